/* VOC-style mean average precision (selsync/map.h). */
#include "selsync/map.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Ground truths sorted by (class, image, input order); detections by
 * (class, descending score, input order). */
typedef struct { int cls, image; size_t idx; } truth_key;
typedef struct { int cls; float score; size_t idx; } det_key;

static int cmp3(int a, int b) { return (a > b) - (a < b); }
static int cmpz(size_t a, size_t b) { return (a > b) - (a < b); }

static int cmp_truth(const void *pa, const void *pb)
{
    const truth_key *a = pa, *b = pb;
    int c = cmp3(a->cls, b->cls);
    if (!c) c = cmp3(a->image, b->image);
    return c ? c : cmpz(a->idx, b->idx);
}

static int cmp_det(const void *pa, const void *pb)
{
    const det_key *a = pa, *b = pb;
    int c = cmp3(a->cls, b->cls);
    if (!c) c = (a->score < b->score) - (a->score > b->score);
    return c ? c : cmpz(a->idx, b->idx);
}

float selsync_box_iou(selsync_box a, selsync_box b)
{
    float ix = fminf(a.x + a.w / 2, b.x + b.w / 2) - fmaxf(a.x - a.w / 2, b.x - b.w / 2);
    float iy = fminf(a.y + a.h / 2, b.y + b.h / 2) - fmaxf(a.y - a.h / 2, b.y - b.h / 2);
    if (!(ix > 0 && iy > 0)) return 0;
    float inter = ix * iy, uni = a.w * a.h + b.w * b.h - inter;
    return uni > 0 ? inter / uni : 0;
}

/* First index in t[0..n) (one class, sorted by image) with image >= image. */
static size_t first_of_image(const truth_key *t, size_t n, int image)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].image < image) lo = mid + 1; else hi = mid;
    }
    return lo;
}

selsync_status selsync_map(const selsync_truth *truth, size_t n_truth,
                           const selsync_detection *det, size_t n_det, int classes,
                           float iou_threshold, double *ap, double *map)
{
    if ((!truth && n_truth) || (!det && n_det) || !map || classes < 1 ||
        !(iou_threshold > 0 && iou_threshold <= 1))
        return SELSYNC_EINVAL;
    for (size_t i = 0; i < n_truth; i++)
        if (truth[i].cls < 0 || truth[i].cls >= classes) return SELSYNC_EINVAL;
    for (size_t i = 0; i < n_det; i++)
        if (det[i].cls < 0 || det[i].cls >= classes) return SELSYNC_EINVAL;
    for (size_t i = 0; i < n_det; i++)
        if (isnan(det[i].score)) return SELSYNC_ENONFINITE;

    truth_key *tk = calloc(n_truth + 1, sizeof *tk);
    det_key *dk = calloc(n_det + 1, sizeof *dk);
    unsigned char *used = calloc(n_truth + 1, 1);
    double *prec = calloc(n_truth + 1, sizeof *prec); /* precision at each true positive */
    selsync_status st = SELSYNC_ENOMEM;
    if (!tk || !dk || !used || !prec) goto out;
    for (size_t i = 0; i < n_truth; i++) tk[i] = (truth_key){truth[i].cls, truth[i].image, i};
    for (size_t i = 0; i < n_det; i++) dk[i] = (det_key){det[i].cls, det[i].score, i};
    qsort(tk, n_truth, sizeof *tk, cmp_truth);
    qsort(dk, n_det, sizeof *dk, cmp_det);

    double sum = 0;
    int counted = 0;
    size_t t0 = 0, d0 = 0;
    for (int c = 0; c < classes; c++) {
        size_t t1 = t0, d1 = d0, tp = 0, fp = 0;
        while (t1 < n_truth && tk[t1].cls == c) t1++;
        while (d1 < n_det && dk[d1].cls == c) d1++;
        for (size_t i = d0; i < d1; i++) {
            const selsync_detection *d = &det[dk[i].idx];
            size_t best = SIZE_MAX;
            float best_iou = -1;
            for (size_t j = t0 + first_of_image(tk + t0, t1 - t0, d->image);
                 j < t1 && tk[j].image == d->image; j++) {
                float iou = selsync_box_iou(d->box, truth[tk[j].idx].box);
                if (iou > best_iou) best_iou = iou, best = j;
            }
            if (best != SIZE_MAX && best_iou >= iou_threshold && !used[best]) {
                used[best] = 1;
                tp++;
                prec[tp - 1] = (double)tp / (double)(tp + fp);
            } else {
                fp++;
            }
        }
        /* Interpolation: the running maximum from the right; false positives
         * never raise it (their precision is below the true positive before). */
        double a = 0;
        for (size_t k = tp; k-- > 0;) {
            if (k + 1 < tp && prec[k + 1] > prec[k]) prec[k] = prec[k + 1];
            a += prec[k];
        }
        a = t1 > t0 ? a / (double)(t1 - t0) : NAN;
        if (t1 > t0) sum += a, counted++;
        if (ap) ap[c] = a;
        t0 = t1, d0 = d1;
    }
    *map = counted ? sum / counted : NAN;
    st = SELSYNC_OK;
out:
    free(tk);
    free(dk);
    free(used);
    free(prec);
    return st;
}
