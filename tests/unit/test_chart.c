/* Unit tests for the training chart (plugin/core/chart.c): the bins, the
 * metrics reader, and drawings by the real gnuplot and by stand-ins for it
 * (scripts named gnuplot in a folder put on PATH). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv, nanosleep */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chart_gnuplot.h"

typedef struct fx {
    char dir[64], png[128], fake[128], err[1024];
    char *old_path;
    char real_gnuplot[512];
} fx;

static void run_rm(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The gnuplot on PATH, or "" */
static void which_gnuplot(char *out, size_t size)
{
    const char *path = getenv("PATH");
    out[0] = '\0';
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(out, size, "%.*s/gnuplot", (int)n, p);
        if (n && access(out, X_OK) == 0) return;
        p += n + (p[n] == ':');
    }
    out[0] = '\0';
}

/* A chart drawn by gnuplot; its error in f->err. */
static selsync_status create(fx *f, const char *png, const char *title, selsync_chart **c)
{
    return selsync_chart_create(png, title, selsync_chart_gnuplot(), c, f->err, sizeof f->err);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/selsync-chart-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    snprintf(f->png, sizeof f->png, "%s/chart.png", f->dir);
    snprintf(f->fake, sizeof f->fake, "%s/bin", f->dir);
    if (mkdir(f->fake, 0755) != 0) return -1;
    f->old_path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    which_gnuplot(f->real_gnuplot, sizeof f->real_gnuplot);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    setenv("PATH", f->old_path, 1);
    run_rm(f->dir);
    free(f->old_path);
    free(f);
    return 0;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *o = fopen(path, "wb");
    assert_non_null(o);
    assert_true(fputs(text, o) >= 0);
    assert_int_equal(fclose(o), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* Makes FAKE/gnuplot from the script body and puts only FAKE on PATH. */
static void fake_gnuplot(fx *f, const char *body)
{
    char path[192], text[2048];
    snprintf(path, sizeof path, "%s/gnuplot", f->fake);
    snprintf(text, sizeof text, "#!/bin/sh\n%s\n", body);
    write_file(path, text, 0755);
    setenv("PATH", f->fake, 1);
}

/* Polls until no drawing runs (a generous bound, never a timing check). */
static void wait_idle(selsync_chart *c)
{
    const struct timespec nap = {0, 20 * 1000 * 1000};
    for (int i = 0; i < 6000 && selsync_chart_busy(c); i++) nanosleep(&nap, NULL);
    assert_false(selsync_chart_busy(c));
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* The whole file (malloc'd, NUL-terminated) and its size. */
static char *slurp(const char *path, size_t *size)
{
    FILE *i = fopen(path, "rb");
    assert_non_null(i);
    assert_int_equal(fseek(i, 0, SEEK_END), 0);
    long n = ftell(i);
    assert_true(n >= 0);
    rewind(i);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, i), (size_t)n);
    buf[n] = '\0';
    fclose(i);
    if (size) *size = (size_t)n;
    return buf;
}

/* A whole PNG: the signature, then an IEND chunk at the very end. */
static void assert_complete_png(const char *path)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    size_t n;
    char *buf = slurp(path, &n);
    assert_true(n > 1000);
    assert_memory_equal(buf, sig, 8);
    assert_memory_equal(buf + n - 12, iend, 12);
    free(buf);
}

static size_t count_lines(const char *path)
{
    size_t n = 0;
    char *buf = slurp(path, NULL);
    for (char *p = buf; *p; p++) n += *p == '\n';
    free(buf);
    return n;
}

/* ---- bins ---- */

static selsync_chart *new_chart(fx *f)
{
    selsync_chart *c = NULL;
    /* any executable named gnuplot will do for charts that never draw */
    fake_gnuplot(f, "exit 0");
    assert_int_equal(create(f, f->png, "t", &c), SELSYNC_OK);
    assert_non_null(c);
    return c;
}

static void test_bins_stay_bounded(void **state)
{
    fx *f = *state;
    selsync_chart *c = new_chart(f);
    selsync_chart_bin b, prev;
    const uint64_t n = 1000000;
    for (uint64_t s = 0; s < n; s++) selsync_chart_add_step(c, s, 0.01 * (double)(s + 1), 1.0, s % 3 == 0, s);
    size_t nb = selsync_chart_bin_count(c);
    uint64_t width = selsync_chart_bin_width(c), total = 0;
    assert_true(nb <= SELSYNC_CHART_MAX_BINS);
    assert_true(nb > SELSYNC_CHART_MAX_BINS / 2);
    assert_int_equal(width, 1024); /* 2^10: 1024 bins of 1024 steps hold 10^6 */
    for (size_t i = 0; i < nb; i++) {
        assert_int_equal(selsync_chart_get_bin(c, i, &b), 0);
        total += b.steps;
        if (i + 1 < nb) assert_int_equal(b.steps, width);
        assert_int_equal(b.step_last - b.step_first + 1, b.steps);
        if (i) {
            assert_int_equal(b.step_first, prev.step_last + 1);
            assert_true(b.t_begin == prev.t_end);
        }
        prev = b;
    }
    assert_int_equal(total, n);
    assert_int_equal(prev.step_last, n - 1);
    assert_int_equal(prev.bytes_end, n - 1);
    assert_int_equal(selsync_chart_get_bin(c, nb, &b), -1);
    /* evaluations are capped */
    for (int i = 0; i < SELSYNC_CHART_MAX_EVALS + 10; i++) selsync_chart_add_eval(c, (uint64_t)i, i, "top1", 0.5);
    assert_int_equal(selsync_chart_eval_count(c), SELSYNC_CHART_MAX_EVALS);
    selsync_chart_destroy(c);
}

/* loss = step except every 8th step (7, 15, ...) non-finite; every 4th
 * step synchronises; bytes 10 per step; 0.5 s per step */
static void add_known_steps(selsync_chart *c, uint64_t from, uint64_t to)
{
    for (uint64_t s = from; s < to; s++)
        selsync_chart_add_step(c, s, 0.5 * (double)(s + 1), s % 8 == 7 ? (s % 16 == 7 ? NAN : INFINITY) : (double)s,
                               s % 4 == 0, 10 * (s + 1));
}

static void test_bin_values(void **state)
{
    fx *f = *state;
    selsync_chart *c = new_chart(f);
    selsync_chart_bin b;

    add_known_steps(c, 0, SELSYNC_CHART_MAX_BINS);
    assert_int_equal(selsync_chart_bin_count(c), SELSYNC_CHART_MAX_BINS);
    assert_int_equal(selsync_chart_bin_width(c), 1);
    assert_int_equal(selsync_chart_get_bin(c, 7, &b), 0);
    assert_int_equal(b.steps, 1);
    assert_int_equal(b.finite, 0);
    assert_true(isnan(b.loss_mean));
    assert_int_equal(selsync_chart_get_bin(c, 0, &b), 0);
    assert_true(b.t_begin == 0 && b.t_end == 0.5); /* step 0 begins at the start */

    /* 2 * MAX + 1 steps: MAX / 2 bins of 4 steps and one of 1 */
    add_known_steps(c, SELSYNC_CHART_MAX_BINS, 2 * SELSYNC_CHART_MAX_BINS + 1);
    assert_int_equal(selsync_chart_bin_width(c), 4);
    assert_int_equal(selsync_chart_bin_count(c), SELSYNC_CHART_MAX_BINS / 2 + 1);
    for (size_t i = 0; i < SELSYNC_CHART_MAX_BINS / 2; i++) {
        double s0 = 4.0 * (double)i;
        assert_int_equal(selsync_chart_get_bin(c, i, &b), 0);
        assert_int_equal(b.step_first, 4 * i);
        assert_int_equal(b.step_last, 4 * i + 3);
        assert_int_equal(b.steps, 4);
        assert_int_equal(b.synced, 1);
        assert_int_equal(b.bytes_end, 10 * (4 * i + 4));
        assert_true(b.t_end == 0.5 * (s0 + 4));
        assert_true(b.t_begin == 0.5 * s0);
        assert_true(b.loss_min == s0);
        if (i % 2) { /* step 4i+3 is not finite */
            assert_int_equal(b.finite, 3);
            assert_true(b.loss_mean == s0 + 1);
            assert_true(b.loss_max == s0 + 2);
        } else {
            assert_int_equal(b.finite, 4);
            assert_true(b.loss_mean == s0 + 1.5);
            assert_true(b.loss_max == s0 + 3);
        }
    }
    assert_int_equal(selsync_chart_get_bin(c, SELSYNC_CHART_MAX_BINS / 2, &b), 0);
    assert_int_equal(b.steps, 1);
    assert_int_equal(b.step_first, 2 * SELSYNC_CHART_MAX_BINS);
    assert_int_equal(b.synced, 1);
    selsync_chart_destroy(c);

    /* a chart that starts later (a resumed run) begins at its first step;
     * a non-finite train_s takes the previous one */
    c = new_chart(f);
    selsync_chart_add_step(c, 500, 12.0, 1.0, 0, 0);
    selsync_chart_add_step(c, 501, NAN, 1.0, 0, 0);
    assert_int_equal(selsync_chart_bin_count(c), 2);
    assert_int_equal(selsync_chart_get_bin(c, 0, &b), 0);
    assert_true(b.t_begin == 12.0 && b.t_end == 12.0);
    assert_int_equal(selsync_chart_get_bin(c, 1, &b), 0);
    assert_true(b.t_begin == 12.0 && b.t_end == 12.0);
    selsync_chart_destroy(c);
}

/* ---- the metrics reader ---- */

static const char metrics_text[] =
    "# partition label rank 0: 410 samples; 0:194 1:216\n"
    "step\tloss\tlr\tgrad_norm\tsmoothed\tchange\tlocal_flag\tdecision\tlayers_synced\tbytes_sent\t"
    "inject_bytes\tt_compute\tt_measure\tt_agree\tt_transfer\n"
    "0\t2.5\t0.1\t3\t3\tinf\t1\tsync\t4\t1000\t0\t0.5\t0.1\t0.2\t0.2\n"
    "1\tnan\t0.1\t3\t3\tnan\t0\tskip\t0\t0\t0\t0.5\t0\t0.25\t0.25\n"
    "# eval\tstep=2\twall_s=2.700\ttrain_s=2.500\ttop1=0.250000\teval_s=0.200\n"
    "2\t1.5\t0.1\t3\t3\t0.1\t0\tlocal\t0\t0\t500\t1\t0\t0\t0\n"
    "3\t0.5\t0.1\t3\t3\t0.5\t1\tsync\t4\t1000\t0\t1\t0\t0\t0\n"
    "# eval\tstep=4\twall_s=5.000\ttrain_s=4.600\ttop1=0.750000\teval_s=0.200\n";

static void test_read_metrics(void **state)
{
    fx *f = *state;
    char path[192];
    selsync_chart *c = new_chart(f);
    selsync_chart_bin b;
    selsync_chart_eval e;
    snprintf(path, sizeof path, "%s/metrics.0.tsv", f->dir);
    write_file(path, metrics_text, 0644);
    assert_int_equal(selsync_chart_read_metrics(c, path, f->err, sizeof f->err), SELSYNC_OK);

    assert_int_equal(selsync_chart_bin_count(c), 4);
    /* train_s: the step times summed (1, 2), then moved to the eval row's
     * 2.5 (+1 = 3.5, +1 = 4.5); bytes_sent summed; sync only for "sync" */
    static const double t_end[4] = {1, 2, 3.5, 4.5}, loss[4] = {2.5, NAN, 1.5, 0.5};
    static const uint64_t bytes[4] = {1000, 1000, 1000, 2000}, synced[4] = {1, 0, 0, 1};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(selsync_chart_get_bin(c, i, &b), 0);
        assert_int_equal(b.step_first, i);
        assert_true(fabs(b.t_end - t_end[i]) < 1e-12);
        assert_int_equal(b.bytes_end, bytes[i]);
        assert_int_equal(b.synced, synced[i]);
        if (isnan(loss[i])) assert_int_equal(b.finite, 0);
        else assert_true(b.loss_mean == loss[i]);
    }
    assert_int_equal(selsync_chart_eval_count(c), 2);
    assert_int_equal(selsync_chart_get_eval(c, 1, &e), 0);
    assert_int_equal(e.step, 4);
    assert_true(e.train_s == 4.6 && e.score == 0.75);
    assert_string_equal(e.metric, "top1");
    selsync_chart_destroy(c);
}

/* The 1-based number of the column called name in the tab-separated header
 * line (after "# "); 0 when absent. */
static int column_of(const char *header, const char *name)
{
    char h[512];
    int k = 1;
    snprintf(h, sizeof h, "%s", header + 2);
    for (char *save = NULL, *t = strtok_r(h, "\t\n", &save); t; t = strtok_r(NULL, "\t\n", &save), k++)
        if (strcmp(t, name) == 0) return k;
    return 0;
}

/* The data gnuplot draws, from metrics_text's rows: one row per step with
 * its training time, loss (none for the NaN step), synchronised share, MB
 * sent so far and step; one per evaluation; and the program plots each
 * panel from the columns its header names, so a wrong or missing column
 * or point fails. */
static void test_plotted_data(void **state)
{
    fx *f = *state;
    char path[192], dat[192], gp[192], want[128];
    selsync_chart *c = NULL;
    if (!f->real_gnuplot[0]) fail_msg("gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)");
    assert_int_equal(create(f, f->png, "t", &c), SELSYNC_OK);
    snprintf(path, sizeof path, "%s/metrics.0.tsv", f->dir);
    write_file(path, metrics_text, 0644);
    assert_int_equal(selsync_chart_read_metrics(c, path, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(selsync_chart_draw(c, f->err, sizeof f->err), SELSYNC_OK);
    wait_idle(c);
    assert_complete_png(f->png);
    snprintf(dat, sizeof dat, "%s/.chart.png.dat", f->dir);
    snprintf(gp, sizeof gp, "%s/.chart.png.gp", f->dir);
    char *data = slurp(dat, NULL), *prog = slurp(gp, NULL);

    /* the step rows, field by field (t_end, loss_mean, synced_share, mb_sent, step) */
    const char *header = data;
    int t_end = column_of(header, "t_end"), t_mid = column_of(header, "t_mid"), t_width = column_of(header, "t_width");
    int mean = column_of(header, "loss_mean"), lo = column_of(header, "loss_min"), hi = column_of(header, "loss_max");
    int smooth = column_of(header, "loss_smooth"), share = column_of(header, "synced_share");
    int mb = column_of(header, "mb_sent"), step = column_of(header, "step");
    assert_true(t_end && t_mid && t_width && mean && lo && hi && smooth && share && mb && step);
    static const char *const rows[4][5] = {{"1", "2.5", "1", "0.001", "0"},
                                           {"2", "?", "0", "0.001", "1"},
                                           {"3.5", "1.5", "0", "0.001", "2"},
                                           {"4.5", "0.5", "1", "0.002", "3"}};
    const int cols[5] = {t_end, mean, share, mb, step};
    char *line = strchr(data, '\n') + 1;
    for (int r = 0; r < 4; r++) {
        char *end = strchr(line, '\n'), *field[16], *save = NULL;
        int n = 0;
        *end = '\0';
        for (char *t = strtok_r(line, "\t", &save); t && n < 16; t = strtok_r(NULL, "\t", &save)) field[n++] = t;
        assert_int_equal(n, 10);
        for (int k = 0; k < 5; k++)
            if (strcmp(field[cols[k] - 1], rows[r][k]) != 0)
                fail_msg("row %d column %d: '%s', want '%s'", r, cols[k], field[cols[k] - 1], rows[r][k]);
        line = end + 1;
    }
    /* then the evaluations: train_s, score, step */
    assert_string_equal(line, "\n\n# top1: train_s\tscore\tstep\n2.5\t0.25\t2\n4.6\t0.75\t4\n");

    /* each panel plots the columns the header names */
    snprintf(want, sizeof want, "dat index 0 using %d:%d:%d with filledcurves", t_end, lo, hi);
    assert_non_null(strstr(prog, want));
    snprintf(want, sizeof want, "dat index 0 using %d:%d with points", t_end, mean);
    assert_non_null(strstr(prog, want));
    snprintf(want, sizeof want, "dat index 0 using %d:%d with lines", t_end, smooth);
    assert_non_null(strstr(prog, want));
    assert_non_null(strstr(prog, "dat index 1 using 1:2 with linespoints"));
    snprintf(want, sizeof want, "dat index 0 using %d:%d:%d with boxes", t_mid, share, t_width);
    assert_non_null(strstr(prog, want));
    snprintf(want, sizeof want, "dat index 0 using %d:%d axes x1y2", t_end, mb);
    assert_non_null(strstr(prog, want));
    free(data);
    free(prog);
    selsync_chart_destroy(c);
}

/* text = metrics_text's first three lines plus bad; the error names line 4 */
static void assert_bad_row(fx *f, const char *bad, const char *what)
{
    char path[192], text[4096];
    const char *third = strchr(strchr(strchr(metrics_text, '\n') + 1, '\n') + 1, '\n') + 1;
    selsync_chart *c = new_chart(f);
    snprintf(path, sizeof path, "%s/bad.tsv", f->dir);
    snprintf(text, sizeof text, "%.*s%s\n", (int)(third - metrics_text), metrics_text, bad);
    write_file(path, text, 0644);
    assert_int_equal(selsync_chart_read_metrics(c, path, f->err, sizeof f->err), SELSYNC_ECONFIG);
    char want[256];
    snprintf(want, sizeof want, "%s:4: ", path);
    if (!strstr(f->err, want) || !strstr(f->err, what)) fail_msg("error '%s' lacks '%s' or '%s'", f->err, want, what);
    assert_int_equal(selsync_chart_bin_count(c), 1); /* the rows before it */
    selsync_chart_destroy(c);
}

static void test_read_metrics_malformed(void **state)
{
    fx *f = *state;
    assert_bad_row(f, "1\tabc\t0.1\t3\t3\t0.1\t0\tlocal\t0\t0\t0\t1\t0\t0\t0", "bad loss 'abc'");
    assert_bad_row(f, "1\t1.0\t0.1\t3\t3\t0.1\t0\tmaybe\t0\t0\t0\t1\t0\t0\t0", "unknown decision 'maybe'");
    assert_bad_row(f, "1\t1.0\t0.1\t3", "4 fields where the header has 15");
    assert_bad_row(f, "1\t1.0\t0.1\t3\t3\t0.1\t0\tlocal\t0\t0\t0\t-1\t0\t0\t0", "bad t_compute '-1'");
    assert_bad_row(f, "# eval\tstep=2\twall_s=1\ttrain_s=1\teval_s=0.1", "without a score");
    assert_bad_row(f, "# eval\tstep=x\ttrain_s=1\ttop1=0.5", "bad step 'x'");

    /* a step row before any header */
    char path[192];
    selsync_chart *c = new_chart(f);
    snprintf(path, sizeof path, "%s/noheader.tsv", f->dir);
    write_file(path, "# a note\n0\t2.5\n", 0644);
    assert_int_equal(selsync_chart_read_metrics(c, path, f->err, sizeof f->err), SELSYNC_ECONFIG);
    assert_non_null(strstr(f->err, ":2: step row before the header line"));
    /* a missing file */
    snprintf(path, sizeof path, "%s/none.tsv", f->dir);
    assert_int_equal(selsync_chart_read_metrics(c, path, f->err, sizeof f->err), SELSYNC_EIO);
    assert_non_null(strstr(f->err, path));
    selsync_chart_destroy(c);
}

static void test_read_metrics_partial_last_line(void **state)
{
    fx *f = *state;
    char path[192], text[4096];
    selsync_chart *c = new_chart(f);
    snprintf(path, sizeof path, "%s/live.tsv", f->dir);
    /* a row being written: no newline yet, too few fields */
    snprintf(text, sizeof text, "%s4\t0.4\t0.1", metrics_text);
    write_file(path, text, 0644);
    assert_int_equal(selsync_chart_read_metrics(c, path, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(selsync_chart_bin_count(c), 4);
    assert_int_equal(selsync_chart_eval_count(c), 2);
    selsync_chart_destroy(c);
}

/* ---- drawings ---- */

static void add_some(selsync_chart *c, uint64_t from, uint64_t to)
{
    for (uint64_t s = from; s < to; s++) {
        selsync_chart_add_step(c, s, 0.1 * (double)(s + 1), 2.0 / (1.0 + 0.01 * (double)s) + 0.1 * sin((double)s),
                               s % 5 == 0, 4000 * (s / 5 + 1));
        if ((s + 1) % 100 == 0)
            selsync_chart_add_eval(c, s + 1, 0.1 * (double)(s + 1), "top1", 1.0 - 50.0 / (double)(s + 1));
    }
}

static void test_draw_real_gnuplot(void **state)
{
    fx *f = *state;
    selsync_chart *c = NULL;
    char tmp[192], dat[192], gp[192];
    if (!f->real_gnuplot[0]) fail_msg("gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)");
    /* a title with characters gnuplot's strings and formats treat specially */
    assert_int_equal(create(f, f->png, "fmnist.cfg \"q\" 'it''s' \\ @x $1 %s\ttab, selsync 0.3", &c), SELSYNC_OK);
    add_some(c, 0, 3000);
    assert_int_equal(selsync_chart_draw(c, f->err, sizeof f->err), SELSYNC_OK);
    wait_idle(c);
    assert_complete_png(f->png);
    /* the program draws to a hidden file beside png, never to png itself */
    snprintf(tmp, sizeof tmp, "%s/.chart.png.tmp", f->dir);
    snprintf(dat, sizeof dat, "%s/.chart.png.dat", f->dir);
    snprintf(gp, sizeof gp, "%s/.chart.png.gp", f->dir);
    char *prog = slurp(gp, NULL), want[256];
    snprintf(want, sizeof want, "set output \"%s\"\n", tmp);
    assert_non_null(strstr(prog, want));
    free(prog);
    assert_false(exists(tmp));
    /* a redraw at the end, with more steps: the data has at most MAX_BINS rows */
    add_some(c, 3000, 5000);
    assert_int_equal(selsync_chart_finish(c, f->err, sizeof f->err), SELSYNC_OK);
    assert_complete_png(f->png);
    assert_true(count_lines(dat) <= SELSYNC_CHART_MAX_BINS + 1 + 3 + 50);
    selsync_chart_destroy(c);
    assert_complete_png(f->png);
    assert_false(exists(dat) || exists(gp) || exists(tmp));
}

static void test_draw_empty_chart(void **state)
{
    fx *f = *state;
    selsync_chart *c = NULL;
    if (!f->real_gnuplot[0]) fail_msg("gnuplot is not installed");
    assert_int_equal(create(f, f->png, NULL, &c), SELSYNC_OK);
    assert_int_equal(selsync_chart_finish(c, f->err, sizeof f->err), SELSYNC_OK);
    assert_complete_png(f->png);
    /* only non-finite losses, no evaluation yet */
    selsync_chart_add_step(c, 0, 1.0, NAN, 0, 0);
    assert_int_equal(selsync_chart_finish(c, f->err, sizeof f->err), SELSYNC_OK);
    assert_complete_png(f->png);
    selsync_chart_destroy(c);
}

/* A stand-in that notes each start, waits for the file GO, then runs the
 * real gnuplot: a drawing lasts as long as the test wants. */
static void gated_gnuplot(fx *f, char *go, size_t size, char *starts, size_t ssize)
{
    char body[1024];
    snprintf(go, size, "%s/go", f->dir);
    snprintf(starts, ssize, "%s/starts", f->dir);
    snprintf(body, sizeof body, "echo started >>'%s'\nwhile [ ! -e '%s' ]; do /bin/sleep 0.02; done\nexec '%s' \"$@\"",
             starts, go, f->real_gnuplot);
    fake_gnuplot(f, body);
}

static void test_draw_while_drawing(void **state)
{
    fx *f = *state;
    selsync_chart *c = NULL;
    char go[192], starts[192];
    struct stat st1, st2;
    if (!f->real_gnuplot[0]) fail_msg("gnuplot is not installed");
    gated_gnuplot(f, go, sizeof go, starts, sizeof starts);
    assert_int_equal(create(f, f->png, "gated", &c), SELSYNC_OK);
    add_some(c, 0, 200);
    assert_int_equal(selsync_chart_draw(c, f->err, sizeof f->err), SELSYNC_OK);
    assert_true(selsync_chart_busy(c));
    assert_false(exists(f->png)); /* absent until complete */
    add_some(c, 200, 400);
    assert_int_equal(selsync_chart_draw(c, f->err, sizeof f->err), SELSYNC_OK); /* a no-op */
    selsync_chart_poll(c);
    assert_true(selsync_chart_busy(c));
    write_file(go, "", 0644);
    wait_idle(c);
    assert_complete_png(f->png);
    assert_int_equal(count_lines(starts), 1);
    assert_int_equal(stat(f->png, &st1), 0);

    /* the next drawing leaves the previous picture in place until its own
     * is complete, then replaces it (a new file, renamed over) */
    remove(go);
    size_t n0;
    char *before = slurp(f->png, &n0);
    assert_int_equal(selsync_chart_draw(c, f->err, sizeof f->err), SELSYNC_OK);
    assert_true(selsync_chart_busy(c));
    size_t n1;
    char *during = slurp(f->png, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, during, n0);
    free(before);
    free(during);
    write_file(go, "", 0644);
    wait_idle(c);
    assert_int_equal(count_lines(starts), 2);
    assert_complete_png(f->png);
    assert_int_equal(stat(f->png, &st2), 0);
    assert_true(st1.st_ino != st2.st_ino);
    selsync_chart_destroy(c);
}

static void test_gnuplot_fails(void **state)
{
    fx *f = *state;
    selsync_chart *c = NULL;
    fake_gnuplot(f, "echo 'line 7: this plot went wrong' >&2\nexit 3");
    assert_int_equal(create(f, f->png, "t", &c), SELSYNC_OK);
    add_some(c, 0, 10);
    assert_int_equal(selsync_chart_draw(c, f->err, sizeof f->err), SELSYNC_OK);
    wait_idle(c);
    assert_int_equal(selsync_chart_draw(c, f->err, sizeof f->err), SELSYNC_EIO);
    if (!strstr(f->err, f->png) || !strstr(f->err, "exited with status 3") ||
        !strstr(f->err, "line 7: this plot went wrong"))
        fail_msg("unexpected error: %s", f->err);
    assert_false(exists(f->png));
    /* it stays failed */
    assert_int_equal(selsync_chart_finish(c, f->err, sizeof f->err), SELSYNC_EIO);
    assert_non_null(strstr(f->err, "exited with status 3"));
    selsync_chart_destroy(c);
    /* gnuplot's output stays for a look */
    char log[192];
    snprintf(log, sizeof log, "%s/.chart.png.log", f->dir);
    assert_true(exists(log));
}

static void test_gnuplot_leaves_no_picture(void **state)
{
    fx *f = *state;
    selsync_chart *c = NULL;
    fake_gnuplot(f, "exit 0");
    assert_int_equal(create(f, f->png, "t", &c), SELSYNC_OK);
    assert_int_equal(selsync_chart_finish(c, f->err, sizeof f->err), SELSYNC_EIO);
    assert_non_null(strstr(f->err, f->png));
    assert_non_null(strstr(f->err, "could not be renamed"));
    selsync_chart_destroy(c);
}

static void test_gnuplot_absent(void **state)
{
    fx *f = *state;
    selsync_chart *c = (selsync_chart *)f; /* overwritten with NULL */
    setenv("PATH", f->fake, 1);            /* an empty folder */
    assert_int_equal(create(f, f->png, "t", &c), SELSYNC_ECONFIG);
    assert_null(c);
    assert_string_equal(f->err, "gnuplot not found on PATH: no training chart");
    /* a file named gnuplot that cannot be executed is not one */
    char path[192];
    snprintf(path, sizeof path, "%s/gnuplot", f->fake);
    write_file(path, "#!/bin/sh\n", 0644);
    assert_int_equal(create(f, f->png, "t", &c), SELSYNC_ECONFIG);
}

static void test_create_bad_folder(void **state)
{
    fx *f = *state;
    selsync_chart *c = NULL;
    char png[192];
    fake_gnuplot(f, "exit 0");
    snprintf(png, sizeof png, "%s/missing/chart.png", f->dir);
    assert_int_equal(create(f, png, "t", &c), SELSYNC_EIO);
    assert_null(c);
    assert_non_null(strstr(f->err, png));
    assert_int_equal(create(f, NULL, "t", &c), SELSYNC_EINVAL);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_bins_stay_bounded),
        T(test_bin_values),
        T(test_read_metrics),
        T(test_read_metrics_malformed),
        T(test_plotted_data),
        T(test_read_metrics_partial_last_line),
        T(test_draw_real_gnuplot),
        T(test_draw_empty_chart),
        T(test_draw_while_drawing),
        T(test_gnuplot_fails),
        T(test_gnuplot_leaves_no_picture),
        T(test_gnuplot_absent),
        T(test_create_bad_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
