/* Unit tests for the partitions (plugin/core/partition.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "selsync/partition.h"
#include "selsync/rng.h"

/* Every rank's shard of n items for seed, concatenated in rank order into
 * all[n]; checks disjoint, covering and sizes within one. */
static void check_cover(size_t n, int world, uint64_t seed, size_t *all)
{
    size_t *shard = malloc(n * sizeof *shard), total = 0, lo = n, hi = 0;
    unsigned char *seen = calloc(n, 1);
    assert_non_null(shard);
    assert_non_null(seen);
    for (int r = 0; r < world; r++) {
        size_t count = 0;
        assert_int_equal(selsync_partition_iid(n, world, r, seed, shard, &count), SELSYNC_OK);
        lo = count < lo ? count : lo;
        hi = count > hi ? count : hi;
        for (size_t i = 0; i < count; i++) {
            assert_true(shard[i] < n);
            assert_int_equal(seen[shard[i]], 0); /* disjoint */
            seen[shard[i]] = 1;
            all[total++] = shard[i];
        }
    }
    assert_int_equal(total, n); /* covering */
    assert_true(lo >= 1 && hi - lo <= 1);
    free(shard);
    free(seen);
}

static void test_disjoint_and_covering(void **state)
{
    static const size_t ns[] = {1, 2, 7, 10, 16, 97, 1000};
    static const int worlds[] = {1, 2, 3, 4, 7, 16};
    size_t all[1000];
    (void)state;
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (size_t w = 0; w < sizeof worlds / sizeof *worlds; w++)
            if (ns[i] >= (size_t)worlds[w]) check_cover(ns[i], worlds[w], 42, all);
}

static void test_seed_determines_order(void **state)
{
    size_t a[100], b[100], c[100], id = 0;
    (void)state;
    check_cover(100, 3, 5, a);
    check_cover(100, 3, 5, b);
    check_cover(100, 3, 6, c);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    for (size_t i = 0; i < 100; i++) id += a[i] == i;
    assert_true(id < 100); /* shuffled, not the identity */
}

static void test_world_one_is_a_permutation(void **state)
{
    size_t s[50], count = 0;
    unsigned char seen[50] = {0};
    (void)state;
    assert_int_equal(selsync_partition_iid(50, 1, 0, 9, s, &count), SELSYNC_OK);
    assert_int_equal(count, 50);
    for (size_t i = 0; i < 50; i++) seen[s[i]]++;
    for (size_t i = 0; i < 50; i++) assert_int_equal(seen[i], 1);
}

static void test_block_sizes(void **state)
{
    size_t s[10], count = 0;
    const size_t want[4] = {2, 3, 2, 3}; /* floor(r * 10 / 4): 0, 2, 5, 7, 10 */
    (void)state;
    for (int r = 0; r < 4; r++) {
        assert_int_equal(selsync_partition_iid(10, 4, r, 1, s, &count), SELSYNC_OK);
        assert_int_equal(count, want[r]);
    }
}

static void test_invalid(void **state)
{
    size_t s[8], count = 123;
    (void)state;
    assert_int_equal(selsync_partition_iid(3, 4, 0, 1, s, &count), SELSYNC_EINVAL); /* n < world */
    assert_int_equal(selsync_partition_iid(0, 1, 0, 1, s, &count), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_iid(8, 0, 0, 1, s, &count), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_iid(8, 2, 2, 1, s, &count), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_iid(8, 2, -1, 1, s, &count), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_iid(8, 2, 0, 1, NULL, &count), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_iid(8, 2, 0, 1, s, NULL), SELSYNC_EINVAL);
    assert_int_equal(count, 123); /* untouched on error */
}

/* ---- selsync_partition_make / _histogram ---- */

enum { MAXW = 16 };

static selsync_config scheme(selsync_partition p, int k, double a, uint64_t seed)
{
    selsync_config c;
    selsync_config_default(&c, "test.cfg", 3);
    c.partition = p;
    c.partition_k = k;
    c.partition_alpha = a;
    c.seed = seed;
    return c;
}

/* Random labels in [0, classes), every `unlabelled`-th sample -1 (0: none). */
static int *make_labels(size_t n, int classes, size_t unlabelled, uint64_t seed)
{
    int *l = malloc((n ? n : 1) * sizeof *l);
    selsync_rng r = selsync_rng_stream(seed, 99, 0);
    assert_non_null(l);
    for (size_t i = 0; i < n; i++)
        l[i] = unlabelled && i % unlabelled == 0 ? -1 : (int)selsync_rng_below(&r, (uint64_t)classes);
    return l;
}

/* Every rank's shard: s[r] points into one block of world * n entries. */
typedef struct shards {
    size_t *buf, *s[MAXW], c[MAXW];
    int world;
} shards;

static void make_all(shards *sh, const selsync_config *cfg, const int *labels, size_t n, int classes, int world)
{
    char err[256];
    assert_true(world <= MAXW);
    sh->world = world;
    sh->buf = malloc((size_t)world * n * sizeof *sh->buf);
    assert_non_null(sh->buf);
    for (int r = 0; r < world; r++) {
        sh->s[r] = sh->buf + (size_t)r * n;
        if (selsync_partition_make(cfg, labels, n, classes, world, r, sh->s[r], &sh->c[r], err, sizeof err))
            fail_msg("rank %d of %d: %s", r, world, err);
        assert_string_equal(err, "");
    }
}

/* Checks the histogram against the shards and returns it (caller frees). */
static size_t *check_hist(const shards *sh, const selsync_config *cfg, const int *labels, size_t n, int classes)
{
    size_t cols = (size_t)classes + 1, *h = malloc((size_t)sh->world * cols * sizeof *h);
    size_t *want = calloc((size_t)sh->world * cols, sizeof *want);
    char err[256];
    assert_true(h && want);
    assert_int_equal(selsync_partition_histogram(cfg, labels, n, classes, sh->world, h, err, sizeof err), SELSYNC_OK);
    for (int r = 0; r < sh->world; r++)
        for (size_t i = 0; i < sh->c[r]; i++) {
            int l = labels[sh->s[r][i]];
            want[(size_t)r * cols + (l < 0 ? (size_t)classes : (size_t)l)]++;
        }
    assert_memory_equal(h, want, (size_t)sh->world * cols * sizeof *h);
    free(want);
    return h;
}

/* Disjoint across ranks; returns how many samples the ranks hold in all,
 * and marks them in seen (n entries). */
static size_t check_disjoint(const shards *sh, size_t n, unsigned char *seen)
{
    size_t total = 0;
    memset(seen, 0, n);
    for (int r = 0; r < sh->world; r++)
        for (size_t i = 0; i < sh->c[r]; i++) {
            assert_true(sh->s[r][i] < n);
            assert_int_equal(seen[sh->s[r][i]], 0);
            seen[sh->s[r][i]] = 1;
            total++;
        }
    return total;
}

static int holds(int r, int c, int k, int classes)
{
    for (int j = 0; j < k; j++)
        if ((r * k + j) % classes == c) return 1;
    return 0;
}

static void test_make_iid_is_partition_iid(void **state)
{
    selsync_config c = scheme(SELSYNC_PARTITION_IID, 0, 0, 77);
    int *labels = make_labels(101, 5, 4, 1);
    size_t a[101], b[101], na, nb;
    (void)state;
    for (int r = 0; r < 6; r++) {
        assert_int_equal(selsync_partition_iid(101, 6, r, 77, a, &na), SELSYNC_OK);
        assert_int_equal(selsync_partition_make(&c, labels, 101, 5, 6, r, b, &nb, NULL, 0), SELSYNC_OK);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na * sizeof *a);
    }
    free(labels);
}

static void test_disjoint_and_covering_schemes(void **state)
{
    static const struct { size_t n; int classes, world, k; double a; size_t unl; uint64_t seed; } cases[] = {
        {1000, 10, 4, 2, 1.0, 0, 1}, {997, 10, 5, 2, 0.5, 7, 2}, {500, 3, 3, 1, 2.0, 0, 3},
        {2000, 16, 16, 1, 1.0, 5, 4}, {300, 7, 2, 3, 10.0, 3, 5}, {64, 4, 1, 4, 1.0, 0, 6},
    };
    unsigned char *seen = malloc(2000);
    (void)state;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        size_t n = cases[t].n;
        int classes = cases[t].classes, world = cases[t].world;
        int *labels = make_labels(n, classes, cases[t].unl, cases[t].seed);
        for (int p = 0; p < 3; p++) {
            selsync_partition which[] = {SELSYNC_PARTITION_IID, SELSYNC_PARTITION_LABEL, SELSYNC_PARTITION_DIRICHLET};
            selsync_config c = scheme(which[p], cases[t].k, cases[t].a, cases[t].seed);
            shards sh;
            size_t total, held = 0;
            make_all(&sh, &c, labels, n, classes, world);
            free(check_hist(&sh, &c, labels, n, classes));
            assert_true(cases[t].k * world <= classes || which[p] != SELSYNC_PARTITION_LABEL);
            total = check_disjoint(&sh, n, seen);
            for (size_t i = 0; i < n; i++) {
                int want = 1;
                if (which[p] == SELSYNC_PARTITION_LABEL && labels[i] >= 0) /* only held classes */
                    for (int r = want = 0; r < world; r++) want |= holds(r, labels[i], cases[t].k, classes);
                assert_int_equal(seen[i], want);
                held += (size_t)want;
            }
            assert_int_equal(total, held);
            if (which[p] != SELSYNC_PARTITION_LABEL) assert_int_equal(total, n);
            free(sh.buf);
        }
        free(labels);
    }
    free(seen);
}

static void test_seldp_chunks(void **state)
{
    static const size_t ns[] = {10, 97, 256};
    static const int worlds[] = {1, 3, 4, 8};
    size_t perm[256], count;
    (void)state;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 4; b++) {
            size_t n = ns[a];
            int world = worlds[b], *labels = make_labels(n, 4, 5, a);
            selsync_config c = scheme(SELSYNC_PARTITION_SELDP, 0, 0, 31 + a);
            shards sh;
            size_t *h;
            assert_int_equal(selsync_partition_iid(n, 1, 0, 31 + a, perm, &count), SELSYNC_OK);
            make_all(&sh, &c, labels, n, 4, world);
            h = check_hist(&sh, &c, labels, n, 4);
            for (int r = 0; r < world; r++) {
                size_t k = 0;
                assert_int_equal(sh.c[r], n); /* everything on every rank */
                for (int j = 0; j < world; j++) { /* chunks rank, rank+1, ... */
                    int ch = (r + j) % world;
                    for (size_t i = (size_t)ch * n / (size_t)world; i < (size_t)(ch + 1) * n / (size_t)world; i++)
                        assert_int_equal(sh.s[r][k++], perm[i]);
                }
                assert_int_equal(k, n);
                assert_memory_equal(h + (size_t)r * 5, h, 5 * sizeof *h);
            }
            free(h);
            free(sh.buf);
            free(labels);
        }
}

/* label:K: ranks see only their classes; a class held by h ranks is split
 * into h parts differing by at most one. */
static void check_label(size_t n, int classes, int world, int k, size_t unl, uint64_t seed)
{
    int *labels = make_labels(n, classes, unl, seed);
    selsync_config c = scheme(SELSYNC_PARTITION_LABEL, k, 0, seed);
    size_t cols = (size_t)classes + 1, *h, unl_total = 0, lo = n, hi = 0;
    shards sh;
    make_all(&sh, &c, labels, n, classes, world);
    h = check_hist(&sh, &c, labels, n, classes);
    for (int r = 0; r < world; r++) {
        for (size_t i = 0; i < sh.c[r]; i++)
            assert_true(labels[sh.s[r][i]] < 0 || holds(r, labels[sh.s[r][i]], k, classes));
        unl_total += h[(size_t)r * cols + (size_t)classes];
        lo = h[(size_t)r * cols + (size_t)classes] < lo ? h[(size_t)r * cols + (size_t)classes] : lo;
        hi = h[(size_t)r * cols + (size_t)classes] > hi ? h[(size_t)r * cols + (size_t)classes] : hi;
    }
    for (int cl = 0; cl < classes; cl++) {
        size_t have = 0, mn = n, mx = 0, sum = 0;
        int holders = 0;
        for (size_t i = 0; i < n; i++) have += labels[i] == cl;
        for (int r = 0; r < world; r++)
            if (holds(r, cl, k, classes)) {
                size_t x = h[(size_t)r * cols + (size_t)cl];
                holders++;
                sum += x;
                mn = x < mn ? x : mn;
                mx = x > mx ? x : mx;
            }
        if (holders) {
            assert_int_equal(sum, have);
            assert_true(mx - mn <= 1);
        }
    }
    if (unl) { /* samples without a class: spread like iid */
        assert_int_equal(unl_total, (n + unl - 1) / unl);
        assert_true(hi - lo <= 1);
    }
    free(h);
    free(sh.buf);
    free(labels);
}

static void test_label_classes_and_even_split(void **state)
{
    (void)state;
    check_label(1000, 4, 4, 2, 0, 1);   /* every class on two ranks */
    check_label(999, 5, 3, 2, 0, 2);    /* class 0 on ranks 0 and 2 */
    check_label(1200, 10, 16, 3, 6, 3); /* classes on 4 or 5 ranks, with unlabelled */
    check_label(800, 10, 3, 2, 4, 4);   /* classes 6..9 unused */
    check_label(500, 3, 8, 3, 0, 5);    /* K = classes: every rank everything */
}

/* Mean over ranks of the largest class share of the rank's samples. */
static double mean_max_share(double a, uint64_t seed)
{
    enum { N = 20000, C = 20, W = 8 };
    int *labels = make_labels(N, C, 0, seed);
    selsync_config c = scheme(SELSYNC_PARTITION_DIRICHLET, 0, a, seed);
    size_t *h = malloc((size_t)W * (C + 1) * sizeof *h);
    char err[256];
    double mean = 0;
    assert_non_null(h);
    if (selsync_partition_histogram(&c, labels, N, C, W, h, err, sizeof err)) fail_msg("%s", err);
    for (int r = 0; r < W; r++) {
        size_t mx = 0, tot = 0;
        for (int cl = 0; cl <= C; cl++) {
            tot += h[r * (C + 1) + cl];
            mx = h[r * (C + 1) + cl] > mx ? h[r * (C + 1) + cl] : mx;
        }
        mean += (double)mx / (double)tot / W;
    }
    free(h);
    free(labels);
    return mean;
}

static void test_dirichlet_skew(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        double skewed = mean_max_share(0.1, seed), even = mean_max_share(100, seed);
        assert_true(even < 0.08);          /* 1/20 plus noise (about 0.06) */
        assert_true(skewed > 5 * even);    /* about 0.4: a few classes dominate */
    }
}

/* Shares of rank 0 of 2 ~ Beta(A, A): mean 1/2, E[q^2] = (A+1) / (2(2A+1)).
 * Covers both Gamma branches (A < 1 and A >= 1). */
static void test_dirichlet_moments(void **state)
{
    enum { C = 1000, PER = 200, N = C * PER };
    static const double as[] = {0.5, 3.0};
    int *labels = malloc(N * sizeof *labels);
    size_t *h = malloc(2 * (C + 1) * sizeof *h);
    (void)state;
    assert_true(labels && h);
    for (int i = 0; i < N; i++) labels[i] = i % C;
    for (int t = 0; t < 2; t++) {
        selsync_config c = scheme(SELSYNC_PARTITION_DIRICHLET, 0, as[t], 12345);
        double m1 = 0, m2 = 0, want2 = (as[t] + 1) / (2 * (2 * as[t] + 1));
        assert_int_equal(selsync_partition_histogram(&c, labels, N, C, 2, h, NULL, 0), SELSYNC_OK);
        for (int cl = 0; cl < C; cl++) {
            double q = (double)h[cl] / PER;
            assert_int_equal(h[cl] + h[(C + 1) + cl], PER);
            m1 += q / C;
            m2 += q * q / C;
        }
        if (fabs(m1 - 0.5) > 0.03 || fabs(m2 - want2) > 0.03)
            fail_msg("A = %g: mean %.4f, E[q^2] %.4f (expected 0.5, %.4f)", as[t], m1, m2, want2);
    }
    free(labels);
    free(h);
}

/* Any finite A > 0 the parser accepts, down to the smallest subnormal:
 * every rank's count is in range and the counts add up to the list (or the
 * split is refused because a rank would be empty), for many seeds. */
static void test_dirichlet_extreme_alpha(void **state)
{
    (void)state;
    const double alphas[] = {4.9406564584124654e-324, 2.2250738585072014e-308, 1e-300, 1e-20, 1e-3,
                             1, 1e3, 1e300, DBL_MAX};
    const int worlds[] = {2, 3, 16};
    const size_t n = 500;
    const int classes = 10;
    int *labels = make_labels(n, classes, 7, 5);
    size_t hist[16 * 11];
    char err[256];
    for (size_t ai = 0; ai < sizeof alphas / sizeof alphas[0]; ai++)
        for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++)
            for (uint64_t seed = 0; seed < 250; seed++) {
                selsync_config c = scheme(SELSYNC_PARTITION_DIRICHLET, 0, alphas[ai], seed);
                int world = worlds[wi];
                selsync_status st = selsync_partition_histogram(&c, labels, n, classes, world, hist, err, sizeof err);
                if (st != SELSYNC_OK) {
                    assert_int_equal(st, SELSYNC_ECONFIG);
                    assert_non_null(strstr(err, "gets no samples; use a larger A"));
                }
                size_t total = 0;
                for (size_t i = 0; i < (size_t)world * (classes + 1); i++) {
                    assert_true(hist[i] <= n);
                    total += hist[i];
                }
                assert_int_equal(total, n);
            }
    /* the split of seed 203 on 2 ranks, A = DBL_MIN: one rank holds each class */
    selsync_config c = scheme(SELSYNC_PARTITION_DIRICHLET, 0, 2.2250738585072014e-308, 203);
    size_t *shard = malloc(n * sizeof *shard), count = 0, held = 0;
    assert_non_null(shard);
    for (int r = 0; r < 2; r++) {
        selsync_status st = selsync_partition_make(&c, labels, n, classes, 2, r, shard, &count, err, sizeof err);
        if (st == SELSYNC_OK) {
            assert_true(count <= n);
            for (size_t i = 0; i < count; i++) assert_true(shard[i] < n);
            held += count;
        } else {
            assert_int_equal(st, SELSYNC_ECONFIG);
        }
    }
    assert_true(held == 0 || held == n);
    free(shard);
    free(labels);
}

static void test_seed_determines_all_schemes(void **state)
{
    static const selsync_partition which[] = {SELSYNC_PARTITION_IID, SELSYNC_PARTITION_SELDP,
                                              SELSYNC_PARTITION_LABEL, SELSYNC_PARTITION_DIRICHLET};
    int *labels = make_labels(600, 8, 9, 3);
    (void)state;
    for (int p = 0; p < 4; p++) {
        selsync_config c1 = scheme(which[p], 2, 1.0, 5), c2 = c1, c3 = c1;
        shards a, b, d;
        int differ = 0;
        c3.seed = 6;
        make_all(&a, &c1, labels, 600, 8, 4);
        make_all(&b, &c2, labels, 600, 8, 4);
        make_all(&d, &c3, labels, 600, 8, 4);
        for (int r = 0; r < 4; r++) {
            assert_int_equal(a.c[r], b.c[r]);
            assert_memory_equal(a.s[r], b.s[r], a.c[r] * sizeof *a.s[r]);
            differ |= a.c[r] != d.c[r] || memcmp(a.s[r], d.s[r], a.c[r] * sizeof *a.s[r]) != 0;
        }
        assert_true(differ);
        free(a.buf);
        free(b.buf);
        free(d.buf);
    }
    free(labels);
}

/* Within a label/dirichlet shard the order is shuffled, not grouped by class. */
static void test_shards_are_shuffled(void **state)
{
    int *labels = make_labels(2000, 4, 0, 8);
    (void)state;
    for (int p = 0; p < 2; p++) {
        selsync_config c = scheme(p ? SELSYNC_PARTITION_DIRICHLET : SELSYNC_PARTITION_LABEL, 2, 5.0, 8);
        shards sh;
        make_all(&sh, &c, labels, 2000, 4, 2);
        for (int r = 0; r < 2; r++) {
            size_t changes = 0;
            for (size_t i = 1; i < sh.c[r]; i++) changes += labels[sh.s[r][i]] != labels[sh.s[r][i - 1]];
            assert_true(changes > sh.c[r] / 4); /* grouped would give at most 3 */
        }
        free(sh.buf);
    }
    free(labels);
}

static void test_unlabelled_spread(void **state)
{
    int *labels = make_labels(1000, 6, 3, 9); /* 334 without a class */
    unsigned char *seen = calloc(1000, 1);
    (void)state;
    for (int p = 0; p < 4; p++) {
        selsync_config c = scheme((selsync_partition)p, 1, 0.3, 9);
        shards sh;
        size_t n_unl = 0;
        make_all(&sh, &c, labels, 1000, 6, 5);
        for (int r = 0; r < 5; r++) {
            size_t u = 0;
            for (size_t i = 0; i < sh.c[r]; i++) u += labels[sh.s[r][i]] < 0;
            if (p == SELSYNC_PARTITION_SELDP) assert_int_equal(u, 334);
            else if (p != SELSYNC_PARTITION_IID) assert_true(u == 66 || u == 67); /* 334 / 5 */
            n_unl += u;
        }
        if (p != SELSYNC_PARTITION_SELDP) {
            assert_int_equal(n_unl, 334);
            check_disjoint(&sh, 1000, seen);
            for (size_t i = 0; i < 1000; i++)
                if (labels[i] < 0) assert_int_equal(seen[i], 1);
        }
        free(sh.buf);
    }
    free(seen);
    free(labels);
}

static void assert_contains(const char *s, const char *needle)
{
    if (!strstr(s, needle)) fail_msg("expected \"%s\" in \"%s\"", needle, s);
}

static void test_config_errors(void **state)
{
    int labels[40];
    size_t shard[40], count = 99, hist[8 * 5];
    selsync_config c;
    char err[512];
    (void)state;
    for (int i = 0; i < 40; i++) labels[i] = i % 4 == 2 ? 3 : i % 4; /* class 2 has no samples */

    selsync_config_default(&c, "net.cfg", 3);
    assert_int_equal(selsync_config_set(&c, "partition", "label:5", 12, err, sizeof err), SELSYNC_OK);
    assert_int_equal(selsync_partition_make(&c, labels, 40, 4, 2, 0, shard, &count, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "net.cfg:12: [selsync] partition = 'label:5': K is larger than the 4 classes");
    assert_contains(err, "; allowed: label:K with K from 1 to 4");
    assert_int_equal(selsync_partition_histogram(&c, labels, 40, 4, 2, hist, err, sizeof err), SELSYNC_ECONFIG);

    c.partition_k = 1; /* rank 2 holds class 2 only: no samples, on every rank alike */
    for (int r = 0; r < 4; r++) {
        assert_int_equal(selsync_partition_make(&c, labels, 40, 4, 4, r, shard, &count, err, sizeof err),
                         SELSYNC_ECONFIG);
        assert_contains(err, "net.cfg:12: [selsync] partition = 'label:1': "
                             "rank 2 gets no samples (its class 2 has none)");
        assert_contains(err, "; allowed: ");
    }
    assert_int_equal(selsync_partition_histogram(&c, labels, 40, 4, 4, hist, err, sizeof err), SELSYNC_ECONFIG);
    assert_int_equal(count, 99);
    c.partition_k = 2; /* ranks hold {0,1} {2,3} {0,1} {2,3}: fine */
    assert_int_equal(selsync_partition_make(&c, labels, 40, 4, 4, 1, shard, &count, err, sizeof err), SELSYNC_OK);
    assert_int_equal(count, 10); /* class 3 only: 20 samples split in two */

    c = scheme(SELSYNC_PARTITION_DIRICHLET, 0, 0.01, 1); /* line 0: the section's line */
    for (int i = 0; i < 40; i++) labels[i] = 0;
    assert_int_equal(selsync_partition_make(&c, labels, 40, 1, 8, 0, shard, &count, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "test.cfg:3: [selsync] partition = 'dirichlet:0.01': rank ");
    assert_contains(err, " gets no samples; use a larger A or fewer ranks");

    c = scheme(SELSYNC_PARTITION_IID, 0, 0, 1);
    assert_int_equal(selsync_partition_make(&c, labels, 3, 1, 4, 0, shard, &count, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "partition = 'iid': rank 0 gets no samples (3 samples for 4 ranks)");
    c.partition = SELSYNC_PARTITION_SELDP;
    assert_int_equal(selsync_partition_make(&c, labels, 0, 1, 2, 0, shard, &count, err, sizeof err), SELSYNC_ECONFIG);
    assert_int_equal(selsync_partition_make(&c, labels, 3, 1, 4, 3, shard, &count, err, sizeof err), SELSYNC_OK);
    assert_int_equal(count, 3);
}

static void test_bad_arguments(void **state)
{
    int labels[8] = {0, 1, 2, 0, 1, 2, -1, 0};
    size_t shard[8], count, hist[3 * 4];
    selsync_config c = scheme(SELSYNC_PARTITION_LABEL, 1, 1, 1);
    char err[256];
    (void)state;
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, 0, shard, &count, err, sizeof err), SELSYNC_OK);
    assert_int_equal(selsync_partition_make(&c, labels, 8, 2, 3, 0, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_contains(err, "sample 2 has label 2");
    labels[3] = -2;
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, 0, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_histogram(&c, labels, 8, 3, 3, hist, err, sizeof err), SELSYNC_EINVAL);
    labels[3] = 0;
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 0, 0, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, 3, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, -1, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_make(&c, labels, 8, -1, 3, 0, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_make(NULL, labels, 8, 3, 3, 0, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_make(&c, NULL, 8, 3, 3, 0, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, 0, NULL, &count, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, 0, shard, NULL, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_partition_histogram(&c, labels, 8, 3, 3, NULL, err, sizeof err), SELSYNC_EINVAL);
    c.partition_k = 0;
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, 0, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    c = scheme(SELSYNC_PARTITION_DIRICHLET, 0, 0, 1);
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, 0, shard, &count, err, sizeof err), SELSYNC_EINVAL);
    c.partition = (selsync_partition)9;
    assert_int_equal(selsync_partition_make(&c, labels, 8, 3, 3, 0, shard, &count, NULL, 0), SELSYNC_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disjoint_and_covering),
        cmocka_unit_test(test_seed_determines_order),
        cmocka_unit_test(test_world_one_is_a_permutation),
        cmocka_unit_test(test_block_sizes),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_make_iid_is_partition_iid),
        cmocka_unit_test(test_disjoint_and_covering_schemes),
        cmocka_unit_test(test_seldp_chunks),
        cmocka_unit_test(test_label_classes_and_even_split),
        cmocka_unit_test(test_dirichlet_skew),
        cmocka_unit_test(test_dirichlet_moments),
        cmocka_unit_test(test_dirichlet_extreme_alpha),
        cmocka_unit_test(test_seed_determines_all_schemes),
        cmocka_unit_test(test_shards_are_shuffled),
        cmocka_unit_test(test_unlabelled_spread),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
