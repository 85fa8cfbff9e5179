/* Darknet's data as the plugin reads it (see evaluation.h). */
#include "evaluation.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart_gnuplot.h"
#include "selsync_build_id.h"
#include "selsync/labels.h"

/* One line "selsync: ..." to stderr, in one write. */
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    selsync_vsay(0, 1, fmt, ap);
    va_end(ap);
}

int darknet_label_path(const char *path, char *out, size_t size)
{
    if (strlen(path) >= size / 2) return -1;
    find_replace((char *)path, "images", "labels", out);
    find_replace(out, "JPEGImages", "labels", out);
    find_replace(out, "raw", "labels", out);
    const char *ext[] = {".jpg", ".png", ".JPG", ".JPEG"};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; ++i)
        find_replace(out, (char *)ext[i], ".txt", out);
    return 0;
}

int darknet_class_of(const char *path, char **labels, int classes, char *why, size_t whylen)
{
    if (labels) {
        for (int i = 0; i < classes; ++i)
            if (strstr(path, labels[i])) return i;
        return -1;
    }
    char label_path[4096];
    selsync_truth *truth = NULL;
    size_t n = 0, cap = 0;
    if (darknet_label_path(path, label_path, sizeof label_path)) {
        snprintf(why, whylen, "%.1000s: path too long", path);
        return -2;
    }
    int best = -2;
    if (!selsync_labels_read(label_path, classes, 0, &truth, &n, &cap, why, whylen) &&
        (best = selsync_labels_majority(truth, n, classes)) == -2)
        snprintf(why, whylen, "out of memory");
    free(truth);
    return best;
}

int darknet_read_truths(char **paths, int n, int classes, selsync_truth **truth, size_t *n_truth)
{
    char label_path[4096], err[2048];
    size_t cap = 0;
    *truth = NULL;
    *n_truth = 0;
    for (int i = 0; i < n; ++i) {
        if (darknet_label_path(paths[i], label_path, sizeof label_path)) {
            say("%.1000s: path too long", paths[i]);
            return -1;
        }
        if (selsync_labels_read(label_path, classes, i, truth, n_truth, &cap, err, sizeof err)) {
            say("the label file of held-out image %.1000s: %s", paths[i], err);
            return -1;
        }
    }
    return 0;
}

int darknet_detector_map(network *net, char **paths, int n, int classes, const selsync_truth *truth,
                        size_t n_truth, int progress, double *ap, double *map, size_t *n_det)
{
    selsync_detection *det = NULL;
    size_t cap_det = 0;
    int rc = 0;
    *n_det = 0;
    for (int i = 0; i < n && !rc; ++i) {
        image im = load_image_color(paths[i], 0, 0);
        image sized = letterbox_image(im, net->w, net->h);
        network_predict(net, sized.data);
        int nboxes = 0;
        detection *dets = get_network_boxes(net, im.w, im.h, 0.005f, 0.5f, NULL, 1, &nboxes);
        layer head = net->layers[net->n - 1]; /* its nms_kind and beta_nms, as detector map */
        do_nms_kind(dets, nboxes, classes, 0.45f, head.nms_kind, head.beta_nms);
        for (int b = 0; b < nboxes && !rc; ++b)
            for (int c = 0; c < classes && c < dets[b].classes; ++c) {
                if (dets[b].prob[c] <= 0) continue;
                if (*n_det == cap_det) {
                    cap_det = cap_det ? 2 * cap_det : 1024;
                    selsync_detection *grown = realloc(det, cap_det * sizeof *det);
                    if (!grown) {
                        say("out of memory");
                        rc = -1;
                        break;
                    }
                    det = grown;
                }
                box bb = dets[b].bbox;
                det[(*n_det)++] = (selsync_detection){i, c, dets[b].prob[c], {bb.x, bb.y, bb.w, bb.h}};
            }
        free_detections(dets, nboxes);
        free_image(sized);
        free_image(im);
        if (progress && (i + 1) % 500 == 0) fprintf(stderr, "selsync: map: %d of %d images\n", i + 1, n);
    }
    if (!rc && selsync_map(truth, n_truth, det, *n_det, classes, 0.5f, ap, map)) {
        say("mAP computation failed");
        rc = -1;
    }
    free(det);
    return rc;
}

void darknet_input_image(network *net, const char *path, int letterbox, float *out)
{
    image im = load_image_color((char *)path, 0, 0);
    image sized;
    if (letterbox) {
        sized = letterbox_image(im, net->w, net->h);
    } else {
        image resized = resize_min(im, net->w);
        sized = crop_image(resized, (resized.w - net->w) / 2, (resized.h - net->h) / 2, net->w, net->h);
        if (resized.data != im.data) free_image(resized);
    }
    size_t have = (size_t)sized.w * (size_t)sized.h * (size_t)sized.c, want = (size_t)net->inputs;
    memcpy(out, sized.data, (have < want ? have : want) * sizeof *out);
    if (have < want) memset(out + have, 0, (want - have) * sizeof *out);
    free_image(sized);
    free_image(im);
}

double darknet_classifier_top1(network *net, char **paths, int n, char **labels, int classes)
{
    int right = 0;
    for (int i = 0; i < n; ++i) {
        image im = load_image_color(paths[i], 0, 0);
        image resized = resize_min(im, net->w);
        image crop = crop_image(resized, (resized.w - net->w) / 2, (resized.h - net->h) / 2, net->w, net->h);
        float *pred = network_predict(net, crop.data);
        int best = 0;
        for (int c = 1; c < classes; ++c)
            if (pred[c] > pred[best]) best = c;
        right += darknet_class_of(paths[i], labels, classes, NULL, 0) == best;
        free_image(crop);
        if (resized.data != im.data) free_image(resized);
        free_image(im);
    }
    return n ? (double)right / n : 0.0;
}

/* --- darknet selsync map: mAP@0.5 of a detector on its validation list ------ */

/* darknet selsync map DATA CFG WEIGHTS: runs the detector on every image of
 * the data file's valid list (letterboxed, as Darknet validates) and prints
 * the VOC-style AP at IoU 0.5 of every class and their mean. */
static int map_command(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s selsync map DATA CFG WEIGHTS\n", argv[0]);
        return EXIT_FAILURE;
    }
    list *options = read_data_cfg(argv[3]);
    char *valid = option_find_str(options, "valid", NULL);
    int classes = option_find_int(options, "classes", 0);
    if (!valid || classes < 1) {
        say("%s: needs valid= and classes= for mAP", argv[3]);
        free_data_cfg(options);
        return EXIT_FAILURE;
    }
    network *net = load_network(argv[4], argv[5], 0);
    set_batch_network(net, 1);
    list *plist = get_paths(valid);
    char **paths = (char **)list_to_array(plist);
    double *ap = calloc((size_t)classes, sizeof *ap), map = 0;
    selsync_truth *truth = NULL;
    size_t n_truth = 0, n_det = 0;
    int status = EXIT_FAILURE;
    if (!ap) say("out of memory");
    else if (!darknet_read_truths(paths, plist->size, classes, &truth, &n_truth)) {
        if (n_truth == 0)
            say("%s: the label files of %s hold no ground-truth box; mAP@0.5 is undefined", argv[3],
                   valid);
        else if (!darknet_detector_map(net, paths, plist->size, classes, truth, n_truth, 1, ap, &map, &n_det))
            status = EXIT_SUCCESS;
    }
    if (status == EXIT_SUCCESS) {
        for (int c = 0; c < classes; ++c)
            if (!isnan(ap[c])) printf("class %d: AP@0.5 = %.4f\n", c, ap[c]);
        printf("mAP@0.5 = %.4f (%d images, %zu boxes, %zu detections)\n", map, plist->size,
               n_truth, n_det);
    }
    free(ap);
    free(truth);
    free_ptrs((void **)paths, plist->size);
    free_list(plist);
    free_network(net);
    free_data_cfg(options);
    return status;
}

/* --- darknet selsync chart: the training chart of a finished run ------------ */

/* darknet selsync chart METRICS [PNG]: draws the chart training draws (loss,
 * held-out score, synchronised steps and bytes against training time) from
 * a metrics file (log= of [selsync]) into PNG, by default METRICS with its
 * extension replaced by .png. */
static int chart_command(int argc, char **argv)
{
    char png[4096], err[1024];
    selsync_chart *chart = NULL;
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s selsync chart METRICS [PNG]\n", argv[0]);
        return EXIT_FAILURE;
    }
    const char *metrics = argv[3], *slash = strrchr(metrics, '/'), *dot = strrchr(metrics, '.');
    size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - metrics) : strlen(metrics);
    if (snprintf(png, sizeof png, "%.*s.png", (int)stem, metrics) >= (int)sizeof png && argc == 4) {
        say("%s: path too long", metrics);
        return EXIT_FAILURE;
    }
    if (argc == 5) snprintf(png, sizeof png, "%s", argv[4]);
    selsync_status st = selsync_chart_create(png, slash ? slash + 1 : metrics, selsync_chart_gnuplot(), &chart, err,
                                             sizeof err);
    if (!st) st = selsync_chart_read_metrics(chart, metrics, err, sizeof err);
    if (!st) st = selsync_chart_finish(chart, err, sizeof err);
    selsync_chart_destroy(chart);
    if (st) {
        say("%s", err);
        return EXIT_FAILURE;
    }
    printf("%s\n", png);
    return EXIT_SUCCESS;
}

int darknet_plugin_command(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "selsync") && !strcmp(argv[2], "version")) {
        printf("%s; %s\n", SELSYNC_BUILD_ID, gemm_kernel());
        return EXIT_SUCCESS;
    }
    if (argc >= 3 && !strcmp(argv[1], "selsync") && !strcmp(argv[2], "map"))
        return map_command(argc, argv);
    if (argc >= 3 && !strcmp(argv[1], "selsync") && !strcmp(argv[2], "chart"))
        return chart_command(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "selsync")) {
        fprintf(stderr, "usage: %s selsync map DATA CFG WEIGHTS\n"
                        "       %s selsync chart METRICS [PNG]\n"
                        "       %s selsync version\n", argv[0], argv[0], argv[0]);
        return EXIT_FAILURE;
    }
    return -1;
}

