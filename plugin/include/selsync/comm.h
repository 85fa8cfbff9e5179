/* The communicator seam between the core and a transport (MPI, a single
 * process, or a test mock). Every rank calls the same collectives in the
 * same order; an implementation reports failures as SELSYNC_ECOMM.
 * Point-to-point messages (send/recv, used by method ssp) never match the
 * messages a transport exchanges inside its collectives. */
#ifndef SELSYNC_COMM_H
#define SELSYNC_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/status.h"

/* recv: a source or tag that matches any. */
#define SELSYNC_ANY (-1)

/* What recv received. */
typedef struct selsync_msg {
    int source, tag;
    size_t bytes;
} selsync_msg;

/* count floats at data (data may be NULL when count is 0). */
typedef struct selsync_segment {
    float *data;
    size_t count;
} selsync_segment;

/* The layout of selsync_comm_ops this core reads; a table of another
 * version is refused (selsync_session_create). Raise it when a member is
 * added, removed or changes meaning. */
#define SELSYNC_COMM_OPS_VERSION 2

typedef struct selsync_comm_ops {
    int version;                /* SELSYNC_COMM_OPS_VERSION */
    const char *name;
    int (*rank)(void *ctx);
    int (*size)(void *ctx);
    /* flags[i] = OR over all ranks of flags[i] (each 0 or 1). */
    selsync_status (*any)(void *ctx, uint8_t *flags, size_t n);
    /* buf[i] = sum over all ranks of buf[i]; every rank receives the same
     * bits (so identical inputs to a later division give identical means). */
    selsync_status (*sum_f32)(void *ctx, float *buf, size_t n);
    /* sum_f32 in place over the concatenation of the segments (which must
     * not overlap; the total count must be the same on every rank, the
     * split may differ), each sum then multiplied by scale: the same bits
     * on every rank as sum_f32 over a packed copy followed by x * scale. */
    selsync_status (*sum_f32v)(void *ctx, const selsync_segment *segs, size_t nseg, float scale);
    /* buf[i] = sum over all ranks of buf[i], for small statistics. */
    selsync_status (*sum_f64)(void *ctx, double *buf, size_t n);
    /* Copies root's buf to every rank. */
    selsync_status (*bcast)(void *ctx, void *buf, size_t bytes, int root);
    /* Bytes this rank has sent so far, payload only (for accounting). The
     * bytes of sums started with sum_f32v_start count from the wait_sums
     * that waits for them, whatever op waited first. */
    uint64_t (*bytes_sent)(void *ctx);
    /* Ends the whole job now with code, after printing message; does not
     * return in a real transport (a mock may record and return). */
    void (*abort)(void *ctx, int code, const char *message);
    /* Point-to-point (NULL where unsupported). send: bytes of buf to rank
     * dest with tag >= 0; returns when buf may be reused (counted in
     * bytes_sent). Messages from one rank to another with one tag arrive in
     * the order sent. */
    selsync_status (*send)(void *ctx, int dest, int tag, const void *buf, size_t bytes);
    /* Waits for the next message from source with tag (either may be
     * SELSYNC_ANY) into buf; one longer than bytes is an error. got (may be
     * NULL) receives its source, tag and length. */
    selsync_status (*recv)(void *ctx, int source, int tag, void *buf, size_t bytes, selsync_msg *got);
    /* The message of the last failed call ("" if none; NULL: no messages). */
    const char *(*last_error)(void *ctx);
    /* Step `step` (0-based, as the engine counts) begins: for messages such
     * as a stall warning (NULL: not used). */
    void (*step_begins)(void *ctx, uint64_t step);
    /* sum_f32v over the k ranks members[0 .. k) alone (distinct, ascending,
     * 1 <= k <= size; the same list on every rank), then every rank,
     * member or not, receives the scaled sums in its segments: a member's
     * segments hold its contribution, a non-member's are only overwritten
     * and it sends nothing. Every rank receives the same bits (the MPI
     * transport: those of its ring sum_f32v with zeros from the
     * non-members, save that a sum of zeros may keep the sign of -0).
     * SELSYNC_EINVAL for a malformed list, on every rank, before anything
     * is sent. NULL: not supported (the engine then zeroes a non-member's
     * tensors and calls sum_f32v over all ranks). */
    selsync_status (*sum_f32v_among)(void *ctx, const selsync_segment *segs, size_t nseg, float scale,
                                     const int *members, int k);
    /* sum_f32v started in the background (NULL: not supported; the engine
     * then calls sum_f32v). Returns at once; the sums started run one after
     * another in the order started, each with the bits of sum_f32v. Neither
     * segs nor the floats in its segments may be touched until wait_sums
     * returns; every other op waits for the started sums first. */
    selsync_status (*sum_f32v_start)(void *ctx, const selsync_segment *segs, size_t nseg, float scale);
    /* Waits until every started sum is done: SELSYNC_OK, or the status of
     * the first that failed (last_error then holds its message; the sums
     * started after it are not run). NULL where sum_f32v_start is. */
    selsync_status (*wait_sums)(void *ctx);
    /* sum_f64 started without blocking (NULL: not supported; the engine
     * then calls sum_f64): returns at once; buf may not be touched until
     * the wait_f64 that completes it returns. Small sums started complete
     * in the order started, apart from the sums of sum_f32v_start. */
    selsync_status (*sum_f64_start)(void *ctx, double *buf, size_t n);
    /* Waits for the oldest sum of sum_f64_start not yet waited for. NULL
     * where sum_f64_start is. */
    selsync_status (*wait_f64)(void *ctx);
} selsync_comm_ops;

typedef struct selsync_comm {
    const selsync_comm_ops *ops;
    void *ctx;
} selsync_comm;

/* A communicator for one process: collectives are identities. */
selsync_comm selsync_comm_single(void);

/* The calls hosts make outside a session: this rank, the rank count, and
 * ending the whole job with a message (one process: prints and returns). */
int selsync_comm_rank(const selsync_comm *c);
int selsync_comm_size(const selsync_comm *c);
void selsync_comm_abort(const selsync_comm *c, int code, const char *message);

/* Why the last call on c failed with st: the transport's message, else
 * st's name. The one place the core reads a transport's errors. */
const char *selsync_comm_error(const selsync_comm *c, selsync_status st);

#endif
