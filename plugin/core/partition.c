/* Splitting a training list between ranks (selsync/partition.h).
 *
 * Every scheme starts from one permutation P of 0..n-1 (Fisher-Yates on the
 * stream (seed, 0, 0), the iid permutation): iid keeps block `rank` of P,
 * seldp reads P's world chunks circularly from chunk `rank` on. label and
 * dirichlet group P by class with a stable counting sort, so each class keeps
 * P's random order and the samples without a class keep iid's; each group is
 * then cut into consecutive pieces in ascending rank order: label into equal
 * blocks for the ranks holding the class, dirichlet at the rounded cumulative
 * shares drawn from the stream (seed, DIRICHLET_STREAM, class), the group
 * without a class into world blocks like iid. A rank's pieces are finally
 * shuffled with the stream (seed, ORDER_STREAM, rank). Every rank computes
 * every rank's counts, so all ranks fail alike when one would be empty. */
#include "selsync/partition.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selsync/rng.h"

#include "internal.h"

#define DIRICHLET_STREAM 0xd12cULL
#define ORDER_STREAM 0x5bd1ULL

/* First index of rank r's block, floor(r * n / world), without overflow:
 * r * (n / world) <= n and r * (n % world) < world^2 < 2^62. */
static size_t block_start(size_t n, int world, int r)
{
    size_t q = n / (size_t)world, rem = n % (size_t)world;
    return (size_t)r * q + (size_t)((uint64_t)r * rem / (uint64_t)world);
}

/* Fisher-Yates from i = n-1 down to 1, swapping i with j = below(i + 1). */
static void shuffle(size_t *a, size_t n, selsync_rng *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)selsync_rng_below(r, (uint64_t)i), x = a[i - 1];
        a[i - 1] = a[j];
        a[j] = x;
    }
}

/* The permutation is the same on every rank; each keeps its block. */
selsync_status selsync_partition_iid(size_t n, int world, int rank, uint64_t seed,
                                     size_t *shard, size_t *count)
{
    selsync_rng r = selsync_rng_stream(seed, 0, 0);
    size_t lo, hi;

    if (!shard || !count || world < 1 || rank < 0 || rank >= world || n < (size_t)world)
        return SELSYNC_EINVAL;
    for (size_t i = 0; i < n; i++) shard[i] = i;
    shuffle(shard, n, &r);
    lo = block_start(n, world, rank);
    hi = block_start(n, world, rank + 1);
    memmove(shard, shard + lo, (hi - lo) * sizeof *shard);
    *count = hi - lo;
    return SELSYNC_OK;
}

/* ---- messages ---- */

/* "FILE:LINE: [selsync] partition = 'VALUE': " then the problem. */
static selsync_status config_error(const selsync_config *cfg, char *err, size_t len, const char *problem, ...)
    SELSYNC_PRINTF(4, 5);
static selsync_status config_error(const selsync_config *cfg, char *err, size_t len, const char *problem, ...)
{
    char value[64];
    size_t used;
    va_list ap;
    const char *name = selsync_partition_name(cfg->partition);
    switch (cfg->partition) {
    case SELSYNC_PARTITION_LABEL: snprintf(value, sizeof value, "%s:%d", name, cfg->partition_k); break;
    case SELSYNC_PARTITION_DIRICHLET: snprintf(value, sizeof value, "%s:%g", name, cfg->partition_alpha); break;
    default: snprintf(value, sizeof value, "%s", name);
    }
    if (!err || len == 0) return SELSYNC_ECONFIG;
    used = selsync_config_where(cfg, SELSYNC_KEY_PARTITION, err, len);
    snprintf(err + used, len - used, "partition = '%s': ", value);
    used += strlen(err + used);
    va_start(ap, problem);
    vsnprintf(err + used, len - used, problem, ap);
    va_end(ap);
    return SELSYNC_ECONFIG;
}

/* ---- the split ---- */

static size_t column(int label, int classes) { return label < 0 ? (size_t)classes : (size_t)label; }

/* Does rank r hold class c under label:K (classes (r*K + j) mod classes, j < K)? */
static int holds(int r, int c, int k, int classes)
{
    uint64_t first = (uint64_t)r * (uint64_t)k % (uint64_t)classes;
    return ((uint64_t)c + (uint64_t)classes - first) % (uint64_t)classes < (uint64_t)k;
}

/* A Gamma(a, 1) draw G in logs, as s = scale * log G with scale = min(a, 1):
 * Marsaglia-Tsang with Box-Muller normals; for a < 1, G = Gamma(a+1) *
 * U^(1/a), so s = log U + a * log Gamma(a+1), finite for every a > 0 where
 * log G itself would overflow. */
static double scaled_log_gamma(double a, selsync_rng *r)
{
    double boost = 0, scale = 1, d, c;
    if (a < 1) {
        boost = log(1.0 - selsync_rng_uniform(r));
        scale = a;
        a += 1;
    }
    d = a - 1.0 / 3.0;
    c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double u1 = 1.0 - selsync_rng_uniform(r), u2 = selsync_rng_uniform(r);
        double x = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2), v = 1.0 + c * x, u;
        if (v <= 0) continue;
        v = v * v * v;
        u = 1.0 - selsync_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return boost + scale * (log(d) + log(v));
    }
}

/* cut[0..world]: rank r takes items [cut[r], cut[r+1]) of group g (m items). */
static void cuts(const selsync_config *cfg, int classes, int world, int g, size_t m, size_t *cut, double *w)
{
    cut[0] = 0;
    if (g == classes) { /* without a class: like iid */
        for (int r = 1; r <= world; r++) cut[r] = block_start(m, world, r);
    } else if (cfg->partition == SELSYNC_PARTITION_LABEL) {
        int h = 0, j = 0;
        for (int r = 0; r < world; r++) h += holds(r, g, cfg->partition_k, classes);
        for (int r = 0; r < world; r++)
            cut[r + 1] = holds(r, g, cfg->partition_k, classes) ? block_start(m, h, ++j) : cut[r];
    } else { /* dirichlet: shares q_r = w_r / sum w, Gamma draws normalised in logs */
        selsync_rng rng = selsync_rng_stream(cfg->seed, DIRICHLET_STREAM, (uint64_t)g);
        double alpha = cfg->partition_alpha, scale = alpha < 1 ? alpha : 1, top = -INFINITY, sum = 0, cum = 0;
        for (int r = 0; r < world; r++) {
            w[r] = scaled_log_gamma(alpha, &rng);
            if (w[r] > top) top = w[r];
        }
        /* w_r / w_top = exp((s_r - s_top) / scale): in [0, 1], 1 for the top */
        for (int r = 0; r < world; r++) sum += (w[r] = exp((w[r] - top) / scale));
        for (int r = 0; r < world; r++) {
            double x = floor((cum += w[r]) / sum * (double)m + 0.5);
            cut[r + 1] = r + 1 == world || !(x < (double)m) ? m : x > (double)cut[r] ? (size_t)x : cut[r];
        }
    }
}

/* Every rank's class counts in hist (world x (classes+1)); with shard, the
 * samples of `rank` in shard[0..*count). Arguments already checked. */
static selsync_status split(const selsync_config *cfg, const int *labels, size_t n, int classes, int world,
                            int rank, size_t *shard, size_t *count, size_t *hist, char *err, size_t errlen)
{
    size_t cols = (size_t)classes + 1, *perm = NULL, *sorted = NULL, *start = NULL, *cut = NULL, got = 0;
    double *w = NULL;
    selsync_rng rng = selsync_rng_stream(cfg->seed, 0, 0);
    selsync_status st = SELSYNC_OK;

    memset(hist, 0, (size_t)world * cols * sizeof *hist);
    if (n == 0)
        return config_error(cfg, err, errlen, "rank 0 gets no samples (the list is empty); allowed: a non-empty list");
    perm = malloc(n * sizeof *perm);
    cut = malloc(((size_t)world + 1) * sizeof *cut);
    if (!perm || !cut) goto nomem;
    for (size_t i = 0; i < n; i++) perm[i] = i;
    shuffle(perm, n, &rng);

    if (cfg->partition == SELSYNC_PARTITION_IID || cfg->partition == SELSYNC_PARTITION_SELDP) {
        int seldp = cfg->partition == SELSYNC_PARTITION_SELDP;
        for (int r = 0; r <= world; r++) cut[r] = block_start(n, world, r);
        for (int c = 0; c < world; c++) /* seldp: every rank holds all; count into row 0, copy below */
            for (size_t i = cut[c]; i < cut[c + 1]; i++)
                hist[(size_t)(seldp ? 0 : c) * cols + column(labels[perm[i]], classes)]++;
        for (int r = 1; seldp && r < world; r++) memcpy(hist + (size_t)r * cols, hist, cols * sizeof *hist);
        for (int c = 0; shard && c < (seldp ? world : 1); c++) {
            int from = (rank + c) % world;
            for (size_t i = cut[from]; i < cut[from + 1]; i++) shard[got++] = perm[i];
        }
    } else {
        sorted = malloc(n * sizeof *sorted);
        start = calloc(cols + 1, sizeof *start);
        w = malloc((size_t)world * sizeof *w);
        if (!sorted || !start || !w) goto nomem;
        for (size_t i = 0; i < n; i++) start[column(labels[i], classes) + 1]++;
        for (size_t g = 0; g < cols; g++) start[g + 1] += start[g];
        for (size_t i = 0; i < n; i++) sorted[start[column(labels[perm[i]], classes)]++] = perm[i];
        for (size_t g = cols; g > 0; g--) start[g] = start[g - 1]; /* back to the group starts */
        start[0] = 0;
        for (size_t g = 0; g < cols; g++) {
            cuts(cfg, classes, world, (int)g, start[g + 1] - start[g], cut, w);
            for (int r = 0; r < world; r++) hist[(size_t)r * cols + g] = cut[r + 1] - cut[r];
            if (shard)
                for (size_t i = cut[rank]; i < cut[rank + 1]; i++) shard[got++] = sorted[start[g] + i];
        }
    }

    for (int r = 0; r < world; r++) {
        size_t total = 0;
        for (size_t c = 0; c < cols; c++) total += hist[(size_t)r * cols + c];
        if (total > 0) continue;
        if (cfg->partition == SELSYNC_PARTITION_LABEL) {
            int k = cfg->partition_k, first = (int)((uint64_t)r * (uint64_t)k % (uint64_t)classes);
            char held[64];
            if (k == 1) snprintf(held, sizeof held, "its class %d has none", first);
            else snprintf(held, sizeof held, "its classes %d to %d (mod %d) have none", first,
                          (int)(((uint64_t)first + (uint64_t)k - 1) % (uint64_t)classes), classes);
            st = config_error(cfg, err, errlen, "rank %d gets no samples (%s); allowed: a K or a number of ranks "
                              "that gives every rank a class with samples", r, held);
        } else if (cfg->partition == SELSYNC_PARTITION_DIRICHLET) {
            st = config_error(cfg, err, errlen, "rank %d gets no samples; use a larger A or fewer ranks", r);
        } else {
            st = config_error(cfg, err, errlen, "rank %d gets no samples (%zu samples for %d ranks); "
                              "allowed: at least as many samples as ranks", r, n, world);
        }
        goto out;
    }
    if (shard) {
        selsync_rng order = selsync_rng_stream(cfg->seed, ORDER_STREAM, (uint64_t)rank);
        if (sorted) shuffle(shard, got, &order);
        *count = got;
    }
    goto out;
nomem:
    st = selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory partitioning %zu samples", n);
out:
    free(perm);
    free(sorted);
    free(start);
    free(cut);
    free(w);
    return st;
}

static selsync_status check_args(const selsync_config *cfg, const int *labels, size_t n, int classes, int world,
                                 char *err, size_t errlen)
{
    if (!cfg || (!labels && n > 0) || world < 1 || classes < 0)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] partition: NULL argument, world < 1 or classes < 0");
    if ((size_t)classes + 1 > SIZE_MAX / sizeof(size_t) / (size_t)world || n > SIZE_MAX / sizeof(size_t))
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] partition: too many classes, ranks or samples");
    for (size_t i = 0; i < n; i++)
        if (labels[i] < -1 || labels[i] >= classes)
            return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] partition: sample %zu has label %d, outside [-1, %d)",
                       i, labels[i], classes);
    switch (cfg->partition) {
    case SELSYNC_PARTITION_IID:
    case SELSYNC_PARTITION_SELDP: return SELSYNC_OK;
    case SELSYNC_PARTITION_LABEL:
        if (cfg->partition_k < 1)
            return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] partition: label:K with K = %d < 1", cfg->partition_k);
        if (cfg->partition_k > classes)
            return config_error(cfg, err, errlen, "K is larger than the %d classes of the data; allowed: label:K "
                                "with K from 1 to %d", classes, classes);
        return SELSYNC_OK;
    case SELSYNC_PARTITION_DIRICHLET:
        if (!(cfg->partition_alpha > 0) || isinf(cfg->partition_alpha))
            return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] partition: dirichlet:A with A = %g, not a finite A > 0",
                       cfg->partition_alpha);
        return SELSYNC_OK;
    }
    return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] partition: unknown scheme %d", (int)cfg->partition);
}

selsync_status selsync_partition_make(const selsync_config *cfg, const int *labels, size_t n, int classes,
                                      int world, int rank, size_t *shard, size_t *count, char *err, size_t errlen)
{
    selsync_status st;
    size_t *hist;
    if (err && errlen) err[0] = '\0';
    if ((st = check_args(cfg, labels, n, classes, world, err, errlen)) != SELSYNC_OK) return st;
    if (!shard || !count || rank < 0 || rank >= world)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] partition: NULL shard or count, or rank %d outside [0, %d)",
                   rank, world);
    if (!(hist = malloc((size_t)world * ((size_t)classes + 1) * sizeof *hist)))
        return selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory partitioning %zu samples", n);
    st = split(cfg, labels, n, classes, world, rank, shard, count, hist, err, errlen);
    free(hist);
    return st;
}

selsync_status selsync_partition_histogram(const selsync_config *cfg, const int *labels, size_t n, int classes,
                                           int world, size_t *hist, char *err, size_t errlen)
{
    selsync_status st;
    if (err && errlen) err[0] = '\0';
    if ((st = check_args(cfg, labels, n, classes, world, err, errlen)) != SELSYNC_OK) return st;
    if (!hist) return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] partition: NULL hist");
    return split(cfg, labels, n, classes, world, -1, NULL, NULL, hist, err, errlen);
}
