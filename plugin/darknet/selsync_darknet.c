/* The Darknet adapter: the only plugin code that includes darknet.h.
 *
 * It implements Darknet's plugin entry points (darknet_plugin_init/_fini):
 * init starts the transport (MPI under an MPI launcher, one process
 * otherwise) and registers the handler of [selsync] cfg sections. A network
 * with such a section gets this adapter as its event hook:
 *
 *   NETWORK_LOADED  check that every rank built the same layout, then give
 *                   every rank rank 0's weights; a weights file that is a
 *                   checkpoint: rank 0 reads its state and every rank gets it
 *   TRAIN_BEGIN     create the engine, keep this rank's part of the training
 *                   list (cfg partition), seed this rank's sampling, size the
 *                   loader threads and, with injection, the images loaded;
 *                   method ssp on rank 0: end the trainer's loop at once
 *                   (*net->seen), so that TRAIN_END follows
 *   BATCH_REQUESTED data injection: b' + s images for a sender, b' for the others
 *   BATCH_LOADED    data injection: complete the batch with shared samples
 *   BEFORE_UPDATE / AFTER_UPDATE   the engine's step; after it, every
 *                   eval_every steps the evaluation of the consensus model
 *                   (rank 0), every checkpoint_every steps a checkpoint
 *   ITERATION_PRINTED   append the decision and sync fraction (rank 0)
 *   TRAIN_END       final average, final evaluation and summary; method ssp on rank 0: first
 *                   serve the workers until they are done (inside the
 *                   trainer, whose loader thread writes into its frame)
 *   BEFORE_SAVE     only rank 0 writes weights
 *
 * Method ssp: rank 0 is the parameter server (its network holds the global
 * model, which it saves), ranks 1.. are the workers and split the data;
 * the first worker's stdout is the console during training. The server
 * writes one line per answered pull to $SELSYNC_SSP_TRACE when set.
 *
 * Evaluation: rank 0 keeps a second instance of the network (batch 1) for
 * the held-out list (valid= of the trainer's data file); it receives the
 * mean of the ranks' parameters, so training is never disturbed. The score
 * is top-1 for a classifier (the label found in the path) and mAP@0.5 for
 * a detector. Method ssp: only the final model is evaluated.
 *
 * Checkpoints (see selsync/checkpoint.h): rank 0 writes Darknet's weights
 * (its own parameters) followed by a state holding, for every rank, its
 * position in its data, its engine snapshot and its arrays (parameters,
 * momentum), so that every rank continues where it stopped.
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
#include "selsync/checkpoint.h"
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
    uint64_t batches;            /* injection: batches trained so far (index of the next one) */
    uint64_t requested;          /* injection: loads requested so far (index of the next one) */
    uint64_t images_loaded;      /* injection, this process: own images loaded ... */
    uint64_t loads;              /* ... in this many batches */
    size_t next_path;            /* seldp: position of the sequential walk */
    int ssp;                     /* method ssp: rank 0 serves, the others work */
    selsync_ssp_stats served;    /* ssp, rank 0: the server's figures */
    void *resume;                /* a checkpoint's state, until the engine takes it */
    size_t resume_len;
    char checkpoint[4096];       /* the checkpoint file rank 0 writes */
    struct evaluator *eval;      /* with eval_every, from TRAIN_BEGIN on */
    struct attachment *next;
} attachment;

/* Rank 0's evaluation of the held-out list (other ranks: net == NULL). */
typedef struct evaluator {
    network *net;                /* a second instance of the network, batch 1 */
    selsync_tensor *tensors;     /* its arrays, in the order of the attachment's */
    size_t n_tensors;
    char **paths;                /* the held-out list */
    int n;
    char **labels;               /* classifier: label strings; detector: NULL */
    int classes;
    const char *metric;          /* "top1" or "map50" */
    uint64_t last;               /* steps done at the last evaluation */
} evaluator;

typedef struct adapter {
    selsync_comm comm;
    int rank, world;
    int console;                 /* ranks > 0: the stdout they silenced, or -1 */
    attachment *attached;
} adapter;

static adapter *the_adapter; /* set by darknet_plugin_init, for _fini */

static void report(const adapter *ad, const char *fmt, ...)
{
    char line[2048];
    int n = ad && ad->world > 1 ? snprintf(line, sizeof line, "selsync: rank %d: ", ad->rank)
                                : snprintf(line, sizeof line, "selsync: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    fputs(line, stderr); /* one write, so that ranks' lines do not interleave */
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

/* A growing list of tensor views. */
typedef struct tensor_list {
    selsync_tensor *t;
    size_t n, cap;
} tensor_list;

static int add_tensor(tensor_list *a, float *param, float *grad,
                      size_t count, size_t layer, selsync_tensor_kind kind)
{
    if (!param || count == 0) return 0;
    if (a->n == a->cap) return -1;
    a->t[a->n++] = (selsync_tensor){param, grad, count, layer, kind};
    return 0;
}

/* The trained arrays of one updatable layer (or sublayer), and its BN
 * running statistics. */
static int add_layer_tensors(tensor_list *a, const layer *l, size_t index)
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
            if (add_layer_tensors(a, sub[i], index)) return -1;
        return 0;
    }
    case GRU: {
        const layer *sub[] = {l->uz, l->wz, l->ur, l->wr, l->uh, l->wh};
        for (size_t i = 0; i < 6; ++i)
            if (add_layer_tensors(a, sub[i], index)) return -1;
        return 0;
    }
    case LSTM: {
        const layer *sub[] = {l->wf, l->wi, l->wg, l->wo, l->uf, l->ui, l->ug, l->uo};
        for (size_t i = 0; i < 8; ++i)
            if (add_layer_tensors(a, sub[i], index)) return -1;
        return 0;
    }
    default:
        return 0;
    }
    int rc = add_tensor(a, l->weights, l->weight_updates, nw, index, SELSYNC_TENSOR_TRAINED);
    rc |= add_tensor(a, l->biases, l->bias_updates, nb, index, SELSYNC_TENSOR_TRAINED);
    if (l->scale_updates)
        rc |= add_tensor(a, l->scales, l->scale_updates, nb, index, SELSYNC_TENSOR_TRAINED);
    rc |= add_tensor(a, l->rolling_mean, NULL, nb, index, SELSYNC_TENSOR_STAT);
    rc |= add_tensor(a, l->rolling_variance, NULL, nb, index, SELSYNC_TENSOR_STAT);
    return rc;
}

/* The trained arrays of net, layer by layer, into *out (malloc'd; the
 * caller frees it, also on failure). */
static int map_network(network *net, selsync_tensor **out, size_t *n)
{
    tensor_list l = {NULL, 0, 64 + 40 * (size_t)net->n};
    int rc = 0;
    if (!(l.t = calloc(l.cap, sizeof *l.t))) rc = -1;
    for (int i = 0; i < net->n && !rc; ++i)
        if (net->layers[i].update && add_layer_tensors(&l, &net->layers[i], (size_t)i)) rc = -1;
    *out = l.t;
    *n = l.n;
    return rc;
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

/* --- checkpoints ---------------------------------------------------------------- */

/* The state in a checkpoint: this head, then per rank its position in its
 * data (u64) and its engine snapshot, all of the same length. */
typedef struct checkpoint_head {
    char magic[8];
    int32_t world, pad;
    uint64_t per_rank, batches;
} checkpoint_head;

static const char checkpoint_magic[8] = "SSDKNT1";

/* NETWORK_LOADED: when the weights file is a checkpoint, every rank gets
 * its state (rank 0 reads it). */
static void checkpoint_load(attachment *a, const char *weights)
{
    adapter *ad = a->ad;
    char err[1024];
    uint64_t len = 0;
    if (ad->rank == 0 && weights && *weights) {
        if (selsync_checkpoint_read(weights, &a->resume, &a->resume_len, err, sizeof err))
            fatal(ad, "%s", err);
        len = a->resume_len;
    }
    if (ad->world > 1 && ad->comm.ops->bcast(ad->comm.ctx, &len, sizeof len, 0)) goto comm_failed;
    if (len == 0) return;
    if (ad->rank != 0 && !(a->resume = malloc(len))) fatal(ad, "out of memory for the checkpoint state");
    a->resume_len = len;
    if (ad->world > 1 && ad->comm.ops->bcast(ad->comm.ctx, a->resume, len, 0)) goto comm_failed;
    if (ad->rank == 0) report(ad, "%s is a checkpoint: every rank resumes from its state", weights);
    return;
comm_failed:
    fatal(ad, "could not share the checkpoint state: %s", selsync_mpi_last_error());
}

/* With the engine created: takes this rank's part of the checkpoint state. */
static void checkpoint_resume(attachment *a)
{
    adapter *ad = a->ad;
    checkpoint_head h;
    const uint8_t *p = a->resume;
    if (!p) return;
    size_t per_rank = sizeof(uint64_t) + selsync_snapshot_size(a->engine);
    if (a->resume_len < sizeof h) goto mismatch;
    memcpy(&h, p, sizeof h);
    if (memcmp(h.magic, checkpoint_magic, sizeof h.magic) != 0) goto mismatch;
    if (h.world != ad->world)
        fatal(ad, "%s: the checkpoint was written by a job of %d ranks; this one has %d (run it with the same "
              "number of ranks)", a->cfg.file, h.world, ad->world);
    if (h.per_rank != per_rank || a->resume_len != sizeof h + (size_t)h.world * per_rank) goto mismatch;
    p += sizeof h + (size_t)ad->rank * per_rank;
    uint64_t next_path;
    memcpy(&next_path, p, sizeof next_path);
    if (selsync_restore(a->engine, p + sizeof next_path, per_rank - sizeof next_path))
        fatal(ad, "%s", selsync_engine_error(a->engine));
    a->next_path = (size_t)next_path;
    a->batches = h.batches;
    free(a->resume);
    a->resume = NULL;
    if (ad->rank == 0)
        report(ad, "resumed at step %zu", get_current_batch(a->net));
    return;
mismatch:
    fatal(ad, "%s: the checkpoint's state does not fit this network and [selsync] section (written for "
          "another cfg?)", a->cfg.file);
}

/* Every checkpoint_every steps (all ranks): rank 0 gathers every rank's
 * state and writes the checkpoint atomically. */
static void checkpoint_periodic(attachment *a)
{
    adapter *ad = a->ad;
    const selsync_comm_ops *ops = ad->comm.ops;
    const selsync_step *s = selsync_last_step(a->engine);
    if (a->cfg.checkpoint_every <= 0 || !s || (s->step + 1) % (uint64_t)a->cfg.checkpoint_every) return;
    double t0 = selsync_now();
    char err[1024], tmp[4200];
    size_t per_rank = sizeof(uint64_t) + selsync_snapshot_size(a->engine);
    size_t len = sizeof(checkpoint_head) + (ad->rank == 0 ? (size_t)ad->world : 1) * per_rank;
    uint8_t *buf = malloc(len), *mine = buf + sizeof(checkpoint_head);
    if (!buf) fatal(ad, "out of memory for a checkpoint");
    uint64_t next_path = a->next_path;
    memcpy(mine, &next_path, sizeof next_path);
    if (selsync_snapshot(a->engine, mine + sizeof next_path, per_rank - sizeof next_path))
        fatal(ad, "%s", selsync_engine_error(a->engine));
    if (ad->rank != 0) {
        if (ops->send(ad->comm.ctx, 0, 0, mine, per_rank)) goto comm_failed;
    } else {
        for (int r = 1; r < ad->world; ++r)
            if (ops->recv(ad->comm.ctx, r, 0, mine + (size_t)r * per_rank, per_rank, NULL)) goto comm_failed;
        checkpoint_head h = {{0}, ad->world, 0, per_rank, a->batches};
        memcpy(h.magic, checkpoint_magic, sizeof h.magic);
        memcpy(buf, &h, sizeof h);
        if (selsync_checkpoint_temp(a->checkpoint, tmp, sizeof tmp)) fatal(ad, "checkpoint path too long");
        save_weights(a->net, tmp);
        if (selsync_checkpoint_seal(tmp, a->checkpoint, buf, len, err, sizeof err)) fatal(ad, "%s", err);
        report(ad, "step %llu: checkpoint %s (%.1f MB, %.2f s)", (unsigned long long)(s->step + 1),
               a->checkpoint, (double)len / 1e6, selsync_now() - t0);
    }
    free(buf);
    uint8_t done = 1; /* every rank waits for the write: its time is no one's training */
    if (ops->bcast(ad->comm.ctx, &done, 1, 0)) goto comm_failed;
    selsync_exclude_time(a->engine);
    return;
comm_failed:
    fatal(ad, "checkpoint: %s", selsync_mpi_last_error());
}

/* TRAIN_BEGIN with checkpoint_every: the file is BACKUP/CFGNAME_checkpoint.weights,
 * BACKUP being backup= of the data file (Darknet's default otherwise). */
static void checkpoint_prepare(attachment *a, const train_plan *plan)
{
    if (a->cfg.checkpoint_every <= 0) return;
    list *options = plan->datacfg ? read_data_cfg(plan->datacfg) : NULL;
    const char *backup = options ? option_find_str(options, "backup", "/backup/") : "backup";
    char *base = basecfg((char *)a->cfg.file);
    int n = snprintf(a->checkpoint, sizeof a->checkpoint, "%s/%s_checkpoint.weights", backup, base);
    free(base);
    if (options) free_list(options);
    if (n < 0 || (size_t)n >= sizeof a->checkpoint) fatal(a->ad, "checkpoint path too long");
    if (a->ad->rank == 0)
        report(a->ad, "checkpoint every %d steps to %s", a->cfg.checkpoint_every, a->checkpoint);
}

/* --- events ---------------------------------------------------------------- */

static void on_loaded(attachment *a, const char *weights)
{
    adapter *ad = a->ad;
    if (ad->world == 1) {
        checkpoint_load(a, weights);
        return;
    }
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
    checkpoint_load(a, weights);
    return;
comm_failed:
    fatal(ad, "could not share the initial weights: %s", selsync_mpi_last_error());
}

static void start_engine(attachment *a)
{
    char err[1024];
    /* Darknet scales the update buffers by the momentum after each update:
     * a residual to subtract unless the momentum is 0 (buffers cleared). */
    selsync_model model = {a->tensors, a->n_tensors, (size_t)a->net->n, a->net->momentum != 0};
    if (selsync_create(&a->cfg, &a->ad->comm, &model, &a->engine, err, sizeof err))
        fatal(a->ad, "%s", err);
    checkpoint_resume(a);
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
 * (classifier), or the most frequent class in its label file, a tie going
 * to the lowest class (detector, the label file found as Darknet finds it);
 * -1 when there is none. A
 * detector's label file must exist and hold lines "CLASS X Y W H" with
 * CLASS in [0, classes) and a box inside the image; otherwise the message
 * goes to why (naming the file and line) and the result is -2. */
static int class_of(const char *path, char **labels, int classes, char *why, size_t whylen)
{
    if (labels) {
        for (int i = 0; i < classes; ++i)
            if (strstr(path, labels[i])) return i;
        return -1;
    }
    char label_path[4096], text[512];
    if (label_path_of(path, label_path, sizeof label_path)) {
        snprintf(why, whylen, "%.1000s: path too long", path);
        return -2;
    }
    FILE *f = fopen(label_path, "r");
    if (!f) {
        snprintf(why, whylen, "%.1000s: cannot open the label file of %.1000s: %s", label_path, path,
                 strerror(errno));
        return -2;
    }
    int *count = calloc((size_t)(classes > 0 ? classes : 1), sizeof *count);
    int id, best = -1, line = 0, end;
    float x, y, w, h;
    if (!count) {
        fclose(f);
        snprintf(why, whylen, "out of memory");
        return -2;
    }
    while (fgets(text, sizeof text, f)) {
        ++line;
        if (strspn(text, " \t\r\n") == strlen(text)) continue; /* blank */
        end = 0;
        if (sscanf(text, "%d %f %f %f %f %n", &id, &x, &y, &w, &h, &end) != 5 || text[end] != '\0' ||
            id < 0 || id >= classes || !(x >= 0 && x <= 1 && y >= 0 && y <= 1 && w > 0 && w <= 1 && h > 0 && h <= 1)) {
            snprintf(why, whylen, "%.1000s:%d: not a detection label \"CLASS X Y W H\" with CLASS in 0..%d and a "
                     "box inside the image (normalised): %.80s", label_path, line, classes - 1,
                     strtok(text, "\r\n") ? text : "");
            fclose(f);
            free(count);
            return -2;
        }
        ++count[id];
    }
    fclose(f);
    for (id = 0; id < classes; ++id) /* the most frequent class; a tie goes to the lowest id */
        if (count[id] > (best < 0 ? 0 : count[best])) best = id;
    free(count);
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
    char err[4096];
    int *labels = malloc(n * sizeof *labels);
    size_t *shard = malloc(n * sizeof *shard);
    char **copy = malloc(n * sizeof *copy);
    uint8_t *taken = calloc(n, 1);
    if (!labels || !shard || !copy || !taken) fatal(ad, "out of memory");
    for (size_t i = 0; i < n; ++i)
        if ((labels[i] = class_of(plan->paths[i], plan->labels, plan->classes, err, sizeof err)) == -2)
            fatal(ad, "%s", err);
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

/* --- evaluation ---------------------------------------------------------------- */

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

/* Runs net (batch 1) on every image of paths (letterboxed, as Darknet
 * validates) and computes the VOC-style AP at IoU 0.5 of every class (ap,
 * NaN for a class without boxes) and their mean; progress: a line every 500
 * images. Returns -1 after reporting a failure. */
static int detector_map(network *net, char **paths, int n, int classes, int progress, double *ap,
                        double *map, size_t *n_truth, size_t *n_det)
{
    selsync_truth *truth = NULL;
    selsync_detection *det = NULL;
    size_t cap_truth = 0, cap_det = 0;
    int rc = 0;
    *n_truth = *n_det = 0;
    for (int i = 0; i < n && !rc; ++i) {
        if (read_truth(paths[i], i, classes, &truth, n_truth, &cap_truth)) {
            rc = -1;
            break;
        }
        image im = load_image_color(paths[i], 0, 0);
        image sized = letterbox_image(im, net->w, net->h);
        network_predict(net, sized.data);
        int nboxes = 0;
        detection *dets = get_network_boxes(net, im.w, im.h, 0.005f, 0.5f, NULL, 1, &nboxes);
        do_nms_sort(dets, nboxes, classes, 0.45f);
        for (int b = 0; b < nboxes && !rc; ++b)
            for (int c = 0; c < classes && c < dets[b].classes; ++c) {
                if (dets[b].prob[c] <= 0) continue;
                if (*n_det == cap_det) {
                    cap_det = cap_det ? 2 * cap_det : 1024;
                    selsync_detection *grown = realloc(det, cap_det * sizeof *det);
                    if (!grown) {
                        report(NULL, "out of memory");
                        rc = -1;
                        break;
                    }
                    det = grown;
                }
                box bb = dets[b].bbox;
                det[(*n_det)++] = (selsync_detection){i, c, dets[b].prob[c], {bb.x, bb.y, bb.w, bb.h}};
            }
        free_detections(dets, nboxes);
        free_image(sized);
        free_image(im);
        if (progress && (i + 1) % 500 == 0) fprintf(stderr, "selsync: map: %d of %d images\n", i + 1, n);
    }
    if (!rc && selsync_map(truth, *n_truth, det, *n_det, classes, 0.5f, ap, map)) {
        report(NULL, "mAP computation failed");
        rc = -1;
    }
    free(det);
    free(truth);
    return rc;
}

/* Top-1 accuracy of net (batch 1) on paths, whose class is the first label
 * found in the path (as Darknet's classifier validates: the image resized
 * to the network's smaller side, centre crop). */
static double classifier_top1(network *net, char **paths, int n, char **labels, int classes)
{
    int right = 0;
    for (int i = 0; i < n; ++i) {
        image im = load_image_color(paths[i], 0, 0);
        image resized = resize_min(im, net->w);
        image crop = crop_image(resized, (resized.w - net->w) / 2, (resized.h - net->h) / 2, net->w, net->h);
        float *pred = network_predict(net, crop.data);
        int best = 0;
        for (int c = 1; c < classes; ++c)
            if (pred[c] > pred[best]) best = c;
        right += class_of(paths[i], labels, classes, NULL, 0) == best;
        free_image(crop);
        if (resized.data != im.data) free_image(resized);
        free_image(im);
    }
    return n ? (double)right / n : 0.0;
}

static int on_selsync_section(network *net, const char *cfgfile, int line, const cfg_option *options, int n,
                              void *user);

/* Accepts a [selsync] section without acting on it (the evaluator's copy of
 * the network). */
static int ignore_section(network *net, const char *cfgfile, int line, const cfg_option *options, int n,
                          void *user)
{
    (void)net, (void)cfgfile, (void)line, (void)options, (void)n, (void)user;
    return 0;
}

/* TRAIN_BEGIN with eval_every: rank 0 builds the evaluator from the plan's
 * data file (valid=); every rank records that evaluation is on. */
static void eval_prepare(attachment *a, const train_plan *plan)
{
    adapter *ad = a->ad;
    evaluator *ev = calloc(1, sizeof *ev);
    if (!ev) fatal(ad, "out of memory");
    a->eval = ev;
    ev->last = UINT64_MAX;
    ev->labels = plan->labels;
    ev->classes = plan->classes;
    ev->metric = plan->labels ? "top1" : "map50";
    if (ad->rank != 0) return;
    const char *datacfg = plan->datacfg ? plan->datacfg : "(no data file)";
    list *options = plan->datacfg ? read_data_cfg(plan->datacfg) : NULL;
    char *valid = options ? option_find_str(options, "valid", NULL) : NULL;
    if (!valid)
        fatal(ad, "%s:%d: [selsync] eval_every needs valid= (the held-out list) in %s", a->cfg.file,
              a->cfg.line[SELSYNC_KEY_EVAL_EVERY], datacfg);
    FILE *probe = fopen(valid, "r");
    if (!probe)
        fatal(ad, "%s:%d: [selsync] eval_every: cannot read the held-out list %s named by %s: %s", a->cfg.file,
              a->cfg.line[SELSYNC_KEY_EVAL_EVERY], valid, datacfg, strerror(errno));
    fclose(probe);
    list *plist = get_paths(valid);
    ev->paths = (char **)list_to_array(plist);
    ev->n = plist->size;
    free_list(plist);
    if (ev->n == 0) fatal(ad, "%s: the held-out list %s is empty", datacfg, valid);
    set_cfg_section_handler(SECTION, ignore_section, NULL);
    ev->net = parse_network_cfg(a->cfg.file);
    set_cfg_section_handler(SECTION, on_selsync_section, ad);
    set_batch_network(ev->net, 1);
    if (map_network(ev->net, &ev->tensors, &ev->n_tensors) || ev->n_tensors != a->n_tensors)
        fatal(ad, "%s: could not build the evaluation copy of the network", a->cfg.file);
    report(ad, "evaluation: %s of the consensus model every %d steps on %d held-out images (%s)",
           ev->metric, a->cfg.eval_every, ev->n, valid);
    free_list(options);
}

static void free_evaluator(evaluator *ev)
{
    if (!ev) return;
    if (ev->net) free_network(ev->net);
    if (ev->paths) free_ptrs((void **)ev->paths, ev->n);
    free(ev->tensors);
    free(ev);
}

/* Rank 0: the score of the parameters loaded into the evaluator's network. */
static double eval_score(evaluator *ev)
{
    if (ev->labels) return classifier_top1(ev->net, ev->paths, ev->n, ev->labels, ev->classes);
    double *ap = calloc((size_t)ev->classes, sizeof *ap), map = 0;
    size_t n_truth, n_det;
    int rc = ap ? detector_map(ev->net, ev->paths, ev->n, ev->classes, 0, ap, &map, &n_truth, &n_det) : -1;
    free(ap);
    return rc ? NAN : map;
}

/* Rank 0: scores the parameters of every tensor, either one array in
 * tensor order (mean) or, when mean is NULL, the attachment's own, and
 * records the row. */
static void eval_record(attachment *a, const float *mean)
{
    evaluator *ev = a->eval;
    double t0 = selsync_now();
    for (size_t i = 0; i < ev->n_tensors; ++i) {
        const float *from = mean ? mean : a->tensors[i].param;
        memcpy(ev->tensors[i].param, from, ev->tensors[i].count * sizeof(float));
        if (mean) mean += ev->tensors[i].count;
    }
    double score = eval_score(ev);
    double took = selsync_now() - t0;
    if (isnan(score)) fatal(a->ad, "evaluation failed");
    const selsync_step *s = selsync_last_step(a->engine);
    uint64_t steps = s ? s->step + 1 : 0;
    if (a->ssp) { /* the server has no steps of its own */
        report(a->ad, "final model: %s %.4f on %d held-out images", ev->labels ? "top-1" : "mAP@0.5", score, ev->n);
        return;
    }
    report(a->ad, "step %llu: %s %.4f on %d held-out images (%.2f s, not counted as training)",
           (unsigned long long)steps, ev->labels ? "top-1" : "mAP@0.5", score, ev->n, took);
    if (selsync_log_eval(a->engine, ev->metric, score, took))
        fatal(a->ad, "%s", selsync_engine_error(a->engine));
}

/* Every eval_every steps (all ranks): rank 0 scores the mean of the ranks'
 * parameters; the others wait, and the time counts as no one's training. */
static void eval_periodic(attachment *a)
{
    const selsync_step *s = selsync_last_step(a->engine);
    if (!a->eval || a->ssp || !s || (s->step + 1) % (uint64_t)a->cfg.eval_every) return;
    const float *mean = selsync_consensus(a->engine);
    if (!mean) fatal(a->ad, "evaluation: %s", selsync_engine_error(a->engine));
    if (a->ad->rank == 0) eval_record(a, mean);
    uint8_t done = 1;
    if (a->ad->comm.ops->bcast(a->ad->comm.ctx, &done, 1, 0))
        fatal(a->ad, "evaluation: %s", selsync_mpi_last_error());
    a->eval->last = s->step + 1;
    selsync_exclude_time(a->engine);
}

/* At the end (rank 0, after the final average or the server's last
 * update): the final model, unless that step was just evaluated. */
static void eval_final(attachment *a)
{
    const selsync_step *s = selsync_last_step(a->engine);
    uint64_t steps = s ? s->step + 1 : 0;
    if (!a->eval || a->ad->rank != 0 || (!a->ssp && a->eval->last == steps)) return;
    eval_record(a, NULL);
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
    if (a->cfg.eval_every > 0) eval_prepare(a, plan);
    checkpoint_prepare(a, plan);
    /* this rank's sampling: the same seed gives the same run (a resumed
     * run draws anew from where it resumed) */
    selsync_rng r = selsync_rng_stream(a->cfg.seed, (uint64_t)ad->rank, 0x5eed + get_current_batch(a->net));
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
        plan->images = a->inject.own; /* each load's count is set at BATCH_REQUESTED */
        a->requested = a->batches;
        if (ad->rank == 0)
            report(ad, "injection: each step %d of %d ranks share %d images each: a sender loads %d, "
                   "every other rank %d, and every batch is completed to %d", a->inject.senders,
                   ad->world, a->inject.shared, a->inject.load, a->inject.own,
                   a->inject.own + a->inject.senders * a->inject.shared);
    }
}

/* 1 when this rank shares part of batch `index` (the same answer on every rank). */
static int injects(const attachment *a, uint64_t index, int *senders)
{
    selsync_inject_senders(a->cfg.seed, index, a->ad->world, a->inject.senders, senders);
    for (int i = 0; i < a->inject.senders; ++i)
        if (senders[i] == a->ad->rank) return 1;
    return 0;
}

/* Injection: a sender loads b' + s own images, every other rank b'. */
static void on_batch_requested(attachment *a, int *images)
{
    if (!a->inject.senders) return;
    int *senders = malloc((size_t)a->inject.senders * sizeof *senders);
    if (!senders) fatal(a->ad, "out of memory");
    *images = injects(a, a->requested++, senders) ? a->inject.load : a->inject.own;
    free(senders);
}

/* Injection: replaces this step's batch of own images (b' + s for a sender,
 * b' otherwise) by a full batch, completed with the samples the chosen
 * senders share. The batch is the one requested before the latest request
 * (the trainer loads the next batch while it trains this one). */
static void on_batch_loaded(attachment *a, data *d)
{
    adapter *ad = a->ad;
    const selsync_inject_sizes *sz = &a->inject;
    if (!sz->senders) return;
    if (a->requested < 2)
        fatal(ad, "injection: the trainer did not report BATCH_REQUESTED before its loads");
    int batch = sz->own + sz->senders * sz->shared;
    int *senders = malloc((size_t)sz->senders * sizeof *senders);
    if (!senders) fatal(ad, "out of memory");
    a->batches = a->requested - 1;
    int loaded = injects(a, a->batches - 1, senders) ? sz->load : sz->own;
    if (d->X.rows != loaded || d->y.rows != loaded)
        fatal(ad, "injection: the loader gave %d images, expected %d", d->X.rows, loaded);
    size_t in = (size_t)d->X.cols, out = (size_t)d->y.cols, row = in + out;
    float *rows = malloc((size_t)loaded * row * sizeof *rows);
    float *full = malloc((size_t)batch * row * sizeof *full);
    if (!rows || !full) fatal(ad, "out of memory");
    for (int i = 0; i < loaded; ++i) {
        memcpy(rows + i * row, d->X.vals[i], in * sizeof(float));
        memcpy(rows + i * row + in, d->y.vals[i], out * sizeof(float));
    }
    a->images_loaded += (uint64_t)loaded;
    a->loads++;
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
    if (st) fatal(a->ad, "%s", selsync_engine_error(a->engine));
    if (!before) {
        checkpoint_periodic(a);
        eval_periodic(a);
    }
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
            s->decision == SELSYNC_LOCAL_STEP ? "local" : s->decision == SELSYNC_SYNC_STEP ? "sync " : "skip ",
            (unsigned long long)t.synced_steps, (unsigned long long)t.steps,
            t.steps ? 100.0 * t.synced_steps / t.steps : 0.0);
}

/* " (Rx<what>)" for the ratio num / den of two byte counts, or "" when
 * either is 0: one rank (bsp sends nothing), or a run that sent nothing. */
static const char *times(char *buf, size_t len, double num, double den, const char *what)
{
    if (num > 0 && den > 0) snprintf(buf, len, " (%.2fx%s)", num / den, what);
    else if (len) buf[0] = '\0';
    return buf;
}

static void print_summary(attachment *a)
{
    adapter *ad = a->ad;
    selsync_totals t;
    selsync_get_totals(a->engine, &t);
    /* means over the training ranks (ssp: the workers, not the server) */
    int server = a->ssp && ad->rank == 0;
    double v[10] = {(double)t.bytes_sent, (double)t.bsp_bytes, t.t_compute, t.t_measure,
                    t.t_agree, t.t_transfer, (double)t.steps, (double)t.inject_bytes,
                    (double)a->images_loaded, (double)a->loads};
    if (server) memset(v, 0, sizeof v);
    if (ad->comm.ops->sum_f64(ad->comm.ctx, v, 10))
        fatal(ad, "could not gather the summary: %s", selsync_mpi_last_error());
    if (ad->rank != 0) return;
    for (int i = 0; i < 10; ++i) v[i] /= parts(a);
    double comm = v[3] + v[4] + v[5];
    char ratio[48];
    if (a->ssp) {
        const selsync_ssp_stats *s = &a->served;
        fprintf(stderr,
                "selsync: summary: method=ssp, %d ranks (server + %d worker%s), staleness %d, %.0f steps per worker\n"
                "selsync: summary: pushed and pulled %.2f MB per worker vs %.2f MB sent for bsp%s\n"
                "selsync: summary: time per worker: compute %.2f s, measure %.3f s, blocked (agree) %.3f s, "
                "transfer %.3f s (communication %.1f%%)\n"
                "selsync: summary: server: %llu updates applied, %llu pulls answered, %llu held by the bound "
                "(%.3f s), largest lead %llu, %.2f MB sent\n",
                ad->world, ad->world - 1, ad->world == 2 ? "" : "s", a->cfg.ssp_staleness, v[6], v[0] / 1e6,
                v[1] / 1e6, times(ratio, sizeof ratio, v[0], v[1], ""), v[2], v[3], v[4], v[5],
                v[2] + comm > 0 ? 100.0 * comm / (v[2] + comm) : 0.0, (unsigned long long)s->pushes,
                (unsigned long long)s->pulls, (unsigned long long)s->queued, s->t_wait,
                (unsigned long long)s->max_lead, (double)s->bytes_sent / 1e6);
        return;
    }
    fprintf(stderr,
            "selsync: summary: method=%s, %d rank%s, %llu steps, %llu synchronised (%.1f%%)\n"
            "selsync: summary: model synchronisation sent %.2f MB per rank; bsp would have sent "
            "%.2f MB%s\n",
            selsync_method_name(a->cfg.method), ad->world, ad->world == 1 ? "" : "s",
            (unsigned long long)t.steps, (unsigned long long)t.synced_steps,
            t.steps ? 100.0 * t.synced_steps / t.steps : 0.0, v[0] / 1e6, v[1] / 1e6,
            times(ratio, sizeof ratio, v[1], v[0], " as much"));
    if (v[7] > 0)
        fprintf(stderr, "selsync: summary: data injection sent %.2f MB per rank; each rank loaded "
                "%.2f own images per step on average, its batches completed to %d\n", v[7] / 1e6,
                v[9] > 0 ? v[8] / v[9] : 0.0, a->inject.own + a->inject.senders * a->inject.shared);
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
    eval_final(a);
    print_summary(a);
}

static int on_event(network *net, network_event event, void *arg, void *user)
{
    attachment *a = user;
    (void)net;
    switch (event) {
    case NETWORK_LOADED: on_loaded(a, arg); break;
    case TRAIN_BEGIN: on_train_begin(a, arg); break;
    case BEFORE_UPDATE: step(a, 1, arg); break;
    case AFTER_UPDATE: step(a, 0, arg); break;
    case BATCH_REQUESTED: on_batch_requested(a, arg); break;
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
            snprintf(err, sizeof err, "%s:%d: [selsync] '%s' is not a key = value line; allowed: one key=value per line",
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
    a->ad = ad;
    a->net = net;
    a->ssp = a->cfg.method == SELSYNC_METHOD_SSP;
    if (st == SELSYNC_OK && map_network(net, &a->tensors, &a->n_tensors)) {
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
    double *ap = calloc((size_t)classes, sizeof *ap), map = 0;
    size_t n_truth = 0, n_det = 0;
    int status = EXIT_FAILURE;
    if (!ap) report(NULL, "out of memory");
    else if (!detector_map(net, paths, plist->size, classes, 1, ap, &map, &n_truth, &n_det))
        status = EXIT_SUCCESS;
    if (status == EXIT_SUCCESS) {
        for (int c = 0; c < classes; ++c)
            if (!isnan(ap[c])) printf("class %d: AP@0.5 = %.4f\n", c, ap[c]);
        printf("mAP@0.5 = %.4f (%d images, %zu boxes, %zu detections)\n", map, plist->size,
               n_truth, n_det);
    }
    free(ap);
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
        free_evaluator(ad->attached->eval);
        free(ad->attached->resume);
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
