/* Darknet's data as the plugin reads it: the class of a training file, the
 * ground truth of detection images, and a model's score on a held-out list
 * (top-1 for a classifier, VOC mAP@0.5 for a detector), as Darknet's own
 * validation finds labels and prepares images. Also the command
 * `darknet selsync map DATA CFG WEIGHTS` (darknet_plugin_command). */
#ifndef SELSYNC_DARKNET_EVALUATION_H
#define SELSYNC_DARKNET_EVALUATION_H

#include <stddef.h>

#include "darknet.h"
#include "selsync/map.h"

/* The label file of a detection image, found as Darknet finds it; -1 when
 * the path is too long. */
int darknet_label_path(const char *path, char *out, size_t size);

/* The class of a training file: the first label string found in its path
 * (classifier, labels != NULL), or the most frequent class in its label file,
 * a tie going to the lowest class (detector); -1 when there is none; -2
 * with the message in why (naming the file and line) when a detector's
 * label file is missing or invalid (selsync/labels.h). */
int darknet_class_of(const char *path, char **labels, int classes, char *why, size_t whylen);

/* The ground-truth boxes of every image of paths (image i's tagged i) into
 * *truth (malloc'd, the caller frees); -1 after reporting a missing or
 * invalid label file. */
int darknet_read_truths(char **paths, int n, int classes, selsync_truth **truth, size_t *n_truth);

/* Runs net (batch 1) on every image of paths (letterboxed, as Darknet
 * validates) and computes, against truth, the VOC-style AP at IoU 0.5 of
 * every class (ap, NaN for a class without boxes) and their mean; progress:
 * a line every 500 images. Returns -1 after reporting a failure. */
int darknet_detector_map(network *net, char **paths, int n, int classes, const selsync_truth *truth,
                         size_t n_truth, int progress, double *ap, double *map, size_t *n_det);

/* The input of net (net->inputs floats into out) for the image at path,
 * prepared as the evaluation prepares it: letterboxed (a detector), or
 * resized to the network's smaller side and cropped at the centre (a
 * classifier). */
void darknet_input_image(network *net, const char *path, int letterbox, float *out);

/* Top-1 accuracy of net (batch 1) on paths, whose class is the first label
 * found in the path (as Darknet's classifier validates: the image resized
 * to the network's smaller side, centre crop). */
double darknet_classifier_top1(network *net, char **paths, int n, char **labels, int classes);

#endif
