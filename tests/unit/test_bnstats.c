/* Unit tests for BatchNorm statistics summed over ranks
 * (plugin/core/bnstats.c): per-rank sums added as the ranks' sum of
 * doubles adds them give the mean and variance of the concatenated data;
 * the synchronised BatchNorm's moments and gradient shares. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "selsync/bnstats.h"

#define RANKS 4
#define CHANNELS 3
#define SPATIAL 5

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Rank r's values: per channel a mean and spread that depend on the rank
 * (label skew: every rank sees other classes), around a large offset. */
static float *rank_values(int r, size_t batch, double offset)
{
    float *x = malloc(batch * CHANNELS * SPATIAL * sizeof *x);
    assert_non_null(x);
    for (size_t b = 0; b < batch; ++b)
        for (size_t c = 0; c < CHANNELS; ++c)
            for (size_t i = 0; i < SPATIAL; ++i)
                x[(b * CHANNELS + c) * SPATIAL + i] =
                    (float)(offset + 3.0 * r * (double)(c + 1) + (0.5 + r) * (uniform() - 0.5));
    return x;
}

/* Mean and variance (divisor n - 1 or n) of channel c over every rank's
 * values, concatenated, by two passes in long double. */
static void reference(float *const *x, const size_t *batch, size_t c, int unbiased, double *mean, double *var)
{
    long double s = 0, q = 0, n = 0;
    for (int r = 0; r < RANKS; ++r)
        for (size_t b = 0; b < batch[r]; ++b)
            for (size_t i = 0; i < SPATIAL; ++i, n += 1) s += x[r][(b * CHANNELS + c) * SPATIAL + i];
    long double m = s / n;
    for (int r = 0; r < RANKS; ++r)
        for (size_t b = 0; b < batch[r]; ++b)
            for (size_t i = 0; i < SPATIAL; ++i) {
                long double d = x[r][(b * CHANNELS + c) * SPATIAL + i] - m;
                q += d * d;
            }
    *mean = (double)m;
    *var = (double)(q / (unbiased ? n - 1 : n));
}

/* Every rank's sums about the common shift, added (what sum_f64 does),
 * then finished: equal to the concatenated data's statistics. */
static void check_combination(double offset, const float *shift, int unbiased)
{
    const size_t batch[RANKS] = {7, 1, 0, 12}; /* a rank may have no samples */
    float *x[RANKS];
    double total[3 * CHANNELS] = {0};
    for (int r = 0; r < RANKS; ++r) {
        double acc[3 * CHANNELS] = {0};
        x[r] = rank_values(r, batch[r], offset);
        /* in two pieces, as chunks of a batch */
        size_t half = batch[r] / 2;
        selsync_bn_accumulate(acc, CHANNELS, x[r], half, SPATIAL, shift);
        selsync_bn_accumulate(acc, CHANNELS, x[r] + half * CHANNELS * SPATIAL, batch[r] - half, SPATIAL, shift);
        for (size_t i = 0; i < 3 * CHANNELS; ++i) total[i] += acc[i];
    }
    float mean[CHANNELS], var[CHANNELS];
    assert_int_equal(selsync_bn_finish(total, CHANNELS, shift, unbiased, mean, var), CHANNELS);
    for (size_t c = 0; c < CHANNELS; ++c) {
        double m, v;
        reference(x, batch, c, unbiased, &m, &v);
        assert_true(total[c] == (double)((7 + 1 + 0 + 12) * SPATIAL));
        /* float results: within a few float ulps of the exact values */
        if (fabs(mean[c] - m) > 4e-7 * fabs(m) + 1e-7) fail_msg("channel %zu: mean %.9g, expected %.9g", c, mean[c], m);
        if (fabs(var[c] - v) > 1e-6 * v) fail_msg("channel %zu: variance %.9g, expected %.9g", c, var[c], v);
    }
    for (int r = 0; r < RANKS; ++r) free(x[r]);
}

static void test_combination_exact(void **state)
{
    (void)state;
    const float zero[CHANNELS] = {0, 0, 0};
    check_combination(0.0, zero, 1);
    check_combination(0.0, NULL, 0);
    check_combination(-2.5, zero, 0);
}

/* Large means, small spread: the shift (the model's current means) keeps
 * the variance's digits. */
static void test_combination_shifted(void **state)
{
    (void)state;
    const float shift[CHANNELS] = {1000.f, 1003.f, 1007.f};
    check_combination(1000.0, shift, 1);
    check_combination(1000.0, shift, 0);
}

/* The mixture formula's between-rank term: two ranks with different means
 * and no spread of their own give the variance of the means, which the
 * average of their own variances (0) misses. */
static void test_between_rank_term(void **state)
{
    (void)state;
    float a[2] = {1.f, 1.f}, b[2] = {3.f, 3.f}, mean = 0, var = 0;
    double acc0[3] = {0}, acc1[3] = {0}, total[3];
    selsync_bn_accumulate(acc0, 1, a, 2, 1, NULL);
    selsync_bn_accumulate(acc1, 1, b, 2, 1, NULL);
    for (int i = 0; i < 3; ++i) total[i] = acc0[i] + acc1[i];
    assert_int_equal(selsync_bn_finish(total, 1, NULL, 1, &mean, &var), 1);
    assert_true(mean == 2.f);
    assert_true(fabsf(var - 4.f / 3.f) < 1e-7f); /* (4 * 1) / (4 - 1) */
    assert_int_equal(selsync_bn_finish(total, 1, NULL, 0, &mean, &var), 1);
    assert_true(var == 1.f);
}

/* A channel without values keeps its statistics; one value: divisor 1;
 * rounding never makes a variance negative. */
static void test_edges(void **state)
{
    (void)state;
    double acc[6] = {0};
    float one = 5.f, mean[2] = {7.f, 7.f}, var[2] = {9.f, 9.f};
    selsync_bn_accumulate(acc, 1, &one, 1, 1, NULL); /* channel 0 of a 1-channel layout */
    double two[6] = {acc[0], 0, acc[1], 0, acc[2], 0};   /* as channel 0 of 2; channel 1 empty */
    assert_int_equal(selsync_bn_finish(two, 2, NULL, 1, mean, var), 1);
    assert_true(mean[0] == 5.f && var[0] == 0.f);
    assert_true(mean[1] == 7.f && var[1] == 9.f);
    float same[3] = {0.1f, 0.1f, 0.1f}, m = 0, v = -1;
    double s[3] = {0};
    selsync_bn_accumulate(s, 1, same, 3, 1, NULL);
    selsync_bn_finish(s, 1, NULL, 1, &m, &v);
    assert_true(v >= 0.f && v < 1e-12f);
}

/* Each rank's batch known only by its own mean and variance (n - 1), as a
 * training pass has them: added as moments, the ranks' sum finishes to the
 * statistics of all their values together. */
static void test_moments_combine(void **state)
{
    (void)state;
    const size_t batch[RANKS] = {7, 1, 3, 12};
    float *x[RANKS];
    double total[3 * CHANNELS] = {0};
    for (int r = 0; r < RANKS; ++r) {
        double own[3 * CHANNELS] = {0};
        float m[CHANNELS], v[CHANNELS];
        x[r] = rank_values(r, batch[r], 0.0);
        selsync_bn_accumulate(own, CHANNELS, x[r], batch[r], SPATIAL, NULL);
        selsync_bn_finish(own, CHANNELS, NULL, 1, m, v);
        selsync_bn_accumulate_moments(total, CHANNELS, batch[r] * SPATIAL, m, v);
    }
    float mean[CHANNELS], var[CHANNELS];
    assert_int_equal(selsync_bn_finish(total, CHANNELS, NULL, 1, mean, var), CHANNELS);
    for (size_t c = 0; c < CHANNELS; ++c) {
        double m, v;
        reference(x, batch, c, 1, &m, &v);
        if (fabs(mean[c] - m) > 1e-6 * fabs(m) + 1e-6) fail_msg("channel %zu: mean %.9g, expected %.9g", c, mean[c], m);
        if (fabs(var[c] - v) > 1e-5 * v) fail_msg("channel %zu: variance %.9g, expected %.9g", c, var[c], v);
    }
    for (int r = 0; r < RANKS; ++r) free(x[r]);
}

/* The backward pass's gradients: summed over the ranks and scaled by each
 * rank's share of the total count (3 of 3 + 5 + 8 here). */
static void test_gradient_share(void **state)
{
    (void)state;
    const size_t count[3] = {3, 5, 8};
    const float a[3][2] = {{1.f, -2.f}, {0.5f, 4.f}, {-3.f, 1.f}}, b[3][2] = {{2.f, 0.f}, {2.f, 1.f}, {4.f, -1.f}};
    double total[1 + 2 * 2] = {0};
    for (int r = 0; r < 3; ++r) {
        double buf[1 + 2 * 2];
        selsync_bn_gradient_pack(buf, 2, count[r], a[r], b[r]);
        for (int i = 0; i < 5; ++i) total[i] += buf[i];
    }
    float ga[2], gb[2];
    selsync_bn_gradient_unpack(total, 2, count[0], ga, gb);
    assert_true(fabsf(ga[0] - (-1.5f * 3.f / 16.f)) < 1e-7f && fabsf(ga[1] - (3.f * 3.f / 16.f)) < 1e-7f);
    assert_true(fabsf(gb[0] - (8.f * 3.f / 16.f)) < 1e-7f && fabsf(gb[1] - 0.f) < 1e-7f);
    /* one rank alone: unchanged */
    double one[5];
    selsync_bn_gradient_pack(one, 2, 4, a[0], b[0]);
    selsync_bn_gradient_unpack(one, 2, 4, ga, gb);
    assert_true(ga[0] == a[0][0] && ga[1] == a[0][1] && gb[0] == b[0][0] && gb[1] == b[0][1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_combination_exact),
        cmocka_unit_test(test_combination_shifted),
        cmocka_unit_test(test_between_rank_term),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_moments_combine),
        cmocka_unit_test(test_gradient_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
