/* Splitting a training list between ranks, deterministically from the seed
 * and the rank count, without communication. */
#ifndef SELSYNC_PARTITION_H
#define SELSYNC_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/status.h"

/* iid: shuffles 0..n-1 with seed (the same permutation on every rank) and
 * returns in shard[0..*count) this rank's contiguous 1/world block of it;
 * the blocks of all ranks are disjoint and cover 0..n-1, their sizes differ
 * by at most one. shard must hold n entries. EINVAL when n < world (some
 * rank would get nothing) or world < 1 or rank outside [0, world). */
selsync_status selsync_partition_iid(size_t n, int world, int rank, uint64_t seed,
                                     size_t *shard, size_t *count);

#endif
