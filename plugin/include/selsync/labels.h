/* Detection label files as Darknet reads them: one object per line,
 * "CLASS X Y W H", the box's centre and size normalised to the image. */
#ifndef SELSYNC_LABELS_H
#define SELSYNC_LABELS_H

#include <stddef.h>

#include "selsync/map.h"
#include "selsync/status.h"

/* Parses the len bytes of text (a label file's contents, named file in
 * messages) and appends its objects, tagged with image, to *truth (grown
 * with realloc; *n used of *cap). Strict: every non-blank line holds
 * exactly CLASS (a decimal integer in [0, classes)) and four decimal
 * numbers with 0 <= X, Y <= 1 and 0 < W, H <= 1; "\n" or "\r\n" ends a
 * line. Otherwise SELSYNC_ECONFIG with "FILE:LINE: ..." in err, and *truth
 * holds the objects of the lines before. EINVAL: NULL arguments or
 * classes < 1; ENOMEM. */
selsync_status selsync_labels_parse(const char *text, size_t len, const char *file, int classes, int image,
                                    selsync_truth **truth, size_t *n, size_t *cap, char *err, size_t errlen);

/* selsync_labels_parse on the file at path; SELSYNC_EIO when it cannot be
 * read (the message names it). */
selsync_status selsync_labels_read(const char *path, int classes, int image, selsync_truth **truth,
                                   size_t *n, size_t *cap, char *err, size_t errlen);

/* The most frequent class of truth[0..n) (classes in [0, classes)), a tie
 * going to the lowest class; -1 when n == 0 or on out of memory (-2). */
int selsync_labels_majority(const selsync_truth *truth, size_t n, int classes);

#endif
