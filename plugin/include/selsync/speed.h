/* Batches that follow speed: how many of a step's mini-batches each rank
 * trains, in proportion to its measured speed, so that a slower rank does
 * less of the step instead of holding the others back. */
#ifndef SELSYNC_SPEED_H
#define SELSYNC_SPEED_H

/* share[0..ranks): mini-batches per rank, each at least 1, summing to
 * total (>= ranks), that make the step's time, the largest
 * share[r] / speed[r], as small as whole mini-batches allow: each one
 * beyond the first goes to the rank that would finish it soonest (ties:
 * the lower rank). A speed that is not finite and > 0 counts as the mean of
 * the others (1 when none is). The same speeds give the same shares on
 * every rank. */
void selsync_speed_shares(const double *speed, int ranks, int total, int *share);

/* The step's time with these shares: the largest share[r] / speed[r]. */
double selsync_speed_step_time(const double *speed, const int *share, int ranks);

#endif
