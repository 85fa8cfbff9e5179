/* Data injection (SelSync's answer to skewed data): each step a fraction
 * alpha of the ranks, chosen identically everywhere from the shared seed,
 * share a fraction beta of their freshly loaded batch with all other ranks,
 * and every rank completes its batch of exactly `batch` samples with what it
 * received. Samples travel as packed rows of floats (input then truth). */
#ifndef SELSYNC_INJECT_H
#define SELSYNC_INJECT_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/comm.h"
#include "selsync/config.h"
#include "selsync/status.h"

typedef struct selsync_inject_sizes {
    int senders;   /* k = max(1, round(alpha * world)) ranks send each step */
    int own;       /* b' = batch - senders * shared: samples a rank that does not send loads */
    int shared;    /* s = samples each sender shares, >= 1 */
    int load;      /* b' + s: samples a sender loads (and keeps) */
} selsync_inject_sizes;

/* Sizes for a batch of `batch` samples on `world` ranks:
 * b' = round(batch / (1 + beta * k)), s = floor((batch - b') / k), then
 * b' = batch - k * s, so a non-sender's b' own plus k*s received and a
 * sender's b' + s own plus (k-1)*s received are both exactly `batch`.
 * SELSYNC_ECONFIG (message naming cfg file, line, key) when injection is
 * off (alpha or beta 0), world < 2, or s or b' would be below 1. */
selsync_status selsync_inject_plan(const selsync_config *cfg, int world, int batch,
                                   selsync_inject_sizes *out, char *err, size_t errlen);

/* The k senders of `step`, ascending, identical on every rank (a partial
 * Fisher-Yates from the stream (seed, 0x1ec7, step)). */
void selsync_inject_senders(uint64_t seed, uint64_t step, int world, int k, int *senders);

/* One step's exchange. rows: this rank's freshly loaded samples as packed
 * rows of row_len floats, `load` rows for a sender and at least `own` for
 * the others; batch: room for `batch` rows. Fills batch
 * with this rank's own rows first (all `load` rows for a sender, the first
 * b' otherwise), then the first `shared` rows of every other sender, in
 * ascending sender order: one bcast per sender. Collective. *bytes (may be
 * NULL) receives the bytes this rank sent. */
selsync_status selsync_inject_exchange(const selsync_comm *comm, const selsync_inject_sizes *sz,
                                       const int *senders, const float *rows, size_t row_len,
                                       float *batch, uint64_t *bytes);

#endif
