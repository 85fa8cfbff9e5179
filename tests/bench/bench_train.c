/* Usage: bench_train CFG [STEPS] [WARMUP]
 *        bench_train --layers CFG [STEPS]
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
 * --layers: where a step's time goes, layer by layer: the forward,
 * backward and update time of every layer (the least of STEPS steps after
 * one warm-up, in the process's CPU time, which a busy machine disturbs
 * less than wall time), its share of their sum, and the zeroing of the
 * deltas before the forward pass. The passes run as Darknet's
 * train_network runs them, with a constant learning rate.
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

/* seconds on CLOCK */
static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double now(void) { return seconds(CLOCK_MONOTONIC); }
static double cpu_now(void) { return seconds(CLOCK_PROCESS_CPUTIME_ID); }

char *get_layer_string(LAYER_TYPE a); /* Darknet's network.c */

/* --layers (top comment): one training step as forward_network,
 * backward_network and update_network take it, each layer's pass timed;
 * least[3 * i + pass] keeps layer i's least time of pass 0 (forward),
 * 1 (backward) and 2 (update), least[3 * n] the zeroing of the deltas. */
static void timed_step(network *net, data d, double *least)
{
    network n = *net;
    get_next_batch(d, net->batch, 0, net->input, net->truth);
    *net->seen += net->batch;
    net->train = n.train = 1;
    double zero = 0;
    for (int i = 0; i < n.n; ++i) {
        layer l = n.layers[i];
        double t0 = cpu_now();
        if (l.delta) fill_cpu(l.outputs * l.batch, 0, l.delta, 1);
        double t1 = cpu_now();
        n.index = i;
        l.forward(l, n);
        double t2 = cpu_now();
        zero += t1 - t0;
        if (t2 - t1 < least[3 * i]) least[3 * i] = t2 - t1;
        n.input = l.output;
        if (l.truth) n.truth = l.output;
    }
    if (zero < least[3 * n.n]) least[3 * n.n] = zero;
    n = *net;
    for (int i = n.n - 1; i >= 0; --i) {
        layer l = n.layers[i];
        n.input = i ? n.layers[i - 1].output : net->input;
        n.delta = i ? n.layers[i - 1].delta : net->delta;
        n.index = i;
        double t0 = cpu_now();
        l.backward(l, n);
        double t = cpu_now() - t0;
        if (t < least[3 * i + 1]) least[3 * i + 1] = t;
    }
    update_args a = {0};
    a.batch = net->batch;
    a.learning_rate = net->learning_rate;
    a.momentum = net->momentum;
    a.decay = net->decay;
    for (int i = 0; i < net->n; ++i) {
        layer l = net->layers[i];
        if (!l.update) continue;
        double t0 = cpu_now();
        l.update(l, a);
        double t = cpu_now() - t0;
        if (t < least[3 * i + 2]) least[3 * i + 2] = t;
    }
}

static int layer_times(const char *cfg, int steps)
{
    srand(1);
    network *net = parse_network_cfg((char *)cfg);
    data d = synthetic_batch(net);
    double *least = malloc(sizeof(double) * 2 * (3 * net->n + 1)), *warm = least + 3 * net->n + 1;
    if (!least) return 1;
    for (int i = 0; i < 2 * (3 * net->n + 1); ++i) least[i] = 1e30;
    for (int s = 0; s <= steps; ++s) timed_step(net, d, s ? least : warm);
    double sum = least[3 * net->n];
    for (int i = 0; i < net->n; ++i) {
        for (int p = 0; p < 3; ++p) if (least[3 * i + p] > 1e29) least[3 * i + p] = 0;
        sum += least[3 * i] + least[3 * i + 1] + least[3 * i + 2];
    }
    printf("%d images a step, the least of %d steps, CPU time: %.1f ms in all, %.1f ms zeroing the deltas\n",
           net->batch, steps, 1e3 * sum, 1e3 * least[3 * net->n]);
    printf("layer type                 w x h     c ->     n  forward ms  backward ms  update ms  share\n");
    for (int i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        double t = least[3 * i] + least[3 * i + 1] + least[3 * i + 2];
        printf("%5d %-14s %5d x %-4d %5d -> %5d %11.2f %12.2f %10.2f %5.1f%%\n", i, get_layer_string(l->type),
               l->w, l->h, l->c, l->out_c, 1e3 * least[3 * i], 1e3 * least[3 * i + 1], 1e3 * least[3 * i + 2],
               100 * t / sum);
    }
    free(least);
    free_data(d);
    free_network(net);
    return 0;
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
    if (argc >= 3 && !strcmp(argv[1], "--layers"))
        return layer_times(argv[2], argc > 3 ? atoi(argv[3]) : 5);
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
