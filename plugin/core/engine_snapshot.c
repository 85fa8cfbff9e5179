/* Snapshots of the engine's state for checkpoints, and their restore
 * (see selsync/engine.h and engine_state.h). */

#include <float.h>
#include <inttypes.h>
#include <string.h>

#include "engine_state.h"

/* The snapshot: a header of sizes (to reject another network or window),
 * then the fields below in order, in this machine's byte order. */
typedef struct snapshot_head {
    char magic[8];
    uint64_t n_track, window, n_params, n_trained, has_snap;
    uint64_t step, ratio_n, local_run;
    double ratio, wall, delta;
    selsync_totals tot;
    double prev_lr; /* the learning rate of the last step (qsr_alpha's bound) */
    uint64_t sync_done; /* sync_until's switch has happened */
    uint64_t has_anchor, has_outer; /* the policy's arrays that follow the host's */
    uint64_t lag; /* the agreements of the last lag steps follow them */
} snapshot_head;

static const char snapshot_magic[8] = "SSENG07";

/* Floats after the norms: the residual snapshot, the host's params and
 * grads, the anchor and the outer momentum. */
static size_t snapshot_floats(const selsync_engine *e, int has_snap, int has_anchor, int has_outer)
{
    return (has_snap ? e->n_trained : 0) + e->n_params + e->n_trained + (has_anchor ? e->n_trained : 0) +
           (has_outer ? e->n_trained : 0);
}

/* lag: the slots' states, then their sums. */
static size_t lag_bytes(const selsync_engine *e)
{
    size_t lag = (size_t)policy_lag(e);
    return lag * (1 + (e->n_groups + 2) * sizeof(double));
}

size_t selsync_engine_snapshot_size(const selsync_engine *e)
{
    if (!e) return 0;
    return sizeof(snapshot_head) + (e->n_track * (size_t)e->cfg.window + e->n_track) * sizeof(double) +
           snapshot_floats(e, e->snap != NULL, e->anchor != NULL, e->outer_u != NULL) * sizeof(float) +
           lag_bytes(e);
}

/* Copies n bytes between the snapshot at *pos and x, in the direction out. */
static void field(uint8_t **pos, void *x, size_t n, int out)
{
    if (out) memcpy(*pos, x, n);
    else memcpy(x, *pos, n);
    *pos += n;
}

/* The host arrays: every param, then every trained grad; then the
 * policy's: the anchor and the outer momentum, where the run has them. */
static void host_arrays(selsync_engine *e, uint8_t **pos, int out)
{
    for (size_t i = 0; i < e->nt; i++) field(pos, e->t[i].param, e->t[i].count * sizeof(float), out);
    for (size_t i = 0; i < e->nt; i++)
        if (e->t[i].kind == SELSYNC_TENSOR_TRAINED) field(pos, e->t[i].grad, e->t[i].count * sizeof(float), out);
    if (e->anchor) field(pos, e->anchor, e->n_trained * sizeof(float), out);
    if (e->outer_u) field(pos, e->outer_u, e->n_trained * sizeof(float), out);
    if (e->lag_state) {
        field(pos, e->lag_state, (size_t)e->cfg.lag, out);
        field(pos, e->lag_sums, (size_t)e->cfg.lag * (e->n_groups + 2) * sizeof(double), out);
    }
}

selsync_status selsync_engine_snapshot(selsync_engine *e, void *buf, size_t len)
{
    selsync_status st;
    double t_late = 0; /* checkpoint time, outside the totals */
    if (!e || !buf) return SELSYNC_EINVAL;
    if ((st = engine_check(e, 0)) != SELSYNC_OK || (st = engine_apply_late(e, 1, &t_late)) != SELSYNC_OK ||
        (st = policy_lag_drain(e)) != SELSYNC_OK)
        return st;
    if (e->log && fflush(e->log) != 0) return metrics_failed(e); /* every row up to here on disk */
    e->tot.bytes_sent += e->late_carry; /* so that a restored run counts them alike */
    e->late_carry = 0;
    if (len != selsync_engine_snapshot_size(e))
        return EFAIL(e, SELSYNC_EINVAL, "[selsync] snapshot buffer of %zu bytes, need %zu", len,
                     selsync_engine_snapshot_size(e));
    snapshot_head h = {{0}, e->n_track, (uint64_t)e->cfg.window, e->n_params, e->n_trained, e->snap != NULL,
                       e->step, e->ratio_n, e->local_run, e->ratio, e->t_mark - e->t_start, e->delta, e->tot,
                       e->prev_lr, (uint64_t)e->sync_done, e->anchor != NULL, e->outer_u != NULL,
                       policy_lag(e)};
    uint8_t *pos = buf;
    memcpy(h.magic, snapshot_magic, sizeof h.magic);
    field(&pos, &h, sizeof h, 1);
    field(&pos, e->ring, e->n_track * (size_t)e->cfg.window * sizeof(double), 1);
    field(&pos, e->prev, e->n_track * sizeof(double), 1);
    if (e->snap) field(&pos, e->snap, e->n_trained * sizeof(float), 1);
    host_arrays(e, &pos, 1);
    return SELSYNC_OK;
}


/* 1 when the n floats at p (any alignment) are all finite. */
static int floats_finite(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, p + i * sizeof x, sizeof x);
        if (!(x >= -FLT_MAX && x <= FLT_MAX)) return 0;
    }
    return 1;
}

static int nonneg_finite(double x) { return x >= 0 && x <= DBL_MAX; }

/* Why the snapshot's fields (head h, then the norms at pos) cannot be a
 * state this engine wrote; NULL when they can. */
static const char *restored_fields_invalid(const selsync_engine *e, const snapshot_head *h, const uint8_t *pos)
{
    const selsync_totals *t = &h->tot;
    if (h->step >= MAX_RESTORED_COUNT || t->steps > h->step || t->synced_steps > t->steps ||
        t->skipped_steps > t->steps)
        return "its step counters are out of range";
    if (h->ratio_n > e->n_params || !nonneg_finite(h->ratio) || h->ratio > 1e6)
        return "its transfer ratio is out of range";
    if (h->local_run > h->step || !nonneg_finite(h->delta) || !nonneg_finite(h->prev_lr) || h->sync_done > 1)
        return "its run of local steps, its delta or its learning rate is out of range";
    if (!nonneg_finite(h->wall) || !nonneg_finite(t->t_compute) || !nonneg_finite(t->t_measure) ||
        !nonneg_finite(t->t_agree) || !nonneg_finite(t->t_transfer) || !nonneg_finite(t->t_excluded))
        return "its times are negative or not finite";
    for (size_t i = 0; i < e->n_track * ((size_t)e->cfg.window + 1); i++) {
        double x;
        memcpy(&x, pos + i * sizeof x, sizeof x);
        if (!nonneg_finite(x)) return "its gradient norms are negative or not finite";
    }
    /* the saved parameters (the last average's, then the model's), the
     * gradient and momentum arrays, the anchor and the outer momentum: NaN
     * would stop the run at its next step */
    size_t floats = snapshot_floats(e, (int)h->has_snap, (int)h->has_anchor, (int)h->has_outer);
    const uint8_t *lag = pos + e->n_track * ((size_t)e->cfg.window + 1) * sizeof(double) + floats * sizeof(float);
    if (!floats_finite(pos + e->n_track * ((size_t)e->cfg.window + 1) * sizeof(double), floats))
        return "its parameters, gradients or momentum are not finite";
    for (uint64_t i = 0; i < h->lag; i++) { /* drained when saved: each slot empty or summed */
        if (lag[i] != LAG_EMPTY && lag[i] != LAG_KNOWN) return "its pending agreements are not complete";
        for (size_t j = 0; j < e->n_groups + 2; j++) {
            double x;
            memcpy(&x, lag + h->lag + (i * (e->n_groups + 2) + j) * sizeof x, sizeof x);
            if (!(x >= 0)) return "its pending agreements are negative or not numbers"; /* Delta may be inf */
        }
    }
    return NULL;
}

/* 1 when a format tag (7 bytes and a NUL) is printable ASCII, fit to quote. */
static int printable_tag(const char tag[8])
{
    for (int i = 0; i < 7; i++)
        if (tag[i] < 0x20 || tag[i] > 0x7e) return 0;
    return tag[7] == '\0';
}

/* Checks that buf (len bytes) is a snapshot this engine can take; *h its
 * head and *pos where its fields begin. */
static selsync_status check_snapshot(selsync_engine *e, const void *buf, size_t len, snapshot_head *h,
                                     uint8_t **pos)
{
    *pos = (uint8_t *)buf;
    if (e->step > 0 || e->in_step || e->has_last || e->header_done || e->ssp || e->ssp_server)
        return EFAIL(e, SELSYNC_ESTATE,
                     "[selsync] selsync_engine_restore: only before the first step, and not with ssp");
    if (len < sizeof *h)
        return EFAIL(e, SELSYNC_EMISMATCH, "[selsync] the saved state is truncated (%zu bytes)", len);
    field(pos, h, sizeof *h, 0);
    if (memcmp(h->magic, snapshot_magic, sizeof h->magic) != 0)
        return EFAIL(e, SELSYNC_EMISMATCH, "[selsync] the saved state is in format '%.7s', written by another "
                     "version of this program; this one reads '%s' (resume with the version that wrote it)",
                     printable_tag(h->magic) ? h->magic : "unknown", snapshot_magic);
    if (len != selsync_engine_snapshot_size(e) ||
        h->n_track != e->n_track || h->window != (uint64_t)e->cfg.window || h->n_params != e->n_params ||
        h->n_trained != e->n_trained || h->has_snap != (e->snap != NULL) || h->has_anchor != (e->anchor != NULL) ||
        h->has_outer != (e->outer_u != NULL) || h->lag != policy_lag(e))
        return EFAIL(e, SELSYNC_EMISMATCH, "[selsync] the saved state was written for another network or "
                     "another [selsync] window, granularity, drift, lag or outer step (%zu bytes; this run needs %zu)", len,
                     selsync_engine_snapshot_size(e));
    const char *bad = restored_fields_invalid(e, h, *pos);
    if (bad)
        return EFAIL(e, SELSYNC_EMISMATCH, "[selsync] the saved state is damaged: %s", bad);
    return SELSYNC_OK;
}

/* Takes the checked snapshot (head h, fields at pos). */
static void apply_snapshot(selsync_engine *e, const snapshot_head *h, uint8_t *pos)
{
    field(&pos, e->ring, e->n_track * (size_t)e->cfg.window * sizeof(double), 0);
    field(&pos, e->prev, e->n_track * sizeof(double), 0);
    if (e->snap) field(&pos, e->snap, e->n_trained * sizeof(float), 0);
    host_arrays(e, &pos, 0);
    policy_anchor_norms(e);
    engine_keep_stats(e, 1);
    e->step = h->step;
    e->ratio_n = (size_t)h->ratio_n;
    e->ratio = h->ratio;
    e->local_run = h->local_run;
    e->delta = h->delta;
    e->prev_lr = h->prev_lr;
    e->sync_done = (int)h->sync_done;
    e->tot = h->tot;
    e->t_mark = selsync_now();
    e->t_start = e->t_mark - h->wall;
    e->resumed = 1;
}

selsync_status selsync_engine_restore(selsync_engine *e, const void *buf, size_t len)
{
    snapshot_head h;
    uint8_t *pos;
    if (!e || !buf) return SELSYNC_EINVAL;
    selsync_status st = check_snapshot(e, buf, len, &h, &pos);
    if (st == SELSYNC_OK) apply_snapshot(e, &h, pos);
    return st;
}

/* The j-th float of a tensor at byte offset off in a snapshot. */
static double state_float(const void *state, size_t off, size_t j)
{
    float x;
    memcpy(&x, (const uint8_t *)state + off + j * sizeof x, sizeof x);
    return x;
}

selsync_status selsync_engine_restore_mean(selsync_engine *e, const void *const *states, size_t n, size_t len)
{
    snapshot_head h;
    uint8_t *pos = NULL;
    if (!e || !states || n == 0) return SELSYNC_EINVAL;
    for (size_t r = n; r-- > 0;) { /* every one checked; h and pos end as the first's */
        selsync_status st = check_snapshot(e, states[r], len, &h, &pos);
        if (st != SELSYNC_OK) return st;
    }
    apply_snapshot(e, &h, pos); /* the first's counters, schedule and delta */
    size_t params = sizeof h + (e->n_track * (size_t)e->cfg.window + e->n_track) * sizeof(double) +
                    (e->snap ? e->n_trained * sizeof(float) : 0);
    for (size_t i = 0, off = params; i < e->nt; off += e->t[i].count * sizeof(float), i++)
        for (size_t j = 0; j < e->t[i].count; j++) {
            /* the element's mean over the states; a variance adds the
             * spread of its means (those count floats before it) */
            size_t means = off - e->t[i].count * sizeof(float);
            double sum = 0, mean = 0, spread = 0;
            for (size_t r = 0; r < n; r++) sum += state_float(states[r], off, j);
            if (e->t[i].variance) {
                for (size_t r = 0; r < n; r++) mean += state_float(states[r], means, j);
                mean /= (double)n;
                for (size_t r = 0; r < n; r++) {
                    double d = state_float(states[r], means, j) - mean;
                    spread += d * d;
                }
            }
            e->t[i].param[j] = (float)((sum + spread) / (double)n);
        }
    /* what belongs to one rank of the old job starts afresh */
    memset(e->ring, 0, e->n_track * (size_t)e->cfg.window * sizeof *e->ring);
    memset(e->prev, 0, e->n_track * sizeof *e->prev);
    if (e->snap) memset(e->snap, 0, e->n_trained * sizeof *e->snap);
    for (size_t i = 0; i < e->nt; i++)
        if (e->t[i].kind == SELSYNC_TENSOR_TRAINED) memset(e->t[i].grad, 0, e->t[i].count * sizeof(float));
    if (e->outer_u) memset(e->outer_u, 0, e->n_trained * sizeof *e->outer_u);
    if (e->lag_state) memset(e->lag_state, LAG_EMPTY, (size_t)e->cfg.lag);
    e->local_run = 0;
    engine_keep_stats(e, 1);
    policy_averaged(e, NULL, 0); /* the anchor: the mean model */
    return SELSYNC_OK;
}
