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

#endif
