/* Usage: train_steps CFG STEPS OUT
 *        train_steps --compare A B TOLERANCE STEPS [GRADIENT_TOLERANCE]
 * The first form trains the network of CFG for STEPS batches of fixed
 * pseudo-random images (one-hot classes, or one box per image for a
 * network that ends in a [yolo] layer) and writes the loss of every step
 * followed by every layer's parameters (Darknet's weights file) to OUT, and
 * the weight gradients of the first step, taken from the same parameters by
 * both builds, to OUT.g (write_gradients). Built with the optimised Darknet
 * and with the reference loops, so the files of one cfg can be compared.
 * The second form compares two such pairs of files (STEPS losses each): it
 * prints the relative error max|a - b| / max|b| of the losses, of all
 * parameters, of the worst block of 4096 parameters and of the weight
 * gradients, and exits 1 when the losses' or all parameters' error exceeds
 * TOLERANCE, the gradients' GRADIENT_TOLERANCE (default TOLERANCE), or the
 * files do not match. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "darknet.h"
#include "synthetic_batch.h"

/* OUT.g: the weight gradients the convolutional and connected layers of
 * NET carry (momentum times the gradient of the step just taken, plus
 * history) */
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
        if (l->type == CONVOLUTIONAL) fwrite(l->weight_updates, sizeof(float), l->nweights, f);
        if (l->type == CONNECTED) fwrite(l->weight_updates, sizeof(float), (size_t)l->inputs * l->outputs, f);
    }
    return fclose(f) ? 1 : 0;
}

static int train(const char *cfg, int steps, const char *out)
{
    srand(1);
    network *net = parse_network_cfg((char *)cfg);
    data d = synthetic_batch(net);
    FILE *f = fopen(out, "wb");
    if (!f) {
        perror(out);
        return 1;
    }
    for (int i = 0; i < steps; ++i) {
        float loss = train_network(net, d);
        fwrite(&loss, sizeof loss, 1, f);
        printf("step %d loss %.7g\n", i + 1, loss);
        if (i == 0 && write_gradients(net, out)) {
            fclose(f);
            return 1;
        }
    }
    fclose(f);
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

static float *read_all(const char *path, long *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc(bytes > 0 ? bytes : 1);
    if (fread(v, 1, bytes, f) != (size_t)bytes) {
        fprintf(stderr, "%s: short read\n", path);
        exit(2);
    }
    fclose(f);
    *count = bytes / (long)sizeof(float);
    return v;
}

/* max|a - b| / max|b| over n floats */
static double rel_error(const float *a, const float *b, long n)
{
    double diff = 0, scale = 0;
    for (long i = 0; i < n; ++i) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= diff)) diff = e; /* NaN counts as the largest error */
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    }
    return scale > 0 ? diff / scale : diff;
}

/* The weights file after the losses: a 20-byte header (major, minor,
 * revision, seen), then the layers' arrays. */
static int compare(const char *pa, const char *pb, double tol, int steps, double grad_tol)
{
    long na, nb;
    float *a = read_all(pa, &na), *b = read_all(pb, &nb);
    if (na != nb || na < steps + 5) {
        fprintf(stderr, "%s and %s differ in size\n", pa, pb);
        return 1;
    }
    double loss_err = rel_error(a, b, steps);
    double worst = 0;
    long off = steps + 5;
    for (long i = off; i < na; i += 4096) {
        long n = na - i < 4096 ? na - i : 4096;
        double e = rel_error(a + i, b + i, n);
        if (!(e <= worst)) worst = e;
    }
    double all = rel_error(a + off, b + off, na - off);
    free(a);
    free(b);
    char ga[4096], gb[4096];
    snprintf(ga, sizeof ga, "%s.g", pa);
    snprintf(gb, sizeof gb, "%s.g", pb);
    a = read_all(ga, &na);
    b = read_all(gb, &nb);
    if (na != nb) {
        fprintf(stderr, "%s and %s differ in size\n", ga, gb);
        return 1;
    }
    double grad = rel_error(a, b, na);
    free(a);
    free(b);
    printf("loss relative error %.3g, parameters %.3g overall, %.3g in the worst block of 4096,"
           " weight gradients %.3g\n", loss_err, all, worst, grad);
    return (loss_err <= tol && all <= tol && grad <= grad_tol) ? 0 : 1;
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
