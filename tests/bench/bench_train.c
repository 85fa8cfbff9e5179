/* Usage: bench_train CFG [STEPS] [WARMUP]
 * Trains the network of CFG on synthetic batches (fixed pseudo-random
 * images, one-hot truths) and prints the training throughput in images/s
 * over STEPS effective batches after WARMUP untimed ones. Built twice, with
 * the build's gemm and with Darknet's stock gemm, for side-by-side runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "darknet.h"
#include "synthetic_batch.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    gemm_choose_kernel(argv); /* the OpenBLAS kernel darknet would run with */
    if (argc < 2) {
        fprintf(stderr, "usage: %s CFG [STEPS] [WARMUP]\n", argv[0]);
        return 2;
    }
    int steps = argc > 2 ? atoi(argv[2]) : 5;
    int warmup = argc > 3 ? atoi(argv[3]) : 1;
    srand(1);
    network *net = parse_network_cfg(argv[1]);
    int imgs = net->batch * net->subdivisions;
    data d = synthetic_batch(net);
    for (int i = 0; i < warmup; ++i) train_network(net, d);
    double t0 = now();
    float loss = 0;
    for (int i = 0; i < steps; ++i) loss = train_network(net, d);
    double dt = now() - t0;
    printf("%.2f images/s (%d batches of %d in %.2f s, last loss %.4f)\n",
           steps * imgs / dt, steps, imgs, dt, loss);
    free_data(d);
    free_network(net);
    return 0;
}
