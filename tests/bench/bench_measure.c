/* Usage: bench_measure [MILLIONS] [STEPS] [TENSORS]
 * What measuring the gradient's change costs the engine, without Darknet or
 * MPI (one rank, selsync_comm_single): TENSORS trained tensors (default 16)
 * of MILLIONS x 10^6 floats in all (default 8.7, about yolov3-tiny's), whose
 * gradient buffers keep a residual after the update as Darknet's do.
 * STEPS steps (default 50) of selsync_engine_before_update and
 * selsync_engine_after_update, with a pass over 64 MiB of other memory
 * before each, as a step's computation would leave the caches. For each
 * method, the median of the steps' t_measure (the engine's own record):
 *   selsync       the change measured (delta = 1e30, so every step after
 *                 the warm-up is local), the host's update described as
 *                 Darknet's adapter does (selsync_engine_note_host_update):
 *                 one pass over the gradient, the residual's snapshot and
 *                 the parameters that also writes the next residual;
 *   selsync-copy  the same without the description: that pass, and the
 *                 snapshot copied from the gradient buffers after the update;
 *   bsp           no change measured: one pass that checks the gradient and
 *                 the parameters are finite.
 * Prints the milliseconds per step and the nanoseconds per float. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selsync/comm.h"
#include "selsync/config.h"
#include "selsync/engine.h"

enum { FLUSH_FLOATS = 16 << 20 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median t_measure of STEPS steps of method over the tensors, in
 * seconds; -1 on failure (the message printed). */
static double measure(const char *method, int described, selsync_tensor *t, size_t nt, int steps, float *flush)
{
    const selsync_host_update sgd = {0.9f, -0.0005f * 64, NULL};
    selsync_model m = {t, nt, nt, 1, 0}; /* grad_keeps_residual, as Darknet's buffers */
    selsync_comm comm = selsync_comm_single();
    selsync_config cfg;
    selsync_engine *e = NULL;
    char err[512];
    double *took = malloc((size_t)steps * sizeof *took), median = -1;
    selsync_config_default(&cfg, "bench_measure", 0);
    if (!took || selsync_config_set(&cfg, "method", method, 1, err, sizeof err) != SELSYNC_OK ||
        (!strcmp(method, "selsync") && selsync_config_set(&cfg, "delta", "1e30", 2, err, sizeof err) != SELSYNC_OK) ||
        selsync_config_finish(&cfg, err, sizeof err) != SELSYNC_OK ||
        selsync_engine_create(&cfg, &comm, &m, &e, err, sizeof err) != SELSYNC_OK) {
        fprintf(stderr, "bench_measure: %s: %s\n", method, took ? err : "out of memory");
        free(took);
        return -1;
    }
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; i < FLUSH_FLOATS; i++) flush[i] += 1.0f; /* the step's computation */
        if (described) selsync_engine_note_host_update(e, &sgd);
        if (selsync_engine_before_update(e, 1.0, 0.1) != SELSYNC_OK ||
            selsync_engine_after_update(e) != SELSYNC_OK) {
            fprintf(stderr, "bench_measure: %s: %s\n", method, selsync_engine_error(e));
            goto done;
        }
        took[s] = selsync_engine_last_step(e)->t_measure;
    }
    qsort(took, (size_t)steps, sizeof *took, cmp_double);
    median = steps % 2 ? took[steps / 2] : 0.5 * (took[steps / 2 - 1] + took[steps / 2]);
done:
    selsync_engine_destroy(e);
    free(took);
    return median;
}

int main(int argc, char **argv)
{
    double millions = argc > 1 ? atof(argv[1]) : 8.7;
    int steps = argc > 2 ? atoi(argv[2]) : 50;
    size_t nt = argc > 3 ? (size_t)atol(argv[3]) : 16, n = (size_t)(millions * 1e6), off = 0;
    static const struct {
        const char *label, *method;
        int described;
    } methods[] = {{"selsync", "selsync", 1}, {"selsync-copy", "selsync", 0}, {"bsp", "bsp", 0}};
    if (millions <= 0 || steps < 1 || nt < 1 || n < nt) {
        fprintf(stderr, "usage: %s [MILLIONS > 0] [STEPS >= 1] [TENSORS >= 1, at most the floats]\n", argv[0]);
        return 2;
    }
    float *param = malloc(n * sizeof *param), *grad = malloc(n * sizeof *grad),
          *flush = calloc(FLUSH_FLOATS, sizeof *flush);
    selsync_tensor *t = malloc(nt * sizeof *t);
    if (!param || !grad || !flush || !t) {
        fprintf(stderr, "bench_measure: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        param[i] = 0.01f * (float)(i % 97);
        grad[i] = 1e-3f * (float)(i % 89) - 0.04f;
    }
    for (size_t i = 0; i < nt; off += t[i].count, i++)
        t[i] = (selsync_tensor){param + off, grad + off, n / nt + (i < n % nt), i, SELSYNC_TENSOR_TRAINED, 0, 1};
    printf("# %.2f M floats in %zu tensors, median of %d steps, 64 MiB of other memory touched before each\n",
           (double)n / 1e6, nt, steps);
    printf("%-12s %12s %10s\n", "method", "measure ms", "ns/float");
    for (size_t k = 0; k < sizeof methods / sizeof *methods; k++) {
        double s = measure(methods[k].method, methods[k].described, t, nt, steps, flush);
        if (s < 0) return 1;
        printf("%-12s %12.3f %10.3f\n", methods[k].label, 1e3 * s, 1e9 * s / (double)n);
    }
    free(param);
    free(grad);
    free(flush);
    free(t);
    return 0;
}
