/* BatchNorm recalibration through the plugin path, and its reference.
 *
 * bn_recalibrate_check train CFG LIST STEPS OUT_PREFIX
 *   Every rank (darknet_plugin_init, load_network, the event hook) reports
 *   TRAIN_BEGIN with the Fashion-MNIST images of LIST (class: the _cK_ token
 *   of the path), so the [selsync] section partitions them, trains STEPS
 *   steps on its own images (the adapter narrowed the plan to them; centre
 *   crops, as the evaluation prepares images) and reports TRAIN_END (the
 *   final average, then the recalibration on this rank's images).
 *   Writes OUT_PREFIX.RANK.before and OUT_PREFIX.RANK.after: the rolling
 *   statistics of every batch-normalised layer before and after TRAIN_END
 *   ("layer channel mean variance", %.9g), OUT_PREFIX.RANK.files: the
 *   rank's images, and (rank 0) OUT_PREFIX.weights.
 *
 * bn_recalibrate_check reference CFG WEIGHTS LIST OUT
 *   One process, independent of the recalibration's code: CFG's network
 *   (its batch = the number of images of LIST) with WEIGHTS runs Darknet's
 *   training forward pass on all images of LIST as one batch; the batch
 *   statistics of every normalised layer (l.mean, l.variance: divisor
 *   n - 1) are what the recalibration over those images must give, every
 *   layer's inputs normalised with the statistics of the layers before it.
 *   Written to OUT like the files above. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "darknet.h"
#include "evaluation.h"

int darknet_plugin_init(int *argc, char ***argv);
int darknet_plugin_fini(int status);

static char *labels[10] = {"_c0_", "_c1_", "_c2_", "_c3_", "_c4_", "_c5_", "_c6_", "_c7_", "_c8_", "_c9_"};

static int normalised(const layer *l)
{
    return (l->type == CONVOLUTIONAL || l->type == CONNECTED) && l->batch_normalize;
}

static int dump(const char *path, const network *net, int batch_stats)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    for (int i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        if (!normalised(l)) continue;
        const float *m = batch_stats ? l->mean : l->rolling_mean, *v = batch_stats ? l->variance : l->rolling_variance;
        for (int c = 0; c < l->out_c; ++c) fprintf(f, "%d %d %.9g %.9g\n", i, c, m[c], v[c]);
    }
    return fclose(f) ? -1 : 0;
}

static char **read_list(const char *file, int *n)
{
    list *l = get_paths((char *)file);
    char **paths = (char **)list_to_array(l);
    *n = l->size;
    free_list(l);
    return paths;
}

static int class_of(const char *path)
{
    for (int c = 0; c < 10; ++c)
        if (strstr(path, labels[c])) return c;
    return -1;
}

static int train(int argc, char **argv)
{
    if (argc != 6) return 2;
    if (darknet_plugin_init(&argc, &argv)) return 1;
    const char *prefix = argv[5];
    int rank = getenv("OMPI_COMM_WORLD_RANK") ? atoi(getenv("OMPI_COMM_WORLD_RANK")) : 0, n = 0;
    int steps = atoi(argv[4]);
    char path[1024];
    srand(1);
    network *net = load_network(argv[2], NULL, 1);
    char **paths = read_list(argv[3], &n);
    train_plan plan = {paths, n, 1, net->batch, labels, 10, NULL};
    report_network_event(net, TRAIN_BEGIN, &plan); /* plan.paths: this rank's images first, plan.n of them */
    snprintf(path, sizeof path, "%s.%d.files", prefix, rank);
    FILE *files = fopen(path, "w");
    if (!files) return 1;
    for (int i = 0; i < plan.n; ++i) fprintf(files, "%s\n", plan.paths[i]);
    fclose(files);
    int b = net->batch;
    data d = {0};
    d.X = make_matrix(b, net->inputs);
    d.y = make_matrix(b, net->truths);
    net->train = 1;
    for (int t = 0; t < steps; ++t) {
        for (int i = 0; i < b; ++i) {
            const char *p = plan.paths[(t * b + i) % plan.n];
            darknet_input_image(net, p, 0, d.X.vals[i]);
            memset(d.y.vals[i], 0, net->truths * sizeof(float));
            d.y.vals[i][class_of(p)] = 1;
        }
        train_network(net, d);
    }
    snprintf(path, sizeof path, "%s.%d.before", prefix, rank);
    if (dump(path, net, 0)) return 1;
    report_network_event(net, TRAIN_END, NULL);
    snprintf(path, sizeof path, "%s.%d.after", prefix, rank);
    if (dump(path, net, 0)) return 1;
    snprintf(path, sizeof path, "%s.weights", prefix);
    if (rank == 0) save_weights(net, path);
    free_data(d);
    free_ptrs((void **)paths, n);
    free_network(net);
    return darknet_plugin_fini(0);
}

static int reference(int argc, char **argv)
{
    if (argc != 6) return 2;
    if (darknet_plugin_init(&argc, &argv)) return 1;
    int n = 0;
    network *net = load_network(argv[2], argv[3], 0);
    char **paths = read_list(argv[4], &n);
    if (n != net->batch) {
        fprintf(stderr, "reference: %d images, but the cfg's batch is %d\n", n, net->batch);
        return 1;
    }
    float *x = calloc((size_t)n * (size_t)net->inputs, sizeof *x);
    if (!x) return 1;
    for (int i = 0; i < n; ++i) darknet_input_image(net, paths[i], 0, x + (size_t)i * (size_t)net->inputs);
    network w = *net;
    w.input = x;
    w.truth = 0;
    w.delta = 0;
    w.train = 1;
    int last = 0;
    for (int i = 0; i < net->n; ++i)
        if (normalised(&net->layers[i])) last = i;
    for (int i = 0; i <= last; ++i) {
        w.index = i;
        layer l = w.layers[i];
        l.forward(l, w);
        w.input = l.output;
    }
    int rc = dump(argv[5], net, 1);
    free(x);
    free_ptrs((void **)paths, n);
    free_network(net);
    return darknet_plugin_fini(rc ? 1 : 0);
}

int main(int argc, char **argv)
{
    int rc = 2;
    if (argc > 1 && !strcmp(argv[1], "train")) rc = train(argc, argv);
    else if (argc > 1 && !strcmp(argv[1], "reference")) rc = reference(argc, argv);
    if (rc == 2)
        fprintf(stderr, "usage: %s train CFG LIST STEPS OUT_PREFIX | reference CFG WEIGHTS LIST OUT\n", argv[0]);
    return rc;
}
