/* Unit tests for the iid partition (plugin/core/partition.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "selsync/partition.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disjoint_and_covering),
        cmocka_unit_test(test_seed_determines_order),
        cmocka_unit_test(test_world_one_is_a_permutation),
        cmocka_unit_test(test_block_sizes),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
