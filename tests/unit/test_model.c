/* The model as one vector: pack and unpack in tensor order, statistics
 * only when asked for. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "selsync/model.h"

static void test_pack_and_unpack(void **state)
{
    (void)state;
    float a[3] = {1, 2, 3}, mean[2] = {10, 20}, b[1] = {4}, g[3] = {0}, buf[8];
    selsync_tensor t[3] = {{a, g, 3, 0, SELSYNC_TENSOR_TRAINED, 0, 0},
                           {mean, NULL, 2, 0, SELSYNC_TENSOR_STAT, 0, 0},
                           {b, g, 1, 1, SELSYNC_TENSOR_TRAINED, 0, 0}};
    memset(buf, 0, sizeof buf);
    assert_int_equal(selsync_model_pack(t, 3, 1, buf), 6);
    const float all[6] = {1, 2, 3, 10, 20, 4};
    assert_memory_equal(buf, all, sizeof all);
    assert_int_equal(selsync_model_pack(t, 3, 0, buf), 4);
    const float trained[4] = {1, 2, 3, 4};
    assert_memory_equal(buf, trained, sizeof trained);
    assert_true(selsync_tensor_travels(&t[0], 0));
    assert_false(selsync_tensor_travels(&t[1], 0));
    assert_true(selsync_tensor_travels(&t[1], 1));

    const float back[6] = {-1, -2, -3, -10, -20, -4};
    assert_int_equal(selsync_model_unpack(t, 3, 1, back), 6);
    assert_true(a[0] == -1 && a[2] == -3 && mean[0] == -10 && mean[1] == -20 && b[0] == -4);
    const float only[4] = {7, 8, 9, 6};
    assert_int_equal(selsync_model_unpack(t, 3, 0, only), 4);
    assert_true(a[0] == 7 && a[2] == 9 && b[0] == 6);
    assert_true(mean[0] == -10 && mean[1] == -20); /* statistics untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pack_and_unpack)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
