/* The SelSync engine: per-step significance, agreement and synchronisation
 * over plain float arrays. It knows neither MPI nor the host framework: the
 * host describes its model as tensors and calls the engine around every
 * optimizer step; the engine talks to other ranks through a selsync_comm.
 *
 * Per step (all ranks, same order):
 *   selsync_engine_layer_ready()    optional, during the backward pass: a layer's
 *                            gradient is final
 *   selsync_engine_before_update()  gradients accumulated, parameters not updated
 *   (host applies its optimizer update)
 *   selsync_engine_after_update()   parameters updated
 * and once at the end selsync_engine_finish() (final average of every tensor).
 *
 * Method ssp (selsync/ssp.h): rank 0 is the parameter server and calls
 * selsync_engine_serve() instead of training; on the other ranks (the workers)
 * selsync_engine_create pulls the initial model from it, selsync_engine_after_update
 * pushes the step's update and pulls the global model, and selsync_engine_finish
 * tells the server the worker is done (no final average). */
#ifndef SELSYNC_ENGINE_H
#define SELSYNC_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "selsync/clock.h"
#include "selsync/comm.h"
#include "selsync/config.h"
#include "selsync/model.h"
#include "selsync/status.h"

typedef enum selsync_decision {
    SELSYNC_LOCAL_STEP = 0,     /* no synchronisation this step */
    SELSYNC_SYNC_STEP,          /* some or all layers synchronised */
    SELSYNC_SKIP_STEP           /* a rank's loss or gradient was not finite (on_nonfinite = skip) */
} selsync_decision;

/* What happened in the last step (valid after selsync_engine_after_update). */
typedef struct selsync_step {
    uint64_t step;              /* 0-based */
    double loss, learning_rate; /* as passed by the host */
    double grad_norm;           /* squared L2 norm of this step's own gradient, whole model */
    double smoothed;            /* EWMA of grad_norm (whole model) */
    double change;              /* relative change of smoothed (whole model; inf = undefined,
                                   NaN = this rank's loss or gradient not finite) */
    int local_flag;             /* this rank found the change significant */
    selsync_decision decision;
    size_t layers_synced;
    uint64_t bytes_sent;        /* this step, this rank (model synchronisation) */
    uint64_t inject_bytes;      /* this step, this rank (data injection) */
    double t_compute, t_measure, t_agree, t_transfer; /* seconds */
    double t_virtual;           /* this rank's virtual clock after the step (selsync/vclock.h); NaN: none */
    double delta;               /* the threshold this step's change was held against */
    double drift;               /* drift rule: the ranks' mean ||x - anchor||^2 / ||anchor||^2 (0: off,
                                   warm-up) */
} selsync_step;

typedef struct selsync_totals {
    uint64_t steps, synced_steps, skipped_steps;
    uint64_t bytes_sent;        /* this rank, all steps incl. the final average */
    uint64_t bsp_bytes;         /* what synchronising every step would have sent */
    uint64_t inject_bytes;      /* this rank, data injection */
    double t_compute, t_measure, t_agree, t_transfer;
    double t_excluded;          /* not training: evaluation, checkpoints (selsync_engine_exclude_time) */
    uint64_t buckets;           /* gradient sums (aggregate = grads), one per bucket */
    uint64_t buckets_early;     /* of those, started during the backward pass (overlap) */
    uint64_t late_averages;     /* parameter averages applied one step late (aggregate = params, overlap) */
} selsync_totals;

typedef struct selsync_engine selsync_engine;

/* Creates an engine for model (tensor views stay owned by the host).
 * cfg must have passed selsync_config_finish. On failure returns a status
 * and writes a message to err; *out is NULL. Collective: no (method ssp: a
 * worker pulls the initial model from the server). */
selsync_status selsync_engine_create(const selsync_config *cfg, const selsync_comm *comm,
                              const selsync_model *model, selsync_engine **out,
                              char *err, size_t errlen);

/* During the backward pass of the step (the one followed by
 * selsync_engine_before_update): the gradient of `layer` is final. Optional; each
 * layer at most once per step, in any order (the backward pass's, last
 * layer first, overlaps most). On a step that averages every layer's
 * gradient for certain (bsp; selsync in its warm-up or after max_local
 * local steps) with overlap = 1 and a communicator with sum_f32v_start,
 * the engine measures the layer's gradient and starts the sum of each
 * gradient bucket whose layers are all ready: the host must then leave the
 * arrays of every reported layer alone until selsync_engine_before_update
 * returns. Otherwise it only notes the layer. Not collective by itself
 * (the sums it starts are). */
selsync_status selsync_engine_layer_ready(selsync_engine *e, size_t layer);

/* Tells the engine the update that follows this step's
 * selsync_engine_before_update (valid for that step only). With it, method
 * selsync takes the next step's residual in the pass that measures the
 * gradient, instead of copying every grad buffer after the update; the
 * change measured is the same, bit for bit, when the host computes as
 * described. Not collective. */
void selsync_engine_note_host_update(selsync_engine *e, const selsync_host_update *u);

/* 1 when this step's selsync_engine_before_update applied the update noted
 * with rates (selsync_host_update): the host must then not apply it. The
 * engine applies it in the pass that measures the change, or checks that
 * the gradients are finite, when it averages parameters (not ssp), does
 * not sum gradients during the backward pass, and stops on a non-finite
 * gradient (on_nonfinite = stop): then nothing but that update comes
 * between the pass and the average. */
int selsync_engine_update_applied(const selsync_engine *e);

/* Measures this step's gradient, decides with the other ranks whether to
 * synchronise (one small collective at most) and, with aggregate=grads,
 * averages the gradients of the layers to synchronise, in buckets of
 * bucket_mb (waiting for those selsync_engine_layer_ready started). Collective. */
selsync_status selsync_engine_before_update(selsync_engine *e, double loss, double learning_rate);

/* With aggregate=params, averages the parameters (and statistics when
 * sync_bn_stats) of the layers chosen in before_update; records the step.
 * With overlap = 1 and a communicator with sum_f32v_start the average runs
 * in the background instead and the next selsync_engine_before_update applies it
 * (engine.c's top comment): the host must then leave the trained params
 * alone until that call. Collective. */
selsync_status selsync_engine_after_update(selsync_engine *e);

/* Averages every tensor once (the final consensus model). Collective. */
selsync_status selsync_engine_finish(selsync_engine *e);

/* Method ssp, rank 0: serves the workers until all are done (see
 * selsync/ssp.h); the model's arrays then hold the global model. trace:
 * NULL or a file for one line per answered pull. stats (may be NULL)
 * receives the server's figures; its bytes sent and time also go into the
 * totals. Point-to-point with every worker. */
struct selsync_ssp_stats;
selsync_status selsync_engine_serve(selsync_engine *e, FILE *trace, struct selsync_ssp_stats *stats);

/* Adds bytes this rank sent for data injection to the coming step's record
 * (metrics column inject_bytes) and to the totals. Call before
 * selsync_engine_before_update of that step. */
void selsync_engine_note_injection(selsync_engine *e, uint64_t bytes);

/* Writes text as "# "-prefixed comment lines to the metrics file, if any
 * (e.g. the data partition); before the first step they precede the
 * header line. Not in the middle of a step. */
selsync_status selsync_engine_log_note(selsync_engine *e, const char *text);

/* ---- evaluation and checkpoints (between steps) ---- */

/* The mean over all ranks of every tensor's param, in tensor order (the
 * model selsync_engine_finish would produce now), without changing the model: an
 * engine-owned array valid until the next call, or NULL on failure (see
 * selsync_engine_error). Collective; not for method ssp. */
const float *selsync_engine_consensus(selsync_engine *e);

/* The time since the end of the last step (or the last call) was not
 * training: the next step's t_compute and the metrics' train_s leave it
 * out; totals.t_excluded counts it. Call on every rank after evaluating or
 * checkpointing. */
void selsync_engine_exclude_time(selsync_engine *e);

/* Seconds of training from the start to the end of the last step: wall
 * time without the excluded time (the metrics' train_s). */
double selsync_engine_train_seconds(const selsync_engine *e);

/* Appends an evaluation row to the metrics file, if any:
 *   # eval<TAB>step=S<TAB>wall_s=W<TAB>train_s=T<TAB>METRIC=SCORE<TAB>eval_s=E
 * S = steps done, W = seconds from the start to the end of step S, T = W
 * without the excluded time, E = eval_s (the evaluation's own time). */
selsync_status selsync_engine_log_eval(selsync_engine *e, const char *metric, double score, double eval_s);

/* This rank's state between steps, as bytes: step, smoothing history,
 * residual snapshot, totals, elapsed times, and the host's arrays (every
 * param, every trained grad: with Darknet the momentum). Restoring it into
 * an engine created for the same model and cfg, before its first step,
 * continues exactly where the snapshot was taken (the metrics file, whose
 * rows up to the snapshot it flushes, is then appended to). Not for method
 * ssp. Not collective. */
size_t selsync_engine_snapshot_size(const selsync_engine *e);
selsync_status selsync_engine_snapshot(selsync_engine *e, void *buf, size_t len);
selsync_status selsync_engine_restore(selsync_engine *e, const void *buf, size_t len);
/* The snapshots of the n ranks of another job (each len bytes, as
 * selsync_engine_restore takes them) restored as one: the step, the
 * learning rate's history, delta and the totals from the first; every
 * param (statistics too) the mean of the n ranks', a variance tensor's plus
 * the variance of the n ranks' means, so that the statistics are those of
 * the ranks' data pooled (the same bits on every rank that restores the
 * same snapshots); and what belonged to one rank
 * of that job restarted: the gradients (with Darknet the momentum) and
 * residual at 0, the smoothing history empty, the run of local steps at 0,
 * the outer momentum at 0, no agreement in flight (lag), the anchor the
 * mean. */
selsync_status selsync_engine_restore_mean(selsync_engine *e, const void *const *states, size_t n, size_t len);

/* "sync", "local" or "skip" (the metrics' decision column). */
const char *selsync_decision_name(selsync_decision d);

const selsync_step *selsync_engine_last_step(const selsync_engine *e);

/* Steps done (a restored engine counts the steps before the snapshot). */
uint64_t selsync_engine_steps(const selsync_engine *e);
void selsync_engine_get_totals(const selsync_engine *e, selsync_totals *out);

/* The message of the last failure ("" if none). */
const char *selsync_engine_error(const selsync_engine *e);

void selsync_engine_destroy(selsync_engine *e);

#endif
