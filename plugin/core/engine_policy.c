/* Which steps synchronise, and among whom: the engine's per-method
 * policy (see engine_state.h).
 *
 * Agreement (selsync): during the first `warmup` steps every rank knows
 * that all layers synchronise, so no collective is needed (the EWMA still
 * fills). Afterwards one `any` over the per-group flags ORs them across
 * ranks; every rank then synchronises the same layers.
 *
 * After every average of the parameters (selsync with aggregate = params,
 * fedavg), with outer_momentum or outer_lr, the trained params take an
 * outer step from the anchor, the params after the previous average
 * (outer_step).
 *
 * With lag = K > 0 the agreement of step t is started without blocking
 * (sum_f64_start) and completed at step t + K, whose decision it makes:
 * the same on every rank, so replicas stay identical at every average,
 * and a rank waits at step t + K only for ranks that have not yet
 * reached step t. The first K steps after the warm-up, which have no
 * agreement to complete, synchronise; max_local, sync_until and the
 * warm-up act at their own step. A drift measured before the last average
 * (fewer than K local steps since) is out of date and does not count.
 * K = 0 is the blocking agreement.
 *
 * With agree = mean a group synchronises when the ranks' mean Delta
 * reaches delta instead: one sum_f64 carries the Delta. With drift > 0
 * the agreement is one sum_f64 as well: the flags, the
 * non-finite flag and this rank's drift D_i = ||x_i - a_i||^2 / ||a_i||^2
 * (x_i: its trained params; a_i: the same right after the last average it
 * applied, the consensus); a flag counts when its sum is > 0, and every
 * layer synchronises when the mean of the D_i exceeds drift.
 *
 * FedAvg with fraction C < 1: k = max(1, round(C * N)) members drawn by a
 * partial Fisher-Yates from the stream (seed, 0xfed, step), the same on
 * every rank; the members alone send (sum_f32v_among) and everybody
 * receives sum / k. A communicator without sum_f32v_among gets one
 * sum_f32v over all ranks in which non-members send zeros. */

#include <math.h>
#include <string.h>

#include "selsync/rng.h"

#include "engine_state.h"

int policy_syncs(const selsync_engine *e, const selsync_tensor *t)
{
    return selsync_tensor_travels(t, e->cfg.sync_bn_stats);
}

/* max_local's bound on local steps in a row this step: max_local, or with
 * qsr_alpha the quadratic synchronisation rule's max(max_local,
 * floor((qsr_alpha / lr)^2)) at the learning rate of the previous step (the
 * same on every rank, known before this step's backward pass and kept in a
 * checkpoint; before any step, max_local). */
#define QSR_BOUND_MAX 1e15
uint64_t policy_local_bound(const selsync_engine *e)
{
    double lr = e->prev_lr, h = e->cfg.max_local;
    if (e->cfg.qsr_alpha > 0 && lr > 0) {
        double q = floor((e->cfg.qsr_alpha / lr) * (e->cfg.qsr_alpha / lr));
        if (q > h) h = q < QSR_BOUND_MAX ? q : QSR_BOUND_MAX;
    }
    return (uint64_t)h;
}

/* sync_until (post-local SGD): every step synchronises until the rate
 * first falls (decay) or stops rising (burn_in), as seen after a step; the
 * steps after it are selective. Decided from the previous steps' rates, so
 * the same on every rank and known before the backward pass. */
void policy_note_rate(selsync_engine *e, double lr)
{
    if (!e->sync_done && e->prev_lr > 0) {
        if (e->cfg.sync_until == SELSYNC_SYNC_UNTIL_DECAY) e->sync_done = lr < e->prev_lr;
        if (e->cfg.sync_until == SELSYNC_SYNC_UNTIL_BURN_IN) e->sync_done = lr <= e->prev_lr;
    }
    e->prev_lr = lr;
}

int policy_forced(const selsync_engine *e)
{
    return e->cfg.method == SELSYNC_METHOD_BSP ||
           (e->cfg.method == SELSYNC_METHOD_SELSYNC &&
            (e->step < (uint64_t)e->cfg.warmup || (e->cfg.sync_until && !e->sync_done) ||
             (e->cfg.max_local > 0 && e->local_run >= policy_local_bound(e))));
}

/* The outer step (SlowMo, Wang et al., ICLR 2020) on an applied average
 * x_avg of a tensor whose anchor is a: u = beta u + (a - x_avg) / lr, then
 * x = a - alpha lr u. With beta = 0 and alpha = 1 it is the average. */
static void outer_step(const selsync_engine *e, size_t i, double lr)
{
    float *x = e->t[i].param, *a = e->anchor + e->snap_off[i], *u = e->outer_u + e->snap_off[i];
    double beta = e->cfg.outer_momentum, step = e->cfg.outer_lr * lr;
    for (size_t j = 0; j < e->t[i].count; j++) {
        double v = beta * (double)u[j] + ((double)a[j] - (double)x[j]) / lr;
        u[j] = (float)v;
        x[j] = (float)((double)a[j] - step * v);
    }
}

/* Tensor i's ||anchor||^2, for the drift rule, once its anchor is set. */
static void anchor_norm(selsync_engine *e, size_t i)
{
    if (e->anchor_sq) e->anchor_sq[i] = engine_sq_diff(e->anchor + e->snap_off[i], NULL, e->t[i].count);
}

void policy_averaged(selsync_engine *e, const uint8_t *layers, double lr)
{
    if (!e->anchor) return;
    for (size_t i = 0; i < e->nt; i++) {
        if (e->t[i].kind != SELSYNC_TENSOR_TRAINED || (layers && !layers[e->t[i].layer])) continue;
        if (layers && e->outer_u && lr > 0) outer_step(e, i, lr);
        memcpy(e->anchor + e->snap_off[i], e->t[i].param, e->t[i].count * sizeof *e->anchor);
        anchor_norm(e, i);
    }
}

void policy_anchor_norms(selsync_engine *e)
{
    for (size_t i = 0; i < e->nt; i++)
        if (e->t[i].kind == SELSYNC_TENSOR_TRAINED) anchor_norm(e, i);
}

/* This rank's ||x - anchor||^2 / ||anchor||^2 over the trained params
 * (inf when the anchor is 0 and x is not): the distances were taken in the
 * pass that measured the gradients (engine_measure_tensor; the params do
 * not change in between), the anchor's norms when it was set. */
static double drift_of(const selsync_engine *e)
{
    double moved = 0, size = 0;
    for (size_t i = 0; i < e->nt; i++) {
        if (e->t[i].kind != SELSYNC_TENSOR_TRAINED) continue;
        moved += e->tmoved[i];
        size += e->anchor_sq[i];
    }
    return size > 0 ? moved / size : moved > 0 ? INFINITY : 0;
}

/* This step's values of the agreement over n flags into v (n + 1
 * doubles): the groups' Delta (agree = mean) or flags, then the other
 * flags (non-finite), then this rank's drift (0 without the drift rule). */
static void agree_fill(const selsync_engine *e, double *v, size_t n)
{
    size_t groups = e->cfg.agree == SELSYNC_AGREE_MEAN ? e->n_groups : 0;
    for (size_t i = 0; i < n; i++) v[i] = i < groups ? e->change[i] : e->flags[i];
    v[n] = selsync_config_drift(&e->cfg) ? drift_of(e) : 0;
}

/* The flags and e->cur.drift from the ranks' sum v of agree_fill: a group
 * counts when the mean Delta >= delta (agree = mean), a flag when its sum
 * is > 0. */
static void agree_read(selsync_engine *e, const double *v, size_t n)
{
    size_t groups = e->cfg.agree == SELSYNC_AGREE_MEAN ? e->n_groups : 0;
    for (size_t i = 0; i < n; i++) e->flags[i] = i < groups ? v[i] / e->world >= e->delta : v[i] > 0;
    e->cur.drift = v[n] / e->world;
}

/* The agreement of a selsync step after warm-up, over n flags (the groups',
 * then the non-finite one): any, or one sum_f64 of agree_fill's values
 * (top comment). */
static selsync_status agree(selsync_engine *e, size_t n)
{
    if (!e->agree64) return e->comm.ops->any(e->comm.ctx, e->flags, n);
    agree_fill(e, e->agree64, n);
    selsync_status st = e->comm.ops->sum_f64(e->comm.ctx, e->agree64, n + 1);
    if (st == SELSYNC_OK) agree_read(e, e->agree64, n);
    return st;
}

/* The same with lag: this step's values start summing in slot step % lag
 * once the agreement of step - lag, which held that slot, has been read
 * into the flags and drift; *known is 0 when there was none (that step
 * was in the warm-up, or before the run). */
static selsync_status agree_lagged(selsync_engine *e, size_t n, int *known)
{
    const selsync_comm_ops *ops = e->comm.ops;
    size_t slot = (size_t)(e->step % (uint64_t)e->cfg.lag);
    double *v = e->lag_sums + slot * (e->n_groups + 2);
    selsync_status st;
    agree_fill(e, e->agree64, n);
    if (e->lag_state[slot] == LAG_STARTED && (st = ops->wait_f64(e->comm.ctx)) != SELSYNC_OK) return st;
    *known = e->lag_state[slot] != LAG_EMPTY;
    if (*known) agree_read(e, v, n);
    memcpy(v, e->agree64, (n + 1) * sizeof *v);
    e->lag_state[slot] = ops->sum_f64_start ? LAG_STARTED : LAG_KNOWN;
    return ops->sum_f64_start ? ops->sum_f64_start(e->comm.ctx, v, n + 1) : ops->sum_f64(e->comm.ctx, v, n + 1);
}

selsync_status policy_lag_drain(selsync_engine *e)
{
    uint64_t lag = policy_lag(e);
    for (uint64_t j = 0; j < lag; j++) { /* the slots of steps step - lag .. step - 1 */
        size_t slot = (size_t)((e->step + j) % lag);
        if (e->lag_state[slot] != LAG_STARTED) continue;
        selsync_status st = e->comm.ops->wait_f64(e->comm.ctx);
        if (st != SELSYNC_OK) return engine_comm_failed(e, st, "agreement (wait_f64)", e->n_groups + 2);
        e->lag_state[slot] = LAG_KNOWN;
    }
    return SELSYNC_OK;
}

/* FedAvg with C < 1: returns k, sets e->member, and when k < world leaves
 * the members in ascending order in e->perm[0 .. k) (top comment). */
static int fedavg_members(selsync_engine *e)
{
    int k = (int)floor(e->cfg.fedavg_fraction * e->world + 0.5);
    selsync_rng r = selsync_rng_stream(e->cfg.seed, 0xfed, e->step);
    k = k < 1 ? 1 : k > e->world ? e->world : k;
    e->member = k == e->world;
    if (k == e->world) return k;
    for (int i = 0; i < e->world; i++) e->perm[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + (int)selsync_rng_below(&r, (uint64_t)(e->world - i)), x = e->perm[i];
        e->perm[i] = e->perm[j];
        e->perm[j] = x;
        e->member |= e->perm[i] == e->rank;
    }
    for (int i = 1; i < k; i++) /* insertion sort of the k drawn */
        for (int j = i, x = e->perm[j]; j > 0 && e->perm[j - 1] > x; j--) {
            e->perm[j] = e->perm[j - 1];
            e->perm[j - 1] = x;
        }
    return k;
}

/* A step of selsync after warm-up (its decision agreed, so the same on every
 * rank): counts the run of local steps for max_local and, with target_sync,
 * moves delta towards the threshold at which that share of the steps
 * synchronises, delta *= exp(TARGET_RATE (synced - target_sync)), within
 * [DELTA_MIN, DELTA_MAX]. */
#define TARGET_RATE 0.1
#define DELTA_MIN 1e-9
#define DELTA_MAX 1e9
static void adapt(selsync_engine *e)
{
    int synced = e->cur.decision == SELSYNC_SYNC_STEP;
    e->local_run = synced ? 0 : e->local_run + 1;
    if (e->cfg.target_sync > 0) {
        e->delta *= exp(TARGET_RATE * (synced - e->cfg.target_sync));
        e->delta = e->delta < DELTA_MIN ? DELTA_MIN : e->delta > DELTA_MAX ? DELTA_MAX : e->delta;
    }
}

/* Fills e->chosen, e->member, e->n_members and e->scale for this step.
 * bad: this rank's loss or gradient is not finite (on_nonfinite = skip);
 * then no rank synchronises this step, which costs one flag in the
 * agreement (selsync after warm-up) or one extra collective of one byte on
 * steps that would synchronise. */
selsync_status policy_decide(selsync_engine *e, int bad)
{
    int all = 0, k = e->world, skip = e->cfg.on_nonfinite == SELSYNC_NONFINITE_SKIP;
    uint8_t *flag = e->flags + e->n_groups; /* the non-finite flag */
    *flag = 0;
    e->member = 1;
    e->cur.delta = e->delta;
    memset(e->chosen, 0, e->n_layers);
    switch (e->cfg.method) {
    case SELSYNC_METHOD_SELSYNC: {
        double t0 = selsync_now();
        selsync_status st;
        int known = 1; /* lag: the agreement this step applies exists */
        if (e->step < (uint64_t)e->cfg.warmup) { all = 1; break; }
        *flag = (uint8_t)bad;
        st = e->lag_state ? agree_lagged(e, e->n_groups + skip, &known) : agree(e, e->n_groups + skip);
        e->cur.t_agree = selsync_now() - t0;
        if (st != SELSYNC_OK)
            return engine_comm_failed(e, st, e->agree64 ? "agreement (sum_f64)" : "agreement (any)", e->n_groups + skip);
        skip = 0; /* agreed */
        for (size_t l = 0; l < e->n_layers && known; l++) e->chosen[l] = e->flags[e->n_groups > 1 ? l : 0] != 0;
        /* no agreement yet; the max_local guard; the drift rule, on a drift
         * measured after the last average (with lag K: K local steps since) */
        all = !known || policy_forced(e) ||
              (e->cur.drift > e->cfg.drift && e->local_run >= policy_lag(e));
        break;
    }
    case SELSYNC_METHOD_BSP:
    case SELSYNC_METHOD_SSP: all = 1; break;
    case SELSYNC_METHOD_FEDAVG:
        if ((e->step + 1) % (uint64_t)e->cfg.fedavg_interval == 0) { all = 1; k = fedavg_members(e); }
        break;
    default: break; /* local: only selsync_engine_finish averages */
    }
    if (all) memset(e->chosen, 1, e->n_layers);
    if (skip && all) { /* agree on the non-finite flag alone */
        double t0 = selsync_now();
        selsync_status st;
        *flag = (uint8_t)bad;
        st = e->comm.ops->any(e->comm.ctx, flag, 1);
        e->cur.t_agree += selsync_now() - t0;
        if (st != SELSYNC_OK) return engine_comm_failed(e, st, "agreement (any)", 1);
    }
    if (e->cfg.on_nonfinite == SELSYNC_NONFINITE_SKIP && *flag) {
        memset(e->chosen, 0, e->n_layers);
        e->cur.decision = SELSYNC_SKIP_STEP;
        e->cur.layers_synced = 0;
        return SELSYNC_OK;
    }
    e->n_members = k;
    e->scale = 1.0f / (float)k;
    e->cur.layers_synced = 0;
    for (size_t l = 0; l < e->n_layers; l++) e->cur.layers_synced += e->chosen[l] && e->payload[l];
    e->cur.decision = e->cur.layers_synced ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP;
    if (e->cfg.method == SELSYNC_METHOD_SELSYNC && e->step >= (uint64_t)e->cfg.warmup) adapt(e);
    return SELSYNC_OK;
}
