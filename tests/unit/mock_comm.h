/* A scripted communicator for single-threaded tests of the engine: one rank
 * of `size`, whose "other ranks" are a scripted contribution. */
#ifndef SELSYNC_MOCK_COMM_H
#define SELSYNC_MOCK_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/comm.h"

#define MOCK_MAX_FLAGS 64
#define MOCK_MAX_QUEUE 16
#define MOCK_MAX_ELEMS 4096
#define MOCK_MAX_RANKS 32
#define MOCK_MAX_MSGS 128
#define MOCK_MSG_BYTES 512
#define MOCK_MAX_STARTS 64
#define MOCK_MAX_SEGS 256

/* One point-to-point message: to or from `peer`; data holds the first
 * MOCK_MSG_BYTES bytes. recvs: recv calls made before it was sent. */
typedef struct mock_msg {
    int peer, tag;
    size_t bytes;
    int recvs;
    unsigned char data[MOCK_MSG_BYTES];
} mock_msg;

typedef struct mock_comm {
    int rank, size;

    /* any: each call ORs in the oldest queued row of remote flags (if any). */
    uint8_t any_queue[MOCK_MAX_QUEUE][MOCK_MAX_FLAGS];
    int any_queued;
    int any_calls;
    size_t any_last_n;
    uint8_t any_last_in[MOCK_MAX_FLAGS]; /* this rank's flags in the last call */

    /* sum_f32: buf[i] += remote_scale * buf[i] + remote[i] (remote may be
     * NULL; it must then hold at least n entries). sum_f32v: the same over
     * the packed segments (counted as one sum_f32 call), then x * scale. */
    float remote_scale;
    const float *remote;
    size_t remote_n;
    int sum_calls;
    size_t sum_last_n, sum_total_n;
    float sum_last_in[MOCK_MAX_ELEMS]; /* what this rank contributed last */

    /* sum_f64: buf[i] += remote_f64[i] when remote_f64 is set (at least n
     * entries), else buf[i] *= size (every rank holds the same values). */
    const double *remote_f64;
    int f64_calls;

    /* sum_f32v_among: sum_f32v (a call of sum_calls, also for fail_sum_call)
     * in which a non-member contributes zeros (sum_last_in) and sends
     * nothing (bytes: members only); keeps the last call's member list.
     * no_among, set before mock_as_comm: the op is NULL there, as in a
     * transport without it. */
    int among_calls, among_k;
    int among_members[MOCK_MAX_RANKS];
    int no_among;

    /* sum_f32v_start, with async set before mock_as_comm (else the op is
     * NULL): recorded (start_calls; the data pointer of every segment of
     * the first MOCK_MAX_SEGS in started_seg) and run as sum_f32v at the
     * next wait_sums, in the order started, as a background sum finishes
     * later; at most MOCK_MAX_STARTS between two waits (more: SELSYNC_EINVAL). */
    int async;
    int start_calls, wait_calls;
    const float *started_seg[MOCK_MAX_SEGS];
    size_t started_segs;
    struct { const selsync_segment *segs; size_t nseg; float scale; } pending[MOCK_MAX_STARTS];
    int pending_n;

    /* bcast: records every call (root and bytes of the first MOCK_MAX_QUEUE);
     * at the root keeps a copy of what it sent (up to MOCK_MAX_ELEMS floats)
     * and leaves buf alone; elsewhere copies the scripted data of the root,
     * bcast_from[root] (bcast_from_n[root] bytes, at least `bytes`), into
     * buf, or leaves buf alone when none is scripted; with
     * bcast_from_once[root] the scripted data serves one call only. */
    const void *bcast_from[MOCK_MAX_RANKS];
    size_t bcast_from_n[MOCK_MAX_RANKS];
    int bcast_from_once[MOCK_MAX_RANKS];
    int bcast_calls;
    int bcast_root[MOCK_MAX_QUEUE];
    size_t bcast_bytes[MOCK_MAX_QUEUE];
    float bcast_sent[MOCK_MAX_ELEMS];
    size_t bcast_sent_n; /* bytes */

    /* recv: takes the first scripted message of inbox that matches source
     * and tag (SELSYNC_ANY matches all); none left is SELSYNC_ECOMM (a real
     * transport would wait forever). send: appends to outbox. */
    mock_msg inbox[MOCK_MAX_MSGS], outbox[MOCK_MAX_MSGS];
    int inbox_n, outbox_n, recv_calls, send_calls, recv_starved;

    /* Failure injection: the call with this 1-based number fails, 0 = never. */
    int fail_any_call, fail_sum_call, fail_bcast_call, fail_send_call, fail_recv_call;

    /* 4 per float summed, 1 per flag, 8 per double; bcast: bytes x (size-1)
     * at the root, 0 elsewhere (a flat tree); send: its bytes */
    uint64_t bytes;
    int abort_calls, abort_code;
    char abort_message[256];
} mock_comm;

void mock_init(mock_comm *m, int rank, int size);
selsync_comm mock_as_comm(mock_comm *m);
/* Queues remote flags for the next `any` call not yet scripted. */
void mock_script_any(mock_comm *m, const uint8_t *flags, size_t n);
/* Appends a message from source to the inbox (data: bytes, or NULL for zeros). */
void mock_script_msg(mock_comm *m, int source, int tag, const void *data, size_t bytes);

#endif
