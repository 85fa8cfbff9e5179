/* The averages over the ranks: parameters or gradients, in buckets that
 * may overlap the backward pass, or a parameter average in the background
 * applied a step late.
 *
 * - Transfer. One sum_f32v per synchronisation, in place over the tensors
 *   (no packing), each sum multiplied by 1/k: the same float operations on
 *   every rank, so every replica receives the same bits.
 *   aggregate = params averages parameters after the host's update (the
 *   paper's PA); aggregate = grads averages gradients before it. BN running
 *   statistics (STAT tensors) travel with their layer when sync_bn_stats.
 *   With sync_momentum a parameter average between steps also averages the
 *   trained tensors' grad, which after the host's update holds its
 *   momentum (Darknet: momentum x the step's update).
 * - Gradient buckets (aggregate = grads). The tensors to average, taken from
 *   the last to the first, are cut into buckets of bucket_mb; each bucket is
 *   one sum_f32v. A bucket is a function of the model, bucket_mb and the
 *   chosen layers only, so each element is summed in the same order whether
 *   the buckets are summed during the backward pass or after it.
 * - Overlap (overlap = 1, a communicator with sum_f32v_start). On a step
 *   known before its backward pass to average every layer (bsp; selsync in
 *   its warm-up or after max_local local steps), the host reports each
 *   layer whose gradient is final (selsync_engine_layer_ready): the engine measures
 *   that layer's tensors then and starts every bucket whose layers are all
 *   ready, in bucket order; before_update starts the rest and waits. The
 *   metrics' t_transfer is then the exposed part: the time before_update
 *   waited. Other steps (decided after the backward pass) sum the same
 *   buckets in before_update.
 * - Parameter averages in the background (aggregate = params, overlap = 1,
 *   a communicator with sum_f32v_start; all ranks average). after_update
 *   copies the params to average into one packed buffer and starts its sum;
 *   the next step's forward and backward passes run meanwhile, on the
 *   params the rank had. The next before_update waits and applies it: a
 *   trained tensor takes the average (the host changes it only in its
 *   update), a STAT tensor the average plus what that step's forward passes
 *   added. So the average arrives one step late, under that step's own
 *   update; replicas are equal to the update after every average and after
 *   selsync_engine_finish. Its bytes and waiting go into the next step's record;
 *   consensus, snapshot and finish apply a pending average first.
 * - Accounting. bsp_bytes = steps x (payload bytes of a full synchronisation)
 *   x r, where r = bytes the communicator reported per payload byte in the
 *   largest transfer over all ranks so far (a members-only sum is not one):
 *   exact once a full synchronisation has happened (a warm-up step, or
 *   selsync_engine_finish for local and fedavg); before any transfer r is
 *   2(N-1)/N, a ring all-reduce. */

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_state.h"
#include "internal.h"

/* A transfer of n floats (n > 0) over all ranks sent `bytes`: the bytes per
 * payload byte, kept from the largest transfer so far (a full one once
 * there was one; engine.c's top comment, Accounting). */
static void learn_ratio(selsync_engine *e, uint64_t bytes, size_t n)
{
    if (n < e->ratio_n) return;
    e->ratio = (double)bytes / ((double)n * sizeof(float));
    e->ratio_n = n;
}

/* Sums the params of the trained tensors, and of the STAT tensors when
 * sync_bn_stats, and with momentum (and sync_momentum) the trained
 * tensors' grad, of the chosen layers in place, times
 * scale, over the k ranks e->perm[0 .. k) when k < world (member: this
 * rank is one of them), else over all ranks. The members' sum is one
 * sum_f32v_among, or, where the communicator lacks it, one sum_f32v over
 * all ranks to which a non-member contributes its tensors zeroed first.
 * Adds its time to *t. */
selsync_status engine_transfer(selsync_engine *e, int member, int k, float scale, int momentum, double *t)
{
    double t0 = selsync_now();
    size_t n = 0, ns = 0;
    uint64_t b0;
    selsync_status st;
    int among = k < e->world && e->comm.ops->sum_f32v_among;

    for (size_t i = 0; i < e->nt; i++) {
        const selsync_tensor *x = &e->t[i];
        float *v = x->param;
        if (!e->chosen[x->layer] || !policy_syncs(e, x)) continue;
        if (!member && !among) memset(v, 0, x->count * sizeof(float));
        e->seg[ns++] = (selsync_segment){v, x->count};
        n += x->count;
    }
    for (size_t i = 0; momentum && e->cfg.sync_momentum && i < e->nt; i++) {
        const selsync_tensor *x = &e->t[i];
        if (!e->chosen[x->layer] || x->kind != SELSYNC_TENSOR_TRAINED) continue;
        if (!member && !among) memset(x->grad, 0, x->count * sizeof(float));
        e->seg[ns++] = (selsync_segment){x->grad, x->count};
        n += x->count;
    }
    if (n == 0) return SELSYNC_OK;
    b0 = e->comm.ops->bytes_sent(e->comm.ctx);
    st = among ? e->comm.ops->sum_f32v_among(e->comm.ctx, e->seg, ns, scale, e->perm, k)
               : e->comm.ops->sum_f32v(e->comm.ctx, e->seg, ns, scale);
    if (st != SELSYNC_OK) return engine_comm_failed(e, st, among ? "sum_f32v_among" : "sum_f32v", n);
    if (!among) learn_ratio(e, e->comm.ops->bytes_sent(e->comm.ctx) - b0, n);
    *t += selsync_now() - t0;
    return SELSYNC_OK;
}

/* overlap = 1 with a communicator that can sum in the background */
int engine_overlaps(const selsync_engine *e)
{
    return e->cfg.overlap && e->comm.ops->sum_f32v_start && e->comm.ops->wait_sums;
}

/* Sums (overlapping: starts) the gradient buckets not summed yet this step,
 * in order (the comment at the top): the chosen layers' synced tensors from
 * bucket_pos down, a bucket ending once it holds bucket_mb. ready_only:
 * stops before a bucket that holds a tensor of a layer not ready. */
selsync_status engine_sum_buckets(selsync_engine *e, int ready_only)
{
    const double limit = e->cfg.bucket_mb * 1e6;
    while (e->bucket_pos > 0) {
        size_t i = e->bucket_pos, ns = 0, n = 0;
        selsync_segment *seg = e->seg + e->seg_used;
        selsync_status st;
        while (i > 0 && (double)n * sizeof(float) < limit) {
            const selsync_tensor *x = &e->t[--i];
            if (!e->chosen[x->layer] || !policy_syncs(e, x)) continue;
            if (ready_only && !e->ready[x->layer]) return SELSYNC_OK;
            seg[ns++] = (selsync_segment){x->grad ? x->grad : x->param, x->count};
            n += x->count;
        }
        if (ns == 0) break;
        if (e->bucket_n == 0) e->bucket_b0 = e->comm.ops->bytes_sent(e->comm.ctx);
        st = e->overlapping ? e->comm.ops->sum_f32v_start(e->comm.ctx, seg, ns, e->scale)
                            : e->comm.ops->sum_f32v(e->comm.ctx, seg, ns, e->scale);
        if (st != SELSYNC_OK) return engine_comm_failed(e, st, e->overlapping ? "sum_f32v_start" : "sum_f32v", n);
        e->bucket_pos = i;
        e->seg_used += ns;
        e->bucket_n += n;
        e->tot.buckets++;
        e->tot.buckets_early += ready_only;
    }
    e->bucket_pos = 0;
    return SELSYNC_OK;
}

/* The gradients of the chosen layers averaged over all ranks: the buckets
 * not yet summed, then (overlapping) the wait for those started. Adds the
 * time to *t. */
selsync_status engine_average_grads(selsync_engine *e, double *t)
{
    double t0 = selsync_now();
    selsync_status st = engine_sum_buckets(e, 0);
    if (st == SELSYNC_OK && e->overlapping && (st = e->comm.ops->wait_sums(e->comm.ctx)) != SELSYNC_OK)
        return engine_comm_failed(e, st, "sum_f32v (started during the backward pass)", e->bucket_n);
    if (st != SELSYNC_OK) return st;
    if (e->bucket_n) learn_ratio(e, e->comm.ops->bytes_sent(e->comm.ctx) - e->bucket_b0, e->bucket_n);
    *t += selsync_now() - t0;
    return SELSYNC_OK;
}

/* aggregate = params with overlap = 1: this step's average runs in the
 * background while the next step computes (the comment at the top). */
int engine_averages_late(const selsync_engine *e)
{
    return engine_overlaps(e) && e->cfg.aggregate == SELSYNC_AGGREGATE_PARAMS && e->n_members == e->world;
}

/* Starts the average of the chosen layers' synced params, then with
 * sync_momentum their trained tensors' grad: packed into e->late (the
 * values that the next step changes, STAT tensors' and grads, also kept in
 * late_base) and summed in the background. */
selsync_status engine_start_late(selsync_engine *e)
{
    size_t n = 0, ns = 0, moments = e->cfg.sync_momentum ? e->n_trained : 0;
    selsync_status st;
    if (!e->late) {
        e->late = malloc((e->sync_n + moments) * sizeof *e->late);
        e->late_base = malloc((e->n_params - e->n_trained + moments + 1) * sizeof *e->late_base);
        if (!e->late || !e->late_base)
            return EFAIL(e, SELSYNC_ENOMEM, "[selsync] out of memory for the parameter average in the background");
    }
    for (size_t i = 0; i < e->nt; i++) {
        const selsync_tensor *x = &e->t[i];
        if (!e->chosen[x->layer] || !policy_syncs(e, x)) continue;
        memcpy(e->late + n, x->param, x->count * sizeof(float));
        n += x->count;
        if (x->kind != SELSYNC_TENSOR_STAT) continue;
        memcpy(e->late_base + ns, x->param, x->count * sizeof(float));
        ns += x->count;
    }
    for (size_t i = 0; moments && i < e->nt; i++) {
        const selsync_tensor *x = &e->t[i];
        if (!e->chosen[x->layer] || x->kind != SELSYNC_TENSOR_TRAINED) continue;
        memcpy(e->late + n, x->grad, x->count * sizeof(float));
        memcpy(e->late_base + ns, x->grad, x->count * sizeof(float));
        n += x->count;
        ns += x->count;
    }
    if (n == 0) return SELSYNC_OK;
    memcpy(e->late_layers, e->chosen, e->n_layers);
    e->late_seg = (selsync_segment){e->late, n};
    if ((st = e->comm.ops->sum_f32v_start(e->comm.ctx, &e->late_seg, 1, e->scale)) != SELSYNC_OK)
        return engine_comm_failed(e, st, "sum_f32v_start (parameters)", n);
    e->late_pending = 1;
    e->tot.late_averages++;
    return SELSYNC_OK;
}

/* Waits for the average start_late began and applies it: a trained tensor
 * takes the average (the host leaves it alone between its updates), a STAT
 * tensor the average plus what the forward passes since changed in it, a
 * momentum (sync_momentum) the average plus the gradient the backward
 * passes since added to it.
 * between: called between two steps (its bytes then go into the next
 * step's record). Adds the time to *t. */
selsync_status engine_apply_late(selsync_engine *e, int between, double *t)
{
    double t0 = selsync_now();
    size_t n = 0, ns = 0, total = e->late_seg.count;
    selsync_status st;
    if (!e->late_pending) return SELSYNC_OK;
    e->late_pending = 0;
    uint64_t b0 = e->comm.ops->bytes_sent(e->comm.ctx); /* a started sum counts at its wait (comm.h) */
    if ((st = e->comm.ops->wait_sums(e->comm.ctx)) != SELSYNC_OK)
        return engine_comm_failed(e, st, "sum_f32v (parameters, started after the previous update)", total);
    uint64_t bytes = e->comm.ops->bytes_sent(e->comm.ctx) - b0;
    learn_ratio(e, bytes, total);
    if (between) e->late_carry += bytes;
    for (size_t i = 0; i < e->nt; i++) {
        const selsync_tensor *x = &e->t[i];
        if (!e->late_layers[x->layer] || !policy_syncs(e, x)) continue;
        if (x->kind == SELSYNC_TENSOR_STAT) {
            for (size_t j = 0; j < x->count; j++) x->param[j] += e->late[n + j] - e->late_base[ns + j];
            ns += x->count;
        } else {
            memcpy(x->param, e->late + n, x->count * sizeof(float));
        }
        n += x->count;
    }
    for (size_t i = 0; e->cfg.sync_momentum && i < e->nt; i++) {
        const selsync_tensor *x = &e->t[i];
        if (!e->late_layers[x->layer] || x->kind != SELSYNC_TENSOR_TRAINED) continue;
        float *snap = e->snap ? e->snap + e->snap_off[i] : NULL; /* the residual moves with it: the step's */
        for (size_t j = 0; j < x->count; j++) {                     /* gradient is grad - snap */
            float d = e->late[n + j] - e->late_base[ns + j];
            x->grad[j] += d;
            if (snap) snap[j] += d;
        }
        n += x->count;
        ns += x->count;
    }
    policy_averaged(e, e->late_layers, e->prev_lr); /* the rate of the step that started it */
    *t += selsync_now() - t0;
    return SELSYNC_OK;
}

