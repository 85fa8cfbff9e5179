/* BatchNorm statistics summed over ranks (see selsync/bnstats.h). */
#include "selsync/bnstats.h"

void selsync_bn_accumulate(double *acc, size_t channels, const float *x, size_t batch, size_t spatial,
                           const float *shift)
{
    double *count = acc, *sum = acc + channels, *sumsq = acc + 2 * channels;
    for (size_t b = 0; b < batch; ++b)
        for (size_t c = 0; c < channels; ++c) {
            const float *v = x + (b * channels + c) * spatial;
            double k = shift ? (double)shift[c] : 0.0, s = 0, q = 0;
            for (size_t i = 0; i < spatial; ++i) {
                double d = (double)v[i] - k;
                s += d;
                q += d * d;
            }
            count[c] += (double)spatial;
            sum[c] += s;
            sumsq[c] += q;
        }
}

size_t selsync_bn_finish(const double *acc, size_t channels, const float *shift, int unbiased, float *mean,
                         float *variance)
{
    const double *count = acc, *sum = acc + channels, *sumsq = acc + 2 * channels;
    size_t set = 0;
    for (size_t c = 0; c < channels; ++c) {
        double n = count[c];
        if (!(n > 0)) continue;
        double d = sum[c] / n;                 /* mean - shift */
        double m2 = sumsq[c] - sum[c] * d;     /* sum of (x - mean)^2 */
        if (m2 < 0) m2 = 0;
        double divisor = unbiased && n > 1 ? n - 1 : n;
        mean[c] = (float)((shift ? (double)shift[c] : 0.0) + d);
        variance[c] = (float)(m2 / divisor);
        ++set;
    }
    return set;
}
