/* Usage: cfg_shapes CFG
 * Parses a network cfg with the patched parser (as the darknet executable
 * does, [selsync] handler included) and prints one line per layer:
 * index, type, input and output shape. Used to compare parses. */
#include <stdio.h>

#include "darknet.h"

int darknet_plugin_init(int *argc, char ***argv);
int darknet_plugin_fini(int status);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CFG\n", argv[0]);
        return 2;
    }
    if (darknet_plugin_init(&argc, &argv)) return 1;
    network *net = parse_network_cfg(argv[1]);
    printf("layers %d batch %d inputs %d outputs %d\n", net->n, net->batch, net->inputs, net->outputs);
    for (int i = 0; i < net->n; ++i) {
        layer l = net->layers[i];
        printf("%d type=%d in=%dx%dx%d out=%dx%dx%d outputs=%d nweights=%d\n", i, (int)l.type,
               l.w, l.h, l.c, l.out_w, l.out_h, l.out_c, l.outputs, l.nweights);
    }
    free_network(net);
    return darknet_plugin_fini(0);
}
