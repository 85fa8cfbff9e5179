/* Usage: train_steps CFG STEPS OUT
 *        train_steps --compare A B TOLERANCE STEPS [GRADIENT_TOLERANCE]
 * The first form trains the network of CFG for STEPS batches of fixed
 * pseudo-random images (one-hot classes, or one box per image for a
 * network that ends in a [yolo] layer) and writes the loss of every step
 * followed by every layer's parameters (Darknet's weights file) to OUT,
 * the weight gradients of the first step, taken from the same parameters by
 * both builds, to OUT.g (write_gradients), and the branches every step took
 * to OUT.t (write_branches). It prints the OpenBLAS kernel it ran on.
 * Built with the optimised Darknet and with the reference loops, so the
 * files of one cfg can be compared.
 * The second form compares two such sets of files (STEPS losses each): it
 * prints the relative error max|a - b| / max|b| of the losses, of all
 * parameters, of the worst block of 4096 parameters and of the weight
 * gradients, and exits 1 when the losses' or all parameters' error exceeds
 * TOLERANCE, the gradients' GRADIENT_TOLERANCE (default TOLERANCE), or the
 * files do not match.
 * A max pool or a leaky or relu unit whose inputs lie within rounding of
 * each other may take another branch in the two runs; that changes the
 * gradients of its layer and of those below it outright, and everything
 * after that step. Where the branches differ the comparison names the
 * channels and holds only what they cannot change: the losses up to the
 * first step that differs, the gradients of the layers above the highest
 * one that differs in the first step, no parameters; and it fails when the
 * first step's branches differ in more channels than rounding explains
 * (max_flips). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "darknet.h"
#include "synthetic_batch.h"

/* OpenBLAS's name for the kernel it chose; absent without OpenBLAS */
extern char *openblas_get_corename(void) __attribute__((weak));

/* The number of channels whose branches may differ in the first step for
 * UNITS branches: a near-tie is rare (cifar.cfg at batch 10: about 10 in
 * 5.6 million units, all within 1e-6 of the largest output), a wrong
 * forward pass moves many. */
static long max_flips(long units)
{
    return 2 + units / 100000;
}

/* OUT.g: the weight gradients the convolutional and connected layers of
 * NET carry (momentum times the gradient of the step just taken, plus
 * history), one record per layer: int32 layer index, int32 count, floats */
static int write_gradients(network *net, const char *out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.g", out);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    for (int i = 0; i < net->n; ++i) {
        layer *l = &net->layers[i];
        int head[2] = {i, l->type == CONVOLUTIONAL ? l->nweights
                          : l->type == CONNECTED   ? l->inputs * l->outputs
                                                   : 0};
        if (!head[1]) continue;
        fwrite(head, sizeof head, 1, f);
        fwrite(l->weight_updates, sizeof(float), head[1], f);
    }
    return fclose(f) ? 1 : 0;
}

enum branch_kind { BRANCH_MAX_POOL, BRANCH_SIGN };

/* Appends to F the branches of step STEP (from 0) of NET: per layer and
 * output channel a hash (FNV-1a) of the inputs a max pool chose, or of the
 * signs of a leaky or relu layer's outputs (their gradient goes by sign),
 * over all images; one record per layer: int32 step, layer index, kind,
 * channels, units (batch times outputs), then one uint64 per channel. */
static void write_branches(network *net, int step, FILE *f)
{
    for (int i = 0; i < net->n; ++i) {
        layer *l = &net->layers[i];
        int kind;
        if (l->type == MAXPOOL)
            kind = BRANCH_MAX_POOL;
        else if (l->activation == LEAKY || l->activation == RELU)
            kind = BRANCH_SIGN;
        else
            continue;
        int head[5] = {step, i, kind, l->out_c, l->batch * l->outputs};
        uint64_t *hash = malloc(l->out_c * sizeof *hash);
        for (int c = 0; c < l->out_c; ++c) hash[c] = 14695981039346656037ULL;
        long map = (long)l->out_h * l->out_w;
        for (long j = 0; j < head[4]; ++j) {
            uint32_t v = kind == BRANCH_MAX_POOL ? (uint32_t)l->indexes[j] : l->output[j] > 0;
            uint64_t *h = &hash[j / map % l->out_c];
            for (int byte = 0; byte < 4; ++byte) *h = (*h ^ ((v >> 8 * byte) & 255)) * 1099511628211ULL;
        }
        fwrite(head, sizeof head, 1, f);
        fwrite(hash, sizeof *hash, l->out_c, f);
        free(hash);
    }
}

static int train(const char *cfg, int steps, const char *out)
{
    if (openblas_get_corename) printf("openblas kernel %s\n", openblas_get_corename());
    srand(1);
    network *net = parse_network_cfg((char *)cfg);
    data d = synthetic_batch(net);
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s.t", out);
    FILE *f = fopen(out, "wb"), *t = fopen(tpath, "wb");
    if (!f || !t) {
        perror(f ? tpath : out);
        return 1;
    }
    for (int i = 0; i < steps; ++i) {
        float loss = train_network(net, d);
        fwrite(&loss, sizeof loss, 1, f);
        printf("step %d loss %.7g\n", i + 1, loss);
        write_branches(net, i, t);
        if (i == 0 && write_gradients(net, out)) {
            fclose(f);
            fclose(t);
            return 1;
        }
    }
    fclose(f);
    if (fclose(t)) {
        perror(tpath);
        return 1;
    }
    /* the parameters go to OUT.w with save_weights, then after the losses */
    char wpath[4096];
    snprintf(wpath, sizeof wpath, "%s.w", out);
    save_weights(net, wpath);
    FILE *w = fopen(wpath, "rb");
    f = fopen(out, "ab");
    if (!w || !f) {
        perror(wpath);
        return 1;
    }
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, w)) > 0) fwrite(buf, 1, n, f);
    fclose(w);
    fclose(f);
    remove(wpath);
    free_data(d);
    free_network(net);
    return 0;
}

/* the bytes of PATH (with SUFFIX appended), their count in *BYTES */
static char *read_all(const char *path, const char *suffix, long *bytes)
{
    char name[4096];
    snprintf(name, sizeof name, "%s%s", path, suffix);
    FILE *f = fopen(name, "rb");
    if (!f) {
        perror(name);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    *bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *v = malloc(*bytes > 0 ? *bytes : 1);
    if (fread(v, 1, *bytes, f) != (size_t)*bytes) {
        fprintf(stderr, "%s: short read\n", name);
        exit(2);
    }
    fclose(f);
    return v;
}

/* raises *DIFF to max|a - b| and *SCALE to max|b| over n floats */
static void max_error(const float *a, const float *b, long n, double *diff, double *scale)
{
    for (long i = 0; i < n; ++i) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= *diff)) *diff = e; /* NaN counts as the largest error */
        if (fabs(b[i]) > *scale) *scale = fabs(b[i]);
    }
}

/* max|a - b| / max|b| over n floats */
static double rel_error(const float *a, const float *b, long n)
{
    double diff = 0, scale = 0;
    max_error(a, b, n, &diff, &scale);
    return scale > 0 ? diff / scale : diff;
}

/* What two OUT.t files say: the first step (from 0) whose branches
 * differ (-1 if none), the channels that differ in all steps and in the
 * first, the highest layer that differs in the first step (-1 if none),
 * the number of branches (units) of the first step. */
struct branch_diff {
    int first_step, first_layer;
    long flips, first_flips, first_units;
};

/* Compares the OUT.t files A and B of N bytes each into *D and prints the
 * channels that differ. Returns 0, or -1 if the files do not match. */
static int compare_branches(const char *a, const char *b, long n, struct branch_diff *d)
{
    *d = (struct branch_diff){-1, -1, 0, 0, 0};
    for (long at = 0; at < n;) {
        int head[5], other[5]; /* step, layer, kind, channels, units */
        if (n - at < (long)sizeof head) return -1;
        memcpy(head, a + at, sizeof head);
        memcpy(other, b + at, sizeof other);
        at += sizeof head;
        if (memcmp(head, other, sizeof head) || head[3] <= 0 || (n - at) / 8 < head[3]) return -1;
        if (head[0] == 0) d->first_units += head[4];
        for (int c = 0; c < head[3]; ++c, at += 8) {
            if (!memcmp(a + at, b + at, 8)) continue;
            if (!d->flips++) d->first_step = head[0];
            if (head[0] != 0) continue;
            if (++d->first_flips <= 8)
                printf("%s layer %d (%s) channel %d", d->first_flips > 1 ? "," : "; branches differ in step 1:",
                       head[1], head[2] == BRANCH_MAX_POOL ? "max pool" : "sign", c);
            if (head[1] > d->first_layer) d->first_layer = head[1];
        }
    }
    if (d->first_flips > 8) printf(" and %ld more", d->first_flips - 8);
    if (d->flips > d->first_flips)
        printf("%s %ld channel%s from step %d on", d->first_flips ? ", then in" : "; branches differ in",
               d->flips - d->first_flips, d->flips - d->first_flips > 1 ? "s" : "",
               d->first_flips ? 2 : d->first_step + 1);
    return 0;
}

/* the bytes of PA.SUFFIX, those of PB.SUFFIX in *B, their count in *N;
 * exits 1 when the sizes differ */
static char *read_pair(const char *pa, const char *pb, const char *suffix, char **b, long *n)
{
    long nb;
    char *a = read_all(pa, suffix, n);
    *b = read_all(pb, suffix, &nb);
    if (nb == *n) return a;
    fprintf(stderr, "%s%s and %s%s differ in size\n", pa, suffix, pb, suffix);
    exit(1);
}

/* OUT: the losses, then the weights file (a 20-byte header: major, minor,
 * revision, seen; then the layers' arrays) */
static int compare(const char *pa, const char *pb, double tol, int steps, double grad_tol)
{
    long n;
    char *ca, *cb;
    ca = read_pair(pa, pb, "", &cb, &n);
    float *a = (float *)ca, *b = (float *)cb;
    n /= sizeof(float);
    if (n < steps + 5) {
        fprintf(stderr, "%s: too short\n", pa);
        return 1;
    }
    double worst = 0;
    for (long i = steps + 5; i < n; i += 4096) {
        double e = rel_error(a + i, b + i, n - i < 4096 ? n - i : 4096);
        if (!(e <= worst)) worst = e;
    }
    double params = rel_error(a + steps + 5, b + steps + 5, n - steps - 5);
    printf("loss relative error %.3g, parameters %.3g overall, %.3g in the worst block of 4096",
           rel_error(a, b, steps), params, worst);

    struct branch_diff d;
    ca = read_pair(pa, pb, ".t", &cb, &n);
    int match = !compare_branches(ca, cb, n, &d);
    free(ca);
    free(cb);
    if (!match) {
        fprintf(stderr, "\n%s.t and %s.t do not match\n", pa, pb);
        return 1;
    }
    /* the losses up to the first step whose branches differ */
    double loss = rel_error(a, b, d.flips ? d.first_step + 1 : steps);
    free(a);
    free(b);

    /* the gradients of the layers above d.first_layer (held), and of those
     * at or below it, relative to the largest gradient */
    double held = 0, below = 0, scale = 0;
    long at = 0;
    ca = read_pair(pa, pb, ".g", &cb, &n);
    while (n - at >= 8) {
        int head[2], other[2]; /* layer, count */
        memcpy(head, ca + at, sizeof head);
        memcpy(other, cb + at, sizeof other);
        if (memcmp(head, other, sizeof head) || head[1] <= 0 || (n - at - 8) / 4 < head[1]) break;
        max_error((float *)(ca + at + 8), (float *)(cb + at + 8), head[1],
                  head[0] > d.first_layer ? &held : &below, &scale);
        at += 8 + 4L * head[1];
    }
    free(ca);
    free(cb);
    if (at != n) {
        fprintf(stderr, "\n%s.g and %s.g do not match\n", pa, pb);
        return 1;
    }
    if (scale > 0) held /= scale, below /= scale;

    if (!d.flips) {
        printf(", weight gradients %.3g\n", held);
        return (loss <= tol && params <= tol && held <= grad_tol) ? 0 : 1;
    }
    printf("; held: losses up to step %d %.3g, weight gradients", d.first_step + 1, loss);
    if (d.first_flips)
        printf(" above layer %d %.3g (%.3g at or below it)", d.first_layer, held, below);
    else
        printf(" %.3g", held);
    printf(", no parameters\n");
    long allowed = max_flips(d.first_units);
    if (d.first_flips > allowed)
        printf("the first step's branches differ in %ld channels, more than rounding explains (%ld)\n",
               d.first_flips, allowed);
    return (loss <= tol && d.first_flips <= allowed && held <= grad_tol) ? 0 : 1;
}

int main(int argc, char **argv)
{
    if ((argc == 6 || argc == 7) && !strcmp(argv[1], "--compare"))
        return compare(argv[2], argv[3], atof(argv[4]), atoi(argv[5]),
                       atof(argv[argc == 7 ? 6 : 4]));
    if (argc != 4) {
        fprintf(stderr, "usage: %s CFG STEPS OUT | --compare A B TOLERANCE STEPS [GRADIENT_TOLERANCE]\n",
                argv[0]);
        return 2;
    }
    return train(argv[1], atoi(argv[2]), argv[3]);
}
