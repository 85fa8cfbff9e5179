/* VOC-style detection evaluation: box IoU and mean average precision. */
#ifndef SELSYNC_MAP_H
#define SELSYNC_MAP_H

#include <stddef.h>

#include "selsync/status.h"

/* An axis-aligned box: centre x, y and size w, h, in any consistent unit. */
typedef struct selsync_box { float x, y, w, h; } selsync_box;

/* A ground-truth object of class cls in image `image` (any int id). */
typedef struct selsync_truth { int image; int cls; selsync_box box; } selsync_truth;

/* A detection of class cls with confidence score in image `image`. */
typedef struct selsync_detection { int image; int cls; float score; selsync_box box; } selsync_detection;

/* Intersection over union of a and b; 0 when they do not overlap (or for
 * degenerate boxes). */
float selsync_box_iou(selsync_box a, selsync_box b);

/* Average precision of every class and their mean, as the PASCAL VOC devkit
 * does (no "difficult" objects):
 *  - per class, detections are taken by descending score (ties: input order);
 *  - each is compared with the ground truths of its class and image and
 *    takes the one with the highest IoU (ties: input order); it is a true
 *    positive when that IoU >= iou_threshold and that truth is not matched
 *    yet (it becomes matched), otherwise a false positive (so duplicates of
 *    a matched truth are false positives, also when another truth of the
 *    image overlaps it less);
 *  - AP = area under the precision/recall curve with all-point
 *    interpolation: precision made non-increasing from the right, summed
 *    over the recall steps (1/npos at every true positive).
 * ap[classes] may be NULL. Classes without ground truth get ap = NaN and are
 * left out of the mean *map; with no ground truth at all *map = NaN.
 * EINVAL: NULL truth/det with a non-zero count, NULL map, classes < 1, a
 * class outside [0, classes), iou_threshold outside (0, 1]. ENONFINITE: a
 * NaN score. ENOMEM. ap and *map are written only on SELSYNC_OK. */
selsync_status selsync_map(const selsync_truth *truth, size_t n_truth,
                           const selsync_detection *det, size_t n_det, int classes,
                           float iou_threshold, double *ap, double *map);

#endif
