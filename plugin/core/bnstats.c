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

void selsync_bn_accumulate_moments(double *acc, size_t channels, size_t count, const float *mean,
                                   const float *variance)
{
    double n = (double)count, *cnt = acc, *sum = acc + channels, *sumsq = acc + 2 * channels;
    for (size_t c = 0; c < channels; ++c) {
        double m = (double)mean[c];
        cnt[c] += n;
        sum[c] += n * m;
        sumsq[c] += (count > 1 ? (n - 1) * (double)variance[c] : 0.0) + n * m * m;
    }
}

void selsync_bn_gradient_pack(double *buf, size_t channels, size_t count, const float *a, const float *b)
{
    buf[0] = (double)count;
    for (size_t c = 0; c < channels; ++c) {
        buf[1 + c] = (double)a[c];
        buf[1 + channels + c] = (double)b[c];
    }
}

void selsync_bn_gradient_unpack(const double *buf, size_t channels, size_t count, float *a, float *b)
{
    double share = buf[0] > 0 ? (double)count / buf[0] : 1.0;
    for (size_t c = 0; c < channels; ++c) {
        a[c] = (float)(buf[1 + c] * share);
        b[c] = (float)(buf[1 + channels + c] * share);
    }
}
