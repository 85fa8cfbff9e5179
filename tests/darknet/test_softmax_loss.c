/* The softmax layer's cross-entropy is computed from the logits: finite
 * whenever they are, also when the true class's probability underflows to
 * 0, and equal to log-sum-exp minus the true logit; the gradient stays
 * t - p. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "darknet.h"
#include "softmax_layer.h"

/* -log softmax(z / temp)[k] in long double. */
static double expected_loss(const float *z, int n, float temp, int k)
{
    long double top = z[0] / temp, sum = 0;
    for (int i = 1; i < n; i++) if (z[i] / temp > top) top = z[i] / temp;
    for (int i = 0; i < n; i++) sum += expl(z[i] / temp - top);
    return (double)(logl(sum) + top - z[k] / temp);
}

/* Runs the layer (batch 2, groups) on logits with one true class per group. */
static void check(int groups, float temp, const float *logits, int inputs, const int *true_index)
{
    softmax_layer l = make_softmax_layer(2, inputs, groups);
    l.temperature = temp;
    float *truth = calloc((size_t)(2 * inputs), sizeof *truth);
    network net = {0};
    int n = inputs / groups;
    double want = 0;
    assert_non_null(truth);
    for (int b = 0; b < 2; b++)
        for (int g = 0; g < groups; g++) {
            int at = b * inputs + g * n + true_index[g];
            truth[at] = 1;
            want += expected_loss(logits + b * inputs + g * n, n, temp, true_index[g]);
        }
    net.input = (float *)logits;
    net.truth = truth;
    forward_softmax_layer(l, net);
    assert_true(isfinite(l.cost[0]));
    assert_true(fabs(l.cost[0] - want) <= 1e-4 * fabs(want) + 1e-5);
    for (int i = 0; i < 2 * inputs; i++) {
        assert_true(isfinite(l.delta[i]));
        assert_true(fabsf(l.delta[i] - (truth[i] - l.output[i])) < 1e-6f);
    }
    free_layer(l);
    free(truth);
}

static void test_underflowing_probability(void **state)
{
    (void)state;
    /* the true logit 200 below the largest: p = e^-200 underflows in float */
    const float logits[] = {100, -100, 3, 0, 1e4f, -1e4f};
    const int k[] = {1};
    check(1, 1, logits, 3, k);
    const int k2[] = {2};
    const float wide[] = {80, -80, -85, 80, 0, -120};
    check(1, 1, wide, 3, k2);
}

static void test_ordinary_logits_unchanged(void **state)
{
    (void)state;
    const float logits[] = {0.5f, -1, 2, 0.25f, 0.1f, -0.3f};
    const int k[] = {2};
    check(1, 1, logits, 3, k);
}

static void test_groups_and_temperature(void **state)
{
    (void)state;
    const float logits[] = {300, -300, 1, 2, -50, 50, 0, 900};
    const int k[] = {1, 0};
    check(2, 1, logits, 4, k);
    check(2, 0.5f, logits, 4, k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_underflowing_probability),
        cmocka_unit_test(test_ordinary_logits_unchanged),
        cmocka_unit_test(test_groups_and_temperature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
