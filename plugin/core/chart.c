/* The training chart's data (see selsync/chart.h): the steps in bins, the
 * evaluations, the data file a drawer plots, and a metrics file read back. */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "selsync/chart.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "metrics_columns.h"

#define LINE_MAX_LEN 4096

typedef struct bin {
    uint64_t step_first, step_last, steps, finite, synced, bytes_end;
    double loss_sum, loss_min, loss_max, t_begin, t_end;
} bin;

struct selsync_chart {
    char *png, *title;
    char *dat;                   /* the data file beside png */
    const selsync_chart_drawer *drawer;
    void *d;                     /* the drawer's state */
    bin bins[SELSYNC_CHART_MAX_BINS];
    size_t n_bins;
    uint64_t width;              /* steps per full bin */
    double last_t;               /* train_s of the last step; NaN before the first */
    selsync_chart_eval *evals;
    size_t n_evals, cap_evals;
};

/* ---- creation ---- */

char *selsync_chart_beside(const char *png, const char *suffix)
{
    const char *slash = strrchr(png, '/');
    size_t dir = slash ? (size_t)(slash - png) + 1 : 0;
    size_t n = strlen(png) + strlen(suffix) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%.*s.%s%s", (int)dir, png, png + dir, suffix);
    return s;
}

/* 0 when png's folder exists and is writable. */
static int folder_ok(const char *png)
{
    const char *slash = strrchr(png, '/');
    struct stat st;
    if (!slash) return access(".", W_OK | X_OK);
    if (slash == png) return access("/", W_OK | X_OK);
    char *dir = strdup(png);
    if (!dir) return -1;
    dir[slash - png] = '\0';
    int rc = stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? access(dir, W_OK | X_OK) : -1;
    free(dir);
    return rc;
}

selsync_status selsync_chart_create(const char *png, const char *title, const selsync_chart_drawer *drawer,
                                    selsync_chart **out, char *err, size_t errlen)
{
    selsync_chart *c;
    if (err && errlen) err[0] = '\0';
    if (out) *out = NULL;
    if (!png || !png[0] || !out || !drawer)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] selsync_chart_create: no png, drawer or out");
    if (png[strlen(png) - 1] == '/')
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] training chart '%s' is a folder", png);
    if (folder_ok(png) != 0)
        return selsync_fail(err, errlen, SELSYNC_EIO,
                            "[selsync] training chart '%s': its folder is missing or not writable", png);
    if (!(c = calloc(1, sizeof *c))) return selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory");
    selsync_status st = drawer->open(png, &c->d, err, errlen);
    if (st != SELSYNC_OK) {
        free(c);
        return st;
    }
    c->drawer = drawer;
    c->png = strdup(png);
    c->title = strdup(title ? title : "");
    c->dat = selsync_chart_beside(png, ".dat");
    c->width = 1;
    c->last_t = NAN;
    if (!c->png || !c->title || !c->dat) {
        selsync_chart_destroy(c);
        return selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory");
    }
    *out = c;
    return SELSYNC_OK;
}

/* ---- the series ---- */

static void merge_pairs(selsync_chart *c)
{
    size_t n = 0;
    for (size_t i = 0; i + 1 < c->n_bins; i += 2, n++) {
        bin a = c->bins[i], b = c->bins[i + 1];
        bin *m = &c->bins[n];
        *m = a;
        m->step_last = b.step_last;
        m->steps = a.steps + b.steps;
        m->finite = a.finite + b.finite;
        m->synced = a.synced + b.synced;
        m->loss_sum = a.loss_sum + b.loss_sum;
        m->loss_min = b.finite && (!a.finite || b.loss_min < a.loss_min) ? b.loss_min : a.loss_min;
        m->loss_max = b.finite && (!a.finite || b.loss_max > a.loss_max) ? b.loss_max : a.loss_max;
        m->t_end = b.t_end;
        m->bytes_end = b.bytes_end;
    }
    if (c->n_bins % 2) c->bins[n++] = c->bins[c->n_bins - 1];
    c->n_bins = n;
    c->width *= 2;
}

void selsync_chart_add_step(selsync_chart *c, uint64_t step, double train_s, double loss, int synced,
                            uint64_t bytes_total)
{
    bin *b;
    if (!c) return;
    if (!isfinite(train_s)) train_s = isnan(c->last_t) ? 0.0 : c->last_t;
    if (c->n_bins == 0 || c->bins[c->n_bins - 1].steps >= c->width) {
        if (c->n_bins == SELSYNC_CHART_MAX_BINS) merge_pairs(c);
        b = &c->bins[c->n_bins++];
        memset(b, 0, sizeof *b);
        b->step_first = step;
        b->t_begin = !isnan(c->last_t) ? c->last_t : step == 0 ? 0.0 : train_s;
    } else
        b = &c->bins[c->n_bins - 1];
    b->step_last = step;
    b->steps++;
    if (isfinite(loss)) {
        if (!b->finite || loss < b->loss_min) b->loss_min = loss;
        if (!b->finite || loss > b->loss_max) b->loss_max = loss;
        b->finite++;
        b->loss_sum += loss;
    }
    b->synced += synced != 0;
    b->t_end = train_s;
    b->bytes_end = bytes_total;
    c->last_t = train_s;
}

void selsync_chart_add_eval(selsync_chart *c, uint64_t step, double train_s, const char *metric, double score)
{
    selsync_chart_eval *e;
    if (!c || !metric || c->n_evals >= SELSYNC_CHART_MAX_EVALS) return;
    if (c->n_evals == c->cap_evals) {
        size_t cap = c->cap_evals ? 2 * c->cap_evals : 64;
        if (cap > SELSYNC_CHART_MAX_EVALS) cap = SELSYNC_CHART_MAX_EVALS;
        selsync_chart_eval *grown = realloc(c->evals, cap * sizeof *grown);
        if (!grown) return;
        c->evals = grown;
        c->cap_evals = cap;
    }
    e = &c->evals[c->n_evals++];
    e->step = step;
    e->train_s = train_s;
    e->score = score;
    snprintf(e->metric, sizeof e->metric, "%s", metric);
}

size_t selsync_chart_bin_count(const selsync_chart *c) { return c ? c->n_bins : 0; }
uint64_t selsync_chart_bin_width(const selsync_chart *c) { return c ? c->width : 0; }
size_t selsync_chart_eval_count(const selsync_chart *c) { return c ? c->n_evals : 0; }

int selsync_chart_get_bin(const selsync_chart *c, size_t i, selsync_chart_bin *out)
{
    if (!c || !out || i >= c->n_bins) return -1;
    const bin *b = &c->bins[i];
    out->step_first = b->step_first;
    out->step_last = b->step_last;
    out->steps = b->steps;
    out->finite = b->finite;
    out->loss_mean = b->finite ? b->loss_sum / (double)b->finite : NAN;
    out->loss_min = b->finite ? b->loss_min : NAN;
    out->loss_max = b->finite ? b->loss_max : NAN;
    out->synced = b->synced;
    out->t_begin = b->t_begin;
    out->t_end = b->t_end;
    out->bytes_end = b->bytes_end;
    return 0;
}

int selsync_chart_get_eval(const selsync_chart *c, size_t i, selsync_chart_eval *out)
{
    if (!c || !out || i >= c->n_evals) return -1;
    *out = c->evals[i];
    return 0;
}

/* ---- the drawing ---- */

static void put_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "\t%.9g", v);
    else fputs("\t?", f);
}

size_t selsync_chart_metrics(const selsync_chart *c, const char *names[SELSYNC_CHART_MAX_METRICS])
{
    size_t n = 0;
    for (size_t i = 0; c && i < c->n_evals; i++) {
        size_t k = 0;
        while (k < n && strcmp(names[k], c->evals[i].metric) != 0) k++;
        if (k == n && n < SELSYNC_CHART_MAX_METRICS) names[n++] = c->evals[i].metric;
    }
    return n;
}

const char *selsync_chart_title(const selsync_chart *c) { return c ? c->title : ""; }

/* Block 0: one row per bin (t_end, t_mid, t_width, loss mean, min, max,
 * smoothed, synced share, MB sent, last step); then a block per metric
 * (train_s, score, step). Blocks are separated by two blank lines. */
static int write_data(const selsync_chart *c)
{
    const char *names[SELSYNC_CHART_MAX_METRICS];
    size_t n_names = selsync_chart_metrics(c, names);
    FILE *f = fopen(c->dat, "w");
    size_t half = c->n_bins < 5 ? 0 : c->n_bins / 25 + 1; /* the smoothing window's half width */
    if (!f) return -1;
    fputs("# t_end\tt_mid\tt_width\tloss_mean\tloss_min\tloss_max\tloss_smooth\tsynced_share\tmb_sent\tstep\n", f);
    for (size_t i = 0; i < c->n_bins; i++) {
        const bin *b = &c->bins[i];
        size_t h = half; /* symmetric, narrower near the ends */
        if (h > i) h = i;
        if (h > c->n_bins - 1 - i) h = c->n_bins - 1 - i;
        size_t lo = i - h, hi = i + h;
        double sum = 0;
        uint64_t n = 0;
        for (size_t j = lo; j <= hi; j++) {
            sum += c->bins[j].loss_sum;
            n += c->bins[j].finite;
        }
        fprintf(f, "%.9g", b->t_end);
        put_num(f, 0.5 * (b->t_begin + b->t_end));
        put_num(f, b->t_end - b->t_begin);
        put_num(f, b->finite ? b->loss_sum / (double)b->finite : NAN);
        put_num(f, b->finite ? b->loss_min : NAN);
        put_num(f, b->finite ? b->loss_max : NAN);
        put_num(f, n ? sum / (double)n : NAN);
        put_num(f, (double)b->synced / (double)b->steps);
        put_num(f, (double)b->bytes_end / 1e6);
        fprintf(f, "\t%llu\n", (unsigned long long)b->step_last);
    }
    for (size_t k = 0; k < n_names; k++) {
        fprintf(f, "\n\n# %s: train_s\tscore\tstep\n", names[k]);
        for (size_t i = 0; i < c->n_evals; i++)
            if (strcmp(c->evals[i].metric, names[k]) == 0) {
                fprintf(f, "%.9g", c->evals[i].train_s);
                put_num(f, c->evals[i].score);
                fprintf(f, "\t%llu\n", (unsigned long long)c->evals[i].step);
            }
    }
    int failed = ferror(f);
    return fclose(f) == 0 && !failed ? 0 : -1;
}

selsync_status selsync_chart_draw(selsync_chart *c, char *err, size_t errlen)
{
    selsync_status st;
    if (err && errlen) err[0] = '\0';
    if (!c) return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] selsync_chart_draw: NULL chart");
    int busy = c->drawer->busy(c->d);
    if ((st = c->drawer->status(c->d, err, errlen)) != SELSYNC_OK || busy) return st;
    if (write_data(c) != 0)
        return selsync_fail(err, errlen, SELSYNC_EIO, "[selsync] training chart '%s': writing '%s' failed: %s",
                            c->png, c->dat, strerror(errno));
    return c->drawer->start(c->d, c, c->dat, err, errlen);
}

void selsync_chart_poll(selsync_chart *c)
{
    if (c) (void)c->drawer->busy(c->d);
}

int selsync_chart_busy(selsync_chart *c)
{
    return c ? c->drawer->busy(c->d) : 0;
}

selsync_status selsync_chart_finish(selsync_chart *c, char *err, size_t errlen)
{
    selsync_status st;
    if (err && errlen) err[0] = '\0';
    if (!c) return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] selsync_chart_finish: NULL chart");
    (void)c->drawer->wait(c->d, SELSYNC_CHART_FINISH_WAIT_S, NULL, 0);
    if ((st = selsync_chart_draw(c, err, errlen)) != SELSYNC_OK) return st;
    return c->drawer->wait(c->d, SELSYNC_CHART_FINISH_WAIT_S, err, errlen);
}

void selsync_chart_destroy(selsync_chart *c)
{
    if (!c) return;
    if (c->d) c->drawer->close(c->d);
    if (c->dat) remove(c->dat);
    free(c->png);
    free(c->title);
    free(c->dat);
    free(c->evals);
    free(c);
}

/* ---- reading a metrics file ---- */

/* The columns of the header line that a step row needs (metrics_columns.h). */
enum { COL_STEP, COL_LOSS, COL_DECISION, COL_BYTES, COL_TC, COL_TM, COL_TA, COL_TT, N_COLS };
static const metrics_column needed[N_COLS] = {METRICS_STEP,      METRICS_LOSS,      METRICS_DECISION,
                                              METRICS_BYTES_SENT, METRICS_T_COMPUTE, METRICS_T_MEASURE,
                                              METRICS_T_AGREE,   METRICS_T_TRANSFER};

typedef struct reader {
    const char *path;
    unsigned long line;
    int have_header;
    size_t n_fields;            /* of the header */
    size_t col[N_COLS];
    double t_sum;               /* the step rows' times so far */
    double t_shift;             /* train_s of the latest eval row minus t_sum then */
    uint64_t bytes;
    char *err;
    size_t errlen;
} reader;

static selsync_status bad(reader *r, const char *fmt, ...) SELSYNC_PRINTF(2, 3);

/* SELSYNC_ECONFIG with "PATH:LINE: " and the formatted text. */
static selsync_status bad(reader *r, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return selsync_fail(r->err, r->errlen, SELSYNC_ECONFIG, "%s:%lu: %s", r->path, r->line, msg);
}

/* Splits s at tabs into at most max fields (in place); returns the count,
 * or max + 1 when there are more. */
static size_t split(char *s, char **field, size_t max)
{
    size_t n = 0;
    for (;;) {
        if (n == max) return max + 1;
        field[n++] = s;
        s = strchr(s, '\t');
        if (!s) return n;
        *s++ = '\0';
    }
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    if (!*s) return -1;
    *out = strtod(s, &end);
    return *end ? -1 : 0;
}

static selsync_status read_header(reader *r, char *line)
{
    char *field[64];
    size_t n = split(line, field, 64);
    if (n > 64) return bad(r, "%s", "header line with more than 64 columns");
    for (int k = 0; k < N_COLS; k++) {
        size_t i = 0;
        while (i < n && strcmp(field[i], metrics_column_name[needed[k]]) != 0) i++;
        if (i == n) return bad(r, "header line without the column '%s'", metrics_column_name[needed[k]]);
        r->col[k] = i;
    }
    r->n_fields = n;
    r->have_header = 1;
    return SELSYNC_OK;
}

static selsync_status read_step(selsync_chart *c, reader *r, char *line)
{
    char *field[64];
    double loss, t[4];
    uint64_t step, bytes;
    size_t n = split(line, field, 64);
    if (!r->have_header) return bad(r, "%s", "step row before the header line");
    if (n != r->n_fields)
        return bad(r, "step row with %s%zu fields where the header has %zu", n > 64 ? "over " : "",
                   n > 64 ? (size_t)64 : n, r->n_fields);
    if (parse_u64(field[r->col[COL_STEP]], &step)) return bad(r, "bad step '%s'", field[r->col[COL_STEP]]);
    if (parse_double(field[r->col[COL_LOSS]], &loss)) return bad(r, "bad loss '%s'", field[r->col[COL_LOSS]]);
    if (parse_u64(field[r->col[COL_BYTES]], &bytes))
        return bad(r, "bad bytes_sent '%s'", field[r->col[COL_BYTES]]);
    for (int k = 0; k < 4; k++) {
        const char *s = field[r->col[COL_TC + k]];
        if (parse_double(s, &t[k]) || !isfinite(t[k]) || t[k] < 0)
            return bad(r, "bad %s '%s'", metrics_column_name[needed[COL_TC + k]], s);
    }
    const char *d = field[r->col[COL_DECISION]];
    if (strcmp(d, "sync") != 0 && strcmp(d, "local") != 0 && strcmp(d, "skip") != 0)
        return bad(r, "unknown decision '%s' (not local, sync or skip)", d);
    r->t_sum += t[0] + t[1] + t[2] + t[3];
    r->bytes += bytes;
    selsync_chart_add_step(c, step, r->t_sum + r->t_shift, loss, strcmp(d, "sync") == 0, r->bytes);
    return SELSYNC_OK;
}

/* # eval<TAB>step=S<TAB>wall_s=W<TAB>train_s=T[<TAB>virtual_s=V]<TAB>METRIC=SCORE<TAB>eval_s=E */
static selsync_status read_eval(selsync_chart *c, reader *r, char *line)
{
    char *field[16], *metric = NULL;
    double train_s = NAN, score = NAN, v;
    uint64_t step = 0;
    int have_step = 0;
    size_t n = split(line, field, 16);
    if (n > 16) return bad(r, "%s", "eval row with more than 16 fields");
    for (size_t i = 1; i < n; i++) {
        char *eq = strchr(field[i], '=');
        if (!eq) return bad(r, "eval row field '%s' is not KEY=VALUE", field[i]);
        *eq = '\0';
        const char *key = field[i], *val = eq + 1;
        if (strcmp(key, "step") == 0) {
            if (parse_u64(val, &step)) return bad(r, "eval row: bad step '%s'", val);
            have_step = 1;
        } else if (parse_double(val, &v) || !isfinite(v)) {
            return bad(r, "eval row: bad value of '%s'", key);
        } else if (strcmp(key, "train_s") == 0) {
            train_s = v;
        } else if (strcmp(key, "wall_s") != 0 && strcmp(key, "eval_s") != 0 && strcmp(key, "virtual_s") != 0) {
            if (metric) return bad(r, "eval row with a second score '%s'", key);
            metric = field[i];
            score = v;
        }
    }
    if (!have_step) return bad(r, "%s", "eval row without step=");
    if (isnan(train_s)) return bad(r, "%s", "eval row without train_s=");
    if (!metric) return bad(r, "%s", "eval row without a score (such as top1= or map50=)");
    selsync_chart_add_eval(c, step, train_s, metric, score);
    if (train_s > r->t_sum + r->t_shift) r->t_shift = train_s - r->t_sum;
    return SELSYNC_OK;
}

static selsync_status read_line(selsync_chart *c, reader *r, char *line)
{
    if (!line[0]) return SELSYNC_OK;
    if (strncmp(line, "# eval\t", 7) == 0) return read_eval(c, r, line);
    if (line[0] == '#') return SELSYNC_OK;
    if (strncmp(line, "step\t", 5) == 0) return read_header(r, line);
    return read_step(c, r, line);
}

selsync_status selsync_chart_read_metrics(selsync_chart *c, const char *path, char *err, size_t errlen)
{
    char line[LINE_MAX_LEN];
    reader r = {0};
    selsync_status st = SELSYNC_OK;
    FILE *f;
    if (err && errlen) err[0] = '\0';
    if (!c || !path)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] selsync_chart_read_metrics: NULL argument");
    if (!(f = fopen(path, "r")))
        return selsync_fail(err, errlen, SELSYNC_EIO, "cannot open metrics file '%s': %s", path, strerror(errno));
    r.path = path;
    r.err = err;
    r.errlen = errlen;
    while (st == SELSYNC_OK && fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        int complete = len > 0 && line[len - 1] == '\n';
        r.line++;
        if (!complete && len == sizeof line - 1) {
            st = bad(&r, "%s", "line longer than 4095 bytes");
            break;
        }
        line[strcspn(line, "\r\n")] = '\0';
        st = read_line(c, &r, line);
        if (st != SELSYNC_OK && !complete && !ferror(f)) { /* the last line, being written */
            if (err && errlen) err[0] = '\0';
            st = SELSYNC_OK;
        }
    }
    if (st == SELSYNC_OK && ferror(f))
        st = selsync_fail(err, errlen, SELSYNC_EIO, "reading metrics file '%s' failed: %s", path, strerror(errno));
    fclose(f);
    return st;
}
