/* Usage: bench_measure [MILLIONS] [STEPS] [TENSORS]
 * What measuring the gradient's change costs a step, without Darknet or
 * MPI (one rank, selsync_comm_single): TENSORS trained tensors (default 16)
 * of MILLIONS x 10^6 floats in all (default 8.7, about yolov3-tiny's), whose
 * gradient buffers keep a residual after the update as Darknet's do.
 * STEPS steps (default 50) of selsync_engine_before_update, the host's SGD
 * update (Darknet's sgd_update_cpu, done here unless the engine applied it)
 * and selsync_engine_after_update, with a pass over 64 MiB of other memory
 * before each, as a step's computation would leave the caches. For each
 * variant, the medians of the engine's own pass (t_measure), of the host's
 * update, and of their sum per step:
 *   selsync         the change measured (delta = 1e30, so every step after
 *                   the warm-up is local), the host's update described with
 *                   its rates as Darknet's adapter does: the engine applies
 *                   it in the pass that measures (one pass over the gradient,
 *                   the residual's snapshot and the parameters);
 *   selsync-residual the same without the rates: the pass writes the next
 *                   residual, and the host updates after it;
 *   selsync-copy    no description: the pass, the host's update, and the
 *                   snapshot copied from the gradient buffers after it;
 *   local           no change measured (local SGD, FedAvg): the pass that
 *                   checks the gradient and parameters are finite, which
 *                   applies the host's update given its rates;
 *   local-apart     the same without the rates: the check, then the host's
 *                   update (BSP, which averages gradients before the update).
 * Prints milliseconds per step, and each variant's step against local's. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "selsync/comm.h"
#include "selsync/config.h"
#include "selsync/engine.h"

enum { FLUSH_FLOATS = 16 << 20 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double median_of(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Darknet's update of the tensors (sgd_update_cpu; biases' axpy and scal
 * where the tensor does not decay). */
static void host_update(const selsync_tensor *t, size_t nt, const selsync_host_update *u, const float *rates)
{
    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; j < t[i].count; j++) {
            float g = t[i].decays ? t[i].grad[j] + u->decay * t[i].param[j] : t[i].grad[j];
            t[i].param[j] += rates[i] * g;
            t[i].grad[j] = g * u->momentum;
        }
}

/* The medians of STEPS steps of a variant over the tensors, in seconds, into
 * out: the engine's pass, the host's update, their sum; -1 on failure (the
 * message printed). described: 1 the update noted, 2 with its rates. */
static int measure(const char *method, int described, selsync_tensor *t, size_t nt, int steps, float *flush,
                   double out[3])
{
    float *rates = malloc(nt * sizeof *rates);
    for (size_t i = 0; rates && i < nt; i++) rates[i] = 0.1f / 64;
    const selsync_host_update sgd = {0.9f, -0.0005f * 64, described == 2 ? rates : NULL};
    selsync_model m = {t, nt, nt, 1, 0}; /* grad_keeps_residual, as Darknet's buffers */
    selsync_comm comm = selsync_comm_single();
    selsync_config cfg;
    selsync_engine *e = NULL;
    char err[512];
    double *took = malloc(3 * (size_t)steps * sizeof *took);
    int rc = -1;
    selsync_config_default(&cfg, "bench_measure", 0);
    if (!took || !rates || selsync_config_set(&cfg, "method", method, 1, err, sizeof err) != SELSYNC_OK ||
        (!strcmp(method, "selsync") && selsync_config_set(&cfg, "delta", "1e30", 2, err, sizeof err) != SELSYNC_OK) ||
        selsync_config_finish(&cfg, err, sizeof err) != SELSYNC_OK ||
        selsync_engine_create(&cfg, &comm, &m, &e, err, sizeof err) != SELSYNC_OK) {
        fprintf(stderr, "bench_measure: %s: %s\n", method, took && rates ? err : "out of memory");
        goto done;
    }
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; i < FLUSH_FLOATS; i++) flush[i] += 1.0f; /* the step's computation */
        if (described) selsync_engine_note_host_update(e, &sgd);
        if (selsync_engine_before_update(e, 1.0, 0.1) != SELSYNC_OK) goto failed;
        double t0 = now();
        if (!selsync_engine_update_applied(e)) host_update(t, nt, &sgd, rates);
        took[steps + s] = now() - t0;
        if (selsync_engine_after_update(e) != SELSYNC_OK) goto failed;
        took[s] = selsync_engine_last_step(e)->t_measure;
        took[2 * steps + s] = took[s] + took[steps + s];
    }
    for (int k = 0; k < 3; k++) out[k] = median_of(took + k * steps, steps);
    rc = 0;
    goto done;
failed:
    fprintf(stderr, "bench_measure: %s: %s\n", method, selsync_engine_error(e));
done:
    selsync_engine_destroy(e);
    free(took);
    free(rates);
    return rc;
}

int main(int argc, char **argv)
{
    double millions = argc > 1 ? atof(argv[1]) : 8.7;
    int steps = argc > 2 ? atoi(argv[2]) : 50;
    size_t nt = argc > 3 ? (size_t)atol(argv[3]) : 16, n = (size_t)(millions * 1e6), off = 0;
    static const struct {
        const char *label, *method;
        int described;
    } methods[] = {{"local", "local", 2},          {"local-apart", "local", 0},         {"selsync", "selsync", 2},
                   {"selsync-residual", "selsync", 1}, {"selsync-copy", "selsync", 0}};
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
    printf("%-17s %8s %10s %8s %10s\n", "variant", "pass ms", "update ms", "step ms", "vs local");
    double local = 0;
    for (size_t k = 0; k < sizeof methods / sizeof *methods; k++) {
        double r[3];
        if (measure(methods[k].method, methods[k].described, t, nt, steps, flush, r)) return 1;
        if (k == 0) local = r[2];
        printf("%-17s %8.3f %10.3f %8.3f %+9.3f ms\n", methods[k].label, 1e3 * r[0], 1e3 * r[1], 1e3 * r[2],
               1e3 * (r[2] - local));
    }
    free(param);
    free(grad);
    free(flush);
    free(t);
    return 0;
}
