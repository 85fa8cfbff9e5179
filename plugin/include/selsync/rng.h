/* Small explicit-state random numbers (splitmix64): no global state, the
 * same sequence on every platform, streams derived from (seed, a, b). */
#ifndef SELSYNC_RNG_H
#define SELSYNC_RNG_H

#include <stdint.h>

typedef struct selsync_rng {
    uint64_t state;
} selsync_rng;

static inline uint64_t selsync_rng_next(selsync_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A generator for the stream (seed, a, b), e.g. (seed, rank, step). */
static inline selsync_rng selsync_rng_stream(uint64_t seed, uint64_t a, uint64_t b)
{
    selsync_rng r = {seed};
    r.state = selsync_rng_next(&r) ^ (a * 0xd1b54a32d192ed03ULL);
    r.state = selsync_rng_next(&r) ^ (b * 0x8cb92ba72f3d8dd7ULL);
    return r;
}

/* Uniform integer in [0, n), n >= 1, without modulo bias. */
static inline uint64_t selsync_rng_below(selsync_rng *r, uint64_t n)
{
    uint64_t threshold = (0 - n) % n, x;
    do x = selsync_rng_next(r); while (x < threshold);
    return x % n;
}

/* Uniform real in [0, 1). */
static inline double selsync_rng_uniform(selsync_rng *r)
{
    return (selsync_rng_next(r) >> 11) * 0x1.0p-53;
}

#endif
