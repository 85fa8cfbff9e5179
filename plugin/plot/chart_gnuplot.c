/* The training chart drawn by gnuplot (selsync/chart_gnuplot.h): the
 * core writes the chart's data file; this drawer writes the program that
 * plots it and runs gnuplot in the background. */
#define _POSIX_C_SOURCE 200809L /* posix_spawn, waitpid, kill, nanosleep, strdup */

#include "chart_gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct gnuplot_drawer {
    char *png, *gnuplot;
    char *gp, *tmp, *log;        /* the files beside png: program, picture being drawn, output */
    pid_t pid;                   /* the running gnuplot, 0 when none */
    selsync_status failed;       /* SELSYNC_OK until a drawing failed */
    char fail_msg[768];
} gnuplot_drawer;

static selsync_status fail(char *err, size_t errlen, selsync_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static selsync_status fail(char *err, size_t errlen, selsync_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return st;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The executable regular file PATH_DIR/gnuplot of the first PATH entry
 * holding one (malloc'd), or NULL. An empty entry is the current folder. */
static char *find_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char *cand = malloc(n + sizeof "/gnuplot");
        struct stat st;
        if (!cand) return NULL;
        if (n == 0) strcpy(cand, "./gnuplot");
        else {
            memcpy(cand, p, n);
            strcpy(cand + n, "/gnuplot");
        }
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) return cand;
        free(cand);
        if (!end) return NULL;
        p = end + 1;
    }
}

/* The last non-empty line of the file at path (at most size-1 bytes), or
 * "" when there is none. */
static void last_line(const char *path, char *out, size_t size)
{
    char line[512];
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0]) {
            size_t n = strlen(line) < size ? strlen(line) : size - 1;
            memcpy(out, line, n);
            out[n] = '\0';
        }
    }
    fclose(f);
}

/* A drawing ended with wait status ws (known = 0: not known, the child was
 * reaped elsewhere): its picture replaces png, or the failure is kept. */
static void drawing_ended(gnuplot_drawer *g, int known, int ws)
{
    char tail[256];
    g->pid = 0;
    if (!known || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
        if (rename(g->tmp, g->png) == 0) return;
        g->failed = SELSYNC_EIO;
        snprintf(g->fail_msg, sizeof g->fail_msg,
                 "[selsync] training chart '%s': gnuplot %s but its picture '%s' could not be renamed: %s", g->png,
                 known ? "exited with status 0" : "ended", g->tmp, strerror(errno));
        return;
    }
    last_line(g->log, tail, sizeof tail);
    g->failed = SELSYNC_EIO;
    if (WIFEXITED(ws))
        snprintf(g->fail_msg, sizeof g->fail_msg,
                 "[selsync] training chart '%s': gnuplot exited with status %d%s%s (its output: '%s')", g->png,
                 WEXITSTATUS(ws), tail[0] ? ": " : "", tail, g->log);
    else
        snprintf(g->fail_msg, sizeof g->fail_msg,
                 "[selsync] training chart '%s': gnuplot ended by signal %d%s%s (its output: '%s')", g->png,
                 WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, tail[0] ? ": " : "", tail, g->log);
    remove(g->tmp);
}

/* Notes the end of the running drawing; hang: wait for it. */
static void reap(gnuplot_drawer *g, int hang)
{
    int ws = 0;
    pid_t r;
    if (!g->pid) return;
    do r = waitpid(g->pid, &ws, hang ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == 0) return;
    drawing_ended(g, r == g->pid, ws);
}

/* Waits at most limit_s seconds for the running drawing, then kills it
 * (a failure). */
static void wait_bounded(gnuplot_drawer *g, double limit_s)
{
    const struct timespec nap = {0, 10 * 1000 * 1000};
    double deadline = now_s() + limit_s;
    reap(g, 0);
    while (g->pid && now_s() < deadline) {
        nanosleep(&nap, NULL);
        reap(g, 0);
    }
    if (!g->pid) return;
    kill(g->pid, SIGKILL);
    reap(g, 1);
    g->pid = 0;
    g->failed = SELSYNC_EIO;
    snprintf(g->fail_msg, sizeof g->fail_msg,
             "[selsync] training chart '%s': gnuplot did not finish within %g s and was killed", g->png, limit_s);
    remove(g->tmp);
}

/* Writes s as a double-quoted gnuplot string (a quote or a backslash
 * escaped, control characters as spaces). */
static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s, f);
    }
    fputc('"', f);
}

static const char *metric_label(const char *metric)
{
    if (strcmp(metric, "top1") == 0) return "top-1 accuracy";
    if (strcmp(metric, "map50") == 0) return "mAP@0.5";
    return metric;
}

/* The gnuplot program that draws chart (its data file at dat, blocks as
 * selsync/chart.h says) into g->tmp. */
static int write_program(const gnuplot_drawer *g, const selsync_chart *c, const char *dat)
{
    const char *names[SELSYNC_CHART_MAX_METRICS];
    size_t n_names = selsync_chart_metrics(c, names), n_bins = selsync_chart_bin_count(c);
    size_t n_evals = selsync_chart_eval_count(c);
    uint64_t width = selsync_chart_bin_width(c);
    const char *title = selsync_chart_title(c);
    selsync_chart_bin b, last = {0};
    selsync_chart_eval e;
    FILE *f = fopen(g->gp, "w");
    double xmax = 0, lmin = INFINITY, lmax = -INFINITY, mbmax = 0;
    uint64_t steps = 0, synced = 0;
    if (!f) return -1;
    for (size_t i = 0; selsync_chart_get_bin(c, i, &b) == 0; i++) {
        steps += b.steps;
        synced += b.synced;
        if (b.t_end > xmax) xmax = b.t_end;
        if ((double)b.bytes_end / 1e6 > mbmax) mbmax = (double)b.bytes_end / 1e6;
        if (b.finite) {
            if (b.loss_min < lmin) lmin = b.loss_min;
            if (b.loss_mean > lmax) lmax = b.loss_mean;
        }
        last = b;
    }
    for (size_t i = 0; selsync_chart_get_eval(c, i, &e) == 0; i++)
        if (isfinite(e.train_s) && e.train_s > xmax) xmax = e.train_s;
    if (!(xmax > 0)) xmax = 1;

    fputs("set terminal pngcairo noenhanced size 1000,900 font ',10'\nset output ", f);
    put_quoted(f, g->tmp);
    fputs("\ndat = ", f);
    put_quoted(f, dat);
    fputs("\nset datafile separator '\\t'\nset datafile missing '?'\nset grid\n"
          "set lmargin at screen 0.08\nset rmargin at screen 0.91\n", f);
    fprintf(f, "set xrange [0:%.9g]\n", xmax);
    fputs("set multiplot title ", f);
    {
        char t[1024];
        if (n_bins)
            snprintf(t, sizeof t, "%s%s%llu steps (last %llu), %.1f s of training", title, title[0] ? " - " : "",
                     (unsigned long long)steps, (unsigned long long)last.step_last, last.t_end);
        else
            snprintf(t, sizeof t, "%s%sno steps yet", title, title[0] ? " - " : "");
        put_quoted(f, t);
    }
    fputs("\n", f);

    /* 1: the loss; a log scale when it spans a decade, so that a first
     * steps' spike does not flatten the rest of the curve */
    fputs("set tmargin at screen 0.94\nset bmargin at screen 0.64\nset format x ''\nset ylabel 'loss'\n"
          "set key top right\n", f);
    if (lmax >= lmin && lmin > 0 && lmax / lmin >= 10) fputs("set logscale y\n", f);
    else if (lmax >= lmin && lmin >= 0) fputs("set yrange [0:*]\n", f);
    if (lmax >= lmin)
        fprintf(f, "plot dat index 0 using 1:5:6 with filledcurves lc rgb '#1f77b4' fs transparent solid 0.12 "
                   "noborder title 'min..max of %llu step%s', \\\n"
                   "  dat index 0 using 1:4 with points pt 7 ps 0.35 lc rgb '#a01f77b4' title '%s', \\\n"
                   "  dat index 0 using 1:7 with lines lw 2 lc rgb '#1f4e79' title 'smoothed'\n",
                (unsigned long long)width, width == 1 ? "" : "s", width == 1 ? "loss of a step" : "mean of a bin");
    else
        fputs("set yrange [0:1]\nset label 1 'no finite loss yet' at graph 0.5,0.5 center\nplot NaN notitle\n"
              "unset label 1\n", f);
    fputs("unset logscale y\nset yrange [*:*]\n", f);

    /* 2: the held-out score */
    /* the keys of panels 2 and 3 sit in a band above y = 1, clear of the data */
    fputs("set tmargin at screen 0.62\nset bmargin at screen 0.38\nset yrange [0:1.15]\nset ytics 0,0.2,1\n"
          "set key top left horizontal\n", f);
    fputs("set ylabel ", f);
    put_quoted(f, n_names == 1 ? metric_label(names[0]) : "held-out score");
    fputs("\n", f);
    if (n_names == 0)
        fputs("set label 1 'no evaluation yet' at graph 0.5,0.5 center\nplot NaN notitle\nunset label 1\n", f);
    else {
        static const char *const colour[SELSYNC_CHART_MAX_METRICS] = {"#d62728", "#2ca02c", "#9467bd", "#8c564b"};
        fputs("plot ", f);
        for (size_t k = 0; k < n_names; k++) {
            selsync_chart_eval latest = {0};
            char t[160];
            for (size_t i = 0; i < n_evals; i++)
                if (selsync_chart_get_eval(c, i, &e) == 0 && strcmp(e.metric, names[k]) == 0) latest = e;
            snprintf(t, sizeof t, "%s (last %.4f at step %llu)", metric_label(names[k]), latest.score,
                     (unsigned long long)latest.step);
            fprintf(f, "%sdat index %zu using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb '%s' title ",
                    k ? ", \\\n  " : "", k + 1, colour[k]);
            put_quoted(f, t);
        }
        fputs("\n", f);
    }

    /* 3: the synchronised share and the MB sent */
    fputs("set tmargin at screen 0.36\nset bmargin at screen 0.07\nset format x '%g'\n"
          "set xlabel 'training time (s)'\nset yrange [0:1.25]\nset ylabel 'share of steps synchronised'\n"
          "set ytics 0,0.2,1 nomirror\nset y2label 'MB sent (cumulative)'\nset y2tics\n"
          "set key top left horizontal\n", f);
    fprintf(f, "set y2range [0:%.9g]\n", 1.25 * (mbmax > 0 ? mbmax : 1.0));
    if (n_bins)
        fprintf(f, "plot dat index 0 using 2:8:3 with boxes fs solid 0.5 noborder lc rgb '#ff7f0e' "
                   "title 'synchronised: share of a bin of %llu step%s (%llu of %llu steps)', \\\n"
                   "  dat index 0 using 1:9 axes x1y2 with lines lw 2 lc rgb '#333333' title 'MB sent (%.3g)'\n",
                (unsigned long long)width, width == 1 ? "" : "s", (unsigned long long)synced,
                (unsigned long long)steps, mbmax);
    else
        fputs("set label 1 'no steps yet' at graph 0.5,0.5 center\nplot NaN notitle\n", f);
    fputs("unset multiplot\n", f);
    int failed = ferror(f);
    return fclose(f) == 0 && !failed ? 0 : -1;
}

static selsync_status spawn_gnuplot(gnuplot_drawer *g, char *err, size_t errlen)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    char *argv[] = {"gnuplot", "-d", g->gp, NULL};
    pid_t pid;
    int rc;

    remove(g->tmp);
    if (posix_spawn_file_actions_init(&fa) != 0)
        return fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory");
    if (posix_spawnattr_init(&at) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory");
    }
    sigemptyset(&none);
    sigfillset(&all);
    rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 1, g->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (!rc) rc = posix_spawnattr_setsigmask(&at, &none);
    if (!rc) rc = posix_spawnattr_setsigdefault(&at, &all);
    if (!rc) rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (!rc) rc = posix_spawnp(&pid, g->gnuplot, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc)
        return fail(err, errlen, SELSYNC_EIO, "[selsync] training chart '%s': cannot start '%s': %s",
                            g->png, g->gnuplot, strerror(rc));
    g->pid = pid;
    return SELSYNC_OK;
}

/* ---- the drawer's operations ---- */

static void drawer_close(void *d);

static selsync_status drawer_open(const char *png, void **out, char *err, size_t errlen)
{
    gnuplot_drawer *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g) return fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory");
    if (!(g->gnuplot = find_gnuplot())) {
        free(g);
        return fail(err, errlen, SELSYNC_ECONFIG, "gnuplot not found on PATH: no training chart");
    }
    g->png = strdup(png);
    g->gp = selsync_chart_beside(png, ".gp");
    g->tmp = selsync_chart_beside(png, ".tmp");
    g->log = selsync_chart_beside(png, ".log");
    if (!g->png || !g->gp || !g->tmp || !g->log) {
        drawer_close(g);
        return fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory");
    }
    *out = g;
    return SELSYNC_OK;
}

static int drawer_busy(void *d)
{
    gnuplot_drawer *g = d;
    reap(g, 0);
    return g->pid != 0;
}

static selsync_status drawer_status(void *d, char *err, size_t errlen)
{
    const gnuplot_drawer *g = d;
    return g->failed != SELSYNC_OK ? fail(err, errlen, g->failed, "%s", g->fail_msg) : SELSYNC_OK;
}

static selsync_status drawer_start(void *d, const selsync_chart *c, const char *dat, char *err, size_t errlen)
{
    gnuplot_drawer *g = d;
    if (write_program(g, c, dat) != 0)
        return fail(err, errlen, SELSYNC_EIO, "[selsync] training chart '%s': writing '%s' failed: %s", g->png,
                    g->gp, strerror(errno));
    return spawn_gnuplot(g, err, errlen);
}

static selsync_status drawer_wait(void *d, double limit_s, char *err, size_t errlen)
{
    wait_bounded(d, limit_s);
    return drawer_status(d, err, errlen);
}

static void drawer_close(void *d)
{
    gnuplot_drawer *g = d;
    if (!g) return;
    if (g->pid) wait_bounded(g, SELSYNC_CHART_DESTROY_WAIT_S);
    if (g->gp) remove(g->gp);
    if (g->tmp) remove(g->tmp);
    if (g->log && g->failed == SELSYNC_OK) remove(g->log);
    free(g->png);
    free(g->gnuplot);
    free(g->gp);
    free(g->tmp);
    free(g->log);
    free(g);
}

const selsync_chart_drawer *selsync_chart_gnuplot(void)
{
    static const selsync_chart_drawer gnuplot = {
        .name = "gnuplot",
        .open = drawer_open,
        .busy = drawer_busy,
        .status = drawer_status,
        .start = drawer_start,
        .wait = drawer_wait,
        .close = drawer_close,
    };
    return &gnuplot;
}
