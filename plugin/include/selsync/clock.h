/* The core's clock. */
#ifndef SELSYNC_CLOCK_H
#define SELSYNC_CLOCK_H

/* Monotonic seconds: the clock of every time the core reports (hosts use
 * it for their own timings too). */
double selsync_now(void);

#endif
