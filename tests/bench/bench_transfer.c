/* Usage: mpirun -np N bench_transfer [REPS] [WARMUP] [MIB...]
 * Times the MPI transport's sum_f32 (reduce-scatter + allgather, bitwise
 * identical on all ranks) against a bare MPI_Allreduce(MPI_SUM, MPI_FLOAT)
 * of the same byte count on the same ranks. Per payload (default 1, 8 and
 * 32 MiB): WARMUP untimed calls of each, then REPS timed repetitions
 * (default 20) of both, interleaved and alternating which goes first, each
 * call between barriers and timed as the slowest rank's time. Rank 0 prints
 * median ms per call, algorithm throughput (payload bytes / time) and the
 * throughput ratio ours/bare (>= 0.90 is the goal). */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

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

    double *t_ours = malloc((size_t)reps * sizeof(double));
    double *t_bare = malloc((size_t)reps * sizeof(double));
    if (!t_ours || !t_bare) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        printf("# %d ranks, %d timed reps after %d warm-up calls, median per call\n", size, reps,
               warmup);
        printf("%12s %10s %10s %11s %11s %8s %s\n", "bytes", "ours ms", "bare ms", "ours GB/s",
               "bare GB/s", "ratio", "bare identical");
    }
    int status = 0;
    for (int k = 0; k < n_sizes; ++k) {
        size_t mib = argc > 3 ? (size_t)strtoull(argv[3 + k], NULL, 10) : def_mib[k];
        size_t bytes = mib << 20, n = bytes / sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes);
        if (!a || !b) {
            fprintf(stderr, "out of memory for %zu bytes\n", bytes);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fill(a, n, rank);
        fill(b, n, rank);
        for (int w = 0; w < warmup; ++w) {
            if (c.ops->sum_f32(c.ctx, a, n) != SELSYNC_OK) status = 1;
            MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        for (int r = 0; r < reps; ++r) {
            double t[2];
            fill(a, n, rank);
            fill(b, n, rank);
            for (int j = 0; j < 2; ++j) {
                int ours = (j + r) % 2 == 0;
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                if (ours) {
                    if (c.ops->sum_f32(c.ctx, a, n) != SELSYNC_OK) status = 1;
                } else {
                    MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                }
                t[ours ? 0 : 1] = MPI_Wtime() - t0;
            }
            double tm[2];
            MPI_Allreduce(t, tm, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            t_ours[r] = tm[0];
            t_bare[r] = tm[1];
        }
        /* Identity of the last results on all ranks (ours must be). */
        int ours_same = same_everywhere(fnv1a(a, bytes));
        int bare_same = same_everywhere(fnv1a(b, bytes));
        if (!ours_same) status = 1;
        double mo = median(t_ours, reps), mb = median(t_bare, reps);
        if (rank == 0) {
            printf("%12zu %10.3f %10.3f %11.2f %11.2f %8.2f %s%s\n", bytes, mo * 1e3, mb * 1e3,
                   bytes / mo * 1e-9, bytes / mb * 1e-9, mb / mo, bare_same ? "yes" : "no",
                   ours_same ? "" : "  (ours NOT identical: bug)");
            fflush(stdout);
        }
        free(a);
        free(b);
    }
    free(t_ours);
    free(t_bare);
    selsync_mpi_finalize();
    return status;
}
