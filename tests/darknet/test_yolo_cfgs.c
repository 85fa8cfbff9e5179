/* Usage: test_yolo_cfgs CFG_DIR
 * The project's copies of yolov4-tiny, yolov7-tiny and yolov4 (CFG_DIR)
 * parse to the published layer tables: every layer's output shape where
 * the tables fix it (heads, CSP splits, SPP), the activations and the head
 * keys. Weights written after two training steps of yolov4-tiny reload
 * bit-identically, and a weights file built byte by byte from the layout in
 * docs/detector.md (the maintained fork's: major, minor, revision, a 64-bit
 * seen, then each layer's arrays) loads into the right arrays, whole or as
 * the prefix darknet partial writes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "darknet.h"

static const char *cfg_dir;
static char work[] = "/tmp/test_yolo_cfgs.XXXXXX";

/* CFG_DIR/NAME with [net]'s batch (and subdivisions) set to batch, width
 * and height to size when size > 0, and no [selsync] section, written to
 * the work folder; returns its path (static). */
static char *cfg_copy(const char *name, int batch, int size)
{
    static char out[512];
    char in[512], line[4096];
    snprintf(in, sizeof in, "%s/%s", cfg_dir, name);
    snprintf(out, sizeof out, "%s/%s", work, name);
    FILE *f = fopen(in, "r"), *o = fopen(out, "w");
    assert_non_null(f);
    assert_non_null(o);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "[selsync]", 9) == 0) break;
        if (strncmp(line, "batch=", 6) == 0) fprintf(o, "batch=%d\n", batch);
        else if (strncmp(line, "subdivisions=", 13) == 0) fprintf(o, "subdivisions=1\n");
        else if (size > 0 && strncmp(line, "width=", 6) == 0) fprintf(o, "width=%d\n", size);
        else if (size > 0 && strncmp(line, "height=", 7) == 0) fprintf(o, "height=%d\n", size);
        else fputs(line, o);
    }
    fclose(f);
    fclose(o);
    return out;
}

static void assert_shape(layer l, int w, int h, int c)
{
    if (l.out_w != w || l.out_h != h || l.out_c != c)
        fail_msg("layer of type %d outputs %d x %d x %d, not %d x %d x %d", (int)l.type, l.out_w, l.out_h, l.out_c,
                 w, h, c);
}

/* every [yolo] layer's index, in order */
static int yolo_layers(network *net, int *at, int room)
{
    int n = 0;
    for (int i = 0; i < net->n && n < room; i++)
        if (net->layers[i].type == YOLO) at[n++] = i;
    return n;
}

static void test_yolov4_tiny(void **state)
{
    (void)state;
    network *net = parse_network_cfg(cfg_copy("yolov4-tiny.cfg", 1, 0));
    assert_int_equal(net->n, 38);
    assert_int_equal(net->w, 416);
    int at[4];
    assert_int_equal(yolo_layers(net, at, 4), 2);
    assert_int_equal(at[0], 30);
    assert_int_equal(at[1], 37);
    assert_shape(net->layers[30], 13, 13, 255);
    assert_shape(net->layers[37], 26, 26, 255);
    /* the CSP splits: half the channels of the layer before */
    const int split[] = {3, 11, 19}, channels[] = {64, 128, 256}, grid[] = {104, 52, 26};
    for (int k = 0; k < 3; k++) {
        layer r = net->layers[split[k]];
        assert_int_equal(r.type, ROUTE);
        assert_int_equal(r.groups, 2);
        assert_int_equal(r.group_id, 1);
        assert_shape(net->layers[split[k] - 1], grid[k], grid[k], channels[k]);
        assert_shape(r, grid[k], grid[k], channels[k] / 2);
    }
    layer y = net->layers[37];
    assert_true(y.iou_loss == IOU_LOSS_CIOU && y.nms_kind == NMS_GREEDY);
    assert_true(y.scale_x_y == 1.05f && y.iou_normalizer == .07f && y.resize == 1.5f);
    assert_int_equal(y.mask[0], 1);
    free_network(net);
}

static void test_yolov7_tiny(void **state)
{
    (void)state;
    network *net = parse_network_cfg(cfg_copy("yolov7-tiny.cfg", 1, 0));
    assert_int_equal(net->n, 99);
    int at[4];
    const int grid[] = {52, 26, 13};
    assert_int_equal(yolo_layers(net, at, 4), 3);
    for (int k = 0; k < 3; k++) {
        layer y = net->layers[at[k]];
        assert_shape(y, grid[k], grid[k], 255);
        assert_int_equal(y.new_coords, 1);
        assert_int_equal(y.objectness_smooth, 1);
        assert_true(y.nms_kind == NMS_DIOU && y.scale_x_y == 2 && y.iou_thresh == .2f && y.max_delta == 2);
        assert_int_equal(net->layers[at[k] - 1].activation, LOGISTIC);
    }
    /* SPP: three stride-1 pools of 5, 9 and 13 keep the 13 x 13 grid */
    int pools = 0;
    for (int i = 0; i < net->n; i++)
        if (net->layers[i].type == MAXPOOL && net->layers[i].stride == 1) {
            assert_shape(net->layers[i], 13, 13, 256);
            ++pools;
        }
    assert_int_equal(pools, 3);
    free_network(net);
}

/* yolov4 at 160 x 160 (its grids scale with the input: 20, 10, 5) keeps a
 * test's memory small; 72 mish activations, each keeping its input. */
static void test_yolov4(void **state)
{
    (void)state;
    network *net = parse_network_cfg(cfg_copy("yolov4.cfg", 1, 160));
    assert_int_equal(net->n, 162);
    assert_int_equal(net->mosaic, 1);
    int at[4], mish = 0, shortcuts = 0;
    const int grid[] = {20, 10, 5};
    const float scale[] = {1.2f, 1.1f, 1.05f};
    assert_int_equal(yolo_layers(net, at, 4), 3);
    for (int k = 0; k < 3; k++) {
        assert_shape(net->layers[at[k]], grid[k], grid[k], 255);
        assert_true(net->layers[at[k]].scale_x_y == scale[k]);
    }
    for (int i = 0; i < net->n; i++) {
        if (net->layers[i].activation == MISH && net->layers[i].type == CONVOLUTIONAL) {
            assert_non_null(net->layers[i].activation_gradient);
            ++mish;
        }
        if (net->layers[i].type == SHORTCUT) ++shortcuts;
    }
    assert_int_equal(mish, 72);
    assert_int_equal(shortcuts, 23);
    assert_shape(net->layers[104], 5, 5, 1024); /* the backbone's last layer */
    free_network(net);
}

/* every parameter array of every layer in cfg order, as load_weights reads */
static size_t layer_arrays(layer l, float **a, int *len)
{
    size_t n = 0;
    if (l.type != CONVOLUTIONAL) return 0;
    a[n] = l.biases, len[n++] = l.n;
    if (l.batch_normalize) {
        a[n] = l.scales, len[n++] = l.n;
        a[n] = l.rolling_mean, len[n++] = l.n;
        a[n] = l.rolling_variance, len[n++] = l.n;
    }
    a[n] = l.weights, len[n++] = l.nweights;
    return n;
}

static int files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int ca, cb, same = fa && fb;
    while (same && (ca = fgetc(fa)) != EOF) {
        cb = fgetc(fb);
        same = ca == cb;
    }
    if (same) same = fgetc(fb) == EOF;
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* Two training steps of yolov4-tiny on the detection set's layout (batch 2,
 * one box per image), saved; reloaded into a fresh parse, every array and
 * the forward output are bit-identical, and saving again writes the same
 * bytes. */
static void test_weights_round_trip(void **state)
{
    (void)state;
    char *cfg = cfg_copy("yolov4-tiny-selsync.cfg", 2, 0);
    network *net = parse_network_cfg(cfg);
    data d = {0};
    d.X = make_matrix(4, net->inputs);
    d.y = make_matrix(4, net->truths);
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < net->inputs; j++) d.X.vals[i][j] = (float)((i * 7 + j * 13) % 97) / 97;
        float *box = d.y.vals[i];
        box[0] = .3f + .1f * i, box[1] = .5f, box[2] = .25f, box[3] = .3f, box[4] = (float)i;
    }
    train_network(net, d);
    char first[600], second[600];
    snprintf(first, sizeof first, "%s/first.weights", work);
    snprintf(second, sizeof second, "%s/second.weights", work);
    save_weights(net, first);

    network *again = parse_network_cfg(cfg);
    load_weights(again, first);
    assert_true(*again->seen == *net->seen);
    for (int i = 0; i < net->n; i++) {
        float *a[5], *b[5];
        int la[5], lb[5];
        size_t n = layer_arrays(net->layers[i], a, la);
        assert_int_equal(layer_arrays(again->layers[i], b, lb), n);
        for (size_t k = 0; k < n; k++) assert_memory_equal(a[k], b[k], la[k] * sizeof(float));
    }
    set_batch_network(net, 1);
    set_batch_network(again, 1);
    float *x = d.X.vals[0];
    float *out = network_predict(net, x);
    float *copy = malloc(net->outputs * sizeof(float));
    memcpy(copy, out, net->outputs * sizeof(float));
    assert_memory_equal(copy, network_predict(again, x), net->outputs * sizeof(float));
    save_weights(again, second);
    assert_true(files_equal(first, second));
    free(copy);
    free_data(d);
    free_network(net);
    free_network(again);
}

/* A network of a BatchNorm convolution, a CSP split, a plain convolution
 * and a yolo head, and a file written here field by field: int32 major 0,
 * minor 2, revision 5 (the fork's), uint64 seen (above 2^32), then layer
 * 0's biases, scales, rolling means, rolling variances and weights, layer
 * 2's biases and weights, as float32. */
static void test_weights_layout(void **state)
{
    (void)state;
    char cfg[600], file[600], part[600];
    snprintf(cfg, sizeof cfg, "%s/layout.cfg", work);
    snprintf(file, sizeof file, "%s/layout.weights", work);
    snprintf(part, sizeof part, "%s/layout-part.weights", work);
    FILE *c = fopen(cfg, "w");
    assert_non_null(c);
    fputs("[net]\nbatch=1\nwidth=4\nheight=4\nchannels=3\n\n"
          "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=mish\n\n"
          "[route]\nlayers=-1\ngroups=2\ngroup_id=1\n\n"
          "[convolutional]\nfilters=14\nsize=1\nstride=1\npad=1\nactivation=linear\n\n"
          "[yolo]\nmask=0,1\nanchors=1,2, 3,4\nclasses=2\nnum=2\nscale_x_y=1.05\niou_loss=ciou\n",
          c);
    fclose(c);
    network *net = parse_network_cfg(cfg);
    const int32_t head[3] = {0, 2, 5};
    const uint64_t seen = 5000000000u;
    /* layer 0: 4 biases, 4 scales, 4 means, 4 variances, 4*3*3*3 weights;
     * layer 2: 14 biases, 14*2 weights (its input: 2 of layer 0's 4 channels) */
    const int counts0 = 4 * 4 + 108, counts2 = 14 + 28;
    FILE *f = fopen(file, "wb"), *p = fopen(part, "wb");
    assert_non_null(f);
    assert_non_null(p);
    fwrite(head, sizeof(int32_t), 3, f);
    fwrite(&seen, sizeof seen, 1, f);
    fwrite(head, sizeof(int32_t), 3, p);
    fwrite(&seen, sizeof seen, 1, p);
    for (int i = 0; i < counts0 + counts2; i++) {
        float v = 1 + i / 1000.0f;
        fwrite(&v, sizeof v, 1, f);
        if (i < counts0) fwrite(&v, sizeof v, 1, p);
    }
    fclose(f);
    fclose(p);

    load_weights(net, file);
    assert_true(*net->seen == seen);
    int i = 0;
    for (int li = 0; li < net->n; li++) {
        float *a[5];
        int len[5];
        size_t n = layer_arrays(net->layers[li], a, len);
        for (size_t k = 0; k < n; k++)
            for (int j = 0; j < len[k]; j++, i++) assert_true(a[k][j] == 1 + i / 1000.0f);
    }
    assert_int_equal(i, counts0 + counts2);

    /* the prefix: layer 0 from the file, layer 2 as parsed */
    network *fresh = parse_network_cfg(cfg);
    float keep = fresh->layers[2].weights[0];
    load_weights(fresh, part);
    assert_true(fresh->layers[0].weights[107] == 1 + (counts0 - 1) / 1000.0f);
    assert_true(fresh->layers[2].weights[0] == keep);
    free_network(net);
    free_network(fresh);
}

static int make_work(void **state)
{
    (void)state;
    return mkdtemp(work) ? 0 : -1;
}

static int remove_work(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CFG_DIR\n", argv[0]);
        return 2;
    }
    cfg_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yolov4_tiny),
        cmocka_unit_test(test_yolov7_tiny),
        cmocka_unit_test(test_yolov4),
        cmocka_unit_test(test_weights_round_trip),
        cmocka_unit_test(test_weights_layout),
    };
    return cmocka_run_group_tests(tests, make_work, remove_work);
}
