/* Usage: inject_check CFG STEPS OUT_PREFIX
 * Drives the Darknet adapter's data injection with synthetic batches, as
 * Darknet's trainers do: BATCH_REQUESTED before every load (the count the
 * adapter asks for), one load in flight while a step trains. Every loaded
 * row i of rank r at step t holds (r, t, i) and the class (r+i) % C.
 * After BATCH_LOADED it checks the batch: full, this rank's own rows first
 * (all it loaded; more than the others' count only on a sender),
 * then the shared rows of every other sender in ascending order, each
 * exactly the first rows that sender loaded, with their classes. Writes
 * OUT_PREFIX.RANK.senders, one line per step: "step: s0 s1 ... ok|BAD why",
 * the senders as this rank saw them (to compare across ranks), and trains
 * on the batch so the metrics record the step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "darknet.h"

int darknet_plugin_init(int *argc, char ***argv);
int darknet_plugin_fini(int status);

#define CLASSES 4

static int rank_of_env(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_RANK");
    return v ? atoi(v) : 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s CFG STEPS OUT_PREFIX\n", argv[0]);
        return 2;
    }
    if (darknet_plugin_init(&argc, &argv)) return 1;
    int rank = rank_of_env(), steps = atoi(argv[2]);
    network *net = load_network(argv[1], NULL, 0);
    int batch = net->batch * net->subdivisions;

    /* a training list of 64 files, classes in their names */
    char *labels[CLASSES] = {"_c0_", "_c1_", "_c2_", "_c3_"};
    char *paths[64], names[64][32];
    for (int i = 0; i < 64; ++i) {
        snprintf(names[i], sizeof names[i], "f%02d_c%d_.png", i, i % CLASSES);
        paths[i] = names[i];
    }
    train_plan plan = {paths, 64, 4, batch, labels, CLASSES, NULL};
    report_network_event(net, TRAIN_BEGIN, &plan);
    int own_load = plan.images; /* b': what a rank that does not send loads */
    int load = batch, next = batch;
    report_network_event(net, BATCH_REQUESTED, &load); /* step 0's load */

    char path[1024];
    snprintf(path, sizeof path, "%s.%d.senders", argv[3], rank);
    FILE *out = fopen(path, "w");
    if (!out) return 1;
    int bad = 0;
    for (int t = 0; t < steps; ++t, load = next) {
        next = batch;
        report_network_event(net, BATCH_REQUESTED, &next); /* step t+1's load */
        data d = {0};
        d.X = make_matrix(load, 3);
        d.y = make_matrix(load, CLASSES);
        for (int i = 0; i < load; ++i) {
            d.X.vals[i][0] = (float)rank, d.X.vals[i][1] = (float)t, d.X.vals[i][2] = (float)i;
            d.y.vals[i][(rank + i) % CLASSES] = 1;
        }
        report_network_event(net, BATCH_LOADED, &d);
        const char *why = NULL;
        int own = 0;
        while (own < d.X.rows && (int)d.X.vals[own][0] == rank) ++own;
        if (d.X.rows != batch || d.y.rows != batch) why = "batch not full";
        for (int i = 0; i < own && !why; ++i)
            if ((int)d.X.vals[i][1] != t || (int)d.X.vals[i][2] != i) why = "own rows out of order";
        int senders[64], k = 0;
        if (own != load) why = "own rows not all kept";
        if (load != own_load) senders[k++] = rank; /* loaded more: a sender */
        int shared = -1, prev = -1;
        for (int i = own; i < d.X.rows && !why;) {
            int from = (int)d.X.vals[i][0], n = 0;
            if (from <= prev || from == rank) why = "senders not ascending";
            while (i < d.X.rows && (int)d.X.vals[i][0] == from) {
                if ((int)d.X.vals[i][1] != t || (int)d.X.vals[i][2] != n) why = "not the sender's first rows";
                if (d.y.vals[i][(from + n) % CLASSES] != 1) why = "class does not match";
                ++n, ++i;
            }
            if (shared >= 0 && n != shared) why = "senders shared different counts";
            shared = n, prev = from;
            if (k < 64) senders[k++] = from;
        }
        fprintf(out, "%d:", t);
        for (int lo = 0; lo < k; ++lo) { /* ascending, whichever slot this rank was in */
            int min = lo;
            for (int j = lo + 1; j < k; ++j)
                if (senders[j] < senders[min]) min = j;
            int tmp = senders[lo];
            senders[lo] = senders[min], senders[min] = tmp;
            fprintf(out, " %d", senders[lo]);
        }
        fprintf(out, " %s\n", why ? why : "ok");
        bad += why != NULL;
        if (!why) train_network(net, d); /* the step that logs the injected bytes */
        free_data(d);
    }
    fclose(out);
    free_network(net);
    return darknet_plugin_fini(bad ? 1 : 0);
}
