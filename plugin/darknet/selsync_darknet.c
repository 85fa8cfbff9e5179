/* The Darknet adapter: the only plugin code that includes darknet.h.
 *
 * It implements Darknet's plugin entry points (darknet_plugin_init/_fini):
 * init starts the transport (MPI under an MPI launcher, one process
 * otherwise) and registers the handler of [selsync] cfg sections. A network
 * with such a section gets a training session (selsync/session.h), which
 * runs the distributed protocol; this adapter translates Darknet's events
 * and structs into the session's calls and does what needs Darknet:
 *
 *   NETWORK_LOADED  the network as tensors and its layout hash, the
 *                   build id, the parsed cfg's hash and the host name (the
 *                   ranks compare them); is the weights file a checkpoint
 *                   (its header's mark)?
 *   TRAIN_BEGIN     the training list's hash; every training file's
 *                   class (its path, or its label file); the evaluator
 *                   and the checkpoint file; then the
 *                   session's plan: this rank's files first in the list,
 *                   sequential loading (seldp), the loader threads, the
 *                   images per load; method ssp on rank 0: end the
 *                   trainer's loop at once (*net->seen)
 *   BATCH_REQUESTED / BATCH_LOADED   data injection: the images to load,
 *                   the batch completed with the shared samples
 *   LAYER_BACKWARD_DONE  in the backward pass of a batch's last
 *                   subdivision (an update follows): the layer's gradient
 *                   is final, so its sum may start (overlap)
 *   BEFORE_UPDATE / AFTER_UPDATE     the session's step
 *   ITERATION_PRINTED   the decision and sync fraction (the console rank)
 *   TRAIN_END       the session's end (final average, BatchNorm
 *                   recalibration on this rank's first training files,
 *                   evaluation, summary)
 *   BEFORE_SAVE     only rank 0 writes weights
 *   BATCHNORM_STATISTICS / BATCHNORM_GRADIENT   sync_batchnorm: every
 *                   normalised layer's batch statistics and their gradients
 *                   summed over the ranks (net->batchnorm_shared is set)
 *
 * The evaluator (rank 0) is a second instance of the network (batch 1) for
 * the held-out list (valid= of the trainer's data file): top-1 for a
 * classifier (the label found in the path), mAP@0.5 for a detector.
 *
 * A failure is fatal for the whole job: the message goes to stderr and the
 * transport aborts every rank; with one process the hook returns -1 and
 * Darknet ends the program with a non-zero status (failed()). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "darknet.h"
#include "chart_gnuplot.h"
#include "comm_mpi.h"
#include "evaluation.h"
#include "recalibrate.h"
#include "tensors.h"
#include "selsync/hash.h"
#include "selsync/labels.h"
#include "selsync/map.h"
#include "selsync/session.h"
#include "selsync/vclock.h"
#include "selsync_build_id.h"

#define SECTION "[selsync]"

/* What the streams of a run's draws serve (random_key's values): the
 * initial weights, from the seed; the loads and the trainer's steps, from
 * this rank's key (selsync_plan.seed). */
enum { INITIAL_WEIGHTS_DRAWS = 1, LOAD_DRAWS, STEP_DRAWS };

/* Rank 0's evaluation of the held-out list. */
typedef struct evaluator {
    network *net;                /* a second instance of the network, batch 1 */
    selsync_tensor *tensors;     /* its arrays, in the order of the attachment's */
    size_t n_tensors;
    char **paths;                /* the held-out list */
    int n;
    char **labels;               /* classifier: label strings; detector: NULL */
    int classes;
    selsync_truth *truth;        /* detector: the held-out boxes, read once */
    size_t n_truth;
} evaluator;

/* A network that has a [selsync] section. */
typedef struct attachment {
    struct adapter *ad;
    network *net;
    selsync_config cfg;
    selsync_tensor *tensors;     /* views of the network's arrays */
    size_t n_tensors;
    float *sgd_rates;            /* per tensor, this step's rates when the update is plain SGD, else NULL */
    selsync_session *session;
    evaluator *eval;             /* rank 0 with eval_every, from TRAIN_BEGIN on */
    int sampler;                 /* the trainer reads through next_in_order */
    int step_batch;              /* samples per step, every rank's mean (from TRAIN_BEGIN; 0 before) */
    uint64_t step_draws;         /* the key of the trainer thread's draws, one stream per step */
    char checkpoint[4096];       /* the checkpoint file rank 0 writes */
    char chart[4096];            /* the training chart the console rank draws */
    char **recal_paths;          /* bn_recalibrate: this rank's first training files (copies) */
    int recal_n;
    int letterbox;               /* a detector: its images are letterboxed */
    struct attachment *next;
} attachment;

typedef struct adapter {
    selsync_comm comm;           /* the transport, behind a virtual clock with SELSYNC_VIRTUAL */
    char network[128];           /* the modelled network of SELSYNC_VIRTUAL, or "" */
    int rank, world;
    int console;                 /* ranks > 0: the stdout they silenced, or -1 */
    attachment *attached;
} adapter;

static adapter *the_adapter; /* set by darknet_plugin_init, for _fini */

static void report(const adapter *ad, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    selsync_vsay(ad ? ad->rank : 0, ad ? ad->world : 1, fmt, ap);
    va_end(ap);
}

/* A failure that ends the job: the transport prints the message and aborts
 * every rank (it does not return); with one process it prints it and
 * returns -1, which the caller passes up to Darknet (an event hook's
 * negative return ends the program with a non-zero status). */
static int failed(adapter *ad, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failed(adapter *ad, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    selsync_comm_abort(&ad->comm, EXIT_FAILURE, msg);
    return -1;
}

/* A session call's status: 0, or its failure (failed()). */
static int check(attachment *a, selsync_status st)
{
    return st ? failed(a->ad, "%s", selsync_session_error(a->session)) : 0;
}

/* --- checkpoints ---------------------------------------------------------------- */

/* A checkpoint's Darknet header (int major, minor, revision) carries this
 * revision; Darknet writes 0 and reads none. So a checkpoint cut before its
 * trailer is still known as one. */
#define CHECKPOINT_REVISION 0x53534b43
#define REVISION_OFFSET (2 * sizeof(int))

/* 1 when the weights file at path has the checkpoint mark. */
static int has_checkpoint_mark(const char *path)
{
    int revision = 0;
    FILE *f = fopen(path, "rb");
    int marked = f && fseek(f, REVISION_OFFSET, SEEK_SET) == 0 && fread(&revision, sizeof revision, 1, f) == 1 &&
                 revision == CHECKPOINT_REVISION;
    if (f) fclose(f);
    return marked;
}

/* Marks the weights file at path as a checkpoint; -1 on failure. */
static int mark_checkpoint(const char *path)
{
    int revision = CHECKPOINT_REVISION;
    FILE *f = fopen(path, "r+b");
    int ok = f && fseek(f, REVISION_OFFSET, SEEK_SET) == 0 && fwrite(&revision, sizeof revision, 1, f) == 1;
    if (f && fclose(f)) ok = 0;
    return ok ? 0 : -1;
}

/* The session's save_model (rank 0): Darknet's weights, marked. */
static int save_checkpoint_model(void *user, const char *path)
{
    attachment *a = user;
    save_weights(a->net, (char *)path);
    return mark_checkpoint(path);
}

/* BACKUP/PREFIX CFGNAME SUFFIX into path, BACKUP being backup= of the data
 * file (Darknet's default otherwise): where rank 0 writes the checkpoint
 * and the training chart. */
static int backup_file(attachment *a, const train_plan *plan, const char *prefix, const char *suffix, char *path,
                       size_t len)
{
    list *options = plan->datacfg ? read_data_cfg(plan->datacfg) : NULL;
    const char *backup = options ? option_find_str(options, "backup", "/backup/") : "backup";
    char *base = basecfg((char *)a->cfg.file);
    int n = snprintf(path, len, "%s/%s%s%s", backup, prefix, base, suffix);
    free(base);
    if (options) free_data_cfg(options);
    if (n < 0 || (size_t)n >= len)
        return failed(a->ad, "%s: the path of %s%s%s in the backup folder is too long", a->cfg.file, prefix,
                      "CFGNAME", suffix);
    return 0;
}

/* --- training data ------------------------------------------------------------- */

/* A classifier reads label i of its labels= file for every class i below
 * classes=: a shorter file is refused (on every rank) before any load. */
static int check_labels(attachment *a, const train_plan *plan)
{
    if (!plan->labels || !plan->datacfg) return 0;
    list *options = read_data_cfg(plan->datacfg);
    char *file = option_find_str(options, "labels", "data/labels.list");
    list *lines = get_paths(file);
    int n = lines->size;
    free_ptrs(list_to_array(lines), n);
    free_list(lines);
    int st = n < plan->classes ? failed(a->ad, "%s: classes=%d, but its labels file %s has %d line%s; every class "
                                        "needs a label", plan->datacfg, plan->classes, file, n, n == 1 ? "" : "s")
                               : 0;
    free_data_cfg(options);
    return st;
}

/* Every training file's class (-1: none) into *out, malloc'd. */
static int classes_of(attachment *a, const train_plan *plan, int **out)
{
    char err[4096];
    int *labels = *out = malloc((plan->n ? (size_t)plan->n : 1) * sizeof *labels);
    if (!labels) return failed(a->ad, "out of memory");
    for (int i = 0; i < plan->n; ++i)
        if ((labels[i] = darknet_class_of(plan->paths[i], plan->labels, plan->classes, err, sizeof err)) == -2)
            return failed(a->ad, "%s", err);
    return 0;
}

/* Puts the plan's files in order first in paths (so paths still holds them
 * all) and narrows the trainer's list to them. */
static int keep_files(attachment *a, train_plan *plan, const selsync_plan *mine)
{
    size_t n = (size_t)plan->n, k = 0;
    char **copy = malloc(n * sizeof *copy);
    uint8_t *taken = calloc(n, 1);
    if (!copy || !taken) {
        free(copy);
        free(taken);
        return failed(a->ad, "out of memory");
    }
    for (size_t i = 0; i < mine->count; ++i) {
        copy[k++] = plan->paths[mine->order[i]];
        taken[mine->order[i]] = 1;
    }
    for (size_t i = 0; i < n; ++i)
        if (!taken[i]) copy[k++] = plan->paths[i];
    memcpy(plan->paths, copy, n * sizeof *copy);
    plan->n = (int)mine->count;
    free(taken);
    free(copy);
    return 0;
}

static void free_recalibration_files(attachment *a)
{
    for (int i = 0; i < a->recal_n; ++i) free(a->recal_paths[i]);
    free(a->recal_paths);
    a->recal_paths = NULL;
    a->recal_n = 0;
}

/* bn_recalibrate: the first files of this rank's own (the plan's order). */
static int keep_recalibration_files(attachment *a, const train_plan *plan, const selsync_plan *mine)
{
    size_t n = mine->serve_only ? 0 : mine->count;
    free_recalibration_files(a); /* a second trainer */
    if (n > (size_t)a->cfg.bn_recalibrate) n = (size_t)a->cfg.bn_recalibrate;
    a->letterbox = !plan->labels;
    if (!n) return 0;
    if (!(a->recal_paths = calloc(n, sizeof *a->recal_paths))) return failed(a->ad, "out of memory");
    a->recal_n = (int)n; /* freed with the paths so far */
    for (size_t i = 0; i < n; ++i)
        if (!(a->recal_paths[i] = strdup(plan->paths[mine->order[i]]))) return failed(a->ad, "out of memory");
    return 0;
}

/* The session's recalibrate (every rank). */
static int recalibrate_model(void *user, selsync_session *s, size_t samples)
{
    attachment *a = user;
    int n = (size_t)a->recal_n < samples ? a->recal_n : (int)samples;
    return darknet_recalibrate_bn(a->net, a->recal_paths, n, a->letterbox, s);
}

/* seldp: the loaders read this rank's list in order, chunk after chunk. */
static int next_in_order(int m, void *user)
{
    attachment *a = user;
    return (int)(selsync_session_next_sample(a->session) % (size_t)m);
}

/* --- evaluation ---------------------------------------------------------------- */

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

/* Rank 0 with eval_every: builds the evaluator from the plan's data file
 * (valid=); a held-out list that cannot be scored is refused now. */
static int eval_prepare(attachment *a, const train_plan *plan)
{
    adapter *ad = a->ad;
    evaluator *ev = calloc(1, sizeof *ev);
    if (!ev) return failed(ad, "out of memory");
    a->eval = ev;
    ev->labels = plan->labels;
    ev->classes = plan->classes;
    const char *datacfg = plan->datacfg ? plan->datacfg : "(no data file)";
    list *options = plan->datacfg ? read_data_cfg(plan->datacfg) : NULL;
    char *valid = options ? option_find_str(options, "valid", NULL) : NULL;
    if (!valid)
        return failed(ad, "%s:%d: [selsync] eval_every needs valid= (the held-out list) in %s", a->cfg.file,
              a->cfg.line[SELSYNC_KEY_EVAL_EVERY], datacfg);
    FILE *probe = fopen(valid, "r");
    if (!probe)
        return failed(ad, "%s:%d: [selsync] eval_every: cannot read the held-out list %s named by %s: %s", a->cfg.file,
              a->cfg.line[SELSYNC_KEY_EVAL_EVERY], valid, datacfg, strerror(errno));
    fclose(probe);
    list *plist = get_paths(valid);
    ev->paths = (char **)list_to_array(plist);
    ev->n = plist->size;
    free_list(plist);
    if (ev->n == 0) return failed(ad, "%s: the held-out list %s is empty", datacfg, valid);
    if (!ev->labels) { /* mAP needs boxes: known now, not at the first evaluation */
        if (darknet_read_truths(ev->paths, ev->n, ev->classes, &ev->truth, &ev->n_truth))
            return failed(ad, "%s: the held-out list %s cannot be evaluated", datacfg, valid);
        if (ev->n_truth == 0)
            return failed(ad, "%s: the label files of the held-out list %s (%d images) hold no ground-truth box, so "
                  "mAP@0.5 is undefined; list images with boxes, or drop eval_every", datacfg, valid, ev->n);
    }
    set_cfg_section_handler(SECTION, ignore_section, NULL);
    ev->net = parse_network_cfg(a->cfg.file);
    set_cfg_section_handler(SECTION, on_selsync_section, ad);
    set_batch_network(ev->net, 1);
    if (darknet_map_network(ev->net, &ev->tensors, &ev->n_tensors) || ev->n_tensors != a->n_tensors)
        return failed(ad, "%s: could not build the evaluation copy of the network", a->cfg.file);
    if (ev->labels && ev->net->outputs < ev->classes) /* top-1 reads one output per class */
        return failed(ad, "%s: the network has %d outputs, fewer than the %d classes of %s", a->cfg.file,
              ev->net->outputs, ev->classes, datacfg);
    report(ad, "evaluation: %s of the consensus model every %d steps on %d held-out images (%s)",
           ev->labels ? "top1" : "map50", a->cfg.eval_every, ev->n, valid);
    free_data_cfg(options);
    return 0;
}

static void free_evaluator(evaluator *ev)
{
    if (!ev) return;
    if (ev->net) free_network(ev->net);
    if (ev->paths) free_ptrs((void **)ev->paths, ev->n);
    free(ev->truth);
    free(ev->tensors);
    free(ev);
}

/* The session's score (rank 0): params (every tensor's, in tensor order)
 * loaded into the evaluator's network, scored on the held-out list. */
static double score_model(void *user, const float *params)
{
    evaluator *ev = ((attachment *)user)->eval;
    selsync_model_unpack(ev->tensors, ev->n_tensors, 1, params);
    if (ev->labels) return darknet_classifier_top1(ev->net, ev->paths, ev->n, ev->labels, ev->classes);
    double *ap = calloc((size_t)ev->classes, sizeof *ap), map = 0;
    size_t n_det;
    int rc = ap ? darknet_detector_map(ev->net, ev->paths, ev->n, ev->classes, ev->truth, ev->n_truth, 0, ap, &map,
                               &n_det) : -1;
    free(ap);
    return rc ? NAN : map;
}

/* --- events ---------------------------------------------------------------- */

/* Hashes one cfg section as Darknet parsed it: its type and options. */
static void hash_section(const char *type, int line, const cfg_option *options, int n, void *user)
{
    uint64_t *h = user;
    (void)line;
    *h = selsync_hash(*h, type, strlen(type) + 1);
    for (int i = 0; i < n; ++i) {
        *h = selsync_hash(*h, options[i].key, strlen(options[i].key) + 1);
        if (options[i].val) *h = selsync_hash(*h, options[i].val, strlen(options[i].val) + 1);
    }
}

static int on_loaded(attachment *a, const char *weights)
{
    int marked = a->ad->rank == 0 && weights && *weights && has_checkpoint_mark(weights);
    selsync_model model = {a->tensors, a->n_tensors, (size_t)a->net->n, a->net->momentum != 0,
                           darknet_weights_bytes(a->net)};
    char host[64] = "";
    uint64_t cfg_hash = SELSYNC_HASH_START;
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    visit_cfg_sections(a->cfg.file, hash_section, &cfg_hash);
    selsync_identity id = {host, SELSYNC_BUILD_ID, cfg_hash, darknet_layout_hash(a->net, a->tensors, a->n_tensors)};
    return check(a, selsync_session_load(a->session, &model, &id, weights, marked));
}

/* The training list's content: its paths, in order. */
static uint64_t list_hash(const train_plan *plan)
{
    uint64_t h = SELSYNC_HASH_START;
    for (int i = 0; i < plan->n; ++i) h = selsync_hash(h, plan->paths[i], strlen(plan->paths[i]) + 1);
    return h;
}

static int on_train_begin(attachment *a, train_plan *plan)
{
    adapter *ad = a->ad;
    int *labels = NULL;
    if (plan->datacfg && plan->n == 0) { /* a trainer's list (a host without one passes no data file) */
        list *options = read_data_cfg(plan->datacfg);
        return failed(ad, "%s: the training list %s is empty", plan->datacfg,
                      option_find_str(options, "train", "(train= not set)"));
    }
    if (check_labels(a, plan) || (a->cfg.eval_every > 0 && ad->rank == 0 && eval_prepare(a, plan)) ||
        (a->cfg.checkpoint_every > 0 &&
         backup_file(a, plan, "", "_checkpoint.weights", a->checkpoint, sizeof a->checkpoint)) ||
        (a->cfg.chart_every > 0 && backup_file(a, plan, "chart_", ".png", a->chart, sizeof a->chart)) ||
        classes_of(a, plan, &labels)) {
        free(labels);
        return -1;
    }
    selsync_data data = {.labels = labels, .n = (size_t)plan->n, .list_hash = list_hash(plan),
                         .list_source = plan->datacfg, .classes = plan->classes, .batch = plan->images,
                         .minibatch = a->net->batch,
                         .max_steps = a->net->max_batches > 0 ? (uint64_t)a->net->max_batches : 0,
                         .metric = plan->labels ? "top1" : "map50",
                         .heldout = a->eval ? (size_t)a->eval->n : 0, .checkpoint = a->checkpoint,
                         .chart = a->chart, .note = gemm_kernel(), .chart_drawer = selsync_chart_gnuplot()};
    selsync_plan mine;
    int st = check(a, selsync_session_begin(a->session, &data, &mine));
    free(labels);
    if (st) return st;
    if (mine.console && ad->rank != 0 && ad->console >= 0) { /* with ssp the first worker shows the iterations */
        fflush(stdout);
        if (dup2(ad->console, STDOUT_FILENO) < 0) report(ad, "could not restore stdout");
    }
    if (a->cfg.bn_recalibrate > 0 && keep_recalibration_files(a, plan, &mine)) return -1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int fair = cores > 0 ? (int)(cores / mine.training_ranks) : 1;
    if (fair < 2) fair = 2;
    if (plan->threads > fair) plan->threads = fair;
    if (mine.serve_only) { /* the server: no loop; it serves at TRAIN_END */
        *a->net->seen = (size_t)a->net->max_batches * a->net->batch * a->net->subdivisions;
        plan->threads = 1; /* the trainer still loads one batch */
        return 0;
    }
    /* resume_batch = global: more or fewer mini-batches per update; a
     * resumed step counter goes on from the checkpoint's step */
    a->net->subdivisions = mine.batch / a->net->batch;
    if (mine.resumed) *a->net->seen = (size_t)selsync_session_steps(a->session) * mine.batch;
    a->step_batch = mine.batch;
    /* every draw from this rank's key and the step: load k serves step k,
     * and the trainer thread draws from a stream per step, so a resumed run
     * draws what the uninterrupted one drew */
    uint64_t step = get_current_batch(a->net);
    random_loads_begin(random_key(mine.seed, LOAD_DRAWS), step);
    a->step_draws = random_key(mine.seed, STEP_DRAWS);
    random_stream_seed(random_key(a->step_draws, step));
    if (plan->n > 0 && keep_files(a, plan, &mine)) return -1;
    if (mine.sequential) set_path_sampler(next_in_order, a);
    a->sampler = mine.sequential;
    plan->images = mine.images;
    return 0;
}

/* A step's batch of k mini-batches (speed_batches: this rank's share):
 * one update after the k, the step counter unchanged. */
static void train_as_loaded(network *net, const data *d)
{
    int k = d->X.rows / net->batch;
    if (k < 1 || k == net->subdivisions) return;
    size_t step = get_current_batch(net);
    net->subdivisions = k;
    *net->seen = step * (size_t)net->batch * (size_t)k;
}

/* Injection: replaces this step's batch of own images by a full batch,
 * completed with the samples the chosen senders share. */
static int on_batch_loaded(attachment *a, data *d)
{
    if (!selsync_session_injects(a->session)) return 0;
    size_t in = (size_t)d->X.cols, out = (size_t)d->y.cols, row = in + out;
    int loaded = d->X.rows, batch;
    float *rows = malloc((size_t)(loaded > 0 ? loaded : 1) * row * sizeof *rows), *full;
    if (!rows || d->y.rows != loaded) {
        free(rows);
        return failed(a->ad, "injection: out of memory, or a batch of %d images with %d labels", loaded, d->y.rows);
    }
    for (int i = 0; i < loaded; ++i) {
        memcpy(rows + i * row, d->X.vals[i], in * sizeof(float));
        memcpy(rows + i * row + in, d->y.vals[i], out * sizeof(float));
    }
    if (check(a, selsync_session_batch_loaded(a->session, rows, loaded, row, &full, &batch))) {
        free(rows);
        return -1;
    }
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
    free(full);
    free(rows);
    return 0;
}

static void on_iteration_printed(attachment *a, FILE *out)
{
    char text[128];
    selsync_session_describe_step(a->session, text, sizeof text);
    fputs(text, out);
}

static int on_train_end(attachment *a)
{
    if (a->sampler) set_path_sampler(NULL, NULL);
    a->sampler = 0;
    return check(a, selsync_session_end(a->session, stderr));
}

/* 0 to go on; BEFORE_SAVE: 1 skips the save; BEFORE_UPDATE: 1 when the layers are updated; -1: failed (failed()). */
static int on_event(network *net, network_event event, void *arg, void *user)
{
    attachment *a = user;
    switch (event) {
    case NETWORK_LOADED: return on_loaded(a, arg);
    case TRAIN_BEGIN: return on_train_begin(a, arg);
    case BEFORE_UPDATE: { /* gradient sums divided by the ranks' mean batch: averaged, the global batch's */
        update_args *u = arg;
        if (a->step_batch) u->batch = a->step_batch;
        /* the layers' SGD (sgd_update_cpu; the axpy, axpy, scal of the
         * others): weights' grad + (-decay * batch) * weights, then times
         * the momentum; Adam leaves no such residual. With the rates the
         * engine may apply it: 1 then makes update_network skip the layers' */
        selsync_host_update sgd = {u->momentum, -u->decay * u->batch, NULL};
        if (a->sgd_rates) {
            darknet_sgd_rates(net, a->tensors, a->n_tensors, u, a->sgd_rates);
            sgd.rates = a->sgd_rates;
        }
        if (check(a, selsync_session_before_update(a->session, *net->cost, u->learning_rate, u->adam ? NULL : &sgd)))
            return -1;
        return selsync_session_update_applied(a->session);
    }
    case AFTER_UPDATE:
        random_stream_seed(random_key(a->step_draws, get_current_batch(net)));
        return check(a, selsync_session_after_update(a->session));
    case BATCH_REQUESTED: selsync_session_batch_requested(a->session, arg); return 0;
    case BATCH_LOADED:
        if (on_batch_loaded(a, arg)) return -1;
        train_as_loaded(net, arg);
        return 0;
    case ITERATION_PRINTED: on_iteration_printed(a, arg); return 0;
    case TRAIN_END: return on_train_end(a);
    case BEFORE_SAVE: return a->ad->rank != 0; /* only rank 0 writes */
    case LAYER_BACKWARD_DONE: /* train_network_datum updates after the batch's last subdivision */
        if (((*net->seen) / net->batch) % net->subdivisions == 0)
            return check(a, selsync_session_layer_ready(a->session, (size_t)*(int *)arg));
        return 0;
    case BATCHNORM_STATISTICS:
    case BATCHNORM_GRADIENT: {
        batchnorm_batch *b = arg;
        return check(a, selsync_session_bn_share(a->session, event == BATCHNORM_GRADIENT, (size_t)b->channels,
                                                 (size_t)b->count, b->a, b->b));
    }
    }
    return 0;
}

/* The events on_event handles. */
#define HANDLED_EVENTS (NETWORK_EVENT_BIT(NETWORK_LOADED) | NETWORK_EVENT_BIT(TRAIN_BEGIN) | \
    NETWORK_EVENT_BIT(BATCH_REQUESTED) | NETWORK_EVENT_BIT(BATCH_LOADED) | NETWORK_EVENT_BIT(BEFORE_UPDATE) | \
    NETWORK_EVENT_BIT(AFTER_UPDATE) | NETWORK_EVENT_BIT(ITERATION_PRINTED) | NETWORK_EVENT_BIT(TRAIN_END) | \
    NETWORK_EVENT_BIT(BEFORE_SAVE) | NETWORK_EVENT_BIT(LAYER_BACKWARD_DONE) | \
    NETWORK_EVENT_BIT(BATCHNORM_STATISTICS) | NETWORK_EVENT_BIT(BATCHNORM_GRADIENT))

/* --- the [selsync] section --------------------------------------------------- */

static attachment *find_attachment(adapter *ad, const network *net)
{
    for (attachment *a = ad->attached; a; a = a->next)
        if (a->net == net) return a;
    return NULL;
}

/* The [selsync] section's options as a checked config (err on failure). */
static selsync_status read_section(selsync_config *cfg, const char *cfgfile, int line, const cfg_option *options,
                                   int n, char *err, size_t len)
{
    selsync_config_default(cfg, cfgfile, line);
    selsync_status st = SELSYNC_OK;
    for (int i = 0; i < n && st == SELSYNC_OK; ++i) {
        if (!options[i].val) {
            snprintf(err, len, "%s:%d: [selsync] '%s' is not a key = value line; allowed: one key=value per line",
                     cfgfile, options[i].line, options[i].key);
            st = SELSYNC_ECONFIG;
        } else {
            st = selsync_config_set(cfg, options[i].key, options[i].val, options[i].line, err, len);
        }
    }
    return st ? st : selsync_config_finish(cfg, err, len);
}

/* Before the layers are built: the section is checked (a mistake is
 * reported before a large network is built), and the initial weights are
 * drawn from the seed's stream (rank 0's are shared with every rank). */
static int preview_selsync_section(const char *cfgfile, int line, const cfg_option *options, int n, void *user)
{
    selsync_config cfg;
    char err[1024];
    if (read_section(&cfg, cfgfile, line, options, n, err, sizeof err)) {
        report(user, "%s", err);
        return -1;
    }
    random_stream_seed(random_key(cfg.seed, INITIAL_WEIGHTS_DRAWS));
    return 0;
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
    selsync_status st = read_section(&a->cfg, cfgfile, line, options, n, err, sizeof err);
    a->ad = ad;
    a->net = net;
    selsync_host host = {a, score_model, save_checkpoint_model, recalibrate_model};
    if (st == SELSYNC_OK) st = selsync_session_create(&a->cfg, &ad->comm, &host, &a->session, err, sizeof err);
    if (st == SELSYNC_OK && (darknet_map_network(net, &a->tensors, &a->n_tensors) ||
                             (darknet_update_is_sgd(net) &&
                              !(a->sgd_rates = malloc((a->n_tensors ? a->n_tensors : 1) * sizeof *a->sgd_rates))) ||
                             add_network_hook(net, on_event, a, HANDLED_EVENTS))) {
        snprintf(err, sizeof err, "out of memory");
        st = SELSYNC_ENOMEM;
    }
    if (st != SELSYNC_OK) {
        report(ad, "%s", err);
        selsync_session_destroy(a->session);
        free(a->tensors);
        free(a->sgd_rates);
        free(a);
        return -1;
    }
    a->next = ad->attached;
    ad->attached = a;
    net->batchnorm_shared = a->cfg.sync_batchnorm;
    if (ad->rank == 0) {
        char text[512];
        selsync_config_describe(&a->cfg, ad->world, text, sizeof text);
        const char *hosts = selsync_mpi_hosts();
        report(NULL, "%s; %s%s%s%s%s%s", text, gemm_kernel(), *hosts ? "; sums over MPI (" : "", hosts,
               *hosts ? ")" : "", ad->network[0] ? "; virtual time: " : "", ad->network);
    }
    return 0;
}

/* --- entry points -------------------------------------------------------------- */

/* 1 when Darknet computes on one thread: OMP_NUM_THREADS and
 * OPENBLAS_NUM_THREADS are 1 where set, and one of them is set. */
static int one_thread(void)
{
    const char *omp = getenv("OMP_NUM_THREADS"), *blas = getenv("OPENBLAS_NUM_THREADS");
    int set = 0;
    if (omp && *omp && (set = 1) && strcmp(omp, "1") != 0) return 0;
    if (blas && *blas && (set = 1) && strcmp(blas, "1") != 0) return 0;
    return set;
}

/* With SELSYNC_VIRTUAL set, the transport goes behind a virtual clock
 * (selsync/vclock.h); 0, or -1 with the message in err. */
static int start_virtual_time(adapter *ad, char *err, size_t len)
{
    const char *spec = getenv("SELSYNC_VIRTUAL");
    selsync_vnet net;
    if (!spec || !*spec) return 0;
    if (selsync_vnet_parse(spec, ad->rank, &net, err, len)) return -1;
    if (!net.wall && !one_thread()) {
        snprintf(err, len, "SELSYNC_VIRTUAL=%s counts a rank's computation as the CPU time of its one thread: "
                 "set OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 (or compute=wall)", spec);
        return -1;
    }
    if (selsync_comm_virtual(ad->comm, &net, NULL, &ad->comm, err, len)) return -1;
    selsync_vnet_describe(&net, ad->network, sizeof ad->network);
    return 0;
}

/* Darknet's main starts this plugin only if it has the same version. */
const int darknet_plugin_api_version = DARKNET_PLUGIN_API_VERSION;

int darknet_plugin_init(int *argc, char ***argv)
{
    char err[512] = "";
    adapter *ad = calloc(1, sizeof *ad);
    if (!ad) {
        report(NULL, "out of memory");
        return EXIT_FAILURE;
    }
    if (selsync_mpi_init(argc, argv, &ad->comm, err, sizeof err)) {
        report(NULL, "%s", err); /* a failed init leaves MPI down */
        free(ad);
        return EXIT_FAILURE;
    }
    ad->rank = selsync_comm_rank(&ad->comm);
    ad->world = selsync_comm_size(&ad->comm);
    if (start_virtual_time(ad, err, sizeof err) ||
        set_cfg_section_handler(SECTION, on_selsync_section, ad) != 0 ||
        set_cfg_section_preview(SECTION, preview_selsync_section) != 0) {
        report(ad, "%s", err[0] ? err : "could not register the " SECTION " section handler");
        failed(ad, "plugin start failed");
        selsync_mpi_finalize();
        free(ad);
        return EXIT_FAILURE;
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
        selsync_session_destroy(ad->attached->session);
        free_evaluator(ad->attached->eval);
        free_recalibration_files(ad->attached);
        free(ad->attached->tensors);
        free(ad->attached->sgd_rates);
        free(ad->attached);
        ad->attached = next;
    }
    selsync_comm_virtual_free(&ad->comm);
    selsync_mpi_finalize();
    if (ad->console >= 0) close(ad->console);
    free(ad);
    the_adapter = NULL;
    return status;
}
