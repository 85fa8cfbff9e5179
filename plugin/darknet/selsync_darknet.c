/* The Darknet adapter: the only plugin code that includes darknet.h.
 *
 * It implements Darknet's plugin entry points (darknet_plugin_init/_fini):
 * init starts the transport (MPI under an MPI launcher, one process
 * otherwise) and registers the handler of [selsync] cfg sections. A network
 * with such a section gets this adapter as its event hook:
 *
 *   NETWORK_LOADED  check that every rank built the same layout, then give
 *                   every rank rank 0's weights
 *   TRAIN_BEGIN     create the engine, keep this rank's part of the training
 *                   list (cfg partition), seed this rank's sampling, size the
 *                   loader threads and, with injection, the images loaded;
 *                   method ssp on rank 0: end the trainer's loop at once
 *                   (*net->seen), so that TRAIN_END follows
 *   BATCH_LOADED    data injection: complete the batch with shared samples
 *   BEFORE_UPDATE / AFTER_UPDATE   the engine's step
 *   ITERATION_PRINTED   append the decision and sync fraction (rank 0)
 *   TRAIN_END       final average and summary; method ssp on rank 0: first
 *                   serve the workers until they are done (inside the
 *                   trainer, whose loader thread writes into its frame)
 *   BEFORE_SAVE     only rank 0 writes weights
 *
 * Method ssp: rank 0 is the parameter server (its network holds the global
 * model, which it saves), ranks 1.. are the workers and split the data;
 * the first worker's stdout is the console during training. The server
 * writes one line per answered pull to $SELSYNC_SSP_TRACE when set.
 *
 * A failure is fatal for the whole job: the message goes to stderr and the
 * transport aborts every rank (one process: this process exits non-zero). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "darknet.h"
#include "comm_mpi.h"
#include "selsync/config.h"
#include "selsync/engine.h"
#include "selsync/inject.h"
#include "selsync/map.h"
#include "selsync/partition.h"
#include "selsync/rng.h"
#include "selsync/ssp.h"

#define SECTION "[selsync]"

/* A network that has a [selsync] section. */
typedef struct attachment {
    struct adapter *ad;
    network *net;
    selsync_config cfg;
    selsync_tensor *tensors;     /* views of the network's arrays */
    size_t n_tensors;
    selsync_engine *engine;      /* from the first training step on */
    selsync_inject_sizes inject; /* inject.senders == 0: no injection */
    uint64_t batches;            /* batches loaded so far (injection steps) */
    size_t next_path;            /* seldp: position of the sequential walk */
    int ssp;                     /* method ssp: rank 0 serves, the others work */
    selsync_ssp_stats served;    /* ssp, rank 0: the server's figures */
    struct attachment *next;
} attachment;

typedef struct adapter {
    selsync_comm comm;
    int rank, world;
    int console;                 /* ranks > 0: the stdout they silenced, or -1 */
    attachment *attached;
} adapter;

static adapter *the_adapter; /* set by darknet_plugin_init, for _fini */

static void report(const adapter *ad, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (ad && ad->world > 1) fprintf(stderr, "selsync: rank %d: ", ad->rank);
    else fprintf(stderr, "selsync: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Ends the job: the transport aborts every rank; with one process it
 * returns and this process exits. */
static void fatal(adapter *ad, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ad->comm.ops->abort(ad->comm.ctx, EXIT_FAILURE, msg);
    exit(EXIT_FAILURE);
}

/* --- the network as tensors ------------------------------------------------ */

static int add_tensor(attachment *a, size_t cap, float *param, float *grad,
                      size_t count, size_t layer, selsync_tensor_kind kind)
{
    if (!param || count == 0) return 0;
    if (a->n_tensors == cap) return -1;
    a->tensors[a->n_tensors++] = (selsync_tensor){param, grad, count, layer, kind};
    return 0;
}

/* The trained arrays of one updatable layer (or sublayer), and its BN
 * running statistics. */
static int add_layer_tensors(attachment *a, size_t cap, const layer *l, size_t index)
{
    if (!l) return 0;
    size_t nw = 0, nb = (size_t)l->outputs;
    switch (l->type) {
    case CONVOLUTIONAL:
    case DECONVOLUTIONAL:
        nw = (size_t)l->nweights;
        nb = (size_t)l->n;
        break;
    case CONNECTED:
        nw = (size_t)l->inputs * l->outputs;
        break;
    case LOCAL:
        nw = (size_t)l->size * l->size * l->c * l->n * l->out_w * l->out_h;
        break;
    case RNN:
    case CRNN: {
        const layer *sub[] = {l->input_layer, l->self_layer, l->output_layer};
        for (size_t i = 0; i < 3; ++i)
            if (add_layer_tensors(a, cap, sub[i], index)) return -1;
        return 0;
    }
    case GRU: {
        const layer *sub[] = {l->uz, l->wz, l->ur, l->wr, l->uh, l->wh};
        for (size_t i = 0; i < 6; ++i)
            if (add_layer_tensors(a, cap, sub[i], index)) return -1;
        return 0;
    }
    case LSTM: {
        const layer *sub[] = {l->wf, l->wi, l->wg, l->wo, l->uf, l->ui, l->ug, l->uo};
        for (size_t i = 0; i < 8; ++i)
            if (add_layer_tensors(a, cap, sub[i], index)) return -1;
        return 0;
    }
    default:
        return 0;
    }
    int rc = add_tensor(a, cap, l->weights, l->weight_updates, nw, index, SELSYNC_TENSOR_TRAINED);
    rc |= add_tensor(a, cap, l->biases, l->bias_updates, nb, index, SELSYNC_TENSOR_TRAINED);
    if (l->scale_updates)
        rc |= add_tensor(a, cap, l->scales, l->scale_updates, nb, index, SELSYNC_TENSOR_TRAINED);
    rc |= add_tensor(a, cap, l->rolling_mean, NULL, nb, index, SELSYNC_TENSOR_STAT);
    rc |= add_tensor(a, cap, l->rolling_variance, NULL, nb, index, SELSYNC_TENSOR_STAT);
    return rc;
}

static int map_network(attachment *a)
{
    size_t cap = 64 + 40 * (size_t)a->net->n;
    a->tensors = calloc(cap, sizeof *a->tensors);
    if (!a->tensors) return -1;
    for (int i = 0; i < a->net->n; ++i)
        if (a->net->layers[i].update && add_layer_tensors(a, cap, &a->net->layers[i], (size_t)i))
            return -1;
    return 0;
}

/* FNV-1a over the layout: layer types and every tensor's size and kind. */
static uint64_t layout_hash(const attachment *a)
{
    uint64_t h = 1469598103934665603ULL;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ULL)
    MIX(a->net->n);
    for (int i = 0; i < a->net->n; ++i) MIX(a->net->layers[i].type);
    for (size_t i = 0; i < a->n_tensors; ++i) {
        MIX(a->tensors[i].count);
        MIX(a->tensors[i].layer);
        MIX(a->tensors[i].kind);
    }
#undef MIX
    return h;
}

/* --- events ---------------------------------------------------------------- */

static void on_loaded(attachment *a)
{
    adapter *ad = a->ad;
    if (ad->world == 1) return;
    const selsync_comm_ops *ops = ad->comm.ops;
    uint64_t mine = layout_hash(a), root = mine;
    uint8_t differs;
    if (ops->bcast(ad->comm.ctx, &root, sizeof root, 0)) goto comm_failed;
    differs = root != mine;
    if (ops->any(ad->comm.ctx, &differs, 1)) goto comm_failed;
    if (differs) {
        if (root != mine)
            fatal(ad, "%s: the network built from this cfg differs from rank 0's "
                  "(layers or sizes); every rank must train the same network", a->cfg.file);
        fatal(ad, "%s: another rank built a different network from its cfg", a->cfg.file);
    }
    for (size_t i = 0; i < a->n_tensors; ++i)
        if (ops->bcast(ad->comm.ctx, a->tensors[i].param, a->tensors[i].count * sizeof(float), 0))
            goto comm_failed;
    return;
comm_failed:
    fatal(ad, "could not share the initial weights: %s", selsync_mpi_last_error());
}

static void start_engine(attachment *a)
{
    char err[1024];
    selsync_model model = {a->tensors, a->n_tensors, (size_t)a->net->n, 1};
    if (selsync_create(&a->cfg, &a->ad->comm, &model, &a->engine, err, sizeof err))
        fatal(a->ad, "%s", err);
}

/* The label file of a detection image, found as Darknet finds it; -1 when
 * the path is too long. */
static int label_path_of(const char *path, char *out, size_t size)
{
    if (strlen(path) >= size / 2) return -1;
    find_replace((char *)path, "images", "labels", out);
    find_replace(out, "JPEGImages", "labels", out);
    find_replace(out, "raw", "labels", out);
    const char *ext[] = {".jpg", ".png", ".JPG", ".JPEG"};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; ++i)
        find_replace(out, (char *)ext[i], ".txt", out);
    return 0;
}

/* The class of a training file: the first label string found in its path
 * (classifier), or the most frequent class in its label file (detector,
 * the label file found as Darknet finds it); -1 when there is none. */
static int class_of(const char *path, char **labels, int classes)
{
    if (labels) {
        for (int i = 0; i < classes; ++i)
            if (strstr(path, labels[i])) return i;
        return -1;
    }
    char label_path[4096];
    if (label_path_of(path, label_path, sizeof label_path)) return -1;
    FILE *f = fopen(label_path, "r");
    if (!f) return -1;
    int count[256] = {0}, id, best = -1;
    float x, y, w, h;
    while (fscanf(f, "%d %f %f %f %f", &id, &x, &y, &w, &h) == 5)
        if (id >= 0 && id < classes && id < 256 && ++count[id] > (best < 0 ? 0 : count[best]))
            best = id;
    fclose(f);
    return best;
}

/* The ranks that share the data: all, or with ssp the workers (rank r is
 * part r - 1 of world - 1). */
static int parts(const attachment *a) { return a->ad->world - a->ssp; }

/* Rank 0: one line per training rank with its samples per class, to stderr
 * and the metrics file. */
static void report_partition(attachment *a, const int *labels, size_t n, int classes)
{
    adapter *ad = a->ad;
    size_t cols = (size_t)classes + 1;
    size_t *hist = calloc((size_t)parts(a) * cols, sizeof *hist);
    char err[512], line[4096];
    if (!hist) fatal(ad, "out of memory");
    if (selsync_partition_histogram(&a->cfg, labels, n, classes, parts(a), hist, err, sizeof err))
        fatal(ad, "%s", err);
    for (int r = 0; r < parts(a); ++r) {
        size_t total = 0, len = 0;
        for (size_t c = 0; c < cols; ++c) total += hist[r * cols + c];
        len += (size_t)snprintf(line, sizeof line, "partition %s rank %d: %zu samples;",
                                a->cfg.partition == SELSYNC_PARTITION_IID ? "iid"
                                : a->cfg.partition == SELSYNC_PARTITION_SELDP ? "seldp"
                                : a->cfg.partition == SELSYNC_PARTITION_LABEL ? "label"
                                : "dirichlet", r + a->ssp, total);
        for (size_t c = 0; c < cols && len < sizeof line; ++c)
            if (hist[r * cols + c])
                len += (size_t)snprintf(line + len, sizeof line - len, c == (size_t)classes
                                        ? " none:%zu" : " %zu:%zu", c == (size_t)classes
                                        ? hist[r * cols + c] : c, hist[r * cols + c]);
        if (ad->rank == 0) report(ad, "%s", line);
        if (selsync_log_note(a->engine, line)) fatal(ad, "%s", selsync_engine_error(a->engine));
    }
    free(hist);
}

/* seldp: the loaders read this rank's list in order, chunk after chunk. */
static int next_in_order(int m, void *user)
{
    attachment *a = user;
    return (int)(a->next_path++ % (size_t)m);
}

/* Keeps this rank's part of the training list first in paths (in reading
 * order) and narrows the plan to it; the ssp server only reports. */
static void partition_paths(attachment *a, train_plan *plan)
{
    adapter *ad = a->ad;
    size_t n = (size_t)plan->n, count = 0;
    char err[512];
    int *labels = malloc(n * sizeof *labels);
    size_t *shard = malloc(n * sizeof *shard);
    char **copy = malloc(n * sizeof *copy);
    uint8_t *taken = calloc(n, 1);
    if (!labels || !shard || !copy || !taken) fatal(ad, "out of memory");
    for (size_t i = 0; i < n; ++i) labels[i] = class_of(plan->paths[i], plan->labels, plan->classes);
    if (a->ssp && ad->rank == 0) count = n;
    else if (selsync_partition_make(&a->cfg, labels, n, plan->classes, parts(a), ad->rank - a->ssp, shard,
                                    &count, err, sizeof err))
        fatal(ad, "%s (%zu training files, %d classes)", err, n, plan->classes);
    report_partition(a, labels, n, plan->classes);
    if (a->ssp && ad->rank == 0) goto out;
    /* this rank's part first, then the rest, so paths still holds them all */
    size_t k = 0;
    for (size_t i = 0; i < count; ++i) {
        copy[k++] = plan->paths[shard[i]];
        taken[shard[i]] = 1;
    }
    for (size_t i = 0; i < n; ++i)
        if (!taken[i]) copy[k++] = plan->paths[i];
    memcpy(plan->paths, copy, n * sizeof *copy);
    plan->n = (int)count;
    if (a->cfg.partition == SELSYNC_PARTITION_SELDP) set_path_sampler(next_in_order, a);
out:
    free(taken);
    free(copy);
    free(shard);
    free(labels);
}

/* ssp, rank 0, at TRAIN_END: serves until every worker is done; the network
 * then holds the global model, which the trainer saves. */
static void serve(attachment *a)
{
    adapter *ad = a->ad;
    const char *path = getenv("SELSYNC_SSP_TRACE");
    FILE *trace = path && *path ? fopen(path, "w") : NULL;
    if (path && *path && !trace) fatal(ad, "SELSYNC_SSP_TRACE=%s: %s", path, strerror(errno));
    report(ad, "ssp: rank 0 serves %d workers (ranks 1-%d), staleness bound %d", ad->world - 1,
           ad->world - 1, a->cfg.ssp_staleness);
    if (selsync_serve(a->engine, trace, &a->served)) fatal(ad, "%s", selsync_engine_error(a->engine));
    if (trace && fclose(trace)) fatal(ad, "SELSYNC_SSP_TRACE=%s: %s", path, strerror(errno));
}

static void on_train_begin(attachment *a, train_plan *plan)
{
    adapter *ad = a->ad;
    char err[512];
    if (a->ssp && a->net->max_batches <= 0)
        fatal(ad, "%s: [selsync] method = ssp needs max_batches > 0 in [net] (the workers must finish)",
              a->cfg.file);
    if (a->ssp && ad->rank == 1 && ad->console >= 0) { /* the first worker shows the iterations */
        fflush(stdout);
        if (dup2(ad->console, STDOUT_FILENO) < 0) report(ad, "could not restore stdout");
    }
    if (!a->engine) start_engine(a);
    /* this rank's sampling: the same seed gives the same run */
    selsync_rng r = selsync_rng_stream(a->cfg.seed, (uint64_t)ad->rank, 0x5eed);
    srand((unsigned)selsync_rng_next(&r));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int fair = cores > 0 ? (int)(cores / parts(a)) : 1;
    if (fair < 2) fair = 2;
    if (plan->threads > fair) plan->threads = fair;
    if (plan->n > 0) partition_paths(a, plan); /* a host without a list feeds its own data */
    if (a->ssp && ad->rank == 0) { /* the server: no loop; it serves at TRAIN_END */
        *a->net->seen = (size_t)a->net->max_batches * a->net->batch * a->net->subdivisions;
        plan->threads = 1; /* the trainer still loads one batch */
        return;
    }
    if (a->cfg.inject_alpha > 0) {
        if (selsync_inject_plan(&a->cfg, ad->world, plan->images, &a->inject, err, sizeof err))
            fatal(ad, "%s", err);
        plan->images = a->inject.load;
        if (ad->rank == 0)
            report(ad, "injection: each step %d of %d ranks share %d of their %d images; "
                   "every rank loads %d and completes its batch of %d", a->inject.senders,
                   ad->world, a->inject.shared, a->inject.load, a->inject.load,
                   a->inject.own + a->inject.senders * a->inject.shared);
    }
}

/* Injection: replaces this step's batch of `load` own images by a full
 * batch, completed with the samples the chosen senders share. */
static void on_batch_loaded(attachment *a, data *d)
{
    adapter *ad = a->ad;
    const selsync_inject_sizes *sz = &a->inject;
    if (!sz->senders) return;
    int batch = sz->own + sz->senders * sz->shared;
    if (d->X.rows != sz->load || d->y.rows != sz->load)
        fatal(ad, "injection: the loader gave %d images, expected %d", d->X.rows, sz->load);
    size_t in = (size_t)d->X.cols, out = (size_t)d->y.cols, row = in + out;
    float *rows = malloc((size_t)sz->load * row * sizeof *rows);
    float *full = malloc((size_t)batch * row * sizeof *full);
    int *senders = malloc((size_t)sz->senders * sizeof *senders);
    if (!rows || !full || !senders) fatal(ad, "out of memory");
    for (int i = 0; i < sz->load; ++i) {
        memcpy(rows + i * row, d->X.vals[i], in * sizeof(float));
        memcpy(rows + i * row + in, d->y.vals[i], out * sizeof(float));
    }
    selsync_inject_senders(a->cfg.seed, a->batches++, ad->world, sz->senders, senders);
    uint64_t bytes = 0;
    if (selsync_inject_exchange(&ad->comm, sz, senders, rows, row, full, &bytes))
        fatal(ad, "injection: %s", selsync_mpi_last_error());
    selsync_note_injection(a->engine, bytes);
    data filled = *d;
    filled.shallow = 0;
    filled.X = make_matrix(batch, (int)in);
    filled.y = make_matrix(batch, (int)out);
    for (int i = 0; i < batch; ++i) {
        memcpy(filled.X.vals[i], full + i * row, in * sizeof(float));
        memcpy(filled.y.vals[i], full + i * row + in, out * sizeof(float));
    }
    free_data(*d);
    *d = filled;
    free(senders);
    free(full);
    free(rows);
}

static void step(attachment *a, int before, const update_args *args)
{
    if (!a->engine && a->ssp)
        fatal(a->ad, "%s: [selsync] method = ssp needs a trainer that reports TRAIN_BEGIN "
              "(classifier train, detector train)", a->cfg.file);
    if (!a->engine) start_engine(a);
    selsync_status st = before
        ? selsync_before_update(a->engine, *a->net->cost, args->learning_rate)
        : selsync_after_update(a->engine);
    if (st) fatal(a->ad, "step %zu: %s", get_current_batch(a->net), selsync_engine_error(a->engine));
}

static void on_iteration_printed(attachment *a, FILE *out)
{
    if (!a->engine || a->ad->rank != a->ssp) return;
    const selsync_step *s = selsync_last_step(a->engine);
    selsync_totals t;
    selsync_get_totals(a->engine, &t);
    if (a->ssp) {
        fprintf(out, " | ssp, blocked %.3f s (%.2f s in all)", s->t_agree, t.t_agree);
        return;
    }
    fprintf(out, " | %s, synced %llu/%llu (%.1f%%)",
            s->decision == SELSYNC_SYNC_STEP ? "sync " : "local",
            (unsigned long long)t.synced_steps, (unsigned long long)t.steps,
            t.steps ? 100.0 * t.synced_steps / t.steps : 0.0);
}

static void print_summary(attachment *a)
{
    adapter *ad = a->ad;
    selsync_totals t;
    selsync_get_totals(a->engine, &t);
    /* means over the training ranks (ssp: the workers, not the server) */
    int server = a->ssp && ad->rank == 0;
    double v[8] = {(double)t.bytes_sent, (double)t.bsp_bytes, t.t_compute, t.t_measure,
                   t.t_agree, t.t_transfer, (double)t.steps, (double)t.inject_bytes};
    if (server) memset(v, 0, sizeof v);
    if (ad->comm.ops->sum_f64(ad->comm.ctx, v, 8))
        fatal(ad, "could not gather the summary: %s", selsync_mpi_last_error());
    if (ad->rank != 0) return;
    for (int i = 0; i < 8; ++i) v[i] /= parts(a);
    double comm = v[3] + v[4] + v[5];
    if (a->ssp) {
        const selsync_ssp_stats *s = &a->served;
        fprintf(stderr,
                "selsync: summary: method=ssp, %d ranks (server + %d workers), staleness %d, %.0f steps per worker\n"
                "selsync: summary: pushed and pulled %.2f MB per worker vs %.2f MB sent for bsp (%.2fx)\n"
                "selsync: summary: time per worker: compute %.2f s, measure %.3f s, blocked (agree) %.3f s, "
                "transfer %.3f s (communication %.1f%%)\n"
                "selsync: summary: server: %llu updates applied, %llu pulls answered, %llu held by the bound "
                "(%.3f s), largest lead %llu, %.2f MB sent\n",
                ad->world, ad->world - 1, a->cfg.ssp_staleness, v[6], v[0] / 1e6, v[1] / 1e6,
                v[1] > 0 ? v[0] / v[1] : INFINITY, v[2], v[3], v[4], v[5],
                v[2] + comm > 0 ? 100.0 * comm / (v[2] + comm) : 0.0, (unsigned long long)s->pushes,
                (unsigned long long)s->pulls, (unsigned long long)s->queued, s->t_wait,
                (unsigned long long)s->max_lead, (double)s->bytes_sent / 1e6);
        return;
    }
    fprintf(stderr,
            "selsync: summary: method=%s, %d rank%s, %llu steps, %llu synchronised (%.1f%%)\n"
            "selsync: summary: model synchronisation sent %.2f MB per rank; bsp would have sent "
            "%.2f MB (%.2fx as much)\n",
            selsync_method_name(a->cfg.method), ad->world, ad->world == 1 ? "" : "s",
            (unsigned long long)t.steps, (unsigned long long)t.synced_steps,
            t.steps ? 100.0 * t.synced_steps / t.steps : 0.0, v[0] / 1e6, v[1] / 1e6,
            v[0] > 0 ? v[1] / v[0] : INFINITY);
    if (v[7] > 0)
        fprintf(stderr, "selsync: summary: data injection sent %.2f MB per rank\n", v[7] / 1e6);
    fprintf(stderr,
            "selsync: summary: time per rank: compute %.2f s, measure %.3f s, agree %.3f s, "
            "transfer %.3f s (communication %.1f%%)\n",
            v[2], v[3], v[4], v[5], v[2] + comm > 0 ? 100.0 * comm / (v[2] + comm) : 0.0);
}

static void on_train_end(attachment *a)
{
    if (a->cfg.partition == SELSYNC_PARTITION_SELDP) set_path_sampler(NULL, NULL);
    if (!a->engine) return;
    if (a->ssp && a->ad->rank == 0) serve(a);
    if (selsync_finish(a->engine))
        fatal(a->ad, "final average: %s", selsync_engine_error(a->engine));
    print_summary(a);
}

static int on_event(network *net, network_event event, void *arg, void *user)
{
    attachment *a = user;
    (void)net;
    switch (event) {
    case NETWORK_LOADED: on_loaded(a); break;
    case TRAIN_BEGIN: on_train_begin(a, arg); break;
    case BEFORE_UPDATE: step(a, 1, arg); break;
    case AFTER_UPDATE: step(a, 0, arg); break;
    case BATCH_LOADED: on_batch_loaded(a, arg); break;
    case ITERATION_PRINTED: on_iteration_printed(a, arg); break;
    case TRAIN_END: on_train_end(a); break;
    case BEFORE_SAVE: return a->ad->rank != 0; /* only rank 0 writes */
    }
    return 0;
}

/* --- the [selsync] section --------------------------------------------------- */

static attachment *find_attachment(adapter *ad, const network *net)
{
    for (attachment *a = ad->attached; a; a = a->next)
        if (a->net == net) return a;
    return NULL;
}

static void print_config(const adapter *ad, const selsync_config *c)
{
    if (ad->rank != 0) return;
    fprintf(stderr, "selsync: %s:%d: method=%s", c->file, c->section_line,
            selsync_method_name(c->method));
    if (c->method == SELSYNC_METHOD_SELSYNC)
        fprintf(stderr, " delta=%g window=%d smoothing=%g warmup=%d granularity=%s",
                c->delta, c->window, selsync_config_smoothing(c, ad->world), c->warmup,
                c->granularity == SELSYNC_GRANULARITY_LAYER ? "layer" : "model");
    if (c->method == SELSYNC_METHOD_FEDAVG)
        fprintf(stderr, " fedavg_interval=%d fedavg_fraction=%g", c->fedavg_interval,
                c->fedavg_fraction);
    if (c->method == SELSYNC_METHOD_SSP) fprintf(stderr, " ssp_staleness=%d", c->ssp_staleness);
    fprintf(stderr, " aggregate=%s sync_bn_stats=%d seed=%llu; %d process%s\n",
            c->aggregate == SELSYNC_AGGREGATE_GRADS ? "grads" : "params", c->sync_bn_stats,
            (unsigned long long)c->seed, ad->world, ad->world == 1 ? "" : "es");
}

/* Checks the keys this build cannot serve yet, with the same message shape
 * as the configuration errors. */
static int unsupported(const selsync_config *c, char *err, size_t errlen)
{
    if (c->eval_every <= 0) return 0;
    snprintf(err, errlen, "%s:%d: [selsync] %s: evaluation during training is not available in this build",
             c->file, c->line[SELSYNC_KEY_EVAL_EVERY] ? c->line[SELSYNC_KEY_EVAL_EVERY] : c->section_line,
             selsync_config_key_name(SELSYNC_KEY_EVAL_EVERY));
    return -1;
}

/* Parses one [selsync] section strictly and attaches the adapter. */
static int on_selsync_section(network *net, const char *cfgfile, int line,
                              const cfg_option *options, int n, void *user)
{
    adapter *ad = user;
    char err[1024];
    attachment *first = find_attachment(ad, net);
    if (first) {
        report(ad, "%s:%d: [selsync] second [selsync] section (the first is on line %d); "
               "allowed: one per cfg", cfgfile, line, first->cfg.section_line);
        return -1;
    }
    attachment *a = calloc(1, sizeof *a);
    if (!a) {
        report(ad, "out of memory");
        return -1;
    }
    selsync_config_default(&a->cfg, cfgfile, line);
    selsync_status st = SELSYNC_OK;
    for (int i = 0; i < n && st == SELSYNC_OK; ++i) {
        if (!options[i].val) {
            snprintf(err, sizeof err, "%s:%d: [selsync] '%s' is not a key = value line",
                     cfgfile, options[i].line, options[i].key);
            st = SELSYNC_ECONFIG;
        } else {
            st = selsync_config_set(&a->cfg, options[i].key, options[i].val,
                                    options[i].line, err, sizeof err);
        }
    }
    if (st == SELSYNC_OK) st = selsync_config_finish(&a->cfg, err, sizeof err);
    /* one process may still parse any cfg (e.g. to evaluate); what needs
     * more ranks is checked when training starts */
    if (st == SELSYNC_OK && ad->world > 1)
        st = selsync_config_check_world(&a->cfg, ad->world, err, sizeof err);
    if (st == SELSYNC_OK && unsupported(&a->cfg, err, sizeof err)) st = SELSYNC_ECONFIG;
    a->ad = ad;
    a->net = net;
    a->ssp = a->cfg.method == SELSYNC_METHOD_SSP;
    if (st == SELSYNC_OK && map_network(a)) {
        snprintf(err, sizeof err, "out of memory");
        st = SELSYNC_ENOMEM;
    }
    if (st != SELSYNC_OK) {
        report(ad, "%s", err);
        free(a->tensors);
        free(a);
        return -1;
    }
    a->next = ad->attached;
    ad->attached = a;
    net->hook = on_event;
    net->hook_user = a;
    print_config(ad, &a->cfg);
    return 0;
}

/* --- darknet selsync map: mAP@0.5 of a detector on its validation list ------ */

/* Appends the boxes of one image's label file to *truth (grown as needed). */
static int read_truth(const char *image_path, int image, int classes, selsync_truth **truth,
                      size_t *n, size_t *cap)
{
    char label_path[4096];
    FILE *f = label_path_of(image_path, label_path, sizeof label_path) ? NULL
                                                                        : fopen(label_path, "r");
    if (!f) {
        report(NULL, "cannot read the label file of %s", image_path);
        return -1;
    }
    selsync_truth t = {image, 0, {0, 0, 0, 0}};
    while (fscanf(f, "%d %f %f %f %f", &t.cls, &t.box.x, &t.box.y, &t.box.w, &t.box.h) == 5) {
        if (t.cls < 0 || t.cls >= classes) continue;
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            selsync_truth *grown = realloc(*truth, *cap * sizeof **truth);
            if (!grown) break;
            *truth = grown;
        }
        (*truth)[(*n)++] = t;
    }
    fclose(f);
    return 0;
}

/* darknet selsync map DATA CFG WEIGHTS: runs the detector on every image of
 * the data file's valid list (letterboxed, as Darknet validates) and prints
 * the VOC-style AP at IoU 0.5 of every class and their mean. */
static int map_command(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s selsync map DATA CFG WEIGHTS\n", argv[0]);
        return EXIT_FAILURE;
    }
    list *options = read_data_cfg(argv[3]);
    char *valid = option_find_str(options, "valid", NULL);
    int classes = option_find_int(options, "classes", 0);
    if (!valid || classes < 1) {
        report(NULL, "%s: needs valid= and classes= for mAP", argv[3]);
        return EXIT_FAILURE;
    }
    network *net = load_network(argv[4], argv[5], 0);
    set_batch_network(net, 1);
    list *plist = get_paths(valid);
    char **paths = (char **)list_to_array(plist);
    selsync_truth *truth = NULL;
    selsync_detection *det = NULL;
    size_t n_truth = 0, cap_truth = 0, n_det = 0, cap_det = 0;
    int status = EXIT_SUCCESS;
    for (int i = 0; i < plist->size && status == EXIT_SUCCESS; ++i) {
        if (read_truth(paths[i], i, classes, &truth, &n_truth, &cap_truth)) {
            status = EXIT_FAILURE;
            break;
        }
        image im = load_image_color(paths[i], 0, 0);
        image sized = letterbox_image(im, net->w, net->h);
        network_predict(net, sized.data);
        int nboxes = 0;
        detection *dets = get_network_boxes(net, im.w, im.h, 0.005f, 0.5f, NULL, 1, &nboxes);
        do_nms_sort(dets, nboxes, classes, 0.45f);
        for (int b = 0; b < nboxes; ++b)
            for (int c = 0; c < classes && c < dets[b].classes; ++c) {
                if (dets[b].prob[c] <= 0) continue;
                if (n_det == cap_det) {
                    cap_det = cap_det ? 2 * cap_det : 1024;
                    selsync_detection *grown = realloc(det, cap_det * sizeof *det);
                    if (!grown) {
                        status = EXIT_FAILURE;
                        break;
                    }
                    det = grown;
                }
                box bb = dets[b].bbox;
                det[n_det++] = (selsync_detection){i, c, dets[b].prob[c], {bb.x, bb.y, bb.w, bb.h}};
            }
        free_detections(dets, nboxes);
        free_image(sized);
        free_image(im);
        if ((i + 1) % 500 == 0) fprintf(stderr, "selsync: map: %d of %d images\n", i + 1, plist->size);
    }
    double *ap = calloc((size_t)classes, sizeof *ap), map = 0;
    if (status == EXIT_SUCCESS &&
        (!ap || selsync_map(truth, n_truth, det, n_det, classes, 0.5f, ap, &map))) {
        report(NULL, "mAP computation failed");
        status = EXIT_FAILURE;
    }
    if (status == EXIT_SUCCESS) {
        for (int c = 0; c < classes; ++c)
            if (!isnan(ap[c])) printf("class %d: AP@0.5 = %.4f\n", c, ap[c]);
        printf("mAP@0.5 = %.4f (%d images, %zu boxes, %zu detections)\n", map, plist->size,
               n_truth, n_det);
    }
    free(ap);
    free(det);
    free(truth);
    free_ptrs((void **)paths, plist->size);
    free_list(plist);
    return status;
}

int darknet_plugin_command(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "selsync") && !strcmp(argv[2], "map"))
        return map_command(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "selsync")) {
        fprintf(stderr, "usage: %s selsync map DATA CFG WEIGHTS\n", argv[0]);
        return EXIT_FAILURE;
    }
    return -1;
}

/* --- entry points -------------------------------------------------------------- */

int darknet_plugin_init(int *argc, char ***argv)
{
    char err[512];
    adapter *ad = calloc(1, sizeof *ad);
    if (!ad) {
        report(NULL, "out of memory");
        return EXIT_FAILURE;
    }
    if (selsync_mpi_init(argc, argv, &ad->comm, err, sizeof err)) {
        report(NULL, "%s", err);
        free(ad);
        return EXIT_FAILURE;
    }
    ad->rank = ad->comm.ops->rank(ad->comm.ctx);
    ad->world = ad->comm.ops->size(ad->comm.ctx);
    if (set_cfg_section_handler(SECTION, on_selsync_section, ad) != 0) {
        report(ad, "could not register the " SECTION " section handler");
        fatal(ad, "plugin start failed");
    }
    /* one console: the other ranks keep stderr for their errors only (and
     * stdout for later, should they become the console: ssp) */
    ad->console = ad->rank != 0 ? dup(STDOUT_FILENO) : -1;
    if (ad->rank != 0 && !freopen("/dev/null", "w", stdout))
        report(ad, "could not silence stdout");
    the_adapter = ad;
    return 0;
}

int darknet_plugin_fini(int status)
{
    adapter *ad = the_adapter;
    if (!ad) return status;
    set_cfg_section_handler(SECTION, NULL, NULL);
    while (ad->attached) {
        attachment *next = ad->attached->next;
        selsync_destroy(ad->attached->engine);
        free(ad->attached->tensors);
        free(ad->attached);
        ad->attached = next;
    }
    selsync_mpi_finalize();
    if (ad->console >= 0) close(ad->console);
    free(ad);
    the_adapter = NULL;
    return status;
}
