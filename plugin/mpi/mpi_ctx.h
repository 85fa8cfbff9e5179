/* The MPI transport's parts and the one context they share. comm_mpi.c
 * sets the context up and fills the ops table; every op enters through the
 * gate (gate.c), which keeps MPI to one thread at a time; the stall watch
 * (stall_watch.c) completes every request; the ring (ring.c) sums over
 * MPI; collectives.c and p2p.c are the ops.
 * Every function takes the context: nothing is kept in file statics. */
#ifndef SELSYNC_MPI_CTX_H
#define SELSYNC_MPI_CTX_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <mpi.h>

#include "comm_mpi.h"

#define DEFAULT_CHUNK_BYTES ((size_t)1 << 30)
/* Ring reduce-scatter: bytes per message (segment), which is also the
 * scratch size. Among the ranks of one host, RING_SEGMENT_BYTES: small
 * enough for the received segment to still be in cache when it is added
 * (measured: 256 KiB - 1 MiB beat whole blocks by 10-40 % at 8-32 MiB
 * payloads, at no cost at 1 MiB). Between hosts, a step's block in
 * RING_SEGMENTS_PER_STEP segments of RING_SEGMENT_BYTES to
 * RING_SEGMENT_BYTES_HOSTS: fewer, larger messages, so that each one's
 * rendezvous idles the link less, but enough of them to keep the link busy
 * while one is added (docs/transport-ucx/segments). The sizes can be set at
 * compile time, for the benchmark that chose them. */
#ifndef RING_SEGMENT_BYTES
#define RING_SEGMENT_BYTES ((size_t)1 << 20)
#endif
#ifndef RING_SEGMENT_BYTES_HOSTS
#define RING_SEGMENT_BYTES_HOSTS ((size_t)8 << 20)
#endif
#define RING_SEGMENTS_PER_STEP 4
/* MPI_Reduce_scatter_block: bytes per reduce-scatter + allgather pair. Open
 * MPI allocates a temporary of about this size inside each call; kept below
 * glibc's largest dynamic mmap threshold (32 MiB) so it is recycled from the
 * heap instead of being mapped and page-faulted afresh on every call. */
#define RSB_CHUNK_BYTES ((size_t)4 << 20)
/* RSB: arrays not divisible by the rank count up to this size are copied
 * into a padded scratch and reduced in one pair of calls; larger ones run
 * their divisible head in place and only the tail (< size elements) through
 * the scratch, which saves two copies of the array. */
#define SMALL_PADDED_BYTES ((size_t)64 << 10)
/* Stall watch: a wait polls without sleeping for its first second (as
 * MPI_Wait does, so short waits cost nothing more), then naps 1 ms between
 * polls. */
#define STALL_SPIN_S 1.0
#define STALL_NAP_NS 1000000L
#define STALL_EXIT_CODE 1
/* The background thread's waits (sum_f32v_start) never spin: they poll
 * with naps doubling from BG_NAP_MIN_NS to BG_NAP_MAX_NS, so the thread
 * takes little CPU from the computation it overlaps. */
#define BG_NAP_MIN_NS 5000L
#define BG_NAP_MAX_NS 100000L
/* How long an abort waits for the background thread to leave MPI before
 * it calls MPI_Abort anyway (a job that hangs is worse). */
#define BG_ABORT_WAIT_S 10
/* Tags of the stall notices on the watch communicator; the payload is the
 * sender's collective count (see stall_enter()). */
#define NOTE_WAITING 1  /* "I have waited a while in collective SEQ": answer */
#define NOTE_REACHED 2  /* "I have entered collective SEQ" */
/* Tags on comm: the ring's messages, and sum_f32v_among's hand-out of the
 * members' result to the non-members. */
#define TAG_RING 0
#define TAG_HAND_OUT 1

/* How a queued sum runs: the sum_f32v op. */
typedef selsync_status (*bg_sum_fn)(void *ctx, const selsync_segment *segs, size_t nseg, float scale);

/* A started sum (sum_f32v_start) waiting in the background queue. */
typedef struct bg_sum {
    bg_sum_fn run;
    const selsync_segment *segs;
    size_t nseg;
    float scale;
} bg_sum;

/* A small sum started without blocking: one round of messages, each rank
 * sending its n values to every other and receiving theirs into vals (the
 * ranks' values in rank order), so that it completes once every rank has
 * started it, whether or not the others enter MPI again (a library
 * MPI_Iallreduce of several rounds advances only inside MPI calls: a rank
 * waiting for it would wait for the others' next call). */
struct small_sum {
    double *buf;         /* the caller's values, and the sum once waited for */
    size_t n;
    double *vals;        /* size * n: every rank's values (NULL: nothing to exchange) */
    MPI_Request *req;    /* 2 (size - 1): the receives and sends */
    int *peer;           /* the rank of each request */
    int nreq;
};

typedef struct mpi_ctx {
    /* Setup (comm_mpi.c). */
    MPI_Comm comm;
    MPI_Comm p2p;        /* send/recv: a duplicate, so never matched by the ring */
    MPI_Comm watch;      /* stall notices: a third duplicate */
    int rank, size;
    int active;          /* comm is live */
    int own_init;        /* we called MPI_Init_thread */
    int atexit_done;     /* handler registered */
    int threads_ok;      /* MPI allows a second thread (MPI_THREAD_SERIALIZED or more) */
    int one_host;        /* every rank runs on one host (shared memory) */
    int background;      /* sum_f32v_start: -1 a thread unless one_host, 0 never, 1 always */
    size_t chunk_bytes;  /* cap on bytes per MPI call */
    selsync_mpi_sum_algorithm sum_alg;
    char last_error[MPI_MAX_ERROR_STRING + 160];
    uint64_t bytes;      /* bytes_sent estimate */
    uint64_t bytes_bg;   /* of the started sums, not yet waited for (ctx_count_bytes) */

    /* The gate (gate.c): the background sums, a queue the caller's thread
     * fills and one thread runs, one sum after another. While it has work,
     * the caller's thread makes no MPI call: every other op first waits
     * until the queue is empty (gate_check), so MPI sees one thread at a
     * time (MPI_THREAD_SERIALIZED). A failure is kept and returned by every
     * later op: the ring's state across the ranks is then unknown. */
    struct {
        pthread_mutex_t mu;
        pthread_cond_t cv;       /* the queue changed */
        pthread_t thread;
        int started, stop, busy; /* busy: running q[head], already taken off the count */
        bg_sum *q;
        size_t cap, head, count; /* the sums waiting: q[head .. head + count) */
        selsync_status failed;
    } bg;
    int draining;        /* the caller's thread runs the deferred sums (no thread) */
    /* The exit code of an abort the caller's thread has asked for (0:
     * none). While the background thread is inside MPI it makes the
     * MPI_Abort call itself (gate_abort_pending), so that MPI still sees
     * one thread at a time. */
    int bg_abort_code;
    volatile int aborting;

    /* The stall watch (stall_watch.c): seconds (0 = off) and what a message
     * about a stall says. */
    double stall_warn, stall_timeout;
    int64_t step;        /* the caller's step, < 0 unknown */
    const char *op;      /* the op in progress */
    int collective;      /* it is a collective (counted in seq) */
    uint64_t seq;        /* collectives entered so far */
    uint64_t *reached;   /* per rank: the highest seq it is known to have entered */
    uint64_t *note_buf;  /* per rank: the notice in flight to it */
    MPI_Request *note_req;

    /* The ring (ring.c): segments seg[0 .. nseg) back to back as one array,
     * segment k from element start[k], seen from element rot (ring_at());
     * start and the type map (len, disp) are kept between calls. */
    const selsync_segment *seg;
    size_t nseg, *start, start_cap, rot;
    int *len;
    MPI_Aint *disp;
    size_t map_cap;
    struct iovec *iov;   /* ring_pieces of one message */
    size_t iov_cap;
    float *scratch;      /* sum_f32 scratch, kept between calls */
    size_t scratch_cap;  /* in floats */
    char hosts[32];      /* where the ranks run, for the start-up line */

    /* The collectives (collectives.c). */
    float *pack;         /* reduce_scatter_block sum_f32v: the packed array */
    size_t pack_cap;     /* in floats */
    /* The small sums started without blocking (sum_f64_start), oldest
     * first, small_count of them, on a communicator of their own so that
     * they never meet the ring's collectives. */
    MPI_Comm small;
    struct small_sum *small_sums;
    size_t small_cap, small_count;
    /* sum_f32v_among's hand-out: a request, peer and type per message of a
     * round (at most size of each), kept between calls. */
    MPI_Request *out_req;
    int *out_peer;
    MPI_Datatype *out_type;
    size_t out_cap, out_peer_cap, out_type_cap;
} mpi_ctx;

/* A ring of p ranks over the array of ring_set_array (n elements):
 * position i is rank rank[i] (rank NULL: the world, position i is rank
 * i), this rank is at position me; the array is seen from element rot. */
typedef struct ring_plan {
    const int *rank;
    size_t p, me, n, rot;
} ring_plan;

/* gate.c: errors, byte counts and buffers of the context. */
void ctx_error(mpi_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
selsync_status ctx_mpi_failed(mpi_ctx *c, const char *call, int rc);
void ctx_count_bytes(mpi_ctx *c, uint64_t n);
selsync_status ctx_reserve(mpi_ctx *c, void **p, size_t *cap, size_t n, size_t esize);
/* gate.c: the gate every op passes first, the background sums, aborts. */
int gate_on_background(const mpi_ctx *c);
selsync_status gate_check(mpi_ctx *c, const void *buf, size_t n, const char *op);
selsync_status gate_check_segments(mpi_ctx *c, const selsync_segment *segs, size_t nseg, const char *op);
selsync_status gate_wait_started(mpi_ctx *c);
void gate_stop_background(mpi_ctx *c);
void gate_abort_pending(mpi_ctx *c);
_Noreturn void gate_end_job(int code);
_Noreturn void gate_abort(mpi_ctx *c, int code, const char *message);
/* Queues run(segs, nseg, scale) for the background thread (or, without
 * one, for the caller's next op); the segments are checked here. */
selsync_status gate_start_sum(mpi_ctx *c, bg_sum_fn run, const selsync_segment *segs, size_t nseg, float scale);
selsync_status comm_mpi_wait_sums(void *ctx);

/* stall_watch.c: every wait on requests, watched for stalls. */
void stall_enter(mpi_ctx *c, const char *op, int collective);
double stall_now(void);
void stall_poll(mpi_ctx *c, int answer);
selsync_status stall_wait(mpi_ctx *c, int n, MPI_Request *req, const int *peer, MPI_Status *st, const char *call);
selsync_status stall_wait_collective(mpi_ctx *c, int rc, MPI_Request *req, const char *call);
selsync_status stall_arrive(mpi_ctx *c);

/* ring.c: the array over the caller's segments and the ring sum. */
size_t ring_chunk_elems(const mpi_ctx *c, size_t esize);
uint64_t ring_bytes(const mpi_ctx *c, size_t count, size_t esize);
size_t ring_block_off(size_t n, size_t p, size_t b);
size_t ring_block_len(size_t n, size_t p, size_t b);
selsync_status ring_set_array(mpi_ctx *c, const selsync_segment *segs, size_t nseg, size_t *n);
selsync_status ring_view(mpi_ctx *c, size_t off, size_t n, void **buf, int *count, MPI_Datatype *type);
selsync_status ring_run(mpi_ctx *c, const ring_plan *pl, float scale);


/* collectives.c and p2p.c: the ops of comm.h. */
selsync_status comm_mpi_sum_f32(void *ctx, float *buf, size_t n);
selsync_status comm_mpi_sum_f32v(void *ctx, const selsync_segment *segs, size_t nseg, float scale);
selsync_status comm_mpi_sum_f32v_start(void *ctx, const selsync_segment *segs, size_t nseg, float scale);
selsync_status comm_mpi_sum_f32v_among(void *ctx, const selsync_segment *segs, size_t nseg, float scale,
                                       const int *members, int k);
selsync_status comm_mpi_any(void *ctx, uint8_t *flags, size_t n);
selsync_status comm_mpi_sum_f64(void *ctx, double *buf, size_t n);
selsync_status comm_mpi_sum_f64_start(void *ctx, double *buf, size_t n);
selsync_status comm_mpi_wait_f64(void *ctx);
/* Frees the small sums still started (at finalize). */
void small_sums_free(mpi_ctx *c);
selsync_status comm_mpi_bcast(void *ctx, void *buf, size_t bytes, int root);
selsync_status comm_mpi_send(void *ctx, int dest, int tag, const void *buf, size_t bytes);
selsync_status comm_mpi_recv(void *ctx, int source, int tag, void *buf, size_t bytes, selsync_msg *got);

#endif
