/* A training session: the distributed protocol of one training run.
 *
 * The session owns the engine, the data partition, the injection schedule,
 * the evaluation and checkpoint schedules and the checkpoint container,
 * and issues every collective itself, so every rank issues the same
 * collectives in the same order. A host (the Darknet adapter) translates
 * its training loop's events into these calls, in this order:
 *
 *   selsync_session_create          the [selsync] section parsed
 *   selsync_session_load            the model built (and its weights read)
 *   selsync_session_begin           a trainer is about to train (optional:
 *                                   a host without a data list may skip it)
 *   per step:
 *     selsync_session_batch_requested   before every load of a batch
 *     selsync_session_batch_loaded      a batch loaded (injection only)
 *     selsync_session_layer_ready       optional, in the backward pass
 *                                       before the update: a layer's
 *                                       gradient is final
 *     selsync_session_before_update     gradients ready
 *     selsync_session_after_update      parameters updated; evaluations and
 *                                       checkpoints that are due run here
 *   selsync_session_end             the trainer's loop is over (with
 *                                   bn_recalibrate, the host's recalibrate
 *                                   runs inside it on every rank)
 *   selsync_session_destroy
 *
 * Every call returns a status; on failure selsync_session_error() holds the
 * message and the host ends the job (selsync_session_abort). Rank 0 writes
 * checkpoints and evaluates; the host supplies what only it can do
 * (selsync_host): score a model and write its model file. */
#ifndef SELSYNC_SESSION_H
#define SELSYNC_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "selsync/chart.h"
#include "selsync/comm.h"
#include "selsync/config.h"
#include "selsync/model.h"
#include "selsync/status.h"

typedef struct selsync_session selsync_session;

/* What only the host can do; score and save_model are called on rank 0
 * only, recalibrate on every rank. */
typedef struct selsync_host {
    void *user;
    /* The score of the model whose parameters are params (every tensor's,
     * in tensor order); NaN after reporting a failure. */
    double (*score)(void *user, const float *params);
    /* Writes the model file (the host's own parameters) to path and marks
     * it as a checkpoint; non-zero after a failure (errno set). Called in
     * a child process of rank 0 (fork), a copy of it at the checkpoint,
     * while training goes on: it may not use the communicator or expect
     * other threads, and what it changes stays in the child. */
    int (*save_model)(void *user, const char *path);
    /* Optional (NULL: the host has no BatchNorm). With bn_recalibrate > 0
     * and a training list (selsync_data.n > 0), at the end of training, on
     * every rank, after the final average and
     * before the final evaluation: re-estimates the model's BatchNorm
     * statistics on up to `samples` of this rank's training samples, layer
     * after layer from the input (each layer's new statistics in force
     * when the next one's inputs are computed), calling
     * selsync_session_bn_combine once per normalised layer: every rank the
     * same layers in the same order, a rank without samples too. Non-zero
     * after a failure (the message reported, or the failed combine's). */
    int (*recalibrate)(void *user, selsync_session *s, size_t samples);
} selsync_host;

/* What every rank must share to train with the others, compared when the
 * model is loaded (the host name only names the rank in messages). */
typedef struct selsync_identity {
    const char *host;           /* this rank's host name */
    const char *build;          /* the program's build id (version and a hash of its sources) */
    uint64_t cfg_hash;          /* the cfg as parsed: every section, every option */
    uint64_t layout_hash;       /* the network built from it: layers and tensor sizes */
} selsync_identity;

/* The training data as the protocol sees it. */
typedef struct selsync_data {
    const int *labels;          /* class of every sample of the list, -1 = none */
    size_t n;                   /* samples in the list */
    uint64_t list_hash;         /* the list's content (its paths, in order) */
    const char *list_source;    /* the file that names the list (for messages; NULL: the cfg) */
    int classes;
    int batch;                  /* samples a step trains on */
    int minibatch;              /* samples of one forward and backward pass; batch is a multiple
                                   (0: batch) */
    const char *metric;         /* with evaluation: "top1" or "map50" */
    size_t heldout;             /* with evaluation: held-out samples (for messages) */
    const char *checkpoint;     /* with checkpoint_every: the file rank 0 writes */
    const char *chart;          /* with chart_every: the training chart's PNG (NULL: none) */
    const char *note;           /* a line for the head of every rank's metrics file (NULL: none) */
    uint64_t max_steps;         /* the host's step limit (0: none; method ssp needs one) */
    const selsync_chart_drawer *chart_drawer; /* with chart: what draws it (NULL: no chart) */
} selsync_data;

/* What selsync_session_begin decides for this rank. */
typedef struct selsync_plan {
    size_t *order;              /* this rank's samples (indices into the list), in reading order;
                                   session-owned, valid until destroy */
    size_t count;               /* how many; the host trains on these only */
    int sequential;             /* read them in order (selsync_session_next_sample), not at random */
    int serve_only;             /* method ssp, rank 0: the host skips its loop; the session serves at end */
    int images;                 /* samples per load: batch, or with injection this rank's own */
    int batch;                  /* samples a step trains on: the data's batch, or after a resume at
                                   another rank count with resume_batch = global the old job's
                                   global batch shared out (a multiple of minibatch) */
    int resumed;                /* a checkpoint was resumed: the host's step counter goes on from
                                   selsync_session_steps (its batch may differ from the writer's) */
    uint64_t seed;              /* this rank's key, from the seed: the host derives its draws from it
                                   and the step number, never from the time or thread timing */
    int console;                /* this rank shows the run's progress: rank 0, or with ssp the first worker */
    int training_ranks;         /* the ranks that train and share the machine's cores (ssp: the workers) */
} selsync_plan;

/* Creates a session for cfg (passed selsync_config_finish) on comm; with
 * several ranks their count is checked against cfg. On failure *out is NULL and err holds
 * the message. Not collective. */
selsync_status selsync_session_create(const selsync_config *cfg, const selsync_comm *comm, const selsync_host *host,
                                      selsync_session **out, char *err, size_t errlen);

/* The model built: checks that every rank runs the same build and cfg and
 * built the same network (id; a difference fails on every rank with one
 * message naming the ranks, hosts and cfg files that differ), gives every
 * rank rank 0's parameters and, when rank 0's weights file (weights, NULL
 * or "" for none) is a checkpoint, every rank its state (required: the
 * host knows the file as one). Collective. */
selsync_status selsync_session_load(selsync_session *s, const selsync_model *model, const selsync_identity *id,
                                    const char *weights, int required);

/* A trainer starts: checks that every rank has the same training list (its
 * length and list_hash), creates the engine (resuming a checkpoint's state),
 * partitions data (data->n == 0: the host feeds its own data) and plans
 * injection. Collective. */
selsync_status selsync_session_begin(selsync_session *s, const selsync_data *data, selsync_plan *plan);

/* Before every load of a batch (no load running); with injection sets
 * *images, the number of samples to load. */
void selsync_session_batch_requested(selsync_session *s, int *images);

/* The next sample of a sequential plan (the loaders call it, under their
 * own lock): an index into plan->order. */
size_t selsync_session_next_sample(selsync_session *s);

/* With injection, a loaded batch of `loaded` rows (row_len floats each):
 * returns in *full (malloc'd, the caller frees) the completed batch of
 * *full_rows rows. Collective. */
int selsync_session_injects(const selsync_session *s);
selsync_status selsync_session_batch_loaded(selsync_session *s, const float *rows, int loaded, size_t row_len,
                                            float **full, int *full_rows);

/* During the backward pass that precedes the update: the gradient of
 * `layer` is final (selsync_engine_layer_ready in selsync/engine.h: gradient sums
 * may start, and the layer's arrays must then stay untouched until
 * selsync_session_before_update returns). Collective where sums start. */
selsync_status selsync_session_layer_ready(selsync_session *s, size_t layer);

/* The optimizer step: before the update (gradients ready) and after it.
 * update: the host's coming update where it is described
 * (selsync_engine_note_host_update), else NULL. After the update, a due
 * evaluation (of the ranks' mean model) and checkpoint run, and the console
 * rank redraws the training chart (every chart_every steps and after an
 * evaluation, in the background; selsync/chart.h). Collective. */
selsync_status selsync_session_before_update(selsync_session *s, double loss, double learning_rate,
                                             const selsync_host_update *update);
selsync_status selsync_session_after_update(selsync_session *s);

/* 1 when the last selsync_session_before_update applied the described
 * update itself (selsync_engine_update_applied): the host must skip its own. */
int selsync_session_update_applied(const selsync_session *s);

/* The end of training: the ssp server serves, the final average, the final
 * evaluation, the chart's last drawing and the summary (rank 0 prints it
 * to out). Collective. */
selsync_status selsync_session_end(selsync_session *s, FILE *out);

/* Inside the host's recalibrate: one normalised layer of `channels`
 * channels. acc holds this rank's sums about shift (selsync/bnstats.h:
 * 3*channels doubles, selsync_bn_accumulate); the shift must be the same on
 * every rank (the session gives every rank rank 0's statistics before
 * recalibrate, so the model's own means are). Sums acc over the ranks (one
 * sum_f64) and sets mean and variance of every channel with values, the
 * variance divided by count - 1 when unbiased. Collective. */
selsync_status selsync_session_bn_combine(selsync_session *s, size_t channels, const float *shift, double *acc,
                                          int unbiased, float *mean, float *variance);

/* With sync_batchnorm, in the training pass of a normalised layer of
 * `channels` channels, `count` values per channel in this rank's batch
 * (selsync/bnstats.h). Forward (gradient 0): a, b are the batch's means and
 * variances (divisor count - 1) and become those of all ranks' batches
 * together. Backward (gradient 1): a, b are the gradients of the loss with
 * respect to the mean and variance and become their sums over the ranks
 * times count / (the total count). One sum_f64; collective: every rank
 * the same layers in the same order. */
selsync_status selsync_session_bn_share(selsync_session *s, int gradient, size_t channels, size_t count, float *a,
                                        float *b);

/* " | sync , synced 3/20 (15.0%)" for the trainer's iteration line (empty
 * before the first step and on the ranks that do not print). */
void selsync_session_describe_step(const selsync_session *s, char *buf, size_t len);

/* The steps done so far (a resumed run counts the earlier ones). */
uint64_t selsync_session_steps(const selsync_session *s);

/* The message of the last failure. */
const char *selsync_session_error(const selsync_session *s);

/* Ends the whole job with the last failure's message (one process: returns,
 * and the host exits non-zero). */
void selsync_session_abort(selsync_session *s);

void selsync_session_destroy(selsync_session *s);

#endif
