/* The significance of this step's gradients, per group (the whole model,
 * or each layer with granularity = layer) and for the whole model:
 *
 * - Norm. Every step each group (the whole model, or one layer with
 *   granularity = layer) measures the squared L2 norm x_t of this step's own
 *   gradient (float sums over blocks of 1024 elements, added in double).
 *   When the host keeps a residual in its grad buffers
 *   (Darknet leaves momentum * grad there after the update) the engine
 *   subtracts a snapshot of the buffer taken at the end of the previous
 *   after_update, so x_t is the norm of this step's contribution only.
 *   When the host described its update (selsync_engine_note_host_update),
 *   the pass that measures also writes the residual that update will
 *   leave, block by block while the block is in the cache, and
 *   after_update copies nothing unless the buffers changed in between (a
 *   skipped step, an average of the momentum). When the host also gave its
 *   rates and nothing comes between the measurement and the update
 *   (selsync_engine_update_applied), the pass applies the update itself,
 *   block by block once the block is measured: one pass over the buffers
 *   where the host's update would have taken another.
 * - Drift. With the drift rule the same pass also takes each tensor's
 *   ||param - anchor||^2 (the same float lanes and blocks as
 *   engine_sq_diff, so the same bits as a pass of its own), which the
 *   agreement sends: the agreement itself then reads no tensor.
 * - Smoothing. x_t goes into a ring of the last `window` values; the smoothed
 *   value is the normalised exponentially weighted mean of the m =
 *   min(steps so far, window) newest values:
 *       s_t = sum_{i<m} (1-a)^i x_{t-i} / sum_{i<m} (1-a)^i,  a = smoothing.
 *   Normalising means s_t is a mean from the first step on, so there is no
 *   zero start-up value to divide by (the reference code's bug).
 * - Change. D_t = |s_t - s_{t-1}| / |s_{t-1}|. It is +inf, which means
 *   "synchronise", when there is no s_{t-1} (step 0), when s_{t-1} is 0 or
 *   not finite, or when s_t is not finite (a NaN/Inf gradient). A NaN stays
 *   in the ring for `window` steps and then in s_{t-1} for one more, so it
 *   forces synchronisation for window + 1 steps. A group is significant on this rank when D_t >= delta, so
 *   delta = 0 synchronises every step. Layers without a trained tensor are
 *   never significant (their norm is always 0).
 * - Methods that never read the change (all but selsync) measure nothing:
 *   they keep no snapshot and take one pass that checks the gradients and
 *   trained parameters are finite (the same pass as selsync's, which
 *   applies the update, when the engine applies it); their metrics show
 *   grad_norm, smoothed and change as nan. */

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_state.h"
#include "internal.h"

/* The squared norm of g - snap (snap may be NULL) over [j, end), in double. */
static double sq_double(const float *g, const float *snap, size_t j, size_t end)
{
    double sum = 0;
    for (; j < end; j++) {
        double v = (double)g[j] - (snap ? (double)snap[j] : 0.0);
        sum += v * v;
    }
    return sum;
}

/* The residual the host's update leaves in grad[j, end) (model.h,
 * selsync_host_update), written into snap: the same float operations. */
static void write_residual(float *restrict snap, const float *restrict g, const float *restrict p, size_t j,
                           size_t end, float decay, float momentum)
{
    for (; j < end; j++) snap[j] = (g[j] + decay * p[j]) * momentum;
}

/* The host's update itself over [j, end) (model.h, selsync_host_update),
 * its residual left in grad and, when snap is not NULL, in snap: the
 * host's float operations. Always inlined and called with literal
 * arguments for snap and decays, so that each variant is a loop of its own. */
static inline __attribute__((always_inline)) void update_span(float *restrict snap, float *restrict g,
                                                               float *restrict p, size_t j, size_t end, float decay,
                                                               float momentum, float rate, int decays)
{
    for (; j < end; j++) {
        float u = decays ? g[j] + decay * p[j] : g[j];
        p[j] += rate * u;
        g[j] = u * momentum;
        if (snap) snap[j] = g[j];
    }
}

static void apply_update(float *snap, float *g, float *p, size_t j, size_t end, float decay, float momentum,
                         float rate, int decays)
{
    if (snap && decays) update_span(snap, g, p, j, end, decay, momentum, rate, 1);
    else if (snap) update_span(snap, g, p, j, end, decay, momentum, rate, 0);
    else if (decays) update_span(NULL, g, p, j, end, decay, momentum, rate, 1);
    else update_span(NULL, g, p, j, end, decay, momentum, rate, 0);
}

/* What the pass leaves once a block is measured: the residual of the
 * host's update in snap, or the update applied (e->update_applied). */
static void after_block(const selsync_engine *e, size_t i, float *snap, size_t j, size_t end)
{
    const selsync_tensor *t = &e->t[i];
    float decay = t->decays ? e->host_update.decay : 0, momentum = e->host_update.momentum;
    if (e->update_applied)
        apply_update(snap, t->grad, t->param, j, end, decay, momentum, e->host_update.rates[i], t->decays);
    else
        write_residual(snap, t->grad, t->param, j, end, decay, momentum);
}

/* Tensor i's squared norm of this step's own gradient, its params' squared
 * distance to the drift rule's anchor and whether its params are finite,
 * once per step (selsync_engine_layer_ready takes them before the layer's
 * bucket is summed); with e->residual_taken, the residual its update will
 * leave written into the snapshot, or with e->update_applied the update
 * applied (after_block). One pass over grad, snapshot, params and anchor:
 * LANES independent float sums over a block of BLOCK elements, so that the
 * compiler vectorises the loop (a lane adds BLOCK / LANES squares: about
 * 1e-7 of relative error), the blocks' sums added in double. A block whose
 * float sum overflows is summed again in double, so only a gradient that
 * is not finite gives an infinite norm. Over 3 M elements the pass took
 * 0.9 ms against 3.2 ms with double lanes. */
#define LANES 16
#define BLOCK 1024

double engine_sq_diff(const float *x, const float *y, size_t n)
{
    size_t j = 0;
    double sum = 0;
    while (n - j >= LANES) {
        float s[LANES] = {0}, block = 0;
        size_t j0 = j, end = j + (n - j < BLOCK ? (n - j) / LANES * LANES : BLOCK);
        if (y)
            for (; j < end; j += LANES)
                for (size_t k = 0; k < LANES; k++) {
                    float v = x[j + k] - y[j + k];
                    s[k] += v * v;
                }
        else
            for (; j < end; j += LANES)
                for (size_t k = 0; k < LANES; k++) s[k] += x[j + k] * x[j + k];
        for (size_t k = 0; k < LANES; k++) block += s[k];
        sum += isinf(block) ? sq_double(x, y, j0, end) : (double)block;
    }
    return sum + sq_double(x, y, j, n);
}

/* Whether the n values of x and of y are finite (bit 1: x is not, bit 2: y
 * is not), in one vectorised pass over both: x * 0 is 0 for every finite x
 * and NaN otherwise. One pass reading both arrays took half the time of a
 * pass over each (tests/bench/bench_measure). */
static int nonfinite_pair(const float *x, const float *y, size_t n)
{
    float lx[LANES] = {0}, ly[LANES] = {0}, bx = 0, by = 0;
    size_t j = 0;
    for (; n - j >= LANES; j += LANES)
        for (size_t k = 0; k < LANES; k++) {
            lx[k] += x[j + k] * 0.0f;
            ly[k] += y[j + k] * 0.0f;
        }
    for (; j < n; j++) {
        bx += x[j] * 0.0f;
        by += y[j] * 0.0f;
    }
    for (size_t k = 0; k < LANES; k++) {
        bx += lx[k];
        by += ly[k];
    }
    return isnan(bx) | isnan(by) << 1;
}

/* One block [j, end) of engine_measure_tensor's pass, end - j a multiple
 * of LANES: the lanes' squares of g - snap into s, of p - a into d (the
 * drift's distance to the anchor), and p * 0 into nf. Always inlined, and
 * called with literal NULLs, so that each variant is a loop of its own
 * without a branch inside. */
static inline __attribute__((always_inline)) void measure_block(const float *g, const float *snap, const float *p,
                                                                 const float *a, size_t j, size_t end, float *s,
                                                                 float *d, float *nf)
{
    for (; j < end; j += LANES)
        for (size_t k = 0; k < LANES; k++) {
            float v = snap ? g[j + k] - snap[j + k] : g[j + k];
            s[k] += v * v;
            nf[k] += p[j + k] * 0.0f;
            if (a) {
                float u = p[j + k] - a[j + k];
                d[k] += u * u;
            }
        }
}

void engine_measure_tensor(selsync_engine *e, size_t i)
{
    const selsync_tensor *t = &e->t[i];
    const float *g = t->grad, *p = t->param;
    float *snap = e->snap ? e->snap + e->snap_off[i] : NULL;
    const float *a = e->anchor_sq ? e->anchor + e->snap_off[i] : NULL; /* the drift rule's anchor */
    int after = (snap && e->residual_taken) || e->update_applied; /* after_block's work */
    float nonfinite[LANES] = {0}, bad = 0; /* x * 0 is 0 for every finite x, NaN otherwise */
    size_t n = t->count, j = 0;
    double sum = 0, moved = 0;
    if (e->measured[i] || t->kind != SELSYNC_TENSOR_TRAINED) return;
    e->measured[i] = 1;
    if (!e->measures_change && !e->update_applied) { /* finiteness alone: 0 or an infinite "norm" */
        int bad_bits = nonfinite_pair(g, p, n);
        e->tsq[i] = bad_bits & 1 ? INFINITY : 0;
        e->tbad[i] = (bad_bits & 2) != 0;
        return;
    }
    while (n - j >= LANES) {
        float s[LANES] = {0}, d[LANES] = {0}, block = 0, dblock = 0;
        size_t j0 = j, end = j + (n - j < BLOCK ? (n - j) / LANES * LANES : BLOCK);
        if (snap && a) measure_block(g, snap, p, a, j, end, s, d, nonfinite);
        else if (snap) measure_block(g, snap, p, NULL, j, end, s, d, nonfinite);
        else if (a) measure_block(g, NULL, p, a, j, end, s, d, nonfinite);
        else measure_block(g, NULL, p, NULL, j, end, s, d, nonfinite);
        j = end;
        for (size_t k = 0; k < LANES; k++) {
            block += s[k];
            dblock += d[k];
        }
        sum += isinf(block) ? sq_double(g, snap, j0, end) : (double)block;
        if (a) moved += isinf(dblock) ? sq_double(p, a, j0, end) : (double)dblock;
        if (after) after_block(e, i, snap, j0, end);
    }
    sum += sq_double(g, snap, j, n);
    if (a) moved += sq_double(p, a, j, n);
    for (size_t k = j; k < n; k++) bad += p[k] * 0.0f;
    if (after) after_block(e, i, snap, j, n);
    for (size_t k = 0; k < LANES; k++) bad += nonfinite[k];
    e->tsq[i] = e->measures_change || !isfinite(sum) ? sum : 0; /* without the change: finiteness alone */
    e->tmoved[i] = moved;
    e->tbad[i] = isnan(bad);
}

/* Norms, smoothing, change and local flags of this step (the comment at the top).
 * A step whose gradient norm or trained parameters are not finite leaves
 * the smoothing untouched and flags nothing; it returns 1 (2 when the
 * parameters are not finite). The loss alone does not count: a loss can be
 * infinite while its gradient is finite. */
int engine_measure(selsync_engine *e)
{
    size_t w = (size_t)e->cfg.window, slot = (size_t)(e->step % w);
    size_t m = e->step < w ? (size_t)e->step + 1 : w, whole = e->n_track - 1;
    int params_bad = 0;

    memset(e->sq, 0, e->n_track * sizeof *e->sq);
    for (size_t i = 0; i < e->nt; i++) {
        if (e->t[i].kind != SELSYNC_TENSOR_TRAINED) continue;
        engine_measure_tensor(e, i);
        params_bad |= e->tbad[i];
        e->sq[e->n_groups > 1 ? e->t[i].layer : 0] += e->tsq[i];
    }
    if (e->n_track > e->n_groups)
        for (size_t g = 0; g < e->n_groups; g++) e->sq[whole] += e->sq[g];

    e->cur.local_flag = 0;
    if (params_bad || !isfinite(e->sq[whole])) {
        e->cur.grad_norm = e->sq[whole];
        e->cur.smoothed = e->prev[whole];
        e->cur.change = NAN;
        memset(e->flags, 0, e->n_groups);
        memset(e->change, 0, e->n_groups * sizeof *e->change);
        return 1 + params_bad;
    }
    if (!e->measures_change) { /* a method that never reads the change */
        e->cur.grad_norm = e->cur.smoothed = e->cur.change = NAN;
        return 0;
    }
    for (size_t k = 0; k < e->n_track; k++) {
        double *ring = e->ring + k * w, num = 0, den = 0, wt = 1, s, change;
        if (k < e->n_groups && !e->active[k]) { e->flags[k] = 0; e->change[k] = 0; continue; }
        ring[slot] = e->sq[k];
        for (size_t i = 0; i < m && wt > 0; i++, wt *= e->keep) { /* wt > 0: no 0 * inf */
            num += wt * ring[(slot + w - i) % w];
            den += wt;
        }
        s = num / den;
        change = e->step == 0 || e->prev[k] == 0 || !isfinite(e->prev[k]) || !isfinite(s)
                     ? INFINITY : fabs(s - e->prev[k]) / fabs(e->prev[k]);
        e->prev[k] = s;
        if (k < e->n_groups) {
            e->change[k] = change;
            e->flags[k] = change >= e->delta;
            e->cur.local_flag |= e->flags[k];
        }
        if (k == whole) {
            e->cur.grad_norm = e->sq[k];
            e->cur.smoothed = s;
            e->cur.change = change;
        }
    }
    return 0;
}

