/* Unit tests for BatchNorm statistics summed over ranks
 * (plugin/core/bnstats.c): per-rank sums added as the ranks' sum of
 * doubles adds them give the mean and variance of the concatenated data. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_combination_exact),
        cmocka_unit_test(test_combination_shifted),
        cmocka_unit_test(test_between_rank_term),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
