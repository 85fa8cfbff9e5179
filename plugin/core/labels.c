/* Detection label files (see selsync/labels.h). */
#include "selsync/labels.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_LABEL_FILE (64u << 20) /* a label file larger than this is not one */

/* The next blank-separated token of [*p, end) in tok (at most size-1 bytes,
 * longer tokens are refused); 0 when there is none. */
static int next_token(const char **p, const char *end, char *tok, size_t size)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    const char *t = s;
    while (t < end && *t != ' ' && *t != '\t') t++;
    *p = t;
    if (t == s || (size_t)(t - s) >= size) return 0;
    memcpy(tok, s, (size_t)(t - s));
    tok[t - s] = '\0';
    return 1;
}

/* A decimal number: sign, digits, fraction, exponent; no hex, inf or nan. */
static int decimal(const char *tok, int integer, double *out)
{
    const char *s = tok + (*tok == '+' || *tok == '-');
    size_t digits = strspn(s, "0123456789");
    char *end;
    if (integer) {
        if (digits == 0 || s[digits] != '\0') return 0;
        errno = 0;
        long v = strtol(tok, &end, 10);
        if (errno || v < -2147483647L || v > 2147483647L) return 0;
        *out = (double)v;
        return 1;
    }
    if (strspn(s, "0123456789.eE+-") != strlen(s) || strspn(s, "0123456789.") == 0) return 0;
    errno = 0;
    *out = strtod(tok, &end);
    return *end == '\0' && errno != ERANGE;
}

/* Parses one line (no line end) into t; 0 when it is not a label line. */
static int parse_line(const char *s, const char *end, int classes, selsync_truth *t)
{
    char tok[64];
    double v[5];
    for (int i = 0; i < 5; i++)
        if (!next_token(&s, end, tok, sizeof tok) || !decimal(tok, i == 0, &v[i])) return 0;
    if (next_token(&s, end, tok, sizeof tok) || s != end) return 0; /* trailing text */
    if (v[0] < 0 || v[0] >= classes) return 0;
    /* the ranges hold for the floats stored (a tiny size rounds to 0) */
    selsync_box b = {(float)v[1], (float)v[2], (float)v[3], (float)v[4]};
    if (!(b.x >= 0 && b.x <= 1 && b.y >= 0 && b.y <= 1 && b.w > 0 && b.w <= 1 && b.h > 0 && b.h <= 1)) return 0;
    t->cls = (int)v[0];
    t->box = b;
    return 1;
}

selsync_status selsync_labels_parse(const char *text, size_t len, const char *file, int classes, int image,
                                    selsync_truth **truth, size_t *n, size_t *cap, char *err, size_t errlen)
{
    if ((!text && len) || !file || !truth || !n || !cap || classes < 1)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "labels: NULL argument or classes < 1");
    const char *p = text, *end = text + len;
    for (size_t line = 1; p < end; line++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *next, *nul = NULL, *q = p;
        if (!eol) eol = end;
        next = eol < end ? eol + 1 : end;
        if (eol > p && eol[-1] == '\r') eol--;
        for (const char *c = p; c < eol && !nul; c++)
            if (*c == '\0') nul = c;
        while (q < eol && (*q == ' ' || *q == '\t')) q++;
        if (q == eol) { /* blank */
            p = next;
            continue;
        }
        selsync_truth t = {image, 0, {0, 0, 0, 0}};
        if (nul || !parse_line(p, eol, classes, &t)) {
            int shown = (int)(eol - p > 80 ? 80 : eol - p);
            if (nul) shown = (int)(nul - p);
            return selsync_fail(err, errlen, SELSYNC_ECONFIG, "%.1000s:%zu: not a detection label \"CLASS X Y W H\" "
                                "with CLASS in 0..%d and a box inside the image (normalised)%s: %.*s%s",
                                file, line, classes - 1, nul ? " (a NUL byte)" : "", shown, p,
                                eol - p > 80 ? "..." : "");
        }
        if (*n == *cap) {
            size_t grown_cap = *cap ? 2 * *cap : 64;
            selsync_truth *grown = realloc(*truth, grown_cap * sizeof **truth);
            if (!grown) return selsync_fail(err, errlen, SELSYNC_ENOMEM, "%.1000s: out of memory", file);
            *truth = grown;
            *cap = grown_cap;
        }
        (*truth)[(*n)++] = t;
        p = next;
    }
    return SELSYNC_OK;
}

selsync_status selsync_labels_read(const char *path, int classes, int image, selsync_truth **truth,
                                   size_t *n, size_t *cap, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) return selsync_fail(err, errlen, SELSYNC_EIO, "%.1000s: cannot open: %s", path, strerror(errno));
    size_t size = 0, got;
    char *text = NULL;
    selsync_status st = SELSYNC_OK;
    for (;;) {
        char *grown = size < MAX_LABEL_FILE ? realloc(text, size + 4096) : NULL;
        if (!grown) {
            st = size < MAX_LABEL_FILE ? selsync_fail(err, errlen, SELSYNC_ENOMEM, "%.1000s: out of memory", path)
                                       : selsync_fail(err, errlen, SELSYNC_ECONFIG, "%.1000s: larger than %u MB, "
                                                      "not a label file", path, MAX_LABEL_FILE >> 20);
            break;
        }
        text = grown;
        got = fread(text + size, 1, 4096, f);
        size += got;
        if (got < 4096) break;
    }
    if (st == SELSYNC_OK && ferror(f))
        st = selsync_fail(err, errlen, SELSYNC_EIO, "%.1000s: cannot read: %s", path, strerror(errno));
    fclose(f);
    if (st == SELSYNC_OK) st = selsync_labels_parse(text, size, path, classes, image, truth, n, cap, err, errlen);
    free(text);
    return st;
}

int selsync_labels_majority(const selsync_truth *truth, size_t n, int classes)
{
    if (n == 0 || classes < 1) return -1;
    size_t *count = calloc((size_t)classes, sizeof *count);
    int best = -1;
    if (!count) return -2;
    for (size_t i = 0; i < n; i++)
        if (truth[i].cls >= 0 && truth[i].cls < classes) count[truth[i].cls]++;
    for (int c = 0; c < classes; c++)
        if (count[c] > (best < 0 ? 0 : count[best])) best = c;
    free(count);
    return best;
}
