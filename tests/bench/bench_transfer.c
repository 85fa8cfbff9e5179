/* Usage: mpirun -np N bench_transfer [REPS] [WARMUP] [MIB...]
 * Times the MPI transport's sum_f32 (reduce-scatter + allgather, bitwise
 * identical on all ranks; default ring implementation, "ours") against a bare
 * MPI_Allreduce(MPI_SUM, MPI_FLOAT) of the same byte count on the same
 * ranks, and for reference the transport's MPI_Reduce_scatter_block variant
 * ("rsb"). Per payload (default 1, 8 and 32 MiB): WARMUP untimed calls of
 * each, then REPS timed repetitions (default 20), interleaved and rotating
 * which goes first, each call between barriers, its time the slowest rank's.
 * Rank 0 prints median ms per call, algorithm throughput (payload bytes /
 * time), the throughput ratio ours/bare (>= 0.90 is the goal), minor page
 * faults per call of ours and of bare (the most of any rank: a library that
 * maps a fresh temporary per call pays for first touches) and whether the
 * bare allreduce happened to give identical bits on all ranks. */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <sys/resource.h>

#include "comm_mpi.h"

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

int main(int argc, char **argv)
{
    selsync_comm c;
    char err[256];
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

    double *t[3];
    for (int j = 0; j < 3; ++j) {
        t[j] = malloc((size_t)reps * sizeof(double));
        if (!t[j]) {
            fprintf(stderr, "out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0) {
        printf("# %d ranks, %d timed reps after %d warm-up calls, median per call\n", size, reps,
               warmup);
        printf("%10s %9s %9s %9s %10s %10s %7s %6s %6s %s\n", "bytes", "ours ms", "bare ms",
               "rsb ms", "ours GB/s", "bare GB/s", "ratio", "flt/o", "flt/b", "bare identical");
    }
    int status = 0;
    for (int k = 0; k < n_sizes; ++k) {
        size_t mib = argc > 3 ? (size_t)strtoull(argv[3 + k], NULL, 10) : def_mib[k];
        size_t bytes = mib << 20, n = bytes / sizeof(float);
        if (n == 0 || n > (size_t)INT_MAX) {
            if (rank == 0) fprintf(stderr, "bench_transfer: %zu MiB: need 1 .. 8191 MiB\n", mib);
            status = 2;
            continue;
        }
        float *buf[3];
        for (int j = 0; j < 3; ++j) {
            buf[j] = malloc(bytes);
            if (!buf[j]) {
                fprintf(stderr, "out of memory for %zu bytes\n", bytes);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            fill(buf[j], n, rank);
        }
        long faults[3] = {0, 0, 0}, fmax[3];
        /* j: 0 ours (ring), 1 bare MPI_Allreduce, 2 ours (reduce_scatter_block) */
        for (int r = -warmup; r < reps; ++r) {
            double tl[3];
            long fl[3];
            for (int j = 0; j < 3; ++j) fill(buf[j], n, rank);
            for (int i = 0; i < 3; ++i) {
                int j = (i + (r < 0 ? 0 : r)) % 3;
                MPI_Barrier(MPI_COMM_WORLD);
                long f0 = minor_faults();
                double t0 = MPI_Wtime();
                if (j == 1) {
                    MPI_Allreduce(MPI_IN_PLACE, buf[1], (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                } else {
                    selsync_mpi_set_sum_algorithm(j == 0 ? SELSYNC_MPI_SUM_RING : SELSYNC_MPI_SUM_RSB);
                    if (c.ops->sum_f32(c.ctx, buf[j], n) != SELSYNC_OK) status = 1;
                }
                tl[j] = MPI_Wtime() - t0;
                fl[j] = minor_faults() - f0;
            }
            if (r >= 0)
                for (int j = 0; j < 3; ++j) faults[j] += fl[j];
            double tm[3];
            MPI_Allreduce(tl, tm, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (r >= 0)
                for (int j = 0; j < 3; ++j) t[j][r] = tm[j];
        }
        selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RING);
        /* Identity of the last results on all ranks (ours must be). */
        int ours_same = same_everywhere(fnv1a(buf[0], bytes)) && same_everywhere(fnv1a(buf[2], bytes));
        int bare_same = same_everywhere(fnv1a(buf[1], bytes));
        if (!ours_same) status = 1;
        MPI_Reduce(faults, fmax, 3, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        double mo = median(t[0], reps), mb = median(t[1], reps), mr = median(t[2], reps);
        if (rank == 0) {
            printf("%10zu %9.3f %9.3f %9.3f %10.2f %10.2f %7.2f %6ld %6ld %s%s\n", bytes, mo * 1e3,
                   mb * 1e3, mr * 1e3, bytes / mo * 1e-9, bytes / mb * 1e-9, mb / mo,
                   fmax[0] / reps, fmax[1] / reps, bare_same ? "yes" : "no", ours_same ? "" : "  (ours NOT identical: bug)");
            fflush(stdout);
        }
        for (int j = 0; j < 3; ++j) free(buf[j]);
    }
    for (int j = 0; j < 3; ++j) free(t[j]);
    selsync_mpi_finalize();
    return status;
}
