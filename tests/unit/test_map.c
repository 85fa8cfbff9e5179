/* Unit tests for the VOC-style mAP evaluator (plugin/core/map.c). Objects
 * are unit boxes ten apart unless stated, so only intended pairs overlap. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "selsync/map.h"

#define N(a) (sizeof(a) / sizeof *(a))
#define NEAR(got, want) assert_true(fabs((double)(got) - (double)(want)) < 1e-9)

static selsync_box box(float x) { return (selsync_box){x, 0.5f, 1, 1}; }
static selsync_truth T(int image, int cls, float x) { return (selsync_truth){image, cls, box(x)}; }
static selsync_detection D(int image, int cls, float score, float x)
{
    return (selsync_detection){image, cls, score, box(x)};
}

/* mAP with classes <= 4 at threshold 0.5; ap[] filled, the mean returned. */
static double run(const selsync_truth *t, size_t nt, const selsync_detection *d, size_t nd,
                  int classes, double *ap)
{
    double m = -1;
    assert_int_equal(selsync_map(t, nt, d, nd, classes, 0.5f, ap, &m), SELSYNC_OK);
    return m;
}

static void test_box_iou(void **state)
{
    (void)state;
    selsync_box a = {1.5f, 0.5f, 3, 1}, b = {2.5f, 0.5f, 3, 1};
    NEAR(selsync_box_iou(a, a), 1.0);                              /* identical */
    NEAR(selsync_box_iou(box(0), box(10)), 0.0);                   /* disjoint */
    NEAR(selsync_box_iou(box(0), box(1)), 0.0);                    /* touching edges */
    /* contained: 2x2 inside 4x4 -> 4 / 16 */
    NEAR(selsync_box_iou((selsync_box){0, 0, 4, 4}, (selsync_box){1, 1, 2, 2}), 0.25);
    /* [0,3] vs [1,4], height 1: inter 2, union 3 + 3 - 2 = 4 -> 0.5, symmetric */
    NEAR(selsync_box_iou(a, b), 0.5);
    NEAR(selsync_box_iou(b, a), 0.5);
    NEAR(selsync_box_iou(a, (selsync_box){1.5f, 0.5f, 0, 1}), 0.0); /* degenerate */
}

static void test_perfect(void **state)
{
    (void)state;
    selsync_truth t[] = {T(0, 0, 0), T(0, 1, 10), T(1, 0, 0), T(2, 1, 20)};
    selsync_detection d[] = {D(2, 1, .3f, 20), D(0, 0, .9f, 0), D(1, 0, .2f, 0), D(0, 1, .5f, 10)};
    double ap[2];
    NEAR(run(t, N(t), d, N(d), 2, ap), 1.0);
    NEAR(ap[0], 1.0);
    NEAR(ap[1], 1.0);
}

static void test_missed_object(void **state)
{
    (void)state;
    /* 2 truths, 1 found: TP at precision 1, recall 1/2 -> AP = 1/2 */
    selsync_truth t[] = {T(0, 0, 0), T(0, 0, 10)};
    selsync_detection d[] = {D(0, 0, .9f, 10)};
    double ap[1];
    NEAR(run(t, N(t), d, N(d), 1, ap), 0.5);
    /* no detections at all: AP 0 */
    NEAR(run(t, N(t), NULL, 0, 1, ap), 0.0);
}

static void test_duplicates(void **state)
{
    (void)state;
    selsync_truth t[] = {T(0, 0, 0), T(0, 0, 10)};
    double ap[1];
    /* A .9, B .8, A-dup .7: TP TP FP -> precisions at TPs 1, 1 -> AP 1 */
    selsync_detection low[] = {D(0, 0, .9f, 0), D(0, 0, .8f, 10), D(0, 0, .7f, 0)};
    NEAR(run(t, N(t), low, N(low), 1, ap), 1.0);
    /* A .9, A-dup .8, B .7: TP FP TP -> precisions 1, 2/3 -> AP (1 + 2/3) / 2 = 5/6 */
    selsync_detection high[] = {D(0, 0, .9f, 0), D(0, 0, .8f, 0), D(0, 0, .7f, 10)};
    NEAR(run(t, N(t), high, N(high), 1, ap), 5.0 / 6);
    /* greedy by score: a worse-fitting (IoU 0.5) detection with the higher
     * score takes the truth, the exact one after it is the duplicate:
     * 1 truth, TP FP -> AP 1; with a second truth missed -> AP 1/2 */
    selsync_truth w[] = {{0, 0, {1.5f, 0.5f, 3, 1}}, T(0, 0, 20)};
    selsync_detection g[] = {{0, 0, .9f, {2.5f, 0.5f, 3, 1}}, {0, 0, .8f, {1.5f, 0.5f, 3, 1}}};
    NEAR(run(w, 1, g, N(g), 1, ap), 1.0);
    NEAR(run(w, 2, g, N(g), 1, ap), 0.5);
}

static void test_best_truth_taken_is_fp(void **state)
{
    (void)state;
    /* VOC: T1 = [0,3], T2 = [1,4] (height 1). d1 = T1 (.9) -> TP on T1.
     * d2 = [0.25,3.25] (.8): IoU T1 = 2.75/3.25 = .846, IoU T2 = 2.25/3.75 = .6;
     * its best truth T1 is taken -> FP although T2 is free. TP FP, 2 truths -> 1/2 */
    selsync_truth t[] = {{0, 0, {1.5f, 0.5f, 3, 1}}, {0, 0, {2.5f, 0.5f, 3, 1}}};
    selsync_detection d[] = {{0, 0, .9f, {1.5f, 0.5f, 3, 1}}, {0, 0, .8f, {1.75f, 0.5f, 3, 1}}};
    double ap[1];
    NEAR(run(t, N(t), d, N(d), 1, ap), 0.5);
}

static void test_wrong_class(void **state)
{
    (void)state;
    /* image 0: truth class 0; image 1: truth class 1. Class-1 detection on the
     * class-0 object (.9) is an FP of class 1, then the true class-1 one (.8):
     * class 1: FP TP -> precision 1/2 at recall 1 -> AP 1/2; class 0 never
     * found -> AP 0; mAP = 1/4 */
    selsync_truth t[] = {T(0, 0, 0), T(1, 1, 0)};
    selsync_detection d[] = {D(0, 1, .9f, 0), D(1, 1, .8f, 0)};
    double ap[2];
    NEAR(run(t, N(t), d, N(d), 2, ap), 0.25);
    NEAR(ap[0], 0.0);
    NEAR(ap[1], 0.5);
}

static void test_empty_image(void **state)
{
    (void)state;
    /* truth only in image 0; a detection in image 1 (same box) is an FP:
     * FP (.9) TP (.8) -> AP 1/2; with the scores swapped TP FP -> AP 1 */
    selsync_truth t[] = {T(0, 0, 0)};
    selsync_detection d[] = {D(1, 0, .9f, 0), D(0, 0, .8f, 0)};
    double ap[1];
    NEAR(run(t, N(t), d, N(d), 1, ap), 0.5);
    d[0].score = .7f;
    NEAR(run(t, N(t), d, N(d), 1, ap), 1.0);
}

static void test_iou_threshold(void **state)
{
    (void)state;
    /* truth [0,3] x [0,1]; detection of the same size shifted right by s:
     * IoU = (3 - s) / (3 + s). s = 1: exactly 0.5 -> TP (>=), AP 1;
     * s = 0.9375: 2.0625 / 3.9375 = .524 -> AP 1; s = 1.0625: 1.9375 / 4.0625 = .477 -> AP 0 */
    selsync_truth t[] = {{0, 0, {1.5f, 0.5f, 3, 1}}};
    selsync_detection d[] = {{0, 0, .9f, {2.5f, 0.5f, 3, 1}}};
    double ap[1], m = -1;
    NEAR(run(t, 1, d, 1, 1, ap), 1.0);
    /* the same IoU 0.5 against a threshold just above it -> FP, AP 0 */
    assert_int_equal(selsync_map(t, 1, d, 1, 1, nextafterf(0.5f, 1.0f), ap, &m), SELSYNC_OK);
    NEAR(m, 0.0);
    d[0].box.x = 1.5f + 0.9375f;
    NEAR(run(t, 1, d, 1, 1, ap), 1.0);
    d[0].box.x = 1.5f + 1.0625f;
    NEAR(run(t, 1, d, 1, 1, ap), 0.0);
}

static void test_all_point_interpolation(void **state)
{
    (void)state;
    /* 3 truths (images 0..2), by score TP FP TP FP TP (FPs in image 9), given
     * shuffled. precision 1, 1/2, 2/3, 2/4, 3/5; recall 1/3, 1/3, 2/3, 2/3, 1;
     * interpolated at the TPs 1, 2/3, 3/5 -> AP = (1 + 2/3 + 3/5) / 3 = 34/45 */
    selsync_truth t[] = {T(0, 0, 0), T(1, 0, 0), T(2, 0, 0)};
    selsync_detection d[] = {D(9, 0, .6f, 0), D(2, 0, .5f, 0), D(0, 0, .9f, 0),
                             D(1, 0, .7f, 0), D(9, 0, .8f, 0)};
    double ap[1];
    NEAR(run(t, N(t), d, N(d), 1, ap), 34.0 / 45);
    /* interpolation raising a point: 2 truths, FP TP TP -> precision 0, 1/2, 2/3;
     * from the right 2/3, 2/3 at the TPs -> AP 2/3 (uninterpolated: 7/12) */
    selsync_detection e[] = {D(9, 0, .9f, 0), D(0, 0, .8f, 0), D(1, 0, .7f, 0)};
    NEAR(run(t, 2, e, N(e), 1, ap), 2.0 / 3);
}

static void test_score_ties_keep_input_order(void **state)
{
    (void)state;
    /* equal scores: FP (image 1) before TP -> AP 1/2; TP first -> AP 1 */
    selsync_truth t[] = {T(0, 0, 0)};
    selsync_detection fp_first[] = {D(1, 0, .5f, 0), D(0, 0, .5f, 0)};
    selsync_detection tp_first[] = {D(0, 0, .5f, 0), D(1, 0, .5f, 0)};
    double ap[1];
    NEAR(run(t, 1, fp_first, 2, 1, ap), 0.5);
    NEAR(run(t, 1, tp_first, 2, 1, ap), 1.0);
}

static void test_classes_without_truth(void **state)
{
    (void)state;
    /* class 0: perfect (1); class 1: detections only (NaN, left out);
     * class 2: 2 truths, 1 found (1/2); class 3: nothing (NaN) -> mAP 3/4 */
    selsync_truth t[] = {T(0, 0, 0), T(0, 2, 10), T(1, 2, 10)};
    selsync_detection d[] = {D(0, 0, .9f, 0), D(0, 1, .9f, 0), D(0, 2, .9f, 10)};
    double ap[4];
    NEAR(run(t, N(t), d, N(d), 4, ap), 0.75);
    NEAR(ap[0], 1.0);
    assert_true(isnan(ap[1]));
    NEAR(ap[2], 0.5);
    assert_true(isnan(ap[3]));
    NEAR(run(t, N(t), d, N(d), 4, NULL), 0.75); /* ap may be NULL */
    /* no ground truth at all: every AP and the mean are NaN */
    assert_true(isnan(run(NULL, 0, d, N(d), 3, ap)));
    assert_true(isnan(ap[0]) && isnan(ap[1]) && isnan(ap[2]));
    assert_true(isnan(run(NULL, 0, NULL, 0, 1, NULL)));
}

static void test_many_images(void **state)
{
    (void)state;
    /* 200 images x 2 objects, both classes; every object of class 0 found,
     * every second image's class-1 object found -> AP 1 and 1/2, mAP 3/4 */
    enum { IMAGES = 200 };
    selsync_truth t[2 * IMAGES];
    selsync_detection d[2 * IMAGES];
    size_t nd = 0;
    for (int i = 0; i < IMAGES; i++) {
        int img = (i * 37) % IMAGES; /* images in scrambled order */
        t[2 * i] = T(img, 0, 0);
        t[2 * i + 1] = T(img, 1, 10);
        d[nd++] = D(img, 0, (float)((i * 53) % IMAGES) / IMAGES, 0);
        if (img % 2) d[nd++] = D(img, 1, (float)i / IMAGES, 10);
    }
    double ap[2];
    NEAR(run(t, N(t), d, nd, 2, ap), 0.75);
    NEAR(ap[0], 1.0);
    NEAR(ap[1], 0.5);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    selsync_truth t[] = {T(0, 0, 0)};
    selsync_detection d[] = {D(0, 0, .9f, 0)};
    double ap[2] = {-1, -1}, m = -1;
    assert_int_equal(selsync_map(NULL, 1, d, 1, 2, .5f, ap, &m), SELSYNC_EINVAL);
    assert_int_equal(selsync_map(t, 1, NULL, 1, 2, .5f, ap, &m), SELSYNC_EINVAL);
    assert_int_equal(selsync_map(t, 1, d, 1, 2, .5f, ap, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_map(t, 1, d, 1, 0, .5f, ap, &m), SELSYNC_EINVAL);
    assert_int_equal(selsync_map(t, 1, d, 1, -3, .5f, ap, &m), SELSYNC_EINVAL);
    assert_int_equal(selsync_map(t, 1, d, 1, 2, 0.0f, ap, &m), SELSYNC_EINVAL);
    assert_int_equal(selsync_map(t, 1, d, 1, 2, 1.5f, ap, &m), SELSYNC_EINVAL);
    assert_int_equal(selsync_map(t, 1, d, 1, 2, NAN, ap, &m), SELSYNC_EINVAL);
    t[0].cls = 2;
    assert_int_equal(selsync_map(t, 1, d, 1, 2, .5f, ap, &m), SELSYNC_EINVAL);
    t[0].cls = -1;
    assert_int_equal(selsync_map(t, 1, d, 1, 2, .5f, ap, &m), SELSYNC_EINVAL);
    t[0].cls = 0;
    d[0].cls = 2;
    assert_int_equal(selsync_map(t, 1, d, 1, 2, .5f, ap, &m), SELSYNC_EINVAL);
    d[0].cls = -1;
    assert_int_equal(selsync_map(t, 1, d, 1, 2, .5f, ap, &m), SELSYNC_EINVAL);
    d[0].cls = 0;
    d[0].score = NAN;
    assert_int_equal(selsync_map(t, 1, d, 1, 2, .5f, ap, &m), SELSYNC_ENONFINITE);
    assert_true(ap[0] == -1 && ap[1] == -1 && m == -1); /* untouched on error */
    d[0].score = .9f;
    assert_int_equal(selsync_map(t, 1, d, 1, 2, 1.0f, ap, &m), SELSYNC_OK); /* 1 is allowed */
    NEAR(m, 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_box_iou),
        cmocka_unit_test(test_perfect),
        cmocka_unit_test(test_missed_object),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_best_truth_taken_is_fp),
        cmocka_unit_test(test_wrong_class),
        cmocka_unit_test(test_empty_image),
        cmocka_unit_test(test_iou_threshold),
        cmocka_unit_test(test_all_point_interpolation),
        cmocka_unit_test(test_score_ties_keep_input_order),
        cmocka_unit_test(test_classes_without_truth),
        cmocka_unit_test(test_many_images),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
