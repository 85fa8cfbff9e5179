/* Unit tests for batches that follow speed (plugin/core/speed.c): shares
 * in proportion to speed in whole mini-batches, the smallest step time
 * whole mini-batches allow (against every split of a small case), equal
 * speeds giving equal shares, and unusable speeds. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "selsync/speed.h"

/* 16 ranks of 4 mini-batches each, one at half speed: it trains 2, and
 * the 2 left over go to the first fast ranks; with 4 at two-thirds speed
 * those get 3. */
static void test_shares_follow_speed(void **state)
{
    (void)state;
    double v[16];
    int k[16], sum = 0;
    for (int r = 0; r < 16; ++r) v[r] = 1;
    v[15] = 0.5;
    selsync_speed_shares(v, 16, 64, k);
    for (int r = 0; r < 16; ++r) sum += k[r];
    assert_int_equal(sum, 64);
    assert_int_equal(k[15], 2);
    assert_int_equal(k[0], 5);
    assert_int_equal(k[1], 5);
    assert_int_equal(k[2], 4);
    assert_true(selsync_speed_step_time(v, k, 16) == 5);
    for (int r = 0; r < 16; ++r) v[r] = r < 4 ? 2.0 / 3 : 1;
    selsync_speed_shares(v, 16, 64, k);
    /* 60 fill every rank to the time 4.5; the 4 left over go to the
     * first fast ranks, which then need 5 */
    for (int r = 0; r < 16; ++r) assert_int_equal(k[r], r < 4 ? 3 : r < 8 ? 5 : 4);
}

/* Equal speeds, in any order of magnitude: equal shares. */
static void test_equal_speeds_equal_shares(void **state)
{
    (void)state;
    double v[5] = {1e-3, 1e-3, 1e-3, 1e-3, 1e-3};
    int k[5];
    selsync_speed_shares(v, 5, 20, k);
    for (int r = 0; r < 5; ++r) assert_int_equal(k[r], 4);
}

/* Every way of giving 3 ranks 9 mini-batches (at least 1 each): none has
 * a smaller step time than the shares chosen. */
static void test_smallest_step_time(void **state)
{
    (void)state;
    const double cases[4][3] = {{1, 2, 3}, {0.3, 0.3, 1}, {5, 1, 1}, {1, 1, 0.01}};
    for (int c = 0; c < 4; ++c) {
        int k[3], best[3];
        selsync_speed_shares(cases[c], 3, 9, best);
        double chosen = selsync_speed_step_time(cases[c], best, 3);
        for (k[0] = 1; k[0] <= 7; ++k[0])
            for (k[1] = 1; k[0] + k[1] <= 8; ++k[1]) {
                k[2] = 9 - k[0] - k[1];
                assert_true(selsync_speed_step_time(cases[c], k, 3) >= chosen);
            }
    }
}

/* A rank whose speed is unknown (0, NaN, inf) counts as the mean of the
 * others; none known: equal shares; every rank keeps at least one. */
static void test_unusable_speeds(void **state)
{
    (void)state;
    double v[4] = {1, 1, 0, NAN}, none[3] = {0, -1, INFINITY}, tiny[3] = {1, 1, 1e-9};
    int k[4];
    selsync_speed_shares(v, 4, 8, k);
    for (int r = 0; r < 4; ++r) assert_int_equal(k[r], 2);
    selsync_speed_shares(none, 3, 6, k);
    for (int r = 0; r < 3; ++r) assert_int_equal(k[r], 2);
    selsync_speed_shares(tiny, 3, 6, k);
    assert_int_equal(k[2], 1);
    assert_int_equal(k[0] + k[1], 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shares_follow_speed),
        cmocka_unit_test(test_equal_speeds_equal_shares),
        cmocka_unit_test(test_smallest_step_time),
        cmocka_unit_test(test_unusable_speeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
