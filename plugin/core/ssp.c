/* SSP on a parameter server (see selsync/ssp.h for the protocol).
 *
 * The server first answers each worker's PULL, in rank order, so that all
 * start from the initial model; then it takes messages from any worker. It
 * keeps, per worker, its clock, whether it is done and the state
 * of its pull (a worker waits for each reply, so at most one): none, just
 * arrived, or held (the bound did not allow it on arrival). After every
 * message it answers each pull that the bound now allows, lowest rank
 * first; only held pulls count as queued and report a wait. Updates and
 * models go through one buffer of n floats; the global model stays in the
 * host's arrays. */

#include "selsync/ssp.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HDR sizeof(selsync_ssp_header)

static int in_model(const selsync_config *cfg, const selsync_tensor *t)
{
    return selsync_tensor_travels(t, cfg->sync_bn_stats);
}

static size_t model_count(const selsync_config *cfg, const selsync_model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_tensors; i++)
        if (in_model(cfg, &m->tensors[i])) n += m->tensors[i].count;
    return n;
}

/* Checks what both sides need; sets *n (floats of the model). */
static selsync_status check_args(const selsync_config *cfg, const selsync_comm *comm, const selsync_model *m,
                                 int server, size_t *n, char *err, size_t len)
{
    if (!cfg || !comm || !comm->ops || !m || !m->tensors)
        return selsync_fail(err, len, SELSYNC_EINVAL, "[selsync] ssp: NULL argument");
    if (!comm->ops->send || !comm->ops->recv || !comm->ops->rank || !comm->ops->size || !comm->ops->bytes_sent)
        return selsync_fail(err, len, SELSYNC_EINVAL, "[selsync] ssp: the %s communicator has no point-to-point messages",
                   comm->ops->name ? comm->ops->name : "");
    int rank = comm->ops->rank(comm->ctx), world = comm->ops->size(comm->ctx);
    if (world < 2 || (server ? rank != 0 : rank < 1 || rank >= world))
        return selsync_fail(err, len, SELSYNC_EINVAL, "[selsync] ssp: rank %d of %d cannot be the %s", rank, world,
                   server ? "server (rank 0)" : "worker (ranks 1 and up)");
    if (!(*n = model_count(cfg, m)) || *n > SIZE_MAX / sizeof(float) / 2)
        return selsync_fail(err, len, SELSYNC_EINVAL, "[selsync] ssp: model of %zu floats", *n);
    return SELSYNC_OK;
}

/* buf = model (pack) or model op= buf (unpack: scale 0 copies, else adds buf * scale). */
static void pack(const selsync_config *cfg, const selsync_model *m, float *buf, int unpack, float scale)
{
    if (!unpack) {
        selsync_model_pack(m->tensors, m->n_tensors, cfg->sync_bn_stats, buf);
        return;
    }
    if (scale == 0) {
        selsync_model_unpack(m->tensors, m->n_tensors, cfg->sync_bn_stats, buf);
        return;
    }
    for (size_t i = 0, k = 0; i < m->n_tensors; i++) {
        const selsync_tensor *t = &m->tensors[i];
        if (!in_model(cfg, t)) continue;
        for (size_t j = 0; j < t->count; j++) t->param[j] += buf[k + j] * scale;
        k += t->count;
    }
}

/* ---- the server ---- */

enum { PULL_NONE, PULL_NEW, PULL_HELD };

typedef struct server {
    const selsync_config *cfg;
    const selsync_comm *comm;
    const selsync_model *model;
    FILE *trace;
    selsync_ssp_stats st;
    int workers, left;          /* left: workers not done */
    size_t n;
    float *buf;
    uint64_t *clock;
    uint8_t *done, *pull;       /* pull: PULL_NONE, PULL_NEW or PULL_HELD */
    double *since;              /* when the pull arrived */
    char *err;
    size_t errlen;
} server;

static selsync_status comm_err(server *s, selsync_status st, const char *what, int rank)
{
    return selsync_fail(s->err, s->errlen, st == SELSYNC_OK ? SELSYNC_ECOMM : st,
               "[selsync] ssp server: %s worker rank %d failed: %s", what, rank, selsync_status_str(st));
}

static uint64_t slowest(const server *s)
{
    uint64_t m = UINT64_MAX;
    for (int w = 0; w < s->workers; w++)
        if (!s->done[w] && s->clock[w] < m) m = s->clock[w];
    return m;
}

/* Answers every pending pull the bound allows. */
static selsync_status release(server *s)
{
    for (int w = 0; w < s->workers; w++) {
        uint64_t low = slowest(s), lead = s->clock[w] - low;
        int held = s->pull[w] == PULL_HELD;
        if (s->pull[w] == PULL_NONE || lead > (uint64_t)s->cfg->ssp_staleness) continue;
        selsync_ssp_header h = {s->clock[w], low, s->n, held ? selsync_now() - s->since[w] : 0.0};
        s->pull[w] = PULL_NONE;
        pack(s->cfg, s->model, s->buf, 0, 0);
        selsync_status st = s->comm->ops->send(s->comm->ctx, w + 1, SSP_TAG_REPLY, &h, HDR);
        if (st == SELSYNC_OK)
            st = s->comm->ops->send(s->comm->ctx, w + 1, SSP_TAG_DATA, s->buf, s->n * sizeof(float));
        if (st != SELSYNC_OK) return comm_err(s, st, "sending the model to", w + 1);
        s->st.pulls++;
        s->st.queued += held;
        s->st.t_wait += h.wait;
        if (lead > s->st.max_lead) s->st.max_lead = lead;
        if (s->trace)
            fprintf(s->trace, "%d\t%" PRIu64 "\t%" PRIu64 "\t%d\t%.6f\n", w + 1, h.clock, low, held, h.wait);
    }
    return SELSYNC_OK;
}

static selsync_status serve_loop(server *s)
{
    const selsync_comm_ops *ops = s->comm->ops;
    float inv = 1.0f / (float)s->workers;
    selsync_ssp_header h;
    selsync_msg got;
    selsync_status st;

    for (int started = 0; s->left > 0; started += started < s->workers) {
        /* start: each worker's PULL in turn, before any update is applied */
        int from = started < s->workers ? started + 1 : SELSYNC_ANY;
        if ((st = ops->recv(s->comm->ctx, from, SELSYNC_ANY, &h, HDR, &got)) != SELSYNC_OK)
            return selsync_fail(s->err, s->errlen, st, "[selsync] ssp server: receiving from the workers failed: %s",
                       selsync_status_str(st));
        int w = got.source - 1;
        const char *bad = got.source < 1 || got.source > s->workers ? "a message from a rank that is no worker"
                        : got.bytes != HDR ? "a message of the wrong size"
                        : (from == SELSYNC_ANY) != (got.tag != SSP_TAG_PULL)
                              ? (from == SELSYNC_ANY ? "a second PULL" : "a message before its PULL")
                        : s->done[w] ? "a message after DONE"
                        : s->pull[w] ? "a message while its pull is pending"
                        : got.tag == SSP_TAG_PULL ? (h.clock != 0 ? "PULL at a clock other than 0" : NULL)
                        : got.tag == SSP_TAG_PUSH ? (h.clock != s->clock[w] + 1 ? "PUSH out of order"
                                                     : h.count != s->n ? "PUSH of another model size" : NULL)
                        : got.tag == SSP_TAG_DONE ? (h.clock != s->clock[w] ? "DONE at another clock" : NULL)
                        : "an unknown tag";
        if (bad)
            return selsync_fail(s->err, s->errlen, SELSYNC_EMISMATCH, "[selsync] ssp server: rank %d sent %s (tag %d, "
                       "%zu bytes, clock %" PRIu64 "; its clock %" PRIu64 ")", got.source, bad, got.tag, got.bytes,
                       h.clock, w >= 0 && w < s->workers ? s->clock[w] : 0);
        s->st.bytes_received += got.bytes;
        if (got.tag == SSP_TAG_PUSH) {
            if ((st = ops->recv(s->comm->ctx, got.source, SSP_TAG_DATA, s->buf, s->n * sizeof(float), &got))
                    != SELSYNC_OK || got.bytes != s->n * sizeof(float))
                return comm_err(s, st, "receiving the update of", w + 1);
            s->st.bytes_received += got.bytes;
            pack(s->cfg, s->model, s->buf, 1, inv);
            s->clock[w] = h.clock;
            s->st.pushes++;
        }
        if (got.tag == SSP_TAG_DONE) {
            s->done[w] = 1;
            s->left--;
        } else {
            s->pull[w] = PULL_NEW;
            s->since[w] = selsync_now();
        }
        if ((st = release(s)) != SELSYNC_OK) return st;
        if (s->pull[w] == PULL_NEW) s->pull[w] = PULL_HELD;
    }
    return SELSYNC_OK;
}

selsync_status selsync_ssp_serve(const selsync_config *cfg, const selsync_comm *comm, const selsync_model *model,
                                 FILE *trace, selsync_ssp_stats *stats, char *err, size_t errlen)
{
    server s = {cfg, comm, model, trace, {0}, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, err, errlen};
    double t0 = selsync_now();
    uint64_t b0;
    selsync_status st;

    if (err && errlen) err[0] = '\0';
    if (stats) memset(stats, 0, sizeof *stats);
    if ((st = check_args(cfg, comm, model, 1, &s.n, err, errlen)) != SELSYNC_OK) return st;
    s.workers = s.left = comm->ops->size(comm->ctx) - 1;
    s.buf = malloc(s.n * sizeof *s.buf);
    s.clock = calloc((size_t)s.workers, sizeof *s.clock);
    s.done = calloc((size_t)s.workers, 1);
    s.pull = calloc((size_t)s.workers, 1);
    s.since = calloc((size_t)s.workers, sizeof *s.since);
    b0 = comm->ops->bytes_sent(comm->ctx);
    if (!s.buf || !s.clock || !s.done || !s.pull || !s.since)
        st = selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] ssp server: out of memory");
    else {
        if (trace) fputs("# rank\tclock\tslowest\tqueued\twait_s\n", trace);
        st = serve_loop(&s);
        if (trace && fflush(trace) != 0 && st == SELSYNC_OK)
            st = selsync_fail(err, errlen, SELSYNC_EIO, "[selsync] ssp server: writing the trace failed");
    }
    s.st.bytes_sent = comm->ops->bytes_sent(comm->ctx) - b0;
    s.st.t_serve = selsync_now() - t0;
    if (stats) *stats = s.st;
    free(s.buf);
    free(s.clock);
    free(s.done);
    free(s.pull);
    free(s.since);
    return st;
}

/* ---- a worker ---- */

struct selsync_ssp_worker {
    selsync_config cfg;
    selsync_comm comm;
    selsync_model model;
    size_t n;
    float *buf, *base;          /* base: the model of the last pull */
    uint64_t clock;
    int pulled, done, broken;
    char err[512];
};

selsync_status selsync_ssp_worker_create(const selsync_config *cfg, const selsync_comm *comm,
                                         const selsync_model *model, selsync_ssp_worker **out, char *err,
                                         size_t errlen)
{
    selsync_ssp_worker *w;
    size_t n = 0;
    selsync_status st;

    if (err && errlen) err[0] = '\0';
    if (!out) return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] ssp: NULL argument");
    *out = NULL;
    if ((st = check_args(cfg, comm, model, 0, &n, err, errlen)) != SELSYNC_OK) return st;
    if (!(w = calloc(1, sizeof *w)) || !(w->buf = malloc(n * sizeof *w->buf)) ||
        !(w->base = malloc(n * sizeof *w->base))) {
        selsync_ssp_worker_destroy(w);
        return selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] ssp: out of memory for a worker");
    }
    w->cfg = *cfg;
    w->comm = *comm;
    w->model = *model;
    w->n = n;
    *out = w;
    return SELSYNC_OK;
}

static selsync_status worker_fail(selsync_ssp_worker *w, selsync_status st, const char *what)
{
    w->broken = 1;
    return selsync_fail(w->err, sizeof w->err, st == SELSYNC_OK ? SELSYNC_EMISMATCH : st,
               "[selsync] ssp worker at clock %" PRIu64 ": %s: %s", w->clock, what,
               st == SELSYNC_OK ? "unexpected reply from the server" : selsync_status_str(st));
}

selsync_status selsync_ssp_sync(selsync_ssp_worker *w, selsync_ssp_exchange *x)
{
    const selsync_comm_ops *ops;
    selsync_ssp_header h = {0, 0, 0, 0};
    selsync_msg got;
    selsync_status st;
    size_t bytes;
    double t0 = selsync_now();
    int push;

    if (!w) return SELSYNC_EINVAL;
    if (w->broken) return SELSYNC_ECOMM; /* keep the first failure's message */
    if (w->done) return selsync_fail(w->err, sizeof w->err, SELSYNC_ESTATE, "[selsync] ssp worker: sync after done");
    ops = w->comm.ops;
    bytes = w->n * sizeof(float);
    push = w->pulled;
    if (push) { /* the update: parameters now minus those pulled last */
        pack(&w->cfg, &w->model, w->buf, 0, 0);
        for (size_t i = 0; i < w->n; i++) w->buf[i] -= w->base[i];
        h.clock = w->clock + 1;
        h.count = w->n;
    }
    st = ops->send(w->comm.ctx, 0, push ? SSP_TAG_PUSH : SSP_TAG_PULL, &h, HDR);
    if (st == SELSYNC_OK && push) st = ops->send(w->comm.ctx, 0, SSP_TAG_DATA, w->buf, bytes);
    if (st != SELSYNC_OK) return worker_fail(w, st, push ? "pushing the update" : "asking for the initial model");
    w->clock = h.clock;
    st = ops->recv(w->comm.ctx, 0, SSP_TAG_REPLY, &h, HDR, &got);
    if (st != SELSYNC_OK || got.bytes != HDR || h.count != w->n || h.clock != w->clock)
        return worker_fail(w, st, "waiting for the server's reply");
    st = ops->recv(w->comm.ctx, 0, SSP_TAG_DATA, w->buf, bytes, &got);
    if (st != SELSYNC_OK || got.bytes != bytes) return worker_fail(w, st, "receiving the model");
    pack(&w->cfg, &w->model, w->buf, 1, 0);
    memcpy(w->base, w->buf, bytes);
    w->pulled = 1;
    if (x) *x = (selsync_ssp_exchange){HDR + (push ? bytes : 0), HDR + bytes, h.wait, selsync_now() - t0};
    return SELSYNC_OK;
}

selsync_status selsync_ssp_done(selsync_ssp_worker *w)
{
    selsync_ssp_header h = {0, 0, 0, 0};
    selsync_status st;
    if (!w) return SELSYNC_EINVAL;
    if (w->broken) return SELSYNC_ECOMM;
    if (w->done) return SELSYNC_OK;
    h.clock = w->clock;
    if ((st = w->comm.ops->send(w->comm.ctx, 0, SSP_TAG_DONE, &h, HDR)) != SELSYNC_OK)
        return worker_fail(w, st, "telling the server it is done");
    w->done = 1;
    return SELSYNC_OK;
}

uint64_t selsync_ssp_clock(const selsync_ssp_worker *w)
{
    return w ? w->clock : 0;
}

const char *selsync_ssp_worker_error(const selsync_ssp_worker *w)
{
    return w ? w->err : "[selsync] no ssp worker (NULL)";
}

void selsync_ssp_worker_destroy(selsync_ssp_worker *w)
{
    if (!w) return;
    free(w->buf);
    free(w->base);
    free(w);
}
