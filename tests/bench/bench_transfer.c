/* Usage: mpirun -np N bench_transfer [REPS] [WARMUP] [MIB...]   (MIB: 8, or 64k for KiB)
 * Times, on the same ranks and byte count:
 *   ours   the MPI transport's sum_f32 (reduce-scatter + allgather, bitwise
 *          identical on all ranks; default ring implementation);
 *   fused  the engine's synchronisation as a training step pays for it:
 *          selsync_engine_after_update of an engine (method = bsp, aggregate =
 *          params) over FUSED_LAYERS synthetic layers whose parameters total
 *          the payload, i.e. one sum_f32v over the tensors in place (the
 *          ring, scaled by 1/N);
 *   bare   MPI_Allreduce(MPI_SUM, MPI_FLOAT) in place;
 *   rsb    for reference, the transport's MPI_Reduce_scatter_block variant.
 * Per payload (default 1, 8 and 32 MiB): WARMUP untimed calls of each, then
 * REPS timed repetitions (default 20), interleaved and rotating which goes
 * first, each call between barriers, its time the slowest rank's (the
 * engine's selsync_engine_before_update, which measures the gradient, runs before
 * the barrier, untimed). Rank 0 prints median ms per call, algorithm
 * throughput of ours and bare (payload bytes / time), the throughput ratios
 * ours/bare and fused/bare (>= 0.90 is the goal), minor page faults per
 * call of ours, fused and bare (the most of any rank; freed memory is kept
 * in the heap, so a library's per-call temporary should not fault) and
 * whether the bare
 * allreduce happened to give identical bits on all ranks. The run fails
 * when ours or rsb differ between ranks or fused is not ours * (1/N)
 * bitwise. */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <malloc.h>
#include <mpi.h>
#include <sys/resource.h>

#include "comm_mpi.h"
#include "selsync/engine.h"

/* The timed operations, in buf[] order. */
enum { OURS, BARE, RSB, FUSED, N_OPS };
enum { FUSED_LAYERS = 4 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void fill(float *b, size_t n, int rank)
{
    for (size_t i = 0; i < n; ++i) b[i] = (float)(i & 1023) * 1e-3f + (float)rank;
}

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* 1 when h is the same on all ranks. */
static int same_everywhere(uint64_t h)
{
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

/* 1 when x holds on all ranks. */
static int all_ranks(int x)
{
    int all = 0;
    MPI_Allreduce(&x, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "out of memory for %zu bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* The engine whose selsync_engine_after_update is timed: FUSED_LAYERS trained
 * tensors, views into param[0 .. n) in order (adjacent, but separate
 * tensors to the engine), with zero grads (grad, n floats, owned by the
 * caller); every step synchronises all parameters. Exits the job on
 * failure. */
static selsync_engine *fused_engine(const selsync_comm *c, float *param, float *grad, size_t n)
{
    selsync_tensor t[FUSED_LAYERS];
    selsync_model m = {t, FUSED_LAYERS, FUSED_LAYERS, 0, 0};
    selsync_config cfg;
    selsync_engine *e = NULL;
    char err[512];
    size_t off = 0;
    for (size_t l = 0; l < FUSED_LAYERS; off += t[l].count, ++l)
        t[l] = (selsync_tensor){param + off, grad + off, n / FUSED_LAYERS + (l < n % FUSED_LAYERS), l,
                                SELSYNC_TENSOR_TRAINED, 0, 0};
    memset(grad, 0, n * sizeof *grad);
    selsync_config_default(&cfg, "bench_transfer", 0);
    if (selsync_config_set(&cfg, "method", "bsp", 1, err, sizeof err) != SELSYNC_OK ||
        selsync_config_set(&cfg, "aggregate", "params", 2, err, sizeof err) != SELSYNC_OK ||
        selsync_config_finish(&cfg, err, sizeof err) != SELSYNC_OK ||
        selsync_engine_create(&cfg, c, &m, &e, err, sizeof err) != SELSYNC_OK) {
        fprintf(stderr, "bench_transfer: engine: %s\n", err);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return e;
}

/* One untimed selsync_engine_before_update; the job ends on failure. */
static void fused_prepare(selsync_engine *e)
{
    if (selsync_engine_before_update(e, 1.0, 0.1) != SELSYNC_OK) {
        fprintf(stderr, "bench_transfer: %s\n", selsync_engine_error(e));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* 1 when fused[i] == ours[i] * (1/size) bitwise for every i, on all ranks. */
static int fused_is_mean(const float *fused, const float *ours, size_t n, int size)
{
    float scale = 1.0f / (float)size;
    int ok = 1;
    for (size_t i = 0; i < n && ok; ++i) {
        float m = ours[i] * scale;
        ok = memcmp(&m, &fused[i], sizeof m) == 0;
    }
    return all_ranks(ok);
}

int main(int argc, char **argv)
{
    selsync_comm c;
    char err[256];
    /* Freed temporaries stay in the heap for reuse: without this glibc maps
     * a fresh scratch buffer of 32 MiB or more for every MPI_Allreduce call,
     * whose first-touch page faults would make the bare all-reduce look
     * up to 25x slower than it is. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    selsync_status s = selsync_mpi_init(&argc, &argv, &c, err, sizeof err);
    if (s != SELSYNC_OK) {
        fprintf(stderr, "selsync_mpi_init: %s\n", err);
        return 1;
    }
    if (!selsync_mpi_active()) {
        fprintf(stderr, "bench_transfer: run under mpirun\n");
        return 2;
    }
    int rank = c.ops->rank(c.ctx), size = c.ops->size(c.ctx);
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    int warmup = argc > 2 ? atoi(argv[2]) : 3;
    size_t def_mib[] = {1, 8, 32};
    int n_sizes = argc > 3 ? argc - 3 : 3;
    if (reps < 1) reps = 1;
    if (warmup < 0) warmup = 0;

    double *t[N_OPS];
    for (int j = 0; j < N_OPS; ++j) t[j] = xmalloc((size_t)reps * sizeof(double));
    if (rank == 0) {
        printf("# %d ranks, %d timed reps after %d warm-up calls, median per call\n", size, reps,
               warmup);
        printf("%10s %9s %9s %9s %9s %10s %10s %6s %6s %6s %6s %6s %s\n", "bytes", "ours ms",
               "fused ms", "bare ms", "rsb ms", "ours GB/s", "bare GB/s", "o/bare", "f/bare", "flt/o",
               "flt/f", "flt/b", "bare identical");
    }
    int status = 0;
    for (int k = 0; k < n_sizes; ++k) {
        char *unit = NULL;
        size_t mib = argc > 3 ? (size_t)strtoull(argv[3 + k], &unit, 10) : def_mib[k];
        size_t bytes = argc > 3 && *unit == 'k' ? mib << 10 : mib << 20, n = bytes / sizeof(float);
        if (n == 0 || n > (size_t)INT_MAX || (argc > 3 && *unit && strcmp(unit, "k") != 0)) {
            if (rank == 0) fprintf(stderr, "bench_transfer: %s: need 1 .. 8191 (MiB) or 1k .. (KiB)\n", argv[3 + k]);
            status = 2;
            continue;
        }
        float *buf[N_OPS], *grad = xmalloc(bytes);
        for (int j = 0; j < N_OPS; ++j) buf[j] = xmalloc(bytes);
        selsync_engine *e = fused_engine(&c, buf[FUSED], grad, n);
        long faults[N_OPS] = {0}, fmax[N_OPS];
        for (int r = -warmup; r < reps; ++r) {
            double tl[N_OPS], tm[N_OPS];
            long fl[N_OPS];
            for (int j = 0; j < N_OPS; ++j) fill(buf[j], n, rank);
            for (int i = 0; i < N_OPS; ++i) {
                int j = (i + (r < 0 ? 0 : r)) % N_OPS;
                if (j == FUSED) fused_prepare(e);
                MPI_Barrier(MPI_COMM_WORLD);
                long f0 = minor_faults();
                double t0 = MPI_Wtime();
                if (j == BARE) {
                    MPI_Allreduce(MPI_IN_PLACE, buf[j], (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                } else if (j == FUSED) {
                    if (selsync_engine_after_update(e) != SELSYNC_OK) status = 1;
                } else {
                    selsync_mpi_set_sum_algorithm(j == OURS ? SELSYNC_MPI_SUM_RING : SELSYNC_MPI_SUM_RSB);
                    if (c.ops->sum_f32(c.ctx, buf[j], n) != SELSYNC_OK) status = 1;
                    selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RING); /* the engine's sum_f32 */
                }
                tl[j] = MPI_Wtime() - t0;
                fl[j] = minor_faults() - f0;
            }
            MPI_Allreduce(tl, tm, N_OPS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            for (int j = 0; j < N_OPS && r >= 0; ++j) {
                faults[j] += fl[j];
                t[j][r] = tm[j];
            }
        }
        /* ours and rsb must give identical bits everywhere, fused their mean. */
        int ours_ok = same_everywhere(fnv1a(buf[OURS], bytes)) && same_everywhere(fnv1a(buf[RSB], bytes)) &&
                      fused_is_mean(buf[FUSED], buf[OURS], n, size);
        int bare_same = same_everywhere(fnv1a(buf[BARE], bytes));
        if (!ours_ok) status = 1;
        MPI_Reduce(faults, fmax, N_OPS, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        double mo = median(t[OURS], reps), mf = median(t[FUSED], reps), mb = median(t[BARE], reps),
               mr = median(t[RSB], reps);
        if (rank == 0) {
            printf("%10zu %9.3f %9.3f %9.3f %9.3f %10.2f %10.2f %6.2f %6.2f %6ld %6ld %6ld %s%s\n", bytes,
                   mo * 1e3, mf * 1e3, mb * 1e3, mr * 1e3, bytes / mo * 1e-9, bytes / mb * 1e-9, mb / mo,
                   mb / mf, fmax[OURS] / reps, fmax[FUSED] / reps, fmax[BARE] / reps, bare_same ? "yes" : "no",
                   ours_ok ? "" : "  (ours NOT identical or fused NOT ours/N: bug)");
            fflush(stdout);
        }
        selsync_engine_destroy(e);
        free(grad);
        for (int j = 0; j < N_OPS; ++j) free(buf[j]);
    }
    for (int j = 0; j < N_OPS; ++j) free(t[j]);
    selsync_mpi_finalize();
    return status;
}
