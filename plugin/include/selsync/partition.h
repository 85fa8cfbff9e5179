/* Splitting a training list between ranks, deterministically from the seed
 * and the rank count, without communication. */
#ifndef SELSYNC_PARTITION_H
#define SELSYNC_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/config.h"
#include "selsync/status.h"

/* iid: shuffles 0..n-1 with seed (the same permutation on every rank) and
 * returns in shard[0..*count) this rank's contiguous 1/world block of it;
 * the blocks of all ranks are disjoint and cover 0..n-1, their sizes differ
 * by at most one. shard must hold n entries. EINVAL when n < world (some
 * rank would get nothing) or world < 1 or rank outside [0, world). */
selsync_status selsync_partition_iid(size_t n, int world, int rank, uint64_t seed,
                                     size_t *shard, size_t *count);

/* The samples of `rank` under cfg->partition (iid, seldp, label:K,
 * dirichlet:A) and cfg->seed, given the class of every sample:
 * labels[i] in [0, classes), or -1 for a sample without a class (such
 * samples are spread over the ranks like iid). shard must hold n entries;
 * the result is in the order the rank should read it:
 *   iid        this rank's shuffled 1/world block;
 *   seldp      all n samples: the shuffled list cut into world chunks, read
 *              circularly starting at chunk `rank`;
 *   label:K    the samples of the K classes of this rank: rank r holds
 *              classes (r*K + j) mod classes, j < K; a class held by several
 *              ranks is split evenly between them; classes held by no rank
 *              (world*K < classes) are not used; shuffled;
 *   dirichlet:A  for every class, shares q ~ Dirichlet(A, ..., A) over the
 *              ranks; the class's shuffled samples are cut at the rounded
 *              cumulative shares; shuffled.
 * Errors (SELSYNC_ECONFIG, message naming the cfg file, line and key): K
 * larger than classes, a rank left without any sample. EINVAL for bad
 * arguments (labels outside [-1, classes), world < 1, rank out of range). */
selsync_status selsync_partition_make(const selsync_config *cfg, const int *labels, size_t n,
                                      int classes, int world, int rank,
                                      size_t *shard, size_t *count,
                                      char *err, size_t errlen);

/* hist[r * (classes + 1) + c] = samples of class c on rank r under the same
 * rules (column `classes` counts samples without a class); hist holds
 * world * (classes + 1) entries. Same errors as selsync_partition_make. */
selsync_status selsync_partition_histogram(const selsync_config *cfg, const int *labels,
                                           size_t n, int classes, int world, size_t *hist,
                                           char *err, size_t errlen);

#endif
