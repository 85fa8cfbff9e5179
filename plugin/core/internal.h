/* Small helpers shared by the core's sources (not part of the API). */
#ifndef SELSYNC_CORE_INTERNAL_H
#define SELSYNC_CORE_INTERNAL_H

#include <time.h>

#if defined(__GNUC__)
#define SELSYNC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SELSYNC_PRINTF(f, a)
#endif

/* Monotonic seconds (needs _POSIX_C_SOURCE >= 199309L in the includer). */
static inline double selsync_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
