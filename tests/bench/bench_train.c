/* Usage: bench_train CFG [STEPS] [WARMUP]
 *        bench_train --peak [SECONDS]
 * Trains the network of CFG on synthetic batches (fixed pseudo-random
 * images, one-hot truths) and prints the training throughput in images/s
 * over STEPS effective batches after WARMUP untimed ones, and the floating
 * point operations a training step does per image (2 per multiply-add of
 * the convolutional and connected layers, counted as a direct convolution
 * or im2col would: the forward pass, the weight gradients, and the input
 * gradients of every layer but the first, which has none to pass on).
 * Built twice, with the build's gemm and with Darknet's stock gemm, for
 * side-by-side runs.
 * --peak: OpenBLAS's sgemm on 1024 x 1024 matrices for about SECONDS (1),
 * with OpenBLAS's thread count: the GFLOP/s the CPU's best matrix product
 * reaches, the anchor a training step is measured against. */
#include <cblas.h>
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

/* 2 x the multiply-adds of one image's training step (top comment). */
static double train_flops_per_image(const network *net)
{
    double flops = 0;
    for (int i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        double macs = l->type == CONVOLUTIONAL ? (double)l->nweights * l->out_h * l->out_w
                    : l->type == CONNECTED ? (double)l->inputs * l->outputs : 0;
        flops += 2 * macs * (i == 0 ? 2 : 3);
    }
    return flops;
}

/* sgemm GFLOP/s on n x n matrices, the best of repeats over about `seconds`. */
static double sgemm_peak(double seconds)
{
    enum { N = 1024 };
    float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N), *c = calloc(N * N, sizeof(float));
    double best = 0, start = now();
    if (!a || !b || !c) return 0;
    for (int i = 0; i < N * N; ++i) a[i] = b[i] = (float)(i % 7) * 0.25f;
    do {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1, a, N, b, N, 0, c, N);
        double gflops = 2.0 * N * N * N / (now() - t0) / 1e9;
        if (gflops > best) best = gflops;
    } while (now() - start < seconds);
    free(a);
    free(b);
    free(c);
    return best;
}

int main(int argc, char **argv)
{
    gemm_choose_kernel(argv); /* the OpenBLAS kernel darknet would run with */
    if (argc >= 2 && !strcmp(argv[1], "--peak")) {
        printf("%.2f GFLOP/s sgemm peak (1024 x 1024 x 1024, the best of repeats)\n",
               sgemm_peak(argc > 2 ? atof(argv[2]) : 1.0));
        return 0;
    }
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
    printf("%.6f GFLOP per image and training step\n", train_flops_per_image(net) / 1e9);
    free_data(d);
    free_network(net);
    return 0;
}
