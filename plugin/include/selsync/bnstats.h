/* BatchNorm statistics over many ranks' samples, exactly: each rank sums
 * its values per channel about a shift every rank shares, the ranks add
 * their sums (one sum of doubles), and the mean and variance come from the
 * totals, as if one process had seen every rank's values at once.
 *
 * A layer of C channels keeps 3*C doubles: count[C], sum[C] (of x - shift)
 * and sumsq[C] (of (x - shift)^2). The shift (the statistics the model
 * already has) keeps the sums small, so the variance loses no digits to
 * cancellation however large the mean. */
#ifndef SELSYNC_BNSTATS_H
#define SELSYNC_BNSTATS_H

#include <stddef.h>

/* Adds `batch` samples of x, laid out [sample][channel][spatial] (Darknet's
 * order; spatial = 1 for a fully connected layer), to acc. shift: C values
 * (NULL: 0). */
void selsync_bn_accumulate(double *acc, size_t channels, const float *x, size_t batch, size_t spatial,
                           const float *shift);

/* The mean and variance of every channel from acc (summed over the ranks)
 * about the same shift; the variance divides by count - 1 when unbiased
 * (by count when count is 1), by count otherwise, and is never negative. A
 * channel without values keeps its mean and variance. Returns how many
 * channels were set. */
size_t selsync_bn_finish(const double *acc, size_t channels, const float *shift, int unbiased, float *mean,
                         float *variance);

/* Adds a batch known by its statistics to acc (shift 0): `count` values
 * per channel with these means and variances (divisor count - 1). After the
 * ranks' sum, selsync_bn_finish(acc, channels, NULL, 1, ...) gives the
 * statistics of all their values together. */
void selsync_bn_accumulate_moments(double *acc, size_t channels, size_t count, const float *mean,
                                   const float *variance);

/* The backward pass of a batch normalised with all ranks' statistics. Each
 * rank packs its batch's per-channel gradients of the mean and variance
 * (a, b; `count` values per channel) into buf, 1 + 2*channels doubles; the
 * ranks sum buf; unpack sets a and b to their sums times count / (the total
 * count), so that the rank's division by its own count divides by the
 * total. */
void selsync_bn_gradient_pack(double *buf, size_t channels, size_t count, const float *a, const float *b);
void selsync_bn_gradient_unpack(const double *buf, size_t channels, size_t count, float *a, float *b);

#endif
