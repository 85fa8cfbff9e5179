/* Data injection (selsync/inject.h).
 *
 * The senders are a partial Fisher-Yates over 0..world-1 computed without
 * the world-sized array: with draws j_t = t + below(world - t), the value
 * that step i takes from position p = j_i is the value position p held
 * before step i, i.e. that of the latest earlier step u with j_u == p (whose
 * value is the one position u held before step u, and so on), or p itself.
 * A sender broadcasts its first `shared` rows from its batch, where they
 * already lie (its own rows come first). */
#include "selsync/inject.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "selsync/rng.h"

#include "internal.h"

/* "FILE:LINE: [selsync] KEY = VALUE: " then the problem. */
static selsync_status config_error(const selsync_config *cfg, selsync_config_key key, char *err, size_t len,
                                   const char *problem, ...) SELSYNC_PRINTF(5, 6);
static selsync_status config_error(const selsync_config *cfg, selsync_config_key key, char *err, size_t len,
                                   const char *problem, ...)
{
    va_list ap;
    size_t used;
    if (!err || len == 0) return SELSYNC_ECONFIG;
    used = selsync_config_where(cfg, key, err, len);
    snprintf(err + used, len - used, "%s = %g: ", selsync_config_key_name(key),
             key == SELSYNC_KEY_INJECT_ALPHA ? cfg->inject_alpha : cfg->inject_beta);
    used += strlen(err + used);
    va_start(ap, problem);
    vsnprintf(err + used, len - used, problem, ap);
    va_end(ap);
    return SELSYNC_ECONFIG;
}

selsync_status selsync_inject_plan(const selsync_config *cfg, int world, int batch, selsync_inject_sizes *out,
                                   char *err, size_t errlen)
{
    const selsync_config_key A = SELSYNC_KEY_INJECT_ALPHA, B = SELSYNC_KEY_INJECT_BETA;
    int k, own, shared;

    if (err && errlen) err[0] = '\0';
    if (!cfg || !out || batch < 1) {
        if (err && errlen) snprintf(err, errlen, "[selsync] selsync_inject_plan: NULL argument or batch < 1");
        return SELSYNC_EINVAL;
    }
    if (!(cfg->inject_alpha > 0 && cfg->inject_alpha <= 1))
        return config_error(cfg, A, err, errlen, "%s; allowed: a real number in (0,1] with inject_beta > 0",
                            cfg->inject_alpha == 0 ? "data injection is off" : "out of range");
    if (!(cfg->inject_beta > 0 && cfg->inject_beta <= 1))
        return config_error(cfg, B, err, errlen, "%s; allowed: a real number in (0,1] with inject_alpha > 0",
                            cfg->inject_beta == 0 ? "data injection is off" : "out of range");
    if (world < 2)
        return config_error(cfg, A, err, errlen, "injection needs at least 2 ranks, running on %d; allowed: "
                            "inject_alpha = 0 and inject_beta = 0 (no injection) on one rank", world);
    k = (int)floor(cfg->inject_alpha * world + 0.5);
    k = k < 1 ? 1 : k > world ? world : k;
    own = (int)floor(batch / (1.0 + cfg->inject_beta * k) + 0.5);
    shared = (batch - own) / k;
    own = batch - k * shared;
    if (shared < 1)
        return config_error(cfg, B, err, errlen, "a batch of %d leaves no sample to share (%d sender%s of %d ranks); "
                            "allowed: larger batch or inject_beta", batch, k, k == 1 ? "" : "s", world);
    if (own < 1)
        return config_error(cfg, B, err, errlen, "a batch of %d leaves a rank no sample of its own (%d senders); "
                            "allowed: smaller inject_beta or inject_alpha, or a larger batch", batch, k);
    out->senders = k;
    out->own = own;
    out->shared = shared;
    out->load = own + shared;
    return SELSYNC_OK;
}

void selsync_inject_senders(uint64_t seed, uint64_t step, int world, int k, int *senders)
{
    selsync_rng r = selsync_rng_stream(seed, 0x1ec7, step);
    if (!senders || world < 1 || k < 1) return;
    if (k > world) k = world;
    for (int i = 0; i < k; i++) senders[i] = i + (int)selsync_rng_below(&r, (uint64_t)(world - i));
    for (int i = k - 1; i >= 0; i--) { /* senders[0..i) still hold the draws */
        int p = senders[i];
        for (int u = i - 1; u >= 0; u--)
            if (senders[u] == p) p = u; /* continue below u: what position u held before step u */
        senders[i] = p;
    }
    for (int i = 1; i < k; i++) /* ascending */
        for (int j = i, x = senders[i]; j > 0 && senders[j - 1] > x; j--) {
            senders[j] = senders[j - 1];
            senders[j - 1] = x;
        }
}

selsync_status selsync_inject_exchange(const selsync_comm *comm, const selsync_inject_sizes *sz,
                                       const int *senders, const float *rows, size_t row_len,
                                       float *batch, uint64_t *bytes)
{
    const selsync_comm_ops *ops = comm ? comm->ops : NULL;
    selsync_status st = SELSYNC_OK;
    int rank, world, mine = 0;
    size_t n_own, piece;
    uint64_t b0;
    float *dst;

    if (bytes) *bytes = 0;
    if (!ops || !ops->rank || !ops->size || !ops->bcast || !ops->bytes_sent || !sz || !senders || !rows ||
        !batch || row_len == 0 || sz->senders < 1 || sz->shared < 1 || sz->own < 1 ||
        sz->load != sz->own + sz->shared)
        return SELSYNC_EINVAL;
    rank = ops->rank(comm->ctx);
    world = ops->size(comm->ctx);
    if (sz->senders > world || (size_t)sz->own + (size_t)sz->senders * (size_t)sz->shared >
                                   SIZE_MAX / sizeof(float) / row_len)
        return SELSYNC_EINVAL;
    for (int i = 0; i < sz->senders; i++) {
        if (senders[i] < 0 || senders[i] >= world || (i > 0 && senders[i] <= senders[i - 1])) return SELSYNC_EINVAL;
        mine |= senders[i] == rank;
    }
    n_own = (size_t)(mine ? sz->load : sz->own) * row_len;
    piece = (size_t)sz->shared * row_len;
    memmove(batch, rows, n_own * sizeof *batch); /* rows may be batch itself */
    dst = batch + n_own;
    b0 = ops->bytes_sent(comm->ctx);
    for (int i = 0; i < sz->senders && st == SELSYNC_OK; i++) {
        int root = senders[i];
        st = ops->bcast(comm->ctx, root == rank ? batch : dst, piece * sizeof *batch, root);
        if (root != rank) dst += piece;
    }
    if (bytes) *bytes = ops->bytes_sent(comm->ctx) - b0;
    return st == SELSYNC_OK ? SELSYNC_OK : SELSYNC_ECOMM;
}
