/* Splitting a training list between ranks (selsync/partition.h). */
#include "selsync/partition.h"

#include <string.h>

#include "selsync/rng.h"

/* First index of rank r's block, floor(r * n / world), without overflow:
 * r * (n / world) <= n and r * (n % world) < world^2 < 2^62. */
static size_t block_start(size_t n, int world, int r)
{
    size_t q = n / (size_t)world, rem = n % (size_t)world;
    return (size_t)r * q + (size_t)((uint64_t)r * rem / (uint64_t)world);
}

/* The permutation is Fisher-Yates from i = n-1 down to 1, swapping i with
 * j = selsync_rng_below(i + 1) of the stream (seed, 0, 0): every rank
 * computes the same one in shard, then keeps its block. */
selsync_status selsync_partition_iid(size_t n, int world, int rank, uint64_t seed,
                                     size_t *shard, size_t *count)
{
    selsync_rng r = selsync_rng_stream(seed, 0, 0);
    size_t lo, hi;

    if (!shard || !count || world < 1 || rank < 0 || rank >= world || n < (size_t)world)
        return SELSYNC_EINVAL;
    for (size_t i = 0; i < n; i++) shard[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)selsync_rng_below(&r, (uint64_t)i + 1), x = shard[i];
        shard[i] = shard[j];
        shard[j] = x;
    }
    lo = block_start(n, world, rank);
    hi = block_start(n, world, rank + 1);
    memmove(shard, shard + lo, (hi - lo) * sizeof *shard);
    *count = hi - lo;
    return SELSYNC_OK;
}
