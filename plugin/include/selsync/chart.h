/* The training chart's data: the steps and evaluations of a run, binned,
 * written to a data file that a drawer (selsync_chart_drawer, supplied by
 * the host: e.g. selsync_chart_gnuplot()) turns into a picture at png in
 * the background, one drawing at a time.
 *
 * Memory and drawing time stay bounded: steps go into at most
 * SELSYNC_CHART_MAX_BINS bins of `width` consecutive steps (width starts at
 * 1); when all are full, neighbouring pairs are merged and width doubles.
 * At most SELSYNC_CHART_MAX_EVALS evaluations are kept (later ones are
 * dropped).
 *
 * The data file, DIR/.NAME.dat for png = DIR/NAME: tab-separated blocks
 * separated by two blank lines, each headed by a "#" line. Block 0: one row
 * per bin (t_end, t_mid, t_width, loss mean, min, max, smoothed, synced
 * share, MB sent, last step); then one block per metric in the order of
 * selsync_chart_metrics (train_s, score, step). "?" marks a missing value.
 * Not thread-safe. */
#ifndef SELSYNC_CHART_H
#define SELSYNC_CHART_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/status.h"

#define SELSYNC_CHART_MAX_BINS 1024
#define SELSYNC_CHART_MAX_EVALS 100000
#define SELSYNC_CHART_MAX_METRICS 4     /* distinct evaluation metrics drawn */

/* How long selsync_chart_finish waits for a drawing before stopping it,
 * and selsync_chart_destroy for a drawing still running. */
#define SELSYNC_CHART_FINISH_WAIT_S 30
#define SELSYNC_CHART_DESTROY_WAIT_S 5

typedef struct selsync_chart selsync_chart;

/* One bin of consecutive steps. */
typedef struct selsync_chart_bin {
    uint64_t step_first, step_last;
    uint64_t steps;          /* steps in the bin */
    uint64_t finite;         /* of them with a finite loss */
    double loss_mean;        /* over the finite losses; NaN without any */
    double loss_min, loss_max;
    uint64_t synced;         /* steps that synchronised */
    double t_begin;          /* train_s before the bin's first step: for the chart's first
                                step 0 when it is step 0, else its own train_s */
    double t_end;            /* train_s after its last step */
    uint64_t bytes_end;      /* cumulative bytes sent after its last step */
} selsync_chart_bin;

typedef struct selsync_chart_eval {
    uint64_t step;
    double train_s, score;
    char metric[16];
} selsync_chart_eval;

/* What draws the data file into a picture, outside the core. Every
 * function but open gets the state open made. */
typedef struct selsync_chart_drawer {
    const char *name;
    /* A drawer of the picture png (*out: its state); a failure's status
     * and message (e.g. no drawing program) end the chart's creation. */
    selsync_status (*open)(const char *png, void **out, char *err, size_t errlen);
    /* 1 while a drawing runs (notes one that ended; never waits). */
    int (*busy)(void *d);
    /* The failure of a drawing so far (it stays), or SELSYNC_OK. */
    selsync_status (*status)(void *d, char *err, size_t errlen);
    /* Starts drawing c from its data file dat (written just now; not
     * busy) and returns at once. */
    selsync_status (*start)(void *d, const selsync_chart *c, const char *dat, char *err, size_t errlen);
    /* Waits at most limit_s seconds for a running drawing, then stops it
     * (a failure); then as status. */
    selsync_status (*wait)(void *d, double limit_s, char *err, size_t errlen);
    /* Waits at most SELSYNC_CHART_DESTROY_WAIT_S seconds for a running
     * drawing, removes the drawer's files and frees d. */
    void (*close)(void *d);
} selsync_chart_drawer;

/* A chart drawn to png (whose folder must exist and be writable) by
 * drawer, entitled title (e.g. the cfg name and the method; NULL = none).
 * SELSYNC_EIO when png's folder is missing or not writable; the drawer's
 * failure to open (the caller warns once and goes on without a chart);
 * EINVAL, ENOMEM. */
selsync_status selsync_chart_create(const char *png, const char *title, const selsync_chart_drawer *drawer,
                                    selsync_chart **out, char *err, size_t errlen);

/* One training step: its number, the cumulative training seconds after it,
 * its loss (non-finite losses count as steps but not in the mean), whether
 * it synchronised, and this rank's cumulative bytes sent (model
 * synchronisation) after it. A non-finite train_s takes the previous one. */
void selsync_chart_add_step(selsync_chart *c, uint64_t step, double train_s, double loss, int synced,
                            uint64_t bytes_total);

/* One evaluation after `step` steps at train_s seconds: metric ("top1",
 * "map50" or another name, at most 15 characters kept) and score. */
void selsync_chart_add_eval(selsync_chart *c, uint64_t step, double train_s, const char *metric, double score);

/* Starts a redraw in the background and returns at once: writes the data
 * file and starts the drawer. Does nothing (SELSYNC_OK) while the previous
 * drawing runs. When a drawing has failed, returns the drawer's failure,
 * and so on every later call (the caller warns once and stops drawing).
 * Writing the data file failing: SELSYNC_EIO. */
selsync_status selsync_chart_draw(selsync_chart *c, char *err, size_t errlen);

/* Notes the end of a running drawing, if it ended (never waits): its
 * picture replaces png, or its failure is kept for the next draw or
 * finish. draw does this too. */
void selsync_chart_poll(selsync_chart *c);

/* 1 while a drawing runs (after polling), else 0. */
int selsync_chart_busy(selsync_chart *c);

/* Waits for a running drawing, draws once more and waits for it, each wait
 * at most SELSYNC_CHART_FINISH_WAIT_S seconds (then the drawing is stopped
 * and that is a failure). Errors as selsync_chart_draw; SELSYNC_OK when png
 * shows everything added. For the end of training and offline tools. */
selsync_status selsync_chart_finish(selsync_chart *c, char *err, size_t errlen);

/* Adds the rows of a SelSync metrics file (see selsync/engine.h: a header
 * line, tab-separated step rows, "#" comment lines among which the
 * "# eval" rows) to c. A step row's train_s is the sum of its t_compute,
 * t_measure, t_agree and t_transfer so far, moved up to the train_s of the
 * latest eval row (which also counts the host's update); its bytes are the
 * bytes_sent column summed; it synchronised when decision is "sync". A
 * last line without a newline that does not parse is being written and is
 * ignored. A malformed row (or a missing header, an unknown decision, a
 * line over 4095 bytes): SELSYNC_ECONFIG with "PATH:LINE: ..." (rows
 * before it are added); an unreadable file: SELSYNC_EIO naming it. */
selsync_status selsync_chart_read_metrics(selsync_chart *c, const char *path, char *err, size_t errlen);

/* The bins and evaluations so far (for tests and tools). get_bin and
 * get_eval return -1 when i is out of range. */
size_t selsync_chart_bin_count(const selsync_chart *c);
uint64_t selsync_chart_bin_width(const selsync_chart *c);
int selsync_chart_get_bin(const selsync_chart *c, size_t i, selsync_chart_bin *out);
size_t selsync_chart_eval_count(const selsync_chart *c);
int selsync_chart_get_eval(const selsync_chart *c, size_t i, selsync_chart_eval *out);
/* The distinct metrics of the evaluations in the order they first came
 * (at most SELSYNC_CHART_MAX_METRICS; names point into c), and the title. */
size_t selsync_chart_metrics(const selsync_chart *c, const char *names[SELSYNC_CHART_MAX_METRICS]);
const char *selsync_chart_title(const selsync_chart *c);

/* "DIR/.NAME<suffix>" for png = "DIR/NAME" (malloc'd; NULL: out of
 * memory): where the chart and its drawer keep their files. */
char *selsync_chart_beside(const char *png, const char *suffix);

/* Closes the drawer (which waits at most SELSYNC_CHART_DESTROY_WAIT_S
 * seconds for a running drawing), removes the data file (not png) and
 * frees c. NULL is allowed. */
void selsync_chart_destroy(selsync_chart *c);

#endif
