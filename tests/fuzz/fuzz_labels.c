/* The detection label parser (selsync_labels_parse) on the input as the
 * text of a label file, not NUL-terminated, for one class and for 80; what
 * it accepts must lie in the documented ranges, and the majority class of
 * the objects must be one of theirs. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_check.h"
#include "selsync/labels.h"

static void parse(const uint8_t *data, size_t size, int classes)
{
    selsync_truth *truth = NULL;
    size_t n = 0, cap = 0;
    char err[1024];
    selsync_status st = selsync_labels_parse((const char *)data, size, "fuzz.txt", classes, 7, &truth, &n, &cap,
                                             err, sizeof err);
    CHECK(st == SELSYNC_OK || st == SELSYNC_ECONFIG);
    CHECK(n <= cap);
    if (st != SELSYNC_OK) CHECK(err[0] != '\0');
    for (size_t i = 0; i < n; i++) {
        const selsync_truth *t = &truth[i];
        CHECK(t->image == 7 && t->cls >= 0 && t->cls < classes);
        CHECK(t->box.x >= 0 && t->box.x <= 1 && t->box.y >= 0 && t->box.y <= 1);
        CHECK(t->box.w > 0 && t->box.w <= 1 && t->box.h > 0 && t->box.h <= 1);
    }
    int major = selsync_labels_majority(truth, n, classes);
    CHECK(n == 0 ? major == -1 : major >= 0 && major < classes);
    free(truth);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse(data, size, 1);
    parse(data, size, 80);
    return 0;
}
