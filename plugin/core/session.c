/* A training session (see selsync/session.h).
 *
 * The collectives of a session, in the order every rank issues them:
 *   load        the agreement on build, cfg and network (bcast(rank 0's
 *               record), any(differs); on a difference one bcast per rank),
 *               bcast(every tensor), bcast(checkpoint state length),
 *               bcast(state)
 *   begin       the agreement on the training list; (ssp workers: the
 *               engine's initial pull)
 *   each step   [injection: one bcast per sender]; [sync_batchnorm: one
 *               sum_f64 per normalised layer in the forward pass, one in
 *               the backward pass (selsync_session_bn_share)]; the engine's agreement
 *               and transfer; when due: the consensus sum and bcast(done)
 *               (evaluation), send/recv to rank 0 and bcast(done)
 *               (checkpoint)
 *   end         (ssp: the server's loop), the final average; with
 *               bn_recalibrate: bcast(rank 0's statistics), one sum_f64
 *               per normalised layer (the host's recalibrate); sum_f64
 *               (summary)
 * Rank 0 alone reads and writes files; the host's score runs on rank 0
 * between collectives, its save_model in rank 0's checkpoint writer
 * (session_checkpoint.c). */
#include "selsync/session.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "selsync/bnstats.h"
#include "selsync/partition.h"
#include "selsync/rng.h"
#include "selsync/vclock.h"

#include "agree.h"
#include "session_state.h"

/* The ranks that share the data: all, or with ssp the workers. */
static int parts(const selsync_session *s) { return s->world - s->ssp; }

/* selsync_agree over the session's ranks, its message the session's. */
static selsync_status session_agree(selsync_session *s, const char *const *what, int n, const agree_record *mine,
                                    const char *advice)
{
    return selsync_agree(&s->comm, s->cfg.file, what, n, mine, advice, s->err, sizeof s->err);
}

/* ---- the training chart (the console rank: 0, or with ssp the first worker) ---- */

/* A failed chart is a warning: training goes on without it. */
static void chart_failed(selsync_session *s, const char *why)
{
    session_say(s, "training chart: %s; training goes on without it", why);
    selsync_chart_destroy(s->chart);
    s->chart = NULL;
}

static void start_chart(selsync_session *s, const char *png, const selsync_chart_drawer *drawer)
{
    char title[600], err[1024];
    const char *base = strrchr(s->cfg.file, '/');
    if (s->cfg.chart_every == 0 || !png || !*png || s->rank != s->ssp) return;
    snprintf(title, sizeof title, "%s: %s, %d rank%s%s", base ? base + 1 : s->cfg.file,
             selsync_method_name(s->cfg.method), s->world, s->world == 1 ? "" : "s",
             s->ssp ? " (the first worker's steps)" : "");
    if (!drawer) {
        chart_failed(s, "the host draws no charts");
        return;
    }
    if (selsync_chart_create(png, title, drawer, &s->chart, err, sizeof err)) {
        chart_failed(s, err);
        return;
    }
    session_say(s, "training chart %s, redrawn every %d steps and after every evaluation", png, s->cfg.chart_every);
}

/* Draws in the background now (now), or only reaps a finished drawing. */
static void update_chart(selsync_session *s, int now)
{
    char err[1024];
    if (!s->chart) return;
    if (!now) selsync_chart_poll(s->chart);
    else if (selsync_chart_draw(s->chart, err, sizeof err)) chart_failed(s, err);
}

selsync_status selsync_session_create(const selsync_config *cfg, const selsync_comm *comm, const selsync_host *host,
                                      selsync_session **out, char *err, size_t errlen)
{
    selsync_session *s;
    *out = NULL;
    if (!cfg || !comm || !comm->ops || !host)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] session: NULL argument");
    if (comm->ops->version != SELSYNC_COMM_OPS_VERSION)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "[selsync] session: the communicator '%s' has a table of "
                            "version %d; this core reads version %d", comm->ops->name ? comm->ops->name : "?",
                            comm->ops->version, SELSYNC_COMM_OPS_VERSION);
    /* one process may still load any cfg (e.g. to evaluate); what needs
     * more ranks is checked when training starts */
    int world = selsync_comm_size(comm);
    selsync_status st = world > 1 ? selsync_config_check_world(cfg, world, err, errlen) : SELSYNC_OK;
    if (st) return st;
    if (!(s = calloc(1, sizeof *s))) return selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] out of memory");
    s->cfg = *cfg;
    s->comm = *comm;
    s->host = *host;
    s->rank = selsync_comm_rank(comm);
    s->world = selsync_comm_size(comm);
    s->ssp = cfg->method == SELSYNC_METHOD_SSP;
    s->evaluated = UINT64_MAX;
    *out = s;
    return SELSYNC_OK;
}

/* ---- load: one network, rank 0's weights and state everywhere ---- */

selsync_status selsync_session_load(selsync_session *s, const selsync_model *model, const selsync_identity *id,
                                    const char *weights, int required)
{
    static const char *const what[] = {"the build", "the cfg (its parsed sections)", "the network built from it"};
    const selsync_comm_ops *ops = s->comm.ops;
    selsync_status st;
    agree_record mine;
    char text[AGREE_VALUE];
    s->model = *model;
    snprintf(s->host_name, sizeof s->host_name, "%s", id->host ? id->host : "");
    agree_where(&mine, id->host, s->cfg.file);
    agree_copy_text(mine.value[0], AGREE_VALUE, id->build);
    snprintf(text, sizeof text, "hash %016" PRIx64, id->cfg_hash);
    agree_copy_text(mine.value[1], AGREE_VALUE, text);
    snprintf(text, sizeof text, "layout hash %016" PRIx64, id->layout_hash);
    agree_copy_text(mine.value[2], AGREE_VALUE, text);
    if ((st = session_agree(s, what, 3, &mine, "Every rank must run the same build of darknet with the same cfg.")))
        return st;
    if (s->world > 1) {
        for (size_t i = 0; i < model->n_tensors; ++i)
            if ((st = ops->bcast(s->comm.ctx, model->tensors[i].param, model->tensors[i].count * sizeof(float), 0)))
                return session_comm_failed(s, st, "sharing the initial weights");
    }
    return session_checkpoint_share(s, weights, required);
}

/* The engine, then the checkpoint's state; a virtual clock starts here,
 * as training time does. */
static selsync_status start_engine(selsync_session *s)
{
    selsync_status st = selsync_engine_create(&s->cfg, &s->comm, &s->model, &s->engine, s->err, sizeof s->err);
    if (!st) st = session_resume(s);
    if (!st) selsync_virtual_hold(&s->comm, 0);
    return st;
}

/* ---- begin: the partition and the injection plan ---- */

/* Rank 0: one line per training rank with its samples per class, to stderr
 * and every rank's metrics file. */
static selsync_status report_partition(selsync_session *s, const selsync_data *d)
{
    size_t cols = (size_t)d->classes + 1, *hist = calloc((size_t)parts(s) * cols, sizeof *hist);
    selsync_status st = SELSYNC_OK;
    char line[4096];
    if (!hist) return FAIL(s, SELSYNC_ENOMEM, "out of memory");
    st = selsync_partition_histogram(&s->cfg, d->labels, d->n, d->classes, parts(s), hist, s->err, sizeof s->err);
    for (int r = 0; r < parts(s) && !st; ++r) {
        size_t total = 0, len;
        for (size_t c = 0; c < cols; ++c) total += hist[r * cols + c];
        len = (size_t)snprintf(line, sizeof line, "partition %s rank %d: %zu samples;",
                               selsync_partition_name(s->cfg.partition), r + s->ssp, total);
        for (size_t c = 0; c < cols && len < sizeof line; ++c)
            if (hist[r * cols + c])
                len += (size_t)(c == (size_t)d->classes
                    ? snprintf(line + len, sizeof line - len, " none:%zu", hist[r * cols + c])
                    : snprintf(line + len, sizeof line - len, " %zu:%zu", c, hist[r * cols + c]));
        if (s->rank == 0) session_say(s, "%s", line);
        if ((st = selsync_engine_log_note(s->engine, line))) st = session_engine_failed(s, st);
    }
    free(hist);
    return st;
}

static selsync_status partition(selsync_session *s, const selsync_data *d, selsync_plan *plan)
{
    selsync_status st;
    if (!(s->order = malloc((d->n ? d->n : 1) * sizeof *s->order))) return FAIL(s, SELSYNC_ENOMEM, "out of memory");
    if (s->ssp && s->rank == 0) {
        for (size_t i = 0; i < d->n; ++i) s->order[i] = i;
        s->count = d->n;
    } else if ((st = selsync_partition_make(&s->cfg, d->labels, d->n, d->classes, parts(s), s->rank - s->ssp,
                                            s->order, &s->count, s->err, sizeof s->err))) {
        size_t used = strlen(s->err);
        snprintf(s->err + used, sizeof s->err - used, " (%zu training files, %d classes)", d->n, d->classes);
        return st;
    }
    plan->order = s->order;
    plan->count = s->count;
    plan->sequential = s->cfg.partition == SELSYNC_PARTITION_SELDP;
    return report_partition(s, d);
}

/* The samples this rank trains per step (s->batch): the host's, or after a
 * resume with resume_batch = global the global batch of the job that wrote
 * the checkpoint shared out in whole mini-batches. */
static selsync_status step_batch(selsync_session *s, const selsync_data *d)
{
    int mini = d->minibatch > 0 ? d->minibatch : d->batch, old = s->resumed_batch ? s->resumed_batch : d->batch;
    long long global = (long long)s->resumed_world * old;
    s->batch = d->batch;
    if (!s->resumed_world) return SELSYNC_OK;
    if (s->cfg.resume_batch == SELSYNC_RESUME_BATCH_GLOBAL) {
        if (global % s->world || global / s->world % mini || global / s->world > INT_MAX)
            return FAIL(s, SELSYNC_ECONFIG, "%s:%d: [selsync] resume_batch = global: the checkpoint's global batch "
                        "of %lld samples (%d ranks of %d) is not a whole number of mini-batches of %d samples (the "
                        "cfg's batch / subdivisions) on each of %d ranks; resume on a rank count that divides "
                        "%lld mini-batches, or set resume_batch = rank", s->cfg.file,
                        s->cfg.line[SELSYNC_KEY_RESUME_BATCH], global, s->resumed_world, old, mini, s->world,
                        global / mini);
        s->batch = (int)(global / s->world);
    }
    long long now = (long long)s->batch * s->world;
    if (s->rank == 0 && now == global && s->batch != d->batch)
        session_say(s, "each rank trains %d samples per step (%d mini-batches of %d): the checkpoint's global batch "
            "of %lld (resume_batch = global)", s->batch, s->batch / mini, mini, now);
    else if (s->rank == 0 && now != global)
        session_say(s, "each rank trains the cfg's %d samples per step: a global batch of %lld where the "
            "checkpoint's was %lld (resume_batch = rank; resume_batch = global keeps it)", s->batch, now, global);
    return SELSYNC_OK;
}

selsync_status selsync_session_begin(selsync_session *s, const selsync_data *d, selsync_plan *plan)
{
    selsync_status st;
    static const char *const what[] = {"the training list"};
    agree_record mine;
    char text[AGREE_VALUE];
    memset(plan, 0, sizeof *plan);
    plan->images = plan->batch = d->batch;
    plan->console = s->rank == s->ssp;
    plan->training_ranks = parts(s);
    if (s->ssp && d->max_steps == 0)
        return FAIL(s, SELSYNC_ECONFIG, "%s: [selsync] method = ssp needs max_batches > 0 in [net] (the workers "
                    "must finish)", s->cfg.file);
    agree_where(&mine, s->host_name, d->list_source ? d->list_source : s->cfg.file);
    snprintf(text, sizeof text, "%zu files, hash %016" PRIx64, d->n, d->list_hash);
    agree_copy_text(mine.value[0], AGREE_VALUE, text);
    if ((st = session_agree(s, what, 1, &mine, "Every rank must read the same training list (the same paths, in the same "
                    "order).")))
        return st;
    if (!s->engine && (st = start_engine(s))) return st;
    if ((st = step_batch(s, d))) return st;
    plan->images = plan->batch = s->batch;
    plan->resumed = s->resumed_world > 0;
    if (d->note && (st = selsync_engine_log_note(s->engine, d->note))) return session_engine_failed(s, st);
    if (s->cfg.eval_every > 0) {
        s->metric = d->metric;
        s->heldout = d->heldout;
    }
    if (s->cfg.checkpoint_every > 0) {
        if (!d->checkpoint || snprintf(s->checkpoint, sizeof s->checkpoint, "%s", d->checkpoint) >=
            (int)sizeof s->checkpoint)
            return FAIL(s, SELSYNC_EINVAL, "%s: [selsync] checkpoint_every: no checkpoint file, or its path is too "
                        "long", s->cfg.file);
        if (s->rank == 0) session_say(s, "checkpoint every %d steps to %s", s->cfg.checkpoint_every, s->checkpoint);
    }
    if (!s->chart) start_chart(s, d->chart, d->chart_drawer);
    /* this rank's key: the host derives its draws from it and the step, so
     * the same seed gives the same run, resumed or not */
    selsync_rng r = selsync_rng_stream(s->cfg.seed, (uint64_t)s->rank, 0x5eed);
    plan->seed = selsync_rng_next(&r);
    s->samples = d->n;
    if (d->n > 0 && (st = partition(s, d, plan))) return st;
    if (s->ssp && s->rank == 0) { /* the server: no loop; it serves at the end */
        plan->serve_only = 1;
        return SELSYNC_OK;
    }
    if ((st = session_speed_begin(s, d))) return st;
    if (s->cfg.inject_alpha > 0) {
        if ((st = selsync_inject_plan(&s->cfg, s->world, s->batch, &s->inject, s->err, sizeof s->err))) return st;
        if (!(s->senders = malloc((size_t)s->inject.senders * sizeof *s->senders)))
            return FAIL(s, SELSYNC_ENOMEM, "out of memory");
        plan->images = s->inject.own;
        s->requested = s->batches;
        if (s->rank == 0)
            session_say(s, "injection: each step %d of %d ranks share %d images each: a sender loads %d, every other rank "
                "%d, and every batch is completed to %d", s->inject.senders, s->world, s->inject.shared,
                s->inject.load, s->inject.own, s->inject.own + s->inject.senders * s->inject.shared);
    }
    return SELSYNC_OK;
}

/* ---- loads ---- */

/* 1 when this rank shares part of batch `index` (the same answer on every
 * rank); the senders in s->senders. */
static int sends(selsync_session *s, uint64_t index)
{
    selsync_inject_senders(s->cfg.seed, index, s->world, s->inject.senders, s->senders);
    for (int i = 0; i < s->inject.senders; ++i)
        if (s->senders[i] == s->rank) return 1;
    return 0;
}

void selsync_session_batch_requested(selsync_session *s, int *images)
{
    /* No load runs now, and every load so far belongs to a batch trained
     * by the time of the next checkpoint. */
    s->trained_sample = s->next_sample;
    if (s->inject.senders) *images = sends(s, s->requested++) ? s->inject.load : s->inject.own;
    session_speed_requested(s, images);
}

size_t selsync_session_next_sample(selsync_session *s)
{
    return s->count ? s->next_sample++ % s->count : 0;
}

int selsync_session_injects(const selsync_session *s) { return s->inject.senders > 0; }

/* The batch at BATCH_LOADED is the one requested before the latest request
 * (the trainer loads the next batch while it trains this one). */
selsync_status selsync_session_batch_loaded(selsync_session *s, const float *rows, int loaded, size_t row_len,
                                            float **full, int *full_rows)
{
    const selsync_inject_sizes *sz = &s->inject;
    int batch = sz->own + sz->senders * sz->shared;
    uint64_t bytes = 0;
    selsync_status st;
    *full = NULL;
    if (s->requested < 2)
        return FAIL(s, SELSYNC_ESTATE, "injection: the trainer did not report BATCH_REQUESTED before its loads");
    s->batches = s->requested - 1;
    int want = sends(s, s->batches - 1) ? sz->load : sz->own;
    if (loaded != want) /* the host's loader broke its contract: not a disagreement between ranks */
        return FAIL(s, SELSYNC_EINVAL, "injection: the loader gave %d images, expected %d", loaded, want);
    if (!(*full = malloc((size_t)batch * row_len * sizeof **full))) return FAIL(s, SELSYNC_ENOMEM, "out of memory");
    s->images_loaded += (uint64_t)loaded;
    s->loads++;
    if ((st = selsync_inject_exchange(&s->comm, sz, s->senders, rows, row_len, *full, &bytes))) {
        free(*full);
        *full = NULL;
        return session_comm_failed(s, st, "injection");
    }
    selsync_engine_note_injection(s->engine, bytes);
    *full_rows = batch;
    return SELSYNC_OK;
}

/* ---- steps, evaluations and checkpoints ---- */

selsync_status selsync_session_layer_ready(selsync_session *s, size_t layer)
{
    selsync_status st = s->engine ? selsync_engine_layer_ready(s->engine, layer) : SELSYNC_OK;
    return st ? session_engine_failed(s, st) : SELSYNC_OK;
}

selsync_status selsync_session_before_update(selsync_session *s, double loss, double learning_rate,
                                             const selsync_host_update *update)
{
    selsync_status st;
    if (!s->engine && s->ssp)
        return FAIL(s, SELSYNC_ESTATE, "%s: [selsync] method = ssp needs a trainer that reports TRAIN_BEGIN "
                    "(classifier train, detector train)", s->cfg.file);
    if (!s->engine && (st = start_engine(s))) return st;
    selsync_engine_note_host_update(s->engine, update);
    st = selsync_engine_before_update(s->engine, loss, learning_rate);
    return st ? session_engine_failed(s, st) : SELSYNC_OK;
}

int selsync_session_update_applied(const selsync_session *s)
{
    return s && selsync_engine_update_applied(s->engine);
}

/* Rank 0: scores params (NULL: its own) and records the row. */
static selsync_status record_evaluation(selsync_session *s, const float *params)
{
    float *own = NULL;
    if (!params) { /* pack the model's own parameters */
        size_t n = 0;
        for (size_t i = 0; i < s->model.n_tensors; ++i) n += s->model.tensors[i].count;
        if (!(own = malloc((n ? n : 1) * sizeof *own))) return FAIL(s, SELSYNC_ENOMEM, "out of memory");
        selsync_model_pack(s->model.tensors, s->model.n_tensors, 1, own);
        params = own;
    }
    double t0 = selsync_now(), score = s->host.score(s->host.user, params), took = selsync_now() - t0;
    free(own);
    if (isnan(score)) return FAIL(s, SELSYNC_EIO, "evaluation failed");
    const char *what = strcmp(s->metric, "top1") ? "mAP@0.5" : "top-1";
    if (s->ssp) { /* the server has no steps of its own */
        session_say(s, "final model: %s %.4f on %zu held-out images", what, score, s->heldout);
        return SELSYNC_OK;
    }
    session_say(s, "step %llu: %s %.4f on %zu held-out images (%.2f s, not counted as training)",
        (unsigned long long)selsync_session_steps(s), what, score, s->heldout, took);
    if (s->chart)
        selsync_chart_add_eval(s->chart, selsync_session_steps(s), selsync_engine_train_seconds(s->engine), s->metric,
                               score);
    selsync_status st = selsync_engine_log_eval(s->engine, s->metric, score, took);
    return st ? session_engine_failed(s, st) : SELSYNC_OK;
}

/* Every eval_every steps (all ranks): rank 0 scores the mean of the ranks'
 * parameters; the others wait, and the time counts as no one's training. */
static selsync_status evaluate(selsync_session *s, uint64_t steps)
{
    selsync_status st = SELSYNC_OK;
    selsync_virtual_hold(&s->comm, 1);
    const float *mean = selsync_engine_consensus(s->engine);
    uint8_t done = 1;
    if (!mean) return session_engine_failed(s, SELSYNC_ECOMM);
    if (s->rank == 0) st = record_evaluation(s, mean);
    if (st) return st;
    if ((st = s->comm.ops->bcast(s->comm.ctx, &done, 1, 0))) return session_comm_failed(s, st, "evaluation");
    s->evaluated = steps;
    session_training_resumes(s);
    return SELSYNC_OK;
}

selsync_status selsync_session_after_update(selsync_session *s)
{
    selsync_status st;
    if ((st = selsync_engine_after_update(s->engine))) return session_engine_failed(s, st);
    uint64_t steps = selsync_session_steps(s);
    if ((st = session_speed_step(s, steps))) return st;
    if (s->chart) {
        const selsync_step *x = selsync_engine_last_step(s->engine);
        selsync_totals t;
        selsync_engine_get_totals(s->engine, &t);
        selsync_chart_add_step(s->chart, x->step, selsync_engine_train_seconds(s->engine), x->loss,
                               x->decision == SELSYNC_SYNC_STEP, t.bytes_sent);
    }
    if (s->cfg.checkpoint_every > 0 && steps % (uint64_t)s->cfg.checkpoint_every == 0 &&
        (st = session_checkpoint(s, steps)))
        return st;
    int evaluating = s->metric && !s->ssp && steps % (uint64_t)s->cfg.eval_every == 0;
    if (evaluating && (st = evaluate(s, steps))) return st;
    update_chart(s, evaluating || steps % (uint64_t)(s->cfg.chart_every ? s->cfg.chart_every : 1) == 0);
    return SELSYNC_OK;
}

/* ---- the end ---- */

/* " (Rx<what>)" for the ratio num / den of two byte counts, or "" when
 * either is 0: one rank (bsp sends nothing), or a run that sent nothing. */
static const char *times(char *buf, size_t len, double num, double den, const char *what)
{
    if (num > 0 && den > 0) snprintf(buf, len, " (%.2fx%s)", num / den, what);
    else if (len) buf[0] = '\0';
    return buf;
}

/* The summary: means over the training ranks (ssp: the workers). */
static selsync_status summary(selsync_session *s, FILE *out)
{
    selsync_totals t;
    selsync_status st;
    selsync_vclock vc = {0};
    char ratio[48];
    int virtual = selsync_virtual_clock(&s->comm, &vc);
    selsync_engine_get_totals(s->engine, &t);
    double v[18] = {(double)t.bytes_sent, (double)t.bsp_bytes, t.t_compute, t.t_measure,
                    t.t_agree, t.t_transfer, (double)t.steps, (double)t.inject_bytes,
                    (double)s->images_loaded, (double)s->loads, vc.now, vc.compute, vc.wait, vc.network,
                    vc.paused, (double)vc.pauses, (double)s->bn_sums, s->bn_seconds};
    if (s->ssp && s->rank == 0) memset(v, 0, sizeof v);
    const size_t nv = sizeof v / sizeof v[0];
    if ((st = s->comm.ops->sum_f64(s->comm.ctx, v, nv))) return session_comm_failed(s, st, "gathering the summary");
    if (s->rank != 0) return SELSYNC_OK;
    for (size_t i = 0; i < nv; ++i) v[i] /= parts(s);
    double comm = v[3] + v[4] + v[5], share = v[2] + comm > 0 ? 100.0 * comm / (v[2] + comm) : 0.0;
    if (s->ssp) {
        const selsync_ssp_stats *x = &s->served;
        fprintf(out,
                "selsync: summary: method=ssp, %d ranks (server + %d worker%s), staleness %d, %.0f steps per worker\n"
                "selsync: summary: pushed and pulled %.2f MB per worker vs %.2f MB sent for bsp%s\n"
                "selsync: summary: time per worker: compute %.2f s, measure %.3f s, blocked (agree) %.3f s, "
                "transfer %.3f s (communication %.1f%%)\n"
                "selsync: summary: server: %llu updates applied, %llu pulls answered, %llu held by the bound "
                "(%.3f s), largest lead %llu, %.2f MB sent\n",
                s->world, s->world - 1, s->world == 2 ? "" : "s", s->cfg.ssp_staleness, v[6], v[0] / 1e6,
                v[1] / 1e6, times(ratio, sizeof ratio, v[0], v[1], ""), v[2], v[3], v[4], v[5], share,
                (unsigned long long)x->pushes, (unsigned long long)x->pulls, (unsigned long long)x->queued,
                x->t_wait, (unsigned long long)x->max_lead, (double)x->bytes_sent / 1e6);
    } else {
        fprintf(out,
                "selsync: summary: method=%s, %d rank%s, %llu steps, %llu synchronised (%.1f%%)\n"
                "selsync: summary: model synchronisation sent %.2f MB per rank; bsp would have sent %.2f MB%s\n",
                selsync_method_name(s->cfg.method), s->world, s->world == 1 ? "" : "s", (unsigned long long)t.steps,
                (unsigned long long)t.synced_steps, t.steps ? 100.0 * t.synced_steps / t.steps : 0.0, v[0] / 1e6,
                v[1] / 1e6, times(ratio, sizeof ratio, v[1], v[0], " as much"));
        if (v[7] > 0)
            fprintf(out, "selsync: summary: data injection sent %.2f MB per rank; each rank loaded %.2f own images "
                    "per step on average, its batches completed to %d\n", v[7] / 1e6, v[9] > 0 ? v[8] / v[9] : 0.0,
                    s->inject.own + s->inject.senders * s->inject.shared);
        fprintf(out, "selsync: summary: time per rank: compute %.2f s, measure %.3f s, agree %.3f s, transfer %.3f s "
                "(communication %.1f%%)\n", v[2], v[3], v[4], v[5], share);
        if (t.buckets)
            fprintf(out, "selsync: summary: gradients averaged in %llu buckets of %g MB, %.1f%% of them started during "
                    "the backward pass (overlap = %d; transfer is the time the updates waited)\n",
                    (unsigned long long)t.buckets, s->cfg.bucket_mb, 100.0 * (double)t.buckets_early / (double)t.buckets,
                    s->cfg.overlap);
        if (t.late_averages)
            fprintf(out, "selsync: summary: %llu parameter averages ran while the next step computed and were applied "
                    "one step late (overlap = 1; transfer is the time the next update waited)\n",
                    (unsigned long long)t.late_averages);
    }
    if (v[16] > 0)
        fprintf(out, "selsync: summary: synchronised BatchNorm: %.0f sums per rank (%.1f per step), %.3f s per rank "
                "in them, waiting included (part of compute above; their bytes part of the synchronisation's)\n",
                v[16], v[6] > 0 ? v[16] / v[6] : 0.0, v[17]);
    session_speed_summary(s, out);
    if (s->checkpoints)
        fprintf(out, "selsync: summary: %llu checkpoint%s written beside training; training stood still %.3f s for "
                "%s (%.3f s each: the ranks' states gathered on rank 0)\n", (unsigned long long)s->checkpoints,
                s->checkpoints == 1 ? "" : "s", s->checkpoint_wait, s->checkpoints == 1 ? "it" : "them",
                s->checkpoint_wait / (double)s->checkpoints);
    if (virtual)
        fprintf(out, "selsync: summary: virtual time per %s: %.3f s (compute %.3f s, waiting for other ranks "
                "%.3f s, network %.3f s)\n", s->ssp ? "worker" : "rank", v[10], v[11] + v[14], v[12], v[13]);
    if (virtual && v[15] > 0)
        fprintf(out, "selsync: summary: virtual pauses (jitter) per %s: %.1f, %.3f s of the compute above\n",
                s->ssp ? "worker" : "rank", v[15], v[14]);
    return SELSYNC_OK;
}

selsync_status selsync_session_bn_combine(selsync_session *s, size_t channels, const float *shift, double *acc,
                                          int unbiased, float *mean, float *variance)
{
    selsync_status st = s->comm.ops->sum_f64(s->comm.ctx, acc, 3 * channels);
    if (st) return session_comm_failed(s, st, "BatchNorm recalibration");
    selsync_bn_finish(acc, channels, shift, unbiased, mean, variance);
    return SELSYNC_OK;
}

selsync_status selsync_session_bn_share(selsync_session *s, int gradient, size_t channels, size_t count, float *a,
                                        float *b)
{
    size_t n = gradient ? 1 + 2 * channels : 3 * channels;
    if (n > s->bn_cap) {
        double *grown = realloc(s->bn_buf, n * sizeof *grown);
        if (!grown) return FAIL(s, SELSYNC_ENOMEM, "out of memory for the synchronised BatchNorm's sums");
        s->bn_buf = grown;
        s->bn_cap = n;
    }
    if (gradient) {
        selsync_bn_gradient_pack(s->bn_buf, channels, count, a, b);
    } else {
        memset(s->bn_buf, 0, n * sizeof *s->bn_buf);
        selsync_bn_accumulate_moments(s->bn_buf, channels, count, a, b);
    }
    double t0 = selsync_now();
    selsync_status st = s->comm.ops->sum_f64(s->comm.ctx, s->bn_buf, n);
    s->bn_seconds += selsync_now() - t0;
    s->bn_sums++;
    if (st) return session_comm_failed(s, st, "synchronised BatchNorm");
    if (gradient)
        selsync_bn_gradient_unpack(s->bn_buf, channels, count, a, b);
    else
        selsync_bn_finish(s->bn_buf, channels, NULL, 1, a, b);
    return SELSYNC_OK;
}

/* After the final average (the virtual clock held), every rank: rank 0's
 * BatchNorm statistics to all (so every rank shifts its sums by the same
 * means), then the host re-estimates them layer by layer over every rank's
 * samples. Not training time. */
static selsync_status recalibrate(selsync_session *s)
{
    size_t n = 0, k = 0;
    selsync_status st;
    double t0 = selsync_now();
    for (size_t i = 0; i < s->model.n_tensors; ++i)
        if (s->model.tensors[i].kind == SELSYNC_TENSOR_STAT) n += s->model.tensors[i].count;
    float *stats = malloc((n ? n : 1) * sizeof *stats);
    if (!stats) return FAIL(s, SELSYNC_ENOMEM, "out of memory for the BatchNorm statistics");
    for (size_t i = 0; i < s->model.n_tensors; ++i)
        if (s->model.tensors[i].kind == SELSYNC_TENSOR_STAT) {
            memcpy(stats + k, s->model.tensors[i].param, s->model.tensors[i].count * sizeof *stats);
            k += s->model.tensors[i].count;
        }
    st = n ? s->comm.ops->bcast(s->comm.ctx, stats, n * sizeof *stats, 0) : SELSYNC_OK;
    for (size_t i = k = 0; !st && i < s->model.n_tensors; ++i)
        if (s->model.tensors[i].kind == SELSYNC_TENSOR_STAT) {
            memcpy(s->model.tensors[i].param, stats + k, s->model.tensors[i].count * sizeof *stats);
            k += s->model.tensors[i].count;
        }
    free(stats);
    if (st) return session_comm_failed(s, st, "BatchNorm recalibration");
    s->err[0] = '\0';
    if (s->host.recalibrate(s->host.user, s, (size_t)s->cfg.bn_recalibrate))
        return s->err[0] ? SELSYNC_ECOMM : FAIL(s, SELSYNC_EIO, "BatchNorm recalibration failed");
    if (s->rank == 0)
        session_say(s, "BatchNorm statistics of the final model re-estimated on up to %d training samples per rank "
            "(%.2f s, not counted as training)", s->cfg.bn_recalibrate, selsync_now() - t0);
    selsync_engine_exclude_time(s->engine);
    return SELSYNC_OK;
}

selsync_status selsync_session_end(selsync_session *s, FILE *out)
{
    selsync_status st;
    if (!s->engine) return SELSYNC_OK;
    if (s->ssp && s->rank == 0) {
        const char *path = getenv("SELSYNC_SSP_TRACE");
        FILE *trace = path && *path ? fopen(path, "w") : NULL;
        if (path && *path && !trace) return FAIL(s, SELSYNC_EIO, "SELSYNC_SSP_TRACE=%s: cannot write it", path);
        session_say(s, "ssp: rank 0 serves %d workers (ranks 1-%d), staleness bound %d", s->world - 1, s->world - 1,
            s->cfg.ssp_staleness);
        if ((st = selsync_engine_serve(s->engine, trace, &s->served))) st = session_engine_failed(s, st);
        if (trace && fclose(trace) && !st) st = FAIL(s, SELSYNC_EIO, "SELSYNC_SSP_TRACE=%s: write failed", path);
        if (st) return st;
    }
    if (s->rank == 0 && (st = session_writer_done(s))) return st; /* the last checkpoint is whole when the job ends */
    if (selsync_engine_finish(s->engine))
        return FAIL(s, SELSYNC_ECOMM, "final average: %s", selsync_engine_error(s->engine));
    selsync_virtual_hold(&s->comm, 1); /* training ends with the final average */
    int recalibrated = s->cfg.bn_recalibrate > 0 && s->host.recalibrate && s->samples > 0;
    if (recalibrated && (st = recalibrate(s))) return st;
    uint64_t steps = selsync_session_steps(s);
    if (s->metric && s->rank == 0 && (s->ssp || recalibrated || s->evaluated != steps) &&
        (st = record_evaluation(s, NULL)))
        return st;
    if (s->chart) {
        char err[1024];
        if (selsync_chart_finish(s->chart, err, sizeof err)) chart_failed(s, err);
    }
    return summary(s, out);
}

void selsync_session_describe_step(const selsync_session *s, char *buf, size_t len)
{
    const selsync_step *x = s->engine ? selsync_engine_last_step(s->engine) : NULL;
    selsync_totals t;
    if (!len) return;
    buf[0] = '\0';
    if (!x || s->rank != s->ssp) return; /* the console: rank 0, or with ssp the first worker */
    selsync_engine_get_totals(s->engine, &t);
    if (s->ssp) {
        snprintf(buf, len, " | ssp, blocked %.3f s (%.2f s in all)", x->t_agree, t.t_agree);
        return;
    }
    snprintf(buf, len, " | %-5s, synced %llu/%llu (%.1f%%)", selsync_decision_name(x->decision),
             (unsigned long long)t.synced_steps, (unsigned long long)t.steps,
             t.steps ? 100.0 * t.synced_steps / t.steps : 0.0);
}

uint64_t selsync_session_steps(const selsync_session *s)
{
    return s->engine ? selsync_engine_steps(s->engine) : 0;
}

const char *selsync_session_error(const selsync_session *s) { return s ? s->err : "[selsync] no session"; }

void selsync_session_abort(selsync_session *s)
{
    selsync_comm_abort(&s->comm, 1, s->err);
}

void selsync_session_destroy(selsync_session *s)
{
    if (!s) return;
    if (s->writer > 0) waitpid(s->writer, NULL, 0);
    selsync_chart_destroy(s->chart);
    selsync_engine_destroy(s->engine);
    free(s->order);
    free(s->senders);
    free(s->resume);
    free(s->bn_buf);
    free(s->speed.shares);
    free(s->speed.speeds);
    free(s);
}
