/* Batches that follow speed (selsync/speed.h). */
#include "selsync/speed.h"

#include <math.h>

static int usable(double v) { return isfinite(v) && v > 0; }

/* speed[r], or for an unusable one the mean of the usable ones (1: none) */
static double speed_of(const double *speed, int ranks, int r)
{
    double sum = 0;
    int n = 0;
    if (usable(speed[r])) return speed[r];
    for (int q = 0; q < ranks; ++q)
        if (usable(speed[q])) sum += speed[q], n++;
    return n ? sum / n : 1.0;
}

void selsync_speed_shares(const double *speed, int ranks, int total, int *share)
{
    for (int r = 0; r < ranks; ++r) share[r] = 1;
    for (int given = ranks; given < total; ++given) {
        int best = 0;
        double soonest = INFINITY;
        for (int r = 0; r < ranks; ++r) {
            double t = (share[r] + 1) / speed_of(speed, ranks, r);
            if (t < soonest) soonest = t, best = r;
        }
        share[best]++;
    }
}

double selsync_speed_step_time(const double *speed, const int *share, int ranks)
{
    double worst = 0;
    for (int r = 0; r < ranks; ++r) {
        double t = share[r] / speed_of(speed, ranks, r);
        if (t > worst) worst = t;
    }
    return worst;
}
