/* Usage: train_steps CFG STEPS OUT
 *        train_steps --compare A B TOLERANCE STEPS
 * The first form trains the network of CFG for STEPS batches of fixed
 * pseudo-random images (one-hot classes, or one box per image for a
 * network that ends in a [yolo] layer) and writes the loss of every step
 * followed by every layer's parameters (Darknet's weights file) to OUT.
 * Built with the optimised Darknet and with the reference loops, so the two
 * files of one cfg can be compared.
 * The second form compares two such files (STEPS losses each): it prints
 * the relative error max|a - b| / max|b| of the losses, of all parameters
 * and of the worst block of 4096 parameters, and exits 1 when the losses'
 * or all parameters' error exceeds TOLERANCE (or the files do not match). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "darknet.h"
#include "synthetic_batch.h"

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
static int compare(const char *pa, const char *pb, double tol, int steps)
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
    printf("loss relative error %.3g, parameters %.3g overall, %.3g in the worst block of 4096\n",
           loss_err, all, worst);
    free(a);
    free(b);
    return (loss_err <= tol && all <= tol) ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "--compare"))
        return compare(argv[2], argv[3], atof(argv[4]), atoi(argv[5]));
    if (argc != 4) {
        fprintf(stderr, "usage: %s CFG STEPS OUT | --compare A B TOLERANCE STEPS\n", argv[0]);
        return 2;
    }
    return train(argv[1], atoi(argv[2]), argv[3]);
}
