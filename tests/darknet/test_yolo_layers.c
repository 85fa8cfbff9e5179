/* The YOLOv4 / YOLOv7 layers of patches 0031-0035, against their published
 * definitions: mish, swish and hard_mish at known points and their
 * gradients by finite differences (alone and inside a convolutional layer,
 * with and without BatchNorm); [route] groups by finite differences; the
 * IoU, GIoU, DIoU and CIoU of two boxes computed by hand, and their
 * derivatives by finite differences on random boxes; greedy and DIoU-NMS
 * on three boxes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "darknet.h"
#include "activations.h"
#include "box.h"
#include "convolutional_layer.h"
#include "route_layer.h"

/* A uniform draw in [lo, hi) from a fixed sequence (the tests are
 * deterministic). */
static double draw(double lo, double hi)
{
    static uint64_t s = 0x9E3779B97F4A7C15u;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return lo + (hi - lo) * (double)(s >> 11) / 9007199254740992.0;
}

static void assert_close(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * (1 + fabs(want))))
        fail_msg("got %.9g, want %.9g (tolerance %g)", got, want, tol);
}

/* mish(x) = x tanh(ln(1 + e^x)), values from the definition in double. */
static void test_activation_values(void **state)
{
    (void)state;
    const float x[] = {-3, -1, 0, .5f, 1, 3, 25, -30};
    const double mish[] = {-0.1456474612756246, -0.30340146137410895, 0, 0.3752452113048951,
                           0.8650983882673103, 2.9865350049679575, 25, -30 * tanh(log1p(exp(-30.0)))};
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) assert_close(activate(x[i], MISH), mish[i], 1e-6);
    assert_close(activate(1, SWISH), 0.7310585786300049, 1e-6);
    assert_close(activate(-2, SWISH), -0.2384058440442351, 1e-6);
    /* hard_mish: x above 0, x^2/2 + x on (-2, 0), 0 below */
    assert_close(activate(2, HARD_MISH), 2, 1e-7);
    assert_close(activate(-1, HARD_MISH), -.5, 1e-7);
    assert_close(activate(-.5f, HARD_MISH), -.375, 1e-7);
    assert_close(activate(-3, HARD_MISH), 0, 1e-7);
    /* no overflow far out */
    assert_true(isfinite(activate(1e4f, MISH)) && isfinite(activate(-1e4f, MISH)));
    assert_true(isfinite(gradient(1e4f, MISH)) && isfinite(gradient(-1e4f, MISH)));
    /* the three need their input kept; the others do not */
    assert_true(activation_needs_input(MISH) && activation_needs_input(SWISH) && activation_needs_input(HARD_MISH));
    assert_false(activation_needs_input(LEAKY) || activation_needs_input(LOGISTIC));
    /* names both ways */
    ACTIVATION a;
    assert_true(find_activation("hard_mish", &a) && a == HARD_MISH);
    assert_false(find_activation("Mish", &a));
    assert_string_equal(get_activation_string(SWISH), "swish");
}

/* gradient(x) against (f(x + h) - f(x - h)) / 2h, away from hard_mish's
 * kinks at -2 and 0 */
static void test_activation_gradients(void **state)
{
    (void)state;
    const ACTIVATION acts[] = {MISH, SWISH, HARD_MISH};
    const double h = 1e-3;
    for (size_t k = 0; k < 3; k++)
        for (int i = 0; i < 400; i++) {
            float x = (float)draw(-8, 8);
            if (acts[k] == HARD_MISH && (fabsf(x + 2) < 2 * h || fabsf(x) < 2 * h)) continue;
            double fd = ((double)activate((float)(x + h), acts[k]) - activate((float)(x - h), acts[k])) / (2 * h);
            assert_close(gradient(x, acts[k]), fd, 2e-3);
        }
}

/* sum(r . out) of a layer output */
static double weighted(const float *out, const float *r, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)r[i] * out[i];
    return s;
}

/* A convolutional layer with act, BatchNorm or not: its input gradient
 * (net.delta) and weight gradient for the loss sum(r . output) against
 * finite differences. */
/* 12 entries of v (n values: the layer's input or weights) drawn at
 * random: grad's entry equals the central difference of sum(r . output). */
static void check_conv_gradient(convolutional_layer l, network net, const float *r, float *v, const float *grad,
                                int n)
{
    const double h = 2e-3;
    int out = l.batch * l.outputs;
    for (int t = 0; t < 12; t++) {
        int i = (int)draw(0, n);
        float keep = v[i];
        v[i] = keep + (float)h;
        forward_convolutional_layer(l, net);
        double up = weighted(l.output, r, out);
        v[i] = keep - (float)h;
        forward_convolutional_layer(l, net);
        double down = weighted(l.output, r, out);
        v[i] = keep;
        assert_close(grad[i], (up - down) / (2 * h), 2e-2);
    }
}

static void check_conv(ACTIVATION act, int bn)
{
    convolutional_layer l = make_convolutional_layer(2, 5, 5, 2, 3, 1, 3, 1, 1, act, bn, 0, 0, 0);
    assert_non_null(l.activation_gradient);
    network net = {0};
    int in = l.batch * l.inputs, out = l.batch * l.outputs;
    float *x = malloc(in * sizeof(float)), *dx = calloc(in, sizeof(float)), *r = malloc(out * sizeof(float));
    net.workspace = calloc(l.workspace_size / sizeof(float) + 1, sizeof(float));
    net.train = 1;
    for (int i = 0; i < in; i++) x[i] = (float)draw(-2, 2);
    for (int i = 0; i < out; i++) r[i] = (float)draw(-1, 1);
    for (int i = 0; i < l.nweights; i++) l.weights[i] = (float)draw(-.5, .5);
    for (int i = 0; i < l.n; i++) l.biases[i] = (float)draw(-.5, .5);
    net.input = x;
    forward_convolutional_layer(l, net);
    memcpy(l.delta, r, out * sizeof(float));
    net.delta = dx;
    backward_convolutional_layer(l, net);
    net.delta = 0;

    check_conv_gradient(l, net, r, x, dx, in);
    check_conv_gradient(l, net, r, l.weights, l.weight_updates, l.nweights);
    free(net.workspace);
    free(x);
    free(dx);
    free(r);
    free_layer(l);
}

static void test_conv_activation_gradients(void **state)
{
    (void)state;
    const ACTIVATION acts[] = {MISH, SWISH, HARD_MISH};
    for (int k = 0; k < 3; k++) {
        check_conv(acts[k], 0);
        check_conv(acts[k], 1);
    }
}

/* [route] layers=0,1 groups=G group_id=K over two 4-channel inputs: the
 * output is part K of each input, and backward adds the gradient of
 * sum(r . output) there only (finite differences on every input value). */
static void check_route(int groups, int group_id)
{
    enum { B = 2, C = 4, S = 3 * 3 };
    layer src[2] = {{0}};
    network net = {0};
    int sizes_in[2] = {C * S, C * S};
    int *layers = malloc(2 * sizeof(int)), *sizes = malloc(2 * sizeof(int));
    for (int k = 0; k < 2; k++) {
        layers[k] = k;
        sizes[k] = sizes_in[k];
        src[k].outputs = sizes_in[k];
        src[k].output = malloc(B * sizes_in[k] * sizeof(float));
        src[k].delta = calloc(B * sizes_in[k], sizeof(float));
        for (int i = 0; i < B * sizes_in[k]; i++) src[k].output[i] = (float)draw(-1, 1);
    }
    net.layers = src;
    route_layer l = make_route_layer(B, 2, layers, sizes, groups, group_id);
    assert_int_equal(l.outputs, 2 * C * S / groups);
    float *r = malloc(B * l.outputs * sizeof(float));
    for (int i = 0; i < B * l.outputs; i++) r[i] = (float)draw(-1, 1);
    forward_route_layer(l, net);
    /* the first routed value is channel group_id * C/groups of input 0 */
    assert_true(l.output[0] == src[0].output[group_id * (C / groups) * S]);
    memcpy(l.delta, r, B * l.outputs * sizeof(float));
    backward_route_layer(l, net);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < B * sizes_in[k]; i++) {
            float keep = src[k].output[i];
            src[k].output[i] = keep + 1;
            forward_route_layer(l, net);
            double up = weighted(l.output, r, B * l.outputs);
            src[k].output[i] = keep - 1;
            forward_route_layer(l, net);
            double down = weighted(l.output, r, B * l.outputs);
            src[k].output[i] = keep;
            assert_close(src[k].delta[i], (up - down) / 2, 1e-5);
        }
    for (int k = 0; k < 2; k++) {
        free(src[k].output);
        free(src[k].delta);
    }
    free(r);
    free_layer(l);
}

static void test_route_groups(void **state)
{
    (void)state;
    check_route(1, 0);
    check_route(2, 0);
    check_route(2, 1);
    check_route(4, 3);
}

static box make_box(float x, float y, float w, float h)
{
    box b = {x, y, w, h};
    return b;
}

/* p = (0.5, 0.5, 0.4, 0.2), t = (0.6, 0.55, 0.3, 0.3), by hand:
 * intersection 0.25 x 0.2 = 0.05, union 0.08 + 0.09 - 0.05 = 0.12,
 * IoU 5/12; enclosing box 0.45 x 0.3 = 0.135, GIoU = 5/12 - 0.015/0.135;
 * rho^2 = 0.01 + 0.0025, c^2 = 0.45^2 + 0.3^2, DIoU = 5/12 - 0.0125/0.2925;
 * v = 4/pi^2 (atan(1) - atan(2))^2, alpha = v / (7/12 + v),
 * CIoU = DIoU - alpha v. */
static void test_iou_values(void **state)
{
    (void)state;
    box p = make_box(.5f, .5f, .4f, .2f), t = make_box(.6f, .55f, .3f, .3f);
    double iou = 5.0 / 12, giou = iou - .015 / .135, diou = iou - .0125 / .2925;
    double v = 4 / (M_PI * M_PI) * pow(atan(1.0) - atan(2.0), 2), alpha = v / (1 - iou + v);
    assert_close(box_metric(p, t, IOU_LOSS_MSE, NULL), iou, 1e-5);
    assert_close(box_iou(p, t), iou, 1e-5);
    assert_close(box_metric(p, t, IOU_LOSS_GIOU, NULL), giou, 1e-5);
    assert_close(box_metric(p, t, IOU_LOSS_DIOU, NULL), diou, 1e-5);
    assert_close(box_metric(p, t, IOU_LOSS_CIOU, NULL), diou - alpha * v, 1e-5);
    assert_close(box_metric(p, t, IOU_LOSS_CIOU, NULL), 0.3711163778238456, 1e-5);
    /* identical boxes: every metric is 1 and its derivative 0 */
    for (int k = IOU_LOSS_MSE; k <= IOU_LOSS_CIOU; k++) {
        dbox d;
        assert_close(box_metric(t, t, (IOU_LOSS)k, &d), 1, 1e-6);
        assert_true(fabsf(d.dx) < 1e-4f && fabsf(d.dy) < 1e-4f);
    }
}

/* CIoU's v for p against t (its paper's definition) */
static double ciou_v(box p, box t)
{
    double a = atan((double)t.w / t.h) - atan((double)p.w / p.h);
    return 4 / (M_PI * M_PI) * a * a;
}

/* The metric's value at p moved by h along coordinate k; for CIoU with
 * alpha held at alpha0, as the derivative is. */
static double metric_at(box p, box t, IOU_LOSS kind, int k, double h, double alpha0)
{
    float *c = k == 0 ? &p.x : k == 1 ? &p.y : k == 2 ? &p.w : &p.h;
    *c += (float)h;
    if (kind == IOU_LOSS_CIOU) return box_metric(p, t, IOU_LOSS_DIOU, NULL) - alpha0 * ciou_v(p, t);
    return box_metric(p, t, kind, NULL);
}

/* Every metric's derivative against finite differences on random boxes,
 * overlapping or not, away from the ties where an edge of one box meets an
 * edge of the other (where the derivative jumps). */
static void test_iou_gradients(void **state)
{
    (void)state;
    const double h = 5e-4;
    int checked = 0;
    for (int kind = IOU_LOSS_MSE; kind <= IOU_LOSS_CIOU; kind++)
        for (int i = 0; i < 300; i++) {
            box p = make_box((float)draw(.2, .8), (float)draw(.2, .8), (float)draw(.05, .5), (float)draw(.05, .5));
            box t = make_box((float)draw(.2, .8), (float)draw(.2, .8), (float)draw(.05, .5), (float)draw(.05, .5));
            float pe[4] = {p.x - p.w / 2, p.x + p.w / 2, p.y - p.h / 2, p.y + p.h / 2};
            float te[4] = {t.x - t.w / 2, t.x + t.w / 2, t.y - t.h / 2, t.y + t.h / 2};
            int tie = 0;
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    if ((a < 2) == (b < 2) && fabsf(pe[a] - te[b]) < 10 * h) tie = 1;
            if (tie) continue;
            double iou = box_iou(p, t), v = ciou_v(p, t);
            double alpha0 = v > 0 ? v / (1 - iou + v) : 0;
            dbox d;
            box_metric(p, t, (IOU_LOSS)kind, &d);
            const float got[4] = {d.dx, d.dy, d.dw, d.dh};
            for (int k = 0; k < 4; k++) {
                double fd = (metric_at(p, t, (IOU_LOSS)kind, k, h, alpha0) -
                             metric_at(p, t, (IOU_LOSS)kind, k, -h, alpha0)) / (2 * h);
                if (fabs(got[k] - fd) > 2e-2 * (1 + fabs(fd)))
                    fail_msg("kind %d coordinate %d: derivative %.6g, finite difference %.6g "
                             "(p %g %g %g %g, t %g %g %g %g)", kind, k, got[k], fd,
                             p.x, p.y, p.w, p.h, t.x, t.y, t.w, t.h);
            }
            ++checked;
        }
    assert_true(checked > 600);
}

/* Three detections of one class: A, B nearly on top of A (IoU 0.905), and C
 * shifted 0.1 to the right (IoU 0.6 with A, its centre penalty
 * (0.01/0.41)^0.6 = 0.108). At threshold 0.55 greedy NMS suppresses B and
 * C; DIoU-NMS (beta 0.6) suppresses B only. */
static void test_diou_nms(void **state)
{
    (void)state;
    for (int kind = NMS_GREEDY; kind <= NMS_DIOU; kind++) {
        detection d[3];
        float prob[3][1] = {{.9f}, {.8f}, {.7f}};
        const box boxes[3] = {make_box(.5f, .5f, .4f, .4f), make_box(.52f, .5f, .4f, .4f), make_box(.6f, .5f, .4f, .4f)};
        memset(d, 0, sizeof d);
        for (int i = 0; i < 3; i++) {
            d[i].bbox = boxes[i];
            d[i].classes = 1;
            d[i].prob = prob[i];
            d[i].objectness = prob[i][0];
        }
        do_nms_kind(d, 3, 1, .55f, (NMS_KIND)kind, .6f);
        int kept = 0, kept_c = 0;
        for (int i = 0; i < 3; i++) {
            if (d[i].prob[0] > 0) ++kept;
            if (d[i].prob[0] > 0 && fabsf(d[i].bbox.x - .6f) < 1e-6f) kept_c = 1;
        }
        assert_int_equal(kept, kind == NMS_DIOU ? 2 : 1);
        assert_int_equal(kept_c, kind == NMS_DIOU);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_values),
        cmocka_unit_test(test_activation_gradients),
        cmocka_unit_test(test_conv_activation_gradients),
        cmocka_unit_test(test_route_groups),
        cmocka_unit_test(test_iou_values),
        cmocka_unit_test(test_iou_gradients),
        cmocka_unit_test(test_diou_nms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
