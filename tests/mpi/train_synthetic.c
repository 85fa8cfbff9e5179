/* Usage: train_synthetic CFG STEPS OUT_PREFIX [options]
 *   --init FILE        load these weights (all ranks; rank 0's are used)
 *   --resume FILE      load FILE keeping its step count (a checkpoint resumes)
 *   --begin            report TRAIN_BEGIN (empty plan) as Darknet's trainers do
 *   --save FILE        save the weights at the end (rank 0 only)
 *   --spike-rank R --spike-step S   rank R scales its inputs by 50 at step S
 *   --ssp              report TRAIN_BEGIN (empty plan) as Darknet's trainers
 *                      do, for method = ssp: rank 0 then serves and trains
 *                      nothing; rank r trains the data of part r - 1
 *   --slow-rank R --slow-ms MS   rank R sleeps MS milliseconds every step
 *   --chunk-bytes N    the MPI transport's bytes per call (pieces)
 *   --background-sums  the MPI transport's background thread for overlapped
 *                      sums also with every rank on one host
 *   --rank-init        Darknet's random initial weights seeded with the rank
 *                      (1 + rank), so that every rank builds different ones
 *                      (without it, seeded with 1; never from seed=, as the
 *                      [selsync] section's preview would draw them)
 *   --loads            report BATCH_REQUESTED and BATCH_LOADED around every
 *                      step, as Darknet's trainers do, and train the batch
 *                      size the hook asks for; the samples follow those of
 *                      the lower ranks (their sizes summed with MPI_Exscan),
 *                      so unequal batches still cover the step's set in order
 *   --nan-rank R --nan-step S   one input of rank R's step S (counted from
 *                      0 in this process) is NaN: its loss and gradient too
 *
 * Trains the network of CFG through the darknet executable's plugin path
 * (darknet_plugin_init, load_network, the event hook) on deterministic
 * synthetic data: with W ranks and batch b, rank r trains step t on samples
 * r*b .. r*b+b-1 of a set of W*b samples that depends only on t (counted
 * from the weights' step count, so a resumed run sees what the
 * uninterrupted one saw), so one process with batch W*b sees exactly the
 * union of the ranks' batches.
 * Writes OUT_PREFIX.RANK.hashes: "step hash" of all parameters after each
 * step, for comparisons across ranks, OUT_PREFIX.RANK.loaded: "loaded hash"
 * right after load_network (after the plugin's NETWORK_LOADED),
 * OUT_PREFIX.RANK.begun: "begun hash" right after TRAIN_BEGIN (with --begin
 * or --ssp: a checkpoint's state is in the network then), and
 * OUT_PREFIX.RANK.pid, and OUT_PREFIX.RANK.stats: after the last step,
 * before TRAIN_END, per batch-normalised layer a line "mean" and a line
 * "variance" with its rolling statistics. With --nan-rank, OUT_PREFIX.RANK.hashes gets a third
 * column: the number of parameters that are not finite. Rank and size come
 * from the launcher environment (1 process without one). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "comm_mpi.h"
#include "darknet.h"

int darknet_plugin_init(int *argc, char ***argv);
int darknet_plugin_fini(int status);

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v ? atoi(v) : def;
}

/* FNV-1a over the bytes of the parameters of the convolutional and
 * connected layers (weights, biases, BN scales and running statistics);
 * *nonfinite (may be NULL) receives how many of them are NaN or infinite. */
static uint64_t hash_params(const network *net, size_t *nonfinite)
{
    if (nonfinite) *nonfinite = 0;
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        size_t nw, nb;
        if (l->type == CONVOLUTIONAL) nw = (size_t)l->nweights, nb = (size_t)l->n;
        else if (l->type == CONNECTED) nw = (size_t)l->inputs * l->outputs, nb = (size_t)l->outputs;
        else continue;
        const float *arrays[] = {l->weights, l->biases, l->scales, l->rolling_mean, l->rolling_variance};
        for (int k = 0; k < 5; ++k) {
            if (!arrays[k]) continue;
            const unsigned char *p = (const unsigned char *)arrays[k];
            size_t count = k == 0 ? nw : nb, bytes = count * sizeof(float);
            if (nonfinite)
                for (size_t j = 0; j < count; ++j) *nonfinite += !isfinite(arrays[k][j]);
            for (size_t j = 0; j < bytes; ++j) h = (h ^ p[j]) * 1099511628211ULL;
        }
    }
    return h;
}

/* Sample s of the set used at step t: inputs in [0,1), a one-hot class. */
static void fill_sample(float *x, int inputs, float *y, int classes, int t, int s)
{
    uint32_t st = 2654435761u * (uint32_t)(t * 1000 + s + 1);
    for (int i = 0; i < inputs; ++i) {
        st = st * 1664525u + 1013904223u;
        x[i] = (float)((st >> 8) / 16777216.0);
    }
    memset(y, 0, classes * sizeof(float));
    y[(t + s) % classes] = 1;
}

/* One line of the hashes file: label and hash, with count_bad also the
 * number of parameters that are not finite. */
/* Every batch-normalised layer's rolling means and variances, a line each. */
static int write_stats(const char *path, const network *net)
{
    FILE *out = fopen(path, "w");
    if (!out) return -1;
    for (int i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        if (!l->batch_normalize || !l->rolling_mean) continue;
        for (int v = 0; v < 2; ++v) {
            fputs(v ? "variance" : "mean", out);
            for (int c = 0; c < l->out_c; ++c) fprintf(out, " %.9g", (v ? l->rolling_variance : l->rolling_mean)[c]);
            fputc('\n', out);
        }
    }
    return fclose(out);
}

static void write_hash(FILE *out, const char *label, const network *net, int count_bad)
{
    size_t bad;
    uint64_t h = hash_params(net, &bad);
    if (count_bad) fprintf(out, "%s %016llx %zu\n", label, (unsigned long long)h, bad);
    else fprintf(out, "%s %016llx\n", label, (unsigned long long)h);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s CFG STEPS OUT_PREFIX [--init F] [--save F] "
                        "[--spike-rank R --spike-step S] [--ssp] [--slow-rank R --slow-ms MS] "
                        "[--chunk-bytes N] [--resume F] [--begin] [--rank-init] "
                        "[--nan-rank R --nan-step S]\n", argv[0]);
        return 2;
    }
    if (darknet_plugin_init(&argc, &argv)) return 1;
    const char *init = NULL, *save = NULL;
    int spike_rank = -1, spike_step = -1, ssp = 0, slow_rank = -1, slow_ms = 0, begin = 0, clear = 1;
    int rank_init = 0, nan_rank = -1, nan_step = -1, loads = 0;
    for (int i = 4; i < argc; i += 2) {
        if (!strcmp(argv[i], "--ssp")) { ssp = 1; i--; continue; }
        if (!strcmp(argv[i], "--begin")) { begin = 1; i--; continue; }
        if (!strcmp(argv[i], "--rank-init")) { rank_init = 1; i--; continue; }
        if (!strcmp(argv[i], "--loads")) { loads = 1; i--; continue; }
        if (!strcmp(argv[i], "--background-sums")) { selsync_mpi_set_background_sums(1); i--; continue; }
        if (i + 1 >= argc) break;
        if (!strcmp(argv[i], "--init")) init = argv[i + 1];
        else if (!strcmp(argv[i], "--resume")) init = argv[i + 1], clear = 0;
        else if (!strcmp(argv[i], "--save")) save = argv[i + 1];
        else if (!strcmp(argv[i], "--spike-rank")) spike_rank = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--spike-step")) spike_step = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--slow-rank")) slow_rank = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--slow-ms")) slow_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--nan-rank")) nan_rank = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--nan-step")) nan_step = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunk-bytes")) selsync_mpi_set_chunk_bytes((size_t)atol(argv[i + 1]));
    }
    int rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    int steps = atoi(argv[2]);
    char path[1024];
    snprintf(path, sizeof path, "%s.%d.pid", argv[3], rank);
    FILE *pid = fopen(path, "w");
    if (pid) fprintf(pid, "%ld\n", (long)getpid()), fclose(pid);
    /* the initial weights from rand(), seeded here (by the rank with
     * --rank-init), not from seed= by the [selsync] section's preview */
    set_cfg_section_preview("[selsync]", NULL);
    srand(rank_init ? 1 + (unsigned)rank : 1);
    network *net = load_network(argv[1], (char *)init, clear);
    net->train = 1;
    snprintf(path, sizeof path, "%s.%d.loaded", argv[3], rank);
    FILE *loaded = fopen(path, "w");
    if (!loaded) {
        perror(path);
        return 1;
    }
    fprintf(loaded, "loaded %016llx\n", (unsigned long long)hash_params(net, NULL));
    fclose(loaded);
    int part = ssp ? rank - 1 : rank, step_batch = net->batch * net->subdivisions;
    if (ssp || begin) {
        train_plan plan = {NULL, 0, 1, net->batch * net->subdivisions, NULL, 0, NULL};
        report_network_event(net, TRAIN_BEGIN, &plan);
        step_batch = plan.images;
        if (ssp && get_current_batch(net) >= (size_t)net->max_batches) steps = 0; /* the server: done */
        snprintf(path, sizeof path, "%s.%d.begun", argv[3], rank);
        FILE *begun = fopen(path, "w");
        if (!begun) {
            perror(path);
            return 1;
        }
        write_hash(begun, "begun", net, 0);
        fclose(begun);
    }
    int t0 = (int)get_current_batch(net); /* (a resumed step counter is set at TRAIN_BEGIN) */
    snprintf(path, sizeof path, "%s.%d.hashes", argv[3], rank);
    FILE *out = fopen(path, "w");
    if (!out) {
        perror(path);
        return 1;
    }
    int b = step_batch, first = part * b;
    data d = {0};
    for (int t = t0; t < t0 + steps; ++t) {
        if (rank == slow_rank) nanosleep(&(struct timespec){slow_ms / 1000, slow_ms % 1000 * 1000000L}, NULL);
        if (loads) {
            b = step_batch;
            report_network_event(net, BATCH_REQUESTED, &b);
            first = 0;
            MPI_Exscan(&b, &first, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0) first = 0;
        }
        if (d.X.rows != b) {
            free_data(d);
            d = (data){0};
            d.X = make_matrix(b, net->inputs);
            d.y = make_matrix(b, net->truths);
        }
        for (int i = 0; i < b; ++i) {
            fill_sample(d.X.vals[i], net->inputs, d.y.vals[i], net->truths, t, first + i);
            if (rank == spike_rank && t == spike_step)
                for (int j = 0; j < net->inputs; ++j) d.X.vals[i][j] *= 50;
        }
        if (rank == nan_rank && t - t0 == nan_step) d.X.vals[0][0] = NAN;
        if (loads) report_network_event(net, BATCH_LOADED, &d);
        train_network(net, d);
        char label[32];
        snprintf(label, sizeof label, "%d", t);
        write_hash(out, label, net, nan_rank >= 0);
    }
    snprintf(path, sizeof path, "%s.%d.stats", argv[3], rank);
    if (write_stats(path, net)) {
        perror(path);
        return 1;
    }
    report_network_event(net, TRAIN_END, NULL);
    write_hash(out, "final", net, nan_rank >= 0);
    fclose(out);
    if (save) save_weights(net, (char *)save);
    free_data(d);
    free_network(net);
    return darknet_plugin_fini(0);
}
