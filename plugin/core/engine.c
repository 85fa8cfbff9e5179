/* The SelSync engine (see selsync/engine.h and the README): one step's
 * order of work over its parts, which keep the state engine_state.h
 * describes: the significance of the gradients (engine_measure.c), which
 * steps and layers synchronise (engine_policy.c), the averages
 * (engine_aggregate.c), the metrics file (engine_metrics.c) and snapshots
 * (engine_snapshot.c).
 *
 * - The step record's norm, smoothed value and change are the whole model's
 *   (an extra tracker with granularity = layer); its local_flag is this
 *   rank's OR of the group flags before agreement, for every method.
 * - SSP (selsync/ssp.h): rank 0 only serves (selsync_engine_serve); a worker pulls
 *   the initial model at create and, instead of a transfer, pushes its
 *   update and pulls the global model after every step: t_agree is the
 *   time the server held the pull for the staleness bound, t_transfer the
 *   rest of the exchange, bytes_sent what the worker pushed plus what it
 *   pulled (so the ranks' sum is the job's traffic, as for the other
 *   methods); bsp_bytes is reckoned for a ring all-reduce over the W
 *   workers. The initial pull counts in the totals only. */

#include "selsync/engine.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selsync/rng.h"
#include "selsync/ssp.h"
#include "selsync/vclock.h"

#include "engine_state.h"
#include "internal.h"



/* ---- create / destroy ---- */

static selsync_status check_model(const selsync_model *m, char *err, size_t len)
{
    if (!m->tensors || m->n_tensors == 0 || m->n_layers == 0)
        return selsync_fail(err, len, SELSYNC_EINVAL, "[selsync] model has no tensors or no layers");
    for (size_t i = 0; i < m->n_tensors; i++) {
        const selsync_tensor *t = &m->tensors[i];
        const char *why = t->layer >= m->n_layers ? "layer index >= n_layers"
                        : t->count == 0 || !t->param ? "no elements or NULL param"
                        : t->count > SIZE_MAX / sizeof(float) / 2 ? "too large"
                        : t->kind != SELSYNC_TENSOR_TRAINED && t->kind != SELSYNC_TENSOR_STAT ? "unknown kind"
                        : t->kind == SELSYNC_TENSOR_TRAINED && !t->grad ? "trained tensor without grad"
                        : t->variance && (t->kind != SELSYNC_TENSOR_STAT || i == 0 || t[-1].kind != SELSYNC_TENSOR_STAT ||
                                          t[-1].variance || t[-1].count != t->count || t[-1].layer != t->layer)
                              ? "variances not after a statistic of their layer and size"
                        : NULL;
        if (why)
            return selsync_fail(err, len, SELSYNC_EINVAL, "[selsync] tensor %zu (layer %zu, %zu elements): %s", i,
                        t->layer, t->count, why);
    }
    return SELSYNC_OK;
}

static selsync_status check_cfg(const selsync_config *c, char *err, size_t len)
{
    if ((unsigned)c->method > SELSYNC_METHOD_LOCAL || !(c->delta >= 0) || c->window < 1 || c->warmup < 0 ||
        !(c->smoothing >= 0 && c->smoothing <= 1) || (unsigned)c->granularity > SELSYNC_GRANULARITY_LAYER ||
        (c->aggregate != SELSYNC_AGGREGATE_PARAMS && c->aggregate != SELSYNC_AGGREGATE_GRADS) ||
        c->fedavg_interval < 1 || !(c->fedavg_fraction > 0 && c->fedavg_fraction <= 1) || !(c->bucket_mb > 0) ||
        c->lag < 0 || c->max_local < 0)
        return selsync_fail(err, len, SELSYNC_EINVAL, "[selsync] configuration out of range or unresolved "
                    "(call selsync_config_finish first)");
    return SELSYNC_OK;
}

/* SSP worker: push + pull (or the first pull); adds the times and the bytes
 * (pushed + pulled) to *agree, *xfer and *bytes. */
static selsync_status ssp_exchange(selsync_engine *e, double *agree, double *xfer, uint64_t *bytes)
{
    selsync_ssp_exchange x;
    selsync_status st = selsync_ssp_sync(e->ssp, &x);
    if (st != SELSYNC_OK) {
        e->broken = 1;
        return EFAIL(e, st, "[selsync] step %" PRIu64 ": rank %d: %s", e->step, e->rank,
                     selsync_ssp_worker_error(e->ssp));
    }
    if (x.t_wait > x.t_total) x.t_wait = x.t_total; /* two clocks */
    *agree += x.t_wait;
    *xfer += x.t_total - x.t_wait;
    *bytes += x.bytes_out + x.bytes_in;
    return SELSYNC_OK;
}

selsync_status selsync_engine_create(const selsync_config *cfg, const selsync_comm *comm, const selsync_model *model,
                              selsync_engine **out, char *err, size_t errlen)
{
    const selsync_comm_ops *ops = comm ? comm->ops : NULL;
    selsync_engine *e;
    selsync_status st;
    size_t n_trained = 0, n_stat = 0, w;

    if (err && errlen) err[0] = '\0';
    if (out) *out = NULL;
    if (!cfg || !comm || !model || !out)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] selsync_engine_create: NULL argument");
    if (!ops || !ops->rank || !ops->size || !ops->any || !ops->sum_f32 || !ops->sum_f32v || !ops->bytes_sent)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] communicator lacks an operation the engine needs");
    if ((st = check_cfg(cfg, err, errlen)) != SELSYNC_OK) return st;
    if ((st = check_model(model, err, errlen)) != SELSYNC_OK) return st;
    int rank = ops->rank(comm->ctx), world = ops->size(comm->ctx);
    if (world < 1 || rank < 0 || rank >= world)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] communicator reports rank %d of %d", rank, world);
    if ((st = selsync_config_check_world(cfg, world, err, errlen)) != SELSYNC_OK) return st;
    /* the agreement is a sum of doubles (agree64) with drift, agree = mean or lag */
    int agree_sums = selsync_config_drift(cfg) ||
                     (cfg->method == SELSYNC_METHOD_SELSYNC && (cfg->lag > 0 || cfg->agree == SELSYNC_AGREE_MEAN));
    if (agree_sums && !ops->sum_f64)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] drift, lag and agree = mean need a communicator "
                    "with sum_f64; '%s' has none", ops->name ? ops->name : "");
    if (cfg->method == SELSYNC_METHOD_SSP && (!ops->send || !ops->recv))
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] method = ssp needs a communicator with point-to-point "
                    "messages; '%s' has none", ops->name ? ops->name : "");
    for (size_t i = 0; i < model->n_tensors; i++) {
        const selsync_tensor *t = &model->tensors[i];
        size_t *sum = t->kind == SELSYNC_TENSOR_TRAINED ? &n_trained : &n_stat;
        if (*sum > SIZE_MAX / sizeof(float) / 2 - t->count)
            return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] model too large");
        *sum += t->count;
    }

    if (!(e = calloc(1, sizeof *e))) goto nomem;
    e->cfg = *cfg;
    e->cfg.log[sizeof e->cfg.log - 1] = '\0';
    e->comm = *comm;
    e->nt = model->n_tensors;
    e->n_layers = model->n_layers;
    e->n_groups = cfg->granularity == SELSYNC_GRANULARITY_LAYER ? model->n_layers : 1;
    e->n_track = e->n_groups + (e->n_groups > 1);
    e->rank = rank;
    e->world = world;
    e->keep = 1.0 - selsync_config_smoothing(cfg, world);
    e->sync_n = n_trained + (cfg->sync_bn_stats ? n_stat : 0);
    e->n_params = n_trained + n_stat;
    e->n_trained = n_trained;
    e->ratio = 2.0 * (world - 1) / world;
    e->delta = cfg->delta;
    w = (size_t)cfg->window;
    if (e->n_track > SIZE_MAX / sizeof(double) / w) goto nomem;
    e->t = malloc(e->nt * sizeof *e->t);
    e->ring = calloc(e->n_track * w, sizeof *e->ring);
    e->sq = calloc(e->n_track, sizeof *e->sq);
    e->prev = calloc(e->n_track, sizeof *e->prev);
    e->active = calloc(e->n_groups, 1);
    e->flags = calloc(e->n_groups + 1, 1); /* + 1: the non-finite flag */
    e->change = calloc(e->n_groups, sizeof *e->change);
    e->chosen = calloc(e->n_layers, 1);
    e->payload = calloc(e->n_layers, 1);
    e->perm = calloc((size_t)world, sizeof *e->perm);
    e->seg = malloc(2 * e->nt * sizeof *e->seg); /* a param and a momentum per tensor */
    e->tsq = calloc(e->nt, sizeof *e->tsq);
    e->tmoved = calloc(e->nt, sizeof *e->tmoved);
    e->tbad = calloc(e->nt, 1);
    e->measured = calloc(e->nt, 1);
    e->snap_off = calloc(e->nt, sizeof *e->snap_off);
    e->ready = calloc(e->n_layers, 1);
    e->late_layers = calloc(e->n_layers, 1);
    e->measures_change = cfg->method == SELSYNC_METHOD_SELSYNC;
    e->snap = model->grad_keeps_residual && e->measures_change ? calloc(n_trained, sizeof *e->snap) : NULL;
    e->stats = cfg->on_nonfinite == SELSYNC_NONFINITE_SKIP && n_stat ? malloc(n_stat * sizeof *e->stats) : NULL;
    if ((selsync_config_drift(cfg) || selsync_config_outer(cfg)) &&
        !(e->anchor = malloc((n_trained + 1) * sizeof *e->anchor)))
        goto nomem;
    if (selsync_config_drift(cfg) && !(e->anchor_sq = calloc(e->nt + 1, sizeof *e->anchor_sq)))
        goto nomem;
    if (agree_sums && !(e->agree64 = malloc((e->n_groups + 2) * sizeof *e->agree64)))
        goto nomem;
    if (cfg->method == SELSYNC_METHOD_SELSYNC && cfg->lag > 0 &&
        (!(e->lag_sums = calloc((size_t)cfg->lag * (e->n_groups + 2), sizeof *e->lag_sums)) ||
         !(e->lag_state = calloc((size_t)cfg->lag, 1))))
        goto nomem;
    if (selsync_config_outer(cfg) && !(e->outer_u = calloc(n_trained + 1, sizeof *e->outer_u))) goto nomem;
    if (!e->t || !e->ring || !e->sq || !e->prev || !e->active || !e->flags || !e->change || !e->chosen || !e->payload ||
        !e->perm || !e->seg || !e->tsq || !e->tmoved || !e->tbad || !e->measured || !e->snap_off || !e->ready || !e->late_layers || (model->grad_keeps_residual && e->measures_change && !e->snap && n_trained) ||
        (cfg->on_nonfinite == SELSYNC_NONFINITE_SKIP && n_stat && !e->stats))
        goto nomem;
    memcpy(e->t, model->tensors, e->nt * sizeof *e->t);
    for (size_t i = 0, off = 0; i < e->nt; i++) {
        e->snap_off[i] = off;
        off += e->t[i].kind == SELSYNC_TENSOR_TRAINED ? e->t[i].count : 0;
        if (e->t[i].kind == SELSYNC_TENSOR_TRAINED) e->active[e->n_groups > 1 ? e->t[i].layer : 0] = 1;
        if (policy_syncs(e, &e->t[i])) e->payload[e->t[i].layer] = 1;
    }
    policy_averaged(e, NULL, 0); /* every rank starts from the same model */
    if (cfg->log[0] && (st = metrics_open(e, err, errlen)) != SELSYNC_OK) goto fail;
    if (cfg->method == SELSYNC_METHOD_SSP) {
        e->ratio = world > 2 ? 2.0 * (world - 2) / (world - 1) : 0.0;
        e->ssp_server = rank == 0;
        if (rank != 0 && ((st = selsync_ssp_worker_create(cfg, comm, model, &e->ssp, err, errlen)) != SELSYNC_OK ||
                          (st = ssp_exchange(e, &e->tot.t_agree, &e->tot.t_transfer, &e->tot.bytes_sent)))) {
            if (e->ssp) selsync_fail(err, errlen, st, "%s", e->err);
            goto fail;
        }
    }
    engine_keep_stats(e, 1);
    e->t_mark = e->t_start = selsync_now();
    *out = e;
    return SELSYNC_OK;
nomem:
    st = selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory creating the engine");
fail:
    selsync_engine_destroy(e);
    return st;
}

void selsync_engine_destroy(selsync_engine *e)
{
    if (!e) return;
    if (e->late_pending) e->comm.ops->wait_sums(e->comm.ctx); /* its buffer is freed below */
    if (e->lag_state && (e->broken || policy_lag_drain(e) != SELSYNC_OK) && memchr(e->lag_state, LAG_STARTED, (size_t)e->cfg.lag))
        e->lag_sums = NULL; /* a sum the transport may still write: left to the job's end */
    metrics_header(e);
    if (e->log) fclose(e->log);
    free(e->t);
    free(e->ring);
    free(e->sq);
    free(e->prev);
    free(e->active);
    free(e->flags);
    free(e->change);
    free(e->chosen);
    free(e->payload);
    free(e->perm);
    free(e->seg);
    free(e->tsq);
    free(e->tmoved);
    free(e->tbad);
    free(e->measured);
    free(e->snap_off);
    free(e->ready);
    free(e->late);
    free(e->late_base);
    free(e->late_layers);
    free(e->snap);
    free(e->stats);
    free(e->mean);
    free(e->anchor);
    free(e->anchor_sq);
    free(e->outer_u);
    free(e->agree64);
    free(e->lag_sums);
    free(e->lag_state);
    selsync_ssp_worker_destroy(e->ssp);
    free(e);
}

/* ---- one step ---- */

/* on_nonfinite = skip, this rank's step is not finite: the host's update
 * applies no gradient (the gradients are zeroed) and the statistics the
 * forward pass changed are put back, so nothing of the bad batch stays. */
static void discard_own_step(selsync_engine *e)
{
    for (size_t i = 0; i < e->nt; i++)
        if (e->t[i].kind == SELSYNC_TENSOR_TRAINED) memset(e->t[i].grad, 0, e->t[i].count * sizeof(float));
    engine_keep_stats(e, 0);
}

/* The step begins (at its first selsync_engine_layer_ready, else at
 * before_update): whether its buckets overlap the backward pass, decided
 * from what is known before it (engine_aggregate.c); the step's byte count
 * starts and the transport learns the step. */
static void open_step(selsync_engine *e)
{
    e->step_open = 1;
    e->overlapping = policy_forced(e) && engine_overlaps(e) && e->cfg.aggregate == SELSYNC_AGGREGATE_GRADS &&
                     e->cfg.on_nonfinite != SELSYNC_NONFINITE_SKIP;
    if (e->overlapping) {
        memset(e->chosen, 1, e->n_layers);
        e->scale = 1.0f / (float)e->world;
    }
    memset(e->measured, 0, e->nt);
    memset(e->ready, 0, e->n_layers);
    e->bucket_pos = e->nt;
    e->seg_used = e->bucket_n = 0;
    e->t_hooks = 0;
    e->bytes0 = e->comm.ops->bytes_sent(e->comm.ctx) - e->late_carry;
    e->late_carry = 0;
    if (e->comm.ops->step_begins) e->comm.ops->step_begins(e->comm.ctx, e->step);
}

selsync_status selsync_engine_layer_ready(selsync_engine *e, size_t layer)
{
    selsync_status st;
    double t0 = selsync_now();

    if (!e) return SELSYNC_EINVAL;
    if (layer >= e->n_layers && e->broken) return SELSYNC_EINVAL; /* the first failure's message stays */
    if (layer >= e->n_layers)
        return EFAIL(e, SELSYNC_EINVAL, "[selsync] step %" PRIu64 ": selsync_engine_layer_ready for layer %zu of %zu",
                     e->step, layer, e->n_layers);
    if ((st = engine_check(e, 0)) != SELSYNC_OK || e->ssp_server || e->ssp) return st;
    if (!e->step_open) open_step(e);
    if (!e->overlapping || e->ready[layer]) return SELSYNC_OK;
    e->ready[layer] = 1;
    for (size_t i = 0; i < e->nt; i++)
        if (e->t[i].layer == layer) engine_measure_tensor(e, i);
    st = engine_sum_buckets(e, 1);
    e->t_hooks += selsync_now() - t0;
    return st;
}

selsync_status selsync_engine_before_update(selsync_engine *e, double loss, double learning_rate)
{
    selsync_status st;
    double t0 = selsync_now();

    if (!e) return SELSYNC_EINVAL;
    if ((st = engine_check(e, 0)) != SELSYNC_OK) return st;
    if (e->ssp_server)
        return EFAIL(e, SELSYNC_ESTATE, "[selsync] method = ssp: rank 0 is the parameter server and does not train");
    if (!e->step_open) open_step(e);
    memset(&e->cur, 0, sizeof e->cur);
    e->cur.step = e->step;
    e->cur.loss = loss;
    e->cur.learning_rate = learning_rate;
    e->cur.inject_bytes = e->inject_next;
    e->inject_next = 0;
    e->cur.t_compute = t0 - e->t_mark - e->t_hooks;
    if ((st = engine_apply_late(e, 0, &e->cur.t_transfer)) != SELSYNC_OK) return st;
    double t1 = selsync_now();
    /* the residual is written while measuring when nothing but the host's
     * described update touches the buffers before after_update */
    e->residual_taken = e->snap && e->host_update_known && e->cfg.aggregate == SELSYNC_AGGREGATE_PARAMS &&
                        !e->overlapping;
    e->update_applied = e->host_update_known && e->host_update.rates && !e->ssp && !e->overlapping &&
                        e->cfg.aggregate == SELSYNC_AGGREGATE_PARAMS && e->cfg.on_nonfinite == SELSYNC_NONFINITE_STOP &&
                        (e->residual_taken || !e->measures_change);
    int bad = engine_measure(e);
    if (bad) e->residual_taken = 0;
    e->cur.t_measure = selsync_now() - t1 + e->t_hooks;
    if (e->overlapping && (st = engine_average_grads(e, &e->cur.t_transfer)) != SELSYNC_OK) return st;
    if (bad == 2 || (bad && e->cfg.on_nonfinite == SELSYNC_NONFINITE_STOP))
        return EFAIL(e, SELSYNC_ENONFINITE, "[selsync] step %" PRIu64 ": rank %d: %s (gradient's squared norm %g, "
                     "loss %g); stopping (%s)", e->step, e->rank,
                     bad == 2 ? "a trained parameter is not finite" : "the gradient is not finite", e->cur.grad_norm,
                     loss, bad == 2 ? "no setting can repair the parameters"
                                    : "on_nonfinite = skip would skip synchronising such steps instead");
    if (bad) discard_own_step(e);
    if ((st = policy_decide(e, bad)) != SELSYNC_OK) return st;
    if (e->cfg.aggregate == SELSYNC_AGGREGATE_GRADS && e->cur.decision == SELSYNC_SYNC_STEP && !e->overlapping &&
        (st = engine_average_grads(e, &e->cur.t_transfer)) != SELSYNC_OK)
        return st;
    e->in_step = 1;
    e->t_host_update = selsync_now();
    return SELSYNC_OK;
}

selsync_status selsync_engine_after_update(selsync_engine *e)
{
    selsync_status st;
    int bad_log = 0;

    if (!e) return SELSYNC_EINVAL;
    if ((st = engine_check(e, 1)) != SELSYNC_OK) return st;
    e->cur.t_compute += selsync_now() - e->t_host_update; /* the host's update is computation too */
    if (e->step + 1 >= MAX_RESTORED_COUNT)
        return EFAIL(e, SELSYNC_ESTATE, "[selsync] the step counter is at %" PRIu64 ", the most a run can count "
                     "(2^53 - 1)", e->step);
    e->in_step = 0;
    e->step_open = 0;
    if (e->cfg.aggregate == SELSYNC_AGGREGATE_PARAMS && e->cur.decision == SELSYNC_SYNC_STEP && !e->ssp) {
        if (engine_averages_late(e)) {
            if ((st = engine_start_late(e)) != SELSYNC_OK) return st;
        } else {
            if ((st = engine_transfer(e, e->member, e->n_members, e->scale, 1, &e->cur.t_transfer)) != SELSYNC_OK)
                return st;
            policy_averaged(e, e->chosen, e->cur.learning_rate);
        }
    }
    if (e->cfg.sync_momentum && e->cur.decision == SELSYNC_SYNC_STEP) e->residual_taken = 0; /* averaged */
    if (e->snap && !e->residual_taken) { /* the residual the host left for the next step */
        double t0 = selsync_now();
        for (size_t i = 0; i < e->nt; i++)
            if (e->t[i].kind == SELSYNC_TENSOR_TRAINED)
                memcpy(e->snap + e->snap_off[i], e->t[i].grad, e->t[i].count * sizeof(float));
        e->cur.t_measure += selsync_now() - t0;
    }
    e->host_update_known = e->residual_taken = e->update_applied = 0;
    if (!e->ssp) /* a started average counts at its wait: in the next step's record */
        e->cur.bytes_sent = e->comm.ops->bytes_sent(e->comm.ctx) - e->bytes0;
    else if ((st = ssp_exchange(e, &e->cur.t_agree, &e->cur.t_transfer, &e->cur.bytes_sent)) != SELSYNC_OK)
        return st;
    engine_keep_stats(e, 1);
    e->last = e->cur;
    policy_note_rate(e, e->cur.learning_rate); /* the rules of the next step */
    e->has_last = 1;
    e->tot.steps++;
    e->tot.synced_steps += e->cur.decision == SELSYNC_SYNC_STEP;
    e->tot.skipped_steps += e->cur.decision == SELSYNC_SKIP_STEP;
    e->tot.bytes_sent += e->cur.bytes_sent;
    e->tot.t_compute += e->cur.t_compute;
    e->tot.t_measure += e->cur.t_measure;
    e->tot.t_agree += e->cur.t_agree;
    e->tot.t_transfer += e->cur.t_transfer;
    selsync_vclock vc;
    e->cur.t_virtual = selsync_virtual_clock(&e->comm, &vc) ? vc.now : NAN;
    if (e->cfg.log[0]) {
        bad_log = metrics_header(e) != 0 || metrics_line(e) != 0;
    }
    e->step++;
    e->t_mark = selsync_now();
    return bad_log ? metrics_failed(e) : SELSYNC_OK;
}

/* One average of every param (STAT ones when sync_bn_stats); its bytes and
 * time go into the totals, not into a step. SSP: a worker tells the server
 * it is done; the server has nothing left to do. */
selsync_status selsync_engine_finish(selsync_engine *e)
{
    selsync_status st;
    uint64_t b0;

    if (!e) return SELSYNC_EINVAL;
    if ((st = engine_check(e, 0)) != SELSYNC_OK || (st = engine_apply_late(e, 1, &e->tot.t_transfer)) != SELSYNC_OK ||
        (st = policy_lag_drain(e)) != SELSYNC_OK)
        return st;
    e->tot.bytes_sent += e->late_carry;
    e->late_carry = 0;
    b0 = e->comm.ops->bytes_sent(e->comm.ctx);
    memset(e->chosen, 1, e->n_layers);
    if (e->cfg.method != SELSYNC_METHOD_SSP)
        st = engine_transfer(e, 1, e->world, 1.0f / (float)e->world, 0, &e->tot.t_transfer);
    else if (e->ssp && (st = selsync_ssp_done(e->ssp)) != SELSYNC_OK) {
        e->broken = 1;
        EFAIL(e, st, "[selsync] rank %d: %s", e->rank, selsync_ssp_worker_error(e->ssp));
    }
    e->tot.bytes_sent += e->comm.ops->bytes_sent(e->comm.ctx) - b0;
    if (st != SELSYNC_OK) return st;
    if (e->cfg.log[0] && (metrics_header(e) != 0 || fflush(e->log) != 0)) return metrics_failed(e);
    return SELSYNC_OK;
}

selsync_status selsync_engine_serve(selsync_engine *e, FILE *trace, selsync_ssp_stats *stats)
{
    selsync_ssp_stats s;
    selsync_model m;
    selsync_status st;

    if (stats) memset(stats, 0, sizeof *stats);
    if (!e) return SELSYNC_EINVAL;
    if (e->broken) return SELSYNC_ECOMM;
    if (!e->ssp_server || e->served)
        return EFAIL(e, SELSYNC_ESTATE, "[selsync] selsync_engine_serve: only rank 0 with method = ssp serves, once");
    e->served = 1;
    m = (selsync_model){e->t, e->nt, e->n_layers, 0, 0};
    st = selsync_ssp_serve(&e->cfg, &e->comm, &m, trace, &s, e->err, sizeof e->err);
    e->broken = st != SELSYNC_OK;
    e->tot.bytes_sent += s.bytes_sent;
    e->tot.t_transfer += s.t_serve;
    if (stats) *stats = s;
    return st;
}

void selsync_engine_note_host_update(selsync_engine *e, const selsync_host_update *u)
{
    if (!e || !u) return;
    e->host_update = *u;
    e->host_update_known = 1;
}

int selsync_engine_update_applied(const selsync_engine *e)
{
    return e && e->update_applied;
}

void selsync_engine_note_injection(selsync_engine *e, uint64_t bytes)
{
    if (!e) return;
    e->inject_next += bytes;
    e->tot.inject_bytes += bytes;
}

/* ---- evaluation, checkpoints ---- */

const float *selsync_engine_consensus(selsync_engine *e)
{
    selsync_status st;
    size_t n = 0;
    double t_late = 0; /* evaluation time, outside the totals */
    if (!e || engine_check(e, 0) != SELSYNC_OK || engine_apply_late(e, 1, &t_late) != SELSYNC_OK) return NULL;
    if (e->cfg.method == SELSYNC_METHOD_SSP) {
        EFAIL(e, SELSYNC_ESTATE, "[selsync] method = ssp: the server holds the model; no consensus to compute");
        return NULL;
    }
    if (!e->mean && !(e->mean = malloc(e->n_params * sizeof *e->mean))) {
        EFAIL(e, SELSYNC_ENOMEM, "[selsync] out of memory for the consensus model");
        return NULL;
    }
    n = selsync_model_pack(e->t, e->nt, 1, e->mean);
    if ((st = e->comm.ops->sum_f32(e->comm.ctx, e->mean, n)) != SELSYNC_OK) {
        engine_comm_failed(e, st, "consensus (sum_f32)", n);
        return NULL;
    }
    for (size_t j = 0; j < n; j++) e->mean[j] *= 1.0f / (float)e->world;
    return e->mean;
}

void selsync_engine_exclude_time(selsync_engine *e)
{
    if (!e) return;
    double now = selsync_now();
    e->tot.t_excluded += now - e->t_mark;
    e->t_mark = now;
}

/* ---- queries ---- */

const selsync_step *selsync_engine_last_step(const selsync_engine *e)
{
    return e && e->has_last ? &e->last : NULL;
}

uint64_t selsync_engine_steps(const selsync_engine *e) { return e ? e->step : 0; }

void selsync_engine_get_totals(const selsync_engine *e, selsync_totals *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!e) return;
    *out = e->tot;
    double bsp = (double)e->tot.steps * (double)e->sync_n * sizeof(float) * e->ratio + 0.5;
    out->bsp_bytes = bsp < 18446744073709551615.0 ? (uint64_t)bsp : UINT64_MAX;
}

const char *selsync_engine_error(const selsync_engine *e)
{
    return e ? e->err : "[selsync] no engine (NULL)";
}
