/* The MPI transport: see comm_mpi.h for the contract, the algorithms and
 * the bytes_sent estimates. The only file of the project that includes
 * mpi.h. One module-wide context: MPI_COMM_WORLD exists once per process. */
#include "comm_mpi.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp_link.h"

#define DEFAULT_CHUNK_BYTES ((size_t)1 << 30)
/* Ring reduce-scatter: bytes per message (segment), which is also the
 * scratch size: small enough for the received segment to still be in cache
 * when it is added (measured: 256 KiB - 1 MiB beat whole blocks by 10-40 %
 * at 8-32 MiB payloads, at no cost at 1 MiB). */
#define RING_SEGMENT_BYTES ((size_t)1 << 20)
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
/* Tags of the stall notices on the watch communicator; the payload is the
 * sender's collective count (see enter()). */
#define NOTE_WAITING 1  /* "I have waited a while in collective SEQ": answer */
#define NOTE_REACHED 2  /* "I have entered collective SEQ" */
/* Tags on comm: the ring's messages, and sum_f32v_among's hand-out of the
 * members' result to the non-members. */
#define TAG_RING 0
#define TAG_HAND_OUT 1

typedef struct mpi_ctx {
    MPI_Comm comm;
    MPI_Comm p2p;        /* send/recv: a duplicate, so never matched by the ring */
    MPI_Comm watch;      /* stall notices: a third duplicate */
    int rank, size;
    int active;          /* comm is live */
    int unfinished;      /* init failed with MPI up: selsync_mpi_finalize finalises it */
    int own_init;        /* we called MPI_Init_thread */
    int atexit_done;     /* handler registered */
    int threads_ok;      /* MPI allows a second thread (MPI_THREAD_SERIALIZED or more) */
    int one_host;        /* every rank runs on one host (shared memory) */
    int background;      /* sum_f32v_start: -1 a thread unless one_host, 0 never, 1 always */
    volatile int aborting;
    float *scratch;      /* sum_f32 scratch, kept between calls */
    size_t scratch_cap;  /* in floats */
    float *pack;         /* reduce_scatter_block sum_f32v: the packed array */
    size_t pack_cap;     /* in floats */
    /* The ring's array: segments seg[0 .. nseg) back to back, segment k
     * from element start[k], seen from element rot (at()); start and the
     * type map (len, disp) are kept between calls. */
    const selsync_segment *seg;
    size_t nseg, *start, start_cap, rot;
    int *len;
    MPI_Aint *disp;
    size_t map_cap;
    /* sum_f32v_among's hand-out: a request, peer and type per message of a
     * round (at most size of each), kept between calls. */
    MPI_Request *out_req;
    int *out_peer;
    MPI_Datatype *out_type;
    size_t out_cap, out_peer_cap, out_type_cap;
    /* The world ring's links (SELSYNC_RING_LINKS): TCP sockets to the
     * right neighbour (written) and from the left one (read), or -1: MPI. */
    int tcp_out, tcp_in;
    char links[256];     /* what the world ring runs over, for messages */
    struct iovec *iov[2];
    size_t iov_cap[2];
    size_t chunk_bytes;  /* cap on bytes per MPI call */
    selsync_mpi_sum_algorithm sum_alg;
    uint64_t bytes;      /* bytes_sent estimate */
    uint64_t bytes_bg;   /* of the started sums, not yet waited for (count_bytes) */
    /* Stall watch (seconds, 0 = off) and what a message about a stall says. */
    double stall_warn, stall_timeout;
    int64_t step;        /* the caller's step, < 0 unknown */
    const char *op;      /* the op in progress */
    int collective;      /* it is a collective (counted in seq) */
    uint64_t seq;        /* collectives entered so far */
    uint64_t *reached;   /* per rank: the highest seq it is known to have entered */
    uint64_t *note_buf;  /* per rank: the notice in flight to it */
    MPI_Request *note_req;
    char last_error[MPI_MAX_ERROR_STRING + 160];
} mpi_ctx;

/* The background sums (sum_f32v_start): a queue the caller's thread fills
 * and one thread runs, one sum after another. While it has work, the
 * caller's thread makes no MPI call: every other op first waits until the
 * queue is empty (check_live), so MPI sees one thread at a time
 * (MPI_THREAD_SERIALIZED). A failure is kept and returned by every later
 * op: the ring's state across the ranks is then unknown. */
typedef struct bg_sum {
    const selsync_segment *segs;
    size_t nseg;
    float scale;
} bg_sum;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* the queue changed */
    pthread_t thread;
    int started, stop, busy; /* busy: running q[head], already taken off the count */
    bg_sum *q;
    size_t cap, head, count; /* the sums waiting: q[head .. head + count) */
    selsync_status failed;
} bg = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static _Thread_local int on_bg_thread;
static int draining; /* the caller's thread runs the deferred sums (no thread) */
/* The exit code of an abort the caller's thread has asked for (0: none).
 * While the background thread is inside MPI it makes the MPI_Abort call
 * itself (bg_check_abort), so that MPI still sees one thread at a time. */
static int bg_abort_code;
/* How long an abort waits for the background thread to leave MPI before
 * it calls MPI_Abort anyway (a job that hangs is worse). */
#define BG_ABORT_WAIT_S 10

static mpi_ctx g = {
    .comm = MPI_COMM_NULL,
    .p2p = MPI_COMM_NULL,
    .watch = MPI_COMM_NULL,
    .rank = 0,
    .size = 1,
    .chunk_bytes = DEFAULT_CHUNK_BYTES,
    .sum_alg = SELSYNC_MPI_SUM_RING,
    .tcp_out = -1,
    .tcp_in = -1,
    .background = -1,
};

/* Adds n bytes to bytes_sent. A started sum's bytes (the background
 * thread's, or deferred ones run by another op's wait) are held apart until
 * wait_sums, so that another op's bytes_sent difference (injection's
 * broadcasts) never holds them and the engine finds them where it waits. */
static void count_bytes(uint64_t n)
{
    if (on_bg_thread || draining) g.bytes_bg += n;
    else g.bytes += n;
}

static void set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g.last_error, sizeof g.last_error, fmt, ap);
    va_end(ap);
}

static selsync_status mpi_fail(const char *call, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
        snprintf(text, sizeof text, "MPI error code %d", rc);
    } else {
        text[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    }
    set_error("%s failed on rank %d: %s", call, g.rank, text);
    return SELSYNC_ECOMM;
}

static void copy_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) snprintf(err, errlen, "%s", msg);
}

static selsync_status bg_idle(void);

/* Every op starts here: checks the communicator and buffer, and on the
 * caller's thread waits for the background sums (their failure, if any,
 * is the op's). */
static selsync_status check_live(void *ctx, const void *buf, size_t n, const char *op)
{
    selsync_status s = on_bg_thread || draining ? SELSYNC_OK : bg_idle();
    if (s != SELSYNC_OK) return s;
    if (ctx != &g || !g.active) {
        set_error("%s: MPI communicator used while not active (after selsync_mpi_finalize?)", op);
        return SELSYNC_ESTATE;
    }
    if (!buf && n) {
        set_error("%s: NULL buffer with %zu elements", op, n);
        return SELSYNC_EINVAL;
    }
    return SELSYNC_OK;
}

/* --- stall watch --------------------------------------------------------- */

static void comm_abort(void *ctx, int code, const char *message);

/* Ends the job with code (MPI_Abort; without MPI running, _Exit). */
static _Noreturn void abort_job(int code)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code);
    /* Not reached with MPI running; without it there is nobody to tell. */
    _Exit(code);
}

/* On the background thread, inside MPI: ends the job if the caller's
 * thread has asked for an abort (comm_abort). */
static void bg_check_abort(void)
{
    int code = on_bg_thread ? __atomic_load_n(&bg_abort_code, __ATOMIC_ACQUIRE) : 0;
    if (code) abort_job(code);
}

/* Every op starts here: names it for stall messages and counts the
 * collectives (every rank calls them in the same order, so the counts
 * agree: seq numbers a collective across the ranks). */
static void enter(const char *op, int collective)
{
    g.op = op;
    g.collective = collective;
    if (collective) ++g.seq;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Sends this rank's seq to rank `to` with tag, unless the previous notice
 * to it is still in flight. Notices are diagnostics: errors are ignored. */
static void note_send(int to, int tag)
{
    int idle = 1;
    if (g.note_req[to] != MPI_REQUEST_NULL) MPI_Test(&g.note_req[to], &idle, MPI_STATUS_IGNORE);
    if (!idle) return;
    g.note_buf[to] = g.seq;
    if (MPI_Isend(&g.note_buf[to], 1, MPI_UINT64_T, to, tag, g.watch, &g.note_req[to]) != MPI_SUCCESS)
        g.note_req[to] = MPI_REQUEST_NULL;
}

/* Receives the notices that have arrived, records how far their senders
 * have got, and answers NOTE_WAITING with this rank's seq (answer: no). */
static void watch_poll(int answer)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        uint64_t seq = 0;
        if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, g.watch, &flag, &st) != MPI_SUCCESS || !flag) return;
        if (MPI_Recv(&seq, 1, MPI_UINT64_T, st.MPI_SOURCE, st.MPI_TAG, g.watch, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        if (seq > g.reached[st.MPI_SOURCE]) g.reached[st.MPI_SOURCE] = seq;
        if (answer && st.MPI_TAG == NOTE_WAITING) note_send(st.MPI_SOURCE, NOTE_REACHED);
    }
}

/* Appends rank r to the list at out (len: its length so far). */
static void list_rank(char *out, size_t cap, size_t *len, int *count, int r)
{
    if (*len < cap)
        *len += (size_t)snprintf(out + *len, cap - *len, "%s%d", *count ? "," : "for rank(s) ", r);
    ++*count;
}

/* Who a stalled wait waits for ("for rank(s) 1,3"): in a collective, the
 * ranks not known to have entered it; else (or when every rank has) the
 * peers of the requests not complete. */
static void describe_missing(char *out, size_t cap, int n, MPI_Request *req, const int *peer)
{
    size_t len = 0;
    int count = 0, any_source = 0, last = -1;
    out[0] = '\0';
    for (int r = 0; g.collective && r < g.size; ++r)
        if (r != g.rank && g.reached[r] < g.seq) list_rank(out, cap, &len, &count, r);
    if (count) return;
    for (int i = 0; i < n; ++i) {
        int flag = 1;
        MPI_Request_get_status(req[i], &flag, MPI_STATUS_IGNORE);
        if (flag) continue;
        if (peer[i] == MPI_ANY_SOURCE) any_source = 1;
        if (peer[i] < 0 || peer[i] == last) continue; /* a ring of 2: one peer twice */
        list_rank(out, cap, &len, &count, last = peer[i]);
    }
    if (count == 0)
        snprintf(out, cap, "%s", any_source ? "for any rank" : "for rank(s) unknown (every rank has entered it)");
}

/* Prints the warning that this rank has waited `waited` seconds in the
 * current op for `missing` ("for rank(s) 1,3"), or with timed_out ends the
 * job (does not return). */
static void stall_say(const char *missing, double waited, int timed_out)
{
    char step[48] = "", msg[512];
    int64_t at = __atomic_load_n(&g.step, __ATOMIC_RELAXED);
    if (at >= 0) snprintf(step, sizeof step, " (step %lld)", (long long)at);
    if (!timed_out) {
        fprintf(stderr, "selsync: rank %d: waiting %lld s in %s%s %s\n", g.rank,
                (long long)waited, g.op, step, missing);
        fflush(stderr);
        return;
    }
    snprintf(msg, sizeof msg,
             "waited %lld s in %s%s %s: SELSYNC_STALL_TIMEOUT=%lld reached; aborting the job",
             (long long)waited, g.op, step, missing, (long long)g.stall_timeout);
    comm_abort(&g, STALL_EXIT_CODE, msg);
}

/* stall_say for a wait on n requests: names the ranks it waits for. */
static void stall_report(int n, MPI_Request *req, const int *peer, double waited, int timed_out)
{
    char missing[256];
    describe_missing(missing, sizeof missing, n, req, peer);
    stall_say(missing, waited, timed_out);
}

/* MPI_Waitall when the watch is off; else polls: busy for up to
 * STALL_SPIN_S, then with naps, answering notices. Half-way to the first
 * warning or timeout, a collective tells every other rank it is waiting
 * (they answer how far they have got, which names the missing ranks). */
static int watched_waitall(int n, MPI_Request *req, const int *peer, MPI_Status *st)
{
    double warn = g.stall_warn, limit = g.stall_timeout;
    int watch = warn > 0 || limit > 0;
    if (!watch && !on_bg_thread) return MPI_Waitall(n, req, st);
    double first = warn <= 0 ? limit : (limit <= 0 || warn < limit) ? warn : limit;
    double spin = on_bg_thread ? 0 : first / 4 < STALL_SPIN_S ? first / 4 : STALL_SPIN_S;
    double t0 = now_s(), next_warn = warn;
    long nap_ns = on_bg_thread ? BG_NAP_MIN_NS : STALL_NAP_NS;
    int told = !g.collective || !watch, done = 0, rc = MPI_SUCCESS;
    while (!done && rc == MPI_SUCCESS) {
        double t = now_s() - t0;
        if (t >= spin) {
            struct timespec nap = {0, nap_ns};
            if (watch) watch_poll(1);
            nanosleep(&nap, NULL);
            if (on_bg_thread && nap_ns < BG_NAP_MAX_NS) nap_ns *= 2;
        }
        if (!told && t >= first / 2) {
            for (int r = 0; r < g.size; ++r)
                if (r != g.rank) note_send(r, NOTE_WAITING);
            told = 1;
        }
        bg_check_abort();
        if (limit > 0 && t >= limit) stall_report(n, req, peer, t, 1);
        if (warn > 0 && t >= next_warn) {
            stall_report(n, req, peer, t, 0);
            while (next_warn <= t) next_warn += warn;
        }
        rc = MPI_Testall(n, req, &done, st);
    }
    return rc;
}

/* Completes n requests; peer[i]: the rank request i talks to, or
 * MPI_ANY_SOURCE, or MPI_PROC_NULL in a library collective. */
static selsync_status wait_for(int n, MPI_Request *req, const int *peer, MPI_Status *st, const char *call)
{
    int done = 0;
    int rc = MPI_Testall(n, req, &done, st);
    if (rc == MPI_SUCCESS && !done) rc = watched_waitall(n, req, peer, st);
    return rc == MPI_SUCCESS ? SELSYNC_OK : mpi_fail(call, rc);
}

/* A library collective started as *req: waited for. */
static selsync_status wait_collective(int rc, MPI_Request *req, const char *call)
{
    static const int nobody = MPI_PROC_NULL;
    return rc == MPI_SUCCESS ? wait_for(1, req, &nobody, MPI_STATUSES_IGNORE, call) : mpi_fail(call, rc);
}

/* Before a blocking collective: with the watch on, the ranks first meet in
 * a watched MPI_Ibarrier (a stall before the collective is reported; one
 * inside it is not). Used where the non-blocking collective would sum in
 * another order than the blocking one (MPI_Reduce_scatter_block). */
static selsync_status arrive(void)
{
    MPI_Request rq;
    if (g.stall_warn <= 0 && g.stall_timeout <= 0) return SELSYNC_OK;
    return wait_collective(MPI_Ibarrier(g.comm, &rq), &rq, "MPI_Ibarrier");
}

/* Elements of esize bytes per MPI call: >= 1, <= INT_MAX, <= chunk_bytes. */
static size_t chunk_elems(size_t esize)
{
    size_t c = g.chunk_bytes / esize;
    if (c > (size_t)INT_MAX) c = (size_t)INT_MAX;
    return c ? c : 1;
}

/* Estimated bytes this rank sends in a reduce-scatter + allgather (or ring
 * allreduce) of count elements of esize bytes. */
static uint64_t ring_bytes(size_t count, size_t esize)
{
    size_t p = (size_t)g.size;
    size_t block = (count + p - 1) / p;
    return 2u * (uint64_t)(p - 1) * (uint64_t)block * (uint64_t)esize;
}

static int comm_rank(void *ctx)
{
    (void)ctx;
    return g.rank;
}

static int comm_size(void *ctx)
{
    (void)ctx;
    return g.size;
}

/* Grows *p to hold n elements of esize bytes. */
static selsync_status reserve(void **p, size_t *cap, size_t n, size_t esize)
{
    if (n <= *cap) return SELSYNC_OK;
    void *q = realloc(*p, n * esize);
    if (!q) {
        set_error("sum: cannot allocate %zu bytes on rank %d", n * esize, g.rank);
        return SELSYNC_ENOMEM;
    }
    *p = q;
    *cap = n;
    return SELSYNC_OK;
}

/* n divisible by size, n / size <= INT_MAX: reduce-scatter from buf into the
 * scratch block, allgather the blocks back into buf. */
static selsync_status rs_ag_direct(float *buf, size_t n)
{
    size_t block = n / (size_t)g.size;
    selsync_status s = reserve((void **)&g.scratch, &g.scratch_cap, block, sizeof(float));
    if (s != SELSYNC_OK) return s;
    if ((s = arrive()) != SELSYNC_OK) return s;
    int rc = MPI_Reduce_scatter_block(buf, g.scratch, (int)block, MPI_FLOAT, MPI_SUM, g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Reduce_scatter_block", rc);
    rc = MPI_Allgather(g.scratch, (int)block, MPI_FLOAT, buf, (int)block, MPI_FLOAT, g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Allgather", rc);
    count_bytes(ring_bytes(n, sizeof(float)));
    return SELSYNC_OK;
}

/* Any n (ceil(n / size) <= INT_MAX): copied into a zero-padded scratch of
 * block * size floats, followed by the block that receives the reduction. */
static selsync_status rs_ag_padded(float *buf, size_t n)
{
    size_t p = (size_t)g.size;
    size_t block = (n + p - 1) / p;
    size_t padded = block * p;
    selsync_status s = reserve((void **)&g.scratch, &g.scratch_cap, padded + block, sizeof(float));
    if (s != SELSYNC_OK) return s;
    float *all = g.scratch, *mine = g.scratch + padded;
    memcpy(all, buf, n * sizeof(float));
    memset(all + n, 0, (padded - n) * sizeof(float));
    if ((s = arrive()) != SELSYNC_OK) return s;
    int rc = MPI_Reduce_scatter_block(all, mine, (int)block, MPI_FLOAT, MPI_SUM, g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Reduce_scatter_block", rc);
    rc = MPI_Allgather(mine, (int)block, MPI_FLOAT, all, (int)block, MPI_FLOAT, g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Allgather", rc);
    memcpy(buf, all, n * sizeof(float));
    count_bytes(ring_bytes(padded, sizeof(float)));
    return SELSYNC_OK;
}

static selsync_status sum_f32_rsb(float *buf, size_t n)
{
    size_t p = (size_t)g.size;
    /* Per pair of calls: a multiple of p elements, block <= INT_MAX. */
    size_t cap = g.chunk_bytes < RSB_CHUNK_BYTES ? g.chunk_bytes : RSB_CHUNK_BYTES;
    size_t block_max = cap / sizeof(float) / p;
    if (block_max == 0) block_max = 1;
    size_t chunk = block_max * p;
    size_t small = SMALL_PADDED_BYTES / sizeof(float);
    for (size_t pos = 0; pos < n;) {
        size_t piece = n - pos < chunk ? n - pos : chunk;
        size_t tail = piece % p;  /* non-zero only in the last piece */
        selsync_status s;
        if (tail == 0) {
            s = rs_ag_direct(buf + pos, piece);
        } else if (piece <= small) {
            s = rs_ag_padded(buf + pos, piece);
        } else {
            s = rs_ag_direct(buf + pos, piece - tail);
            if (s == SELSYNC_OK) s = rs_ag_padded(buf + pos + piece - tail, tail);
        }
        if (s != SELSYNC_OK) return s;
        pos += piece;
    }
    return SELSYNC_OK;
}

/* Block b of n elements over p ranks: the first n % p blocks have one
 * element more. */
static size_t blk_off(size_t n, size_t p, size_t b)
{
    return b * (n / p) + (b < n % p ? b : n % p);
}

static size_t blk_len(size_t n, size_t p, size_t b)
{
    return n / p + (b < n % p);
}

/* The ring works on segs as one array of *n elements. */
static selsync_status set_segments(const selsync_segment *segs, size_t nseg, size_t *n)
{
    selsync_status st = reserve((void **)&g.start, &g.start_cap, nseg + 1, sizeof *g.start);
    if (st != SELSYNC_OK) return st;
    g.seg = segs;
    g.nseg = nseg;
    g.rot = 0;
    g.start[0] = 0;
    for (size_t k = 0; k < nseg; k++) g.start[k + 1] = g.start[k] + segs[k].count;
    *n = g.start[nseg];
    return SELSYNC_OK;
}

/* Element pos (< the array's length) of the array seen from element rot
 * (element (pos + rot) mod length); *run: how many follow it contiguously
 * in its segment, itself included (never past the array's end). */
static float *at(size_t pos, size_t *run)
{
    size_t lo = 0, hi = g.nseg;
    if ((pos += g.rot) >= g.start[g.nseg]) pos -= g.start[g.nseg];
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (g.start[mid] <= pos) lo = mid;
        else hi = mid;
    }
    *run = g.start[lo + 1] - pos;
    return g.seg[lo].data + (pos - g.start[lo]);
}

/* The array's elements [off, off + n) as pieces g.iov[which][0 .. *count),
 * each a run of one caller segment. */
static selsync_status pieces(int which, size_t off, size_t n, int *count)
{
    size_t run, k = 0;
    for (size_t d = 0; d < n; d += run, k++) at(off + d, &run);
    selsync_status st = reserve((void **)&g.iov[which], &g.iov_cap[which], k ? k : 1, sizeof *g.iov[which]);
    if (st != SELSYNC_OK) return st;
    k = 0;
    for (size_t d = 0; d < n; d += run, k++) {
        float *q = at(off + d, &run);
        if (run > n - d) run = n - d;
        g.iov[which][k] = (struct iovec){q, run * sizeof(float)};
    }
    *count = (int)k;
    return SELSYNC_OK;
}

/* Elements [off, off + n) of the array as an MPI buffer: the segment itself
 * when one holds them all, else MPI_BOTTOM and one element of a new
 * hindexed type over their pieces (*type, to be freed). Uses g.iov[0]. */
static selsync_status view(size_t off, size_t n, void **buf, int *count, MPI_Datatype *type)
{
    int k = 0;
    selsync_status st = n ? pieces(0, off, n, &k) : SELSYNC_OK;
    *type = MPI_FLOAT;
    *count = (int)n;
    *buf = n ? g.iov[0][0].iov_base : g.scratch;
    if (st != SELSYNC_OK || k <= 1) return st;
    size_t cap = g.map_cap;
    st = reserve((void **)&g.len, &cap, (size_t)k, sizeof *g.len);
    if (st == SELSYNC_OK) st = reserve((void **)&g.disp, &g.map_cap, (size_t)k, sizeof *g.disp);
    if (st != SELSYNC_OK) return st;
    for (int i = 0; i < k; i++) {
        g.len[i] = (int)(g.iov[0][i].iov_len / sizeof(float));
        MPI_Get_address(g.iov[0][i].iov_base, &g.disp[i]);
    }
    int rc = MPI_Type_create_hindexed(k, g.len, g.disp, MPI_FLOAT, type);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(type);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Type_create_hindexed", rc);
    *buf = MPI_BOTTOM;
    *count = 1;
    return SELSYNC_OK;
}

/* Elements [off, off + n) of the array: x = x + src[i] (when src), then
 * x = x * scale (unless 1), piece by piece. Without a scale the sum is
 * MPI_Reduce_local (the library's vectorised op, measured faster here than
 * a plain C loop); with one, a single loop computes (x + src[i]) * scale,
 * the same operations (float addition commutes), in one pass. */
static selsync_status apply(size_t off, size_t n, const float *src, float scale)
{
    size_t run;
    for (size_t d = 0; d < n; d += run) {
        float *p = at(off + d, &run);
        if (run > n - d) run = n - d;
        if (scale != 1.0f) { /* one pass: the same sum, then the same product */
            const float *q = src ? src + d : NULL;
            if (q)
                for (size_t i = 0; i < run; i++) p[i] = (p[i] + q[i]) * scale;
            else
                for (size_t i = 0; i < run; i++) p[i] *= scale;
            continue;
        }
        int rc = src ? MPI_Reduce_local(src + d, p, (int)run, MPI_FLOAT, MPI_SUM) : MPI_SUCCESS;
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Reduce_local", rc);
    }
    return SELSYNC_OK;
}

/* A ring of p ranks over the array of set_segments (n elements): position
 * i is rank rank[i] (rank NULL: the world, position i is rank i), this
 * rank is at position me; the array is seen from element rot (at()). */
typedef struct ring_plan {
    const int *rank;
    size_t p, me, n, rot;
} ring_plan;

/* Where block b (b <= p) starts. The world: blocks of n/p or n/p + 1
 * elements. Members (rot: where the world's block rank[0] starts): block
 * c is the world's blocks rank[c] .. rank[c+1] - 1, the last one wrapping
 * around to rank[0] - 1. The world ring sums the elements of its block b
 * in the order b+1, b+2, ..., b (mod size); among members, the same order
 * with the non-members left out. */
static size_t plan_off(const ring_plan *pl, size_t b)
{
    if (!pl->rank) return blk_off(pl->n, pl->p, b);
    return b == pl->p ? pl->n : blk_off(pl->n, (size_t)g.size, (size_t)pl->rank[b]) - pl->rot;
}

static int plan_rank(const ring_plan *pl, size_t pos)
{
    return pl->rank ? pl->rank[pos] : (int)pos;
}

/* Messages of one ring step in flight at once: the next is posted before
 * the current one is waited for and added, so the link does not idle while
 * a segment is summed, nor for each segment's rendezvous (on a shaped
 * network link both directions carry the ring's data, and the handshake
 * waits behind it). */
#define RING_DEPTH 2

/* One exchange of a ring step: receive from the left, send to the right. */
typedef struct ring_msg {
    MPI_Request rq[2];
    MPI_Datatype stype, rtype;
    size_t sc, rc;
} ring_msg;

/* Posts exchange o (elements o .. of the blocks at so and ro, sl and rl
 * long, seg per message) into *m: the receive into rbuf (phase 0: a
 * scratch slot) or, in phase 1, straight into the array. */
static selsync_status ring_post(ring_msg *m, int phase, size_t o, size_t seg, size_t so, size_t sl, size_t ro,
                                size_t rl, float *slot, int left, int right)
{
    void *sbuf, *rbuf = slot;
    int scount, rcount;
    m->sc = o < sl ? (sl - o < seg ? sl - o : seg) : 0;
    m->rc = o < rl ? (rl - o < seg ? rl - o : seg) : 0;
    m->stype = m->rtype = MPI_FLOAT;
    rcount = (int)m->rc;
    selsync_status st = view(so + o, m->sc, &sbuf, &scount, &m->stype);
    if (st == SELSYNC_OK && phase == 1) st = view(ro + o, m->rc, &rbuf, &rcount, &m->rtype);
    if (st != SELSYNC_OK) return st;
    int e = MPI_Irecv(rbuf, rcount, m->rtype, left, TAG_RING, g.comm, &m->rq[0]);
    if (e == MPI_SUCCESS) e = MPI_Isend(sbuf, scount, m->stype, right, TAG_RING, g.comm, &m->rq[1]);
    return e == MPI_SUCCESS ? SELSYNC_OK : mpi_fail("MPI_Isend/MPI_Irecv", e);
}

/* The stall watch of a TCP transfer: the same warnings and timeout as
 * watched_waitall's, naming the left neighbour while data from it is
 * missing, else the right one. */
static int tcp_tick(void *user, double waited, int receiving)
{
    static double next_warn;
    char missing[48];
    (void)user;
    bg_check_abort();
    snprintf(missing, sizeof missing, "for rank(s) %d", (g.rank + (receiving ? g.size - 1 : 1)) % g.size);
    if (waited < 0.15) next_warn = g.stall_warn; /* a new transfer's first tick */
    if (g.stall_timeout > 0 && waited >= g.stall_timeout) stall_say(missing, waited, 1);
    if (g.stall_warn > 0 && waited >= next_warn) {
        stall_say(missing, waited, 0);
        while (next_warn <= waited) next_warn += g.stall_warn;
    }
    return 0;
}

/* The reduce-scatter's received pieces: piece k is added into the array
 * (times scale) as soon as it has arrived, while it is still in cache. */
typedef struct tcp_sum {
    size_t ro, rl, seg;
    float scale;
} tcp_sum;

static int tcp_add(void *user, int k)
{
    const tcp_sum *t = user;
    size_t o = (size_t)k * t->seg, n = t->rl - o < t->seg ? t->rl - o : t->seg;
    return apply(t->ro + o, n, g.scratch + o, t->scale) != SELSYNC_OK;
}

/* One step of the world ring over its TCP links: block at so (sl
 * elements) to the right, block at ro (rl) from the left, at once. Phase 0
 * receives into the scratch in pieces of seg elements, each added in as it
 * arrives (times scale); phase 1 straight into the array. The same blocks,
 * order and bits as over MPI. */
static selsync_status tcp_step(int phase, size_t seg, size_t so, size_t sl, size_t ro, size_t rl, float scale)
{
    int ns = 0, nr = 0;
    char why[160];
    tcp_sum sum = {ro, rl, seg, scale};
    tcp_hooks hooks = {tcp_tick, phase == 0 ? tcp_add : NULL, &sum};
    selsync_status st = pieces(0, so, sl, &ns);
    if (st == SELSYNC_OK && phase == 1) st = pieces(1, ro, rl, &nr);
    if (st == SELSYNC_OK && phase == 0) {
        nr = (int)((rl + seg - 1) / seg);
        st = reserve((void **)&g.iov[1], &g.iov_cap[1], nr ? (size_t)nr : 1, sizeof *g.iov[1]);
        for (int k = 0; st == SELSYNC_OK && k < nr; k++) {
            size_t o = (size_t)k * seg;
            g.iov[1][k] = (struct iovec){g.scratch + o, (rl - o < seg ? rl - o : seg) * sizeof(float)};
        }
    }
    if (st != SELSYNC_OK) return st;
    if (tcp_transfer(g.tcp_out, g.iov[0], ns, g.tcp_in, g.iov[1], nr, &hooks, why, sizeof why) != 0) {
        if (!strcmp(why, "stopped where a received piece was used")) return SELSYNC_ECOMM; /* apply's message */
        set_error("%s failed on rank %d over the TCP links of the ring (%s): %s", g.op, g.rank, g.links, why);
        return SELSYNC_ECOMM;
    }
    return SELSYNC_OK;
}

/* Ring reduce-scatter then ring allgather of plan pl, in place, each
 * exchange an MPI_Irecv from the left and an MPI_Isend to the right,
 * waited for together, RING_DEPTH exchanges in flight. Reduce-scatter step
 * s (0 .. p-2): send block (r-s-1) to the right neighbour, receive block
 * (r-s-2) from the left one, segment by segment, into scratch slots and
 * add it into the array; after p-1 steps position r alone holds the
 * complete sum of block r, which it multiplies by scale as it completes.
 * Allgather step s: send block (r-s) right, receive block (r-s-1) from the
 * left straight into the array. Segments: at most RING_SEGMENT_BYTES in
 * the reduce-scatter, chunk_elems() in the allgather (<= INT_MAX elements,
 * <= chunk_bytes). A message whose elements span several of the caller's
 * segments travels as an hindexed type over them. The scratch is allocated
 * once and kept, so calls do not page-fault. */
static selsync_status ring(const ring_plan *pl, float scale)
{
    size_t p = pl->p, r = pl->me, n = pl->n, maxblk = 0;
    int right = plan_rank(pl, (r + 1) % p), left = plan_rank(pl, (r + p - 1) % p);
    int peer[2] = {left, right};
    size_t seg_rs = (g.chunk_bytes < RING_SEGMENT_BYTES ? g.chunk_bytes : RING_SEGMENT_BYTES) /
                    sizeof(float);
    if (seg_rs == 0) seg_rs = 1;
    size_t seg_ag = chunk_elems(sizeof(float));
    for (size_t b = 0; b < p; b++)
        if (plan_off(pl, b + 1) - plan_off(pl, b) > maxblk) maxblk = plan_off(pl, b + 1) - plan_off(pl, b);
    size_t slot = p > 1 ? (maxblk < seg_rs ? maxblk : seg_rs) : 0;
    int tcp = !pl->rank && g.tcp_out >= 0 && p > 1; /* a whole block in the scratch */
    selsync_status st = reserve((void **)&g.scratch, &g.scratch_cap, tcp ? maxblk : RING_DEPTH * slot, sizeof(float));
    uint64_t sent = 0;
    g.rot = pl->rot;
    if (p == 1 && st == SELSYNC_OK) st = apply(0, n, NULL, scale);
    for (int phase = 0; phase < 2 && st == SELSYNC_OK; ++phase) {
        size_t seg = phase == 0 ? seg_rs : seg_ag;
        for (size_t s = 0; s + 1 < p && st == SELSYNC_OK; ++s) {
            size_t sb = phase == 0 ? (r + 2 * p - s - 1) % p : (r + p - s) % p;
            size_t rb = (sb + p - 1) % p;
            size_t so = plan_off(pl, sb), ro = plan_off(pl, rb);
            size_t sl = plan_off(pl, sb + 1) - so, rl = plan_off(pl, rb + 1) - ro;
            /* Every rank runs the same number of exchanges per step (those
             * of the largest block), so each send has its matching receive
             * even where a block is shorter or empty. */
            size_t count = (maxblk + seg - 1) / seg, posted = 0;
            ring_msg m[RING_DEPTH];
            if (tcp) { /* the world ring over its TCP links */
                st = tcp_step(phase, seg, so, sl, ro, rl, s + 2 == p ? scale : 1.0f);
                sent += sl * sizeof(float);
                continue;
            }
            for (size_t k = 0; k < count && st == SELSYNC_OK; ++k) {
                while (st == SELSYNC_OK && posted < count && posted < k + RING_DEPTH) {
                    st = ring_post(&m[posted % RING_DEPTH], phase, posted * seg, seg, so, sl, ro, rl,
                                   g.scratch + posted % RING_DEPTH * slot, left, right);
                    posted++;
                }
                ring_msg *x = &m[k % RING_DEPTH];
                if (st == SELSYNC_OK) st = wait_for(2, x->rq, peer, MPI_STATUSES_IGNORE, "MPI_Isend/MPI_Irecv");
                if (x->stype != MPI_FLOAT) MPI_Type_free(&x->stype);
                if (x->rtype != MPI_FLOAT) MPI_Type_free(&x->rtype);
                /* The last reduce-scatter step completes block r: scaled here. */
                if (st == SELSYNC_OK && phase == 0)
                    st = apply(ro + k * seg, x->rc, g.scratch + k % RING_DEPTH * slot, s + 2 == p ? scale : 1.0f);
                sent += x->sc * sizeof(float);
            }
        }
    }
    count_bytes(sent);
    g.rot = 0;
    return st;
}

static selsync_status comm_sum_f32(void *ctx, float *buf, size_t n)
{
    selsync_status s = check_live(ctx, buf, n, "sum_f32");
    if (s != SELSYNC_OK) return s;
    enter("sum_f32", 1);
    if (n == 0 || g.size == 1) return s;
    if (g.sum_alg == SELSYNC_MPI_SUM_RSB) return sum_f32_rsb(buf, n);
    selsync_segment one = {buf, n};
    if ((s = set_segments(&one, 1, &n)) != SELSYNC_OK) return s;
    ring_plan world = {NULL, (size_t)g.size, (size_t)g.rank, n, 0};
    return ring(&world, 1.0f);
}

/* The segments of set_segments (n > 0 elements) summed over all ranks: the
 * ring in place; reduce_scatter_block on a packed copy. */
static selsync_status sum_segments(const selsync_segment *segs, size_t nseg, size_t n, float scale)
{
    selsync_status s;
    ring_plan world = {NULL, (size_t)g.size, (size_t)g.rank, n, 0};
    if (g.sum_alg == SELSYNC_MPI_SUM_RING || g.size == 1) return ring(&world, scale);
    if ((s = reserve((void **)&g.pack, &g.pack_cap, n, sizeof *g.pack)) != SELSYNC_OK) return s;
    for (size_t k = 0; k < nseg; k++)
        if (segs[k].count) memcpy(g.pack + g.start[k], segs[k].data, segs[k].count * sizeof(float));
    if ((s = sum_f32_rsb(g.pack, n)) != SELSYNC_OK) return s;
    for (size_t k = 0; k < nseg; k++)
        for (size_t i = 0; i < segs[k].count; i++) segs[k].data[i] = g.pack[g.start[k] + i] * scale;
    return SELSYNC_OK;
}

/* Checks the segments (op: the name in messages). */
static selsync_status check_segments(void *ctx, const selsync_segment *segs, size_t nseg, const char *op)
{
    selsync_status s = check_live(ctx, segs, nseg, op);
    for (size_t k = 0; k < nseg && s == SELSYNC_OK; k++) s = check_live(ctx, segs[k].data, segs[k].count, op);
    return s;
}

static selsync_status comm_sum_f32v(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    size_t n;
    selsync_status s = check_segments(ctx, segs, nseg, "sum_f32v");
    if (s == SELSYNC_OK) enter("sum_f32v", 1);
    if (s != SELSYNC_OK || (s = set_segments(segs, nseg, &n)) != SELSYNC_OK || n == 0) return s;
    return sum_segments(segs, nseg, n, scale);
}

/* The growable arrays of one hand-out round, for m messages. */
static selsync_status reserve_round(size_t m)
{
    selsync_status s = reserve((void **)&g.out_req, &g.out_cap, m, sizeof *g.out_req);
    if (s == SELSYNC_OK) s = reserve((void **)&g.out_peer, &g.out_peer_cap, m, sizeof *g.out_peer);
    if (s == SELSYNC_OK) s = reserve((void **)&g.out_type, &g.out_type_cap, m, sizeof *g.out_type);
    return s;
}

/* After the members' ring every member holds the result: member c sends
 * part c of k near-equal parts (blk_off) to every non-member, which
 * receives the k parts at once; in rounds of at most chunk_elems()
 * elements per message, every rank running the rounds of the largest part
 * (empty messages where a part is shorter). me: this rank's position among
 * the members, or -1. */
static selsync_status hand_out(const int *members, size_t k, int me, size_t n)
{
    size_t p = (size_t)g.size, step = chunk_elems(sizeof(float)), m = me >= 0 ? p - k : k;
    size_t maxpart = blk_len(n, k, 0);
    selsync_status st = reserve_round(m);
    for (size_t r = 0, j = 0, c = 0; st == SELSYNC_OK && r < p; r++) { /* the peers, in rank order */
        int member = c < k && members[c] == (int)r;
        c += (size_t)member;
        if (member != (me >= 0)) g.out_peer[j++] = (int)r;
    }
    for (size_t o = 0; o < maxpart && st == SELSYNC_OK; o += step) {
        int e = MPI_SUCCESS;
        for (size_t i = 0; i < m; i++) g.out_type[i] = MPI_FLOAT;
        for (size_t i = 0; i < m && e == MPI_SUCCESS && st == SELSYNC_OK; i++) {
            size_t part = me >= 0 ? (size_t)me : i, len = blk_len(n, k, part);
            size_t cnt = o < len ? (len - o < step ? len - o : step) : 0;
            void *buf;
            int count;
            st = view(blk_off(n, k, part) + o, cnt, &buf, &count, &g.out_type[i]);
            if (st != SELSYNC_OK) break;
            if (me < 0) {
                e = MPI_Irecv(buf, count, g.out_type[i], g.out_peer[i], TAG_HAND_OUT, g.comm, &g.out_req[i]);
            } else if ((e = MPI_Isend(buf, count, g.out_type[i], g.out_peer[i], TAG_HAND_OUT, g.comm,
                                      &g.out_req[i])) == MPI_SUCCESS) {
                count_bytes(cnt * sizeof(float));
            }
        }
        if (st == SELSYNC_OK)
            st = e == MPI_SUCCESS ? wait_for((int)m, g.out_req, g.out_peer, MPI_STATUSES_IGNORE, "MPI_Isend/MPI_Irecv")
                                  : mpi_fail("MPI_Isend/MPI_Irecv", e);
        for (size_t i = 0; i < m; i++)
            if (g.out_type[i] != MPI_FLOAT) MPI_Type_free(&g.out_type[i]);
    }
    return st;
}

/* Validates sum_f32v_among's member list. */
static selsync_status check_members(const int *members, int k)
{
    if (!members || k < 1 || k > g.size) {
        set_error("sum_f32v_among: %d members%s: expected 1 to %d", k, members ? "" : " at NULL", g.size);
        return SELSYNC_EINVAL;
    }
    for (int i = 0; i < k; i++)
        if (members[i] < 0 || members[i] >= g.size || (i > 0 && members[i] <= members[i - 1])) {
            set_error("sum_f32v_among: member %d is rank %d: expected distinct ranks of [0, %d) in ascending order",
                      i, members[i], g.size);
            return SELSYNC_EINVAL;
        }
    return SELSYNC_OK;
}

/* The members' ring (plan_off; the ring whatever the sum algorithm), then
 * the hand-out to the non-members. */
static selsync_status comm_sum_f32v_among(void *ctx, const selsync_segment *segs, size_t nseg, float scale,
                                          const int *members, int k)
{
    size_t n;
    int me = -1;
    selsync_status s = check_segments(ctx, segs, nseg, "sum_f32v_among");
    if (s == SELSYNC_OK) s = check_members(members, k);
    if (s == SELSYNC_OK) enter("sum_f32v_among", 1);
    if (s != SELSYNC_OK || (s = set_segments(segs, nseg, &n)) != SELSYNC_OK || n == 0) return s;
    for (int i = 0; i < k; i++)
        if (members[i] == g.rank) me = i;
    if (me >= 0) {
        ring_plan among = {members, (size_t)k, (size_t)me, n, blk_off(n, (size_t)g.size, (size_t)members[0])};
        s = ring(&among, scale);
    }
    return s == SELSYNC_OK && k < g.size ? hand_out(members, (size_t)k, me, n) : s;
}

static selsync_status allreduce_chunks(void *buf, size_t n, size_t esize, MPI_Datatype type,
                                       MPI_Op op)
{
    if (n == 0 || g.size == 1) return SELSYNC_OK;
    size_t step = chunk_elems(esize);
    for (size_t pos = 0; pos < n; pos += step) {
        size_t cnt = n - pos < step ? n - pos : step;
        MPI_Request rq;
        selsync_status s = wait_collective(
            MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + pos * esize, (int)cnt, type, op, g.comm, &rq), &rq,
            "MPI_Iallreduce");
        if (s != SELSYNC_OK) return s;
        count_bytes(ring_bytes(cnt, esize));
    }
    return SELSYNC_OK;
}

static selsync_status comm_any(void *ctx, uint8_t *flags, size_t n)
{
    selsync_status s = check_live(ctx, flags, n, "any");
    if (s != SELSYNC_OK) return s;
    enter("any", 1);
    return allreduce_chunks(flags, n, sizeof(uint8_t), MPI_UINT8_T, MPI_BOR);
}

static selsync_status comm_sum_f64(void *ctx, double *buf, size_t n)
{
    selsync_status s = check_live(ctx, buf, n, "sum_f64");
    if (s != SELSYNC_OK) return s;
    enter("sum_f64", 1);
    return allreduce_chunks(buf, n, sizeof(double), MPI_DOUBLE, MPI_SUM);
}

/* Children of this rank in the binomial broadcast tree rooted at root. */
static unsigned binomial_children(int root)
{
    unsigned p = (unsigned)g.size;
    unsigned v = ((unsigned)g.rank + p - (unsigned)root) % p;
    unsigned children = 0;
    for (unsigned mask = 1; mask < p && !(v & mask); mask <<= 1) {
        if (v + mask < p) ++children;
    }
    return children;
}

static selsync_status comm_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    selsync_status s = check_live(ctx, buf, bytes, "bcast");
    if (s != SELSYNC_OK) return s;
    enter("bcast", 1);
    if (root < 0 || root >= g.size) {
        set_error("bcast: root %d out of range [0, %d)", root, g.size);
        return SELSYNC_EINVAL;
    }
    if (bytes == 0 || g.size == 1) return SELSYNC_OK;
    size_t step = chunk_elems(1);
    for (size_t pos = 0; pos < bytes; pos += step) {
        size_t cnt = bytes - pos < step ? bytes - pos : step;
        MPI_Request rq;
        s = wait_collective(MPI_Ibcast((char *)buf + pos, (int)cnt, MPI_BYTE, root, g.comm, &rq), &rq,
                            "MPI_Ibcast");
        if (s != SELSYNC_OK) return s;
    }
    count_bytes((uint64_t)binomial_children(root) * (uint64_t)bytes);
    return SELSYNC_OK;
}

/* On the caller's thread only (the background thread's bytes are held
 * apart in bytes_bg until wait_sums), so it needs no wait. */
static uint64_t comm_bytes_sent(void *ctx)
{
    (void)ctx;
    return g.bytes;
}

/* Before MPI_Abort: an error that every rank meets (a bad cfg value, a
 * missing file) is then reported by every rank, not only by the first. */
static void grace_before_abort(void)
{
    struct timespec t = {1, 0};
    if (g.size > 1) nanosleep(&t, NULL);
}

/* Ends the job with code after the message, from any thread. On the
 * caller's thread with the background thread started, the queue is held
 * (the thread takes no further sum) and a sum in progress ends in the
 * thread's own MPI_Abort; once the thread is idle, this thread calls it. */
static void abort_with(int code, const char *message)
{
    code = code ? code : 1;
    g.aborting = 1;
    fprintf(stderr, "selsync: rank %d: %s\n", g.rank, message);
    fflush(stderr);
    grace_before_abort();
    if (bg.started && !on_bg_thread) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += BG_ABORT_WAIT_S;
        pthread_mutex_lock(&bg.mu); /* kept: the thread stays out of MPI */
        __atomic_store_n(&bg_abort_code, code, __ATOMIC_RELEASE);
        while (bg.busy && pthread_cond_timedwait(&bg.cv, &bg.mu, &until) == 0) {
        }
    }
    abort_job(code);
}

static void comm_abort(void *ctx, int code, const char *message)
{
    (void)ctx;
    abort_with(code, message ? message : "aborting");
}

/* A message is a run of pieces of chunk_elems(1) bytes ended by a shorter
 * (possibly empty) one, all with its tag: MPI keeps them in order. */
static selsync_status comm_send(void *ctx, int dest, int tag, const void *buf, size_t bytes)
{
    selsync_status s = check_live(ctx, buf, bytes, "send");
    if (s != SELSYNC_OK) return s;
    if (dest < 0 || dest >= g.size || tag < 0) {
        set_error("send: destination %d or tag %d out of range (%d ranks)", dest, tag, g.size);
        return SELSYNC_EINVAL;
    }
    enter("send", 0);
    size_t piece = chunk_elems(1), pos = 0, n;
    do {
        n = bytes - pos < piece ? bytes - pos : piece;
        MPI_Request rq;
        int rc = MPI_Isend((const char *)buf + pos, (int)n, MPI_BYTE, dest, tag, g.p2p, &rq);
        s = rc == MPI_SUCCESS ? wait_for(1, &rq, &dest, MPI_STATUSES_IGNORE, "MPI_Isend") : mpi_fail("MPI_Isend", rc);
        if (s != SELSYNC_OK) return s;
        pos += n;
    } while (n == piece);
    count_bytes(bytes);
    return SELSYNC_OK;
}

static selsync_status comm_recv(void *ctx, int source, int tag, void *buf, size_t bytes, selsync_msg *got)
{
    selsync_status s = check_live(ctx, buf, bytes, "recv");
    if (s != SELSYNC_OK) return s;
    if (source < SELSYNC_ANY || source >= g.size || tag < SELSYNC_ANY) {
        set_error("recv: source %d or tag %d out of range (%d ranks)", source, tag, g.size);
        return SELSYNC_EINVAL;
    }
    int src = source == SELSYNC_ANY ? MPI_ANY_SOURCE : source;
    int tg = tag == SELSYNC_ANY ? MPI_ANY_TAG : tag, n = 0;
    size_t piece = chunk_elems(1), pos = 0;
    enter("recv", 0);
    do {
        MPI_Status st;
        MPI_Request rq;
        int rc = MPI_Irecv((char *)buf + pos, (int)(bytes - pos < piece ? bytes - pos : piece), MPI_BYTE, src,
                           tg, g.p2p, &rq);
        s = rc == MPI_SUCCESS ? wait_for(1, &rq, &src, &st, "MPI_Irecv") : mpi_fail("MPI_Irecv", rc);
        if (s != SELSYNC_OK) return s;
        rc = MPI_Get_count(&st, MPI_BYTE, &n);
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Get_count", rc);
        src = st.MPI_SOURCE; /* the other pieces come from the same sender, same tag */
        tg = st.MPI_TAG;
        pos += (size_t)n;
    } while ((size_t)n == piece);
    if (got) *got = (selsync_msg){src, tg, pos};
    return SELSYNC_OK;
}

/* The background thread's message is complete once it is idle. */
static const char *comm_last_error(void *ctx)
{
    (void)ctx;
    if (bg.started && !on_bg_thread) (void)bg_idle();
    return g.last_error;
}

/* The step a stall warning names. */
static void comm_step_begins(void *ctx, uint64_t step)
{
    (void)ctx;
    __atomic_store_n(&g.step, (int64_t)step, __ATOMIC_RELAXED); /* read by the background thread */
}

/* --- background sums ------------------------------------------------------ */

static void *bg_main(void *arg)
{
    (void)arg;
    on_bg_thread = 1;
    pthread_mutex_lock(&bg.mu);
    for (;;) {
        while ((bg.count == 0 || bg_abort_code) && !bg.stop) pthread_cond_wait(&bg.cv, &bg.mu);
        if (bg.count == 0 || bg_abort_code) break;
        bg_sum job = bg.q[bg.head++];
        selsync_status st = bg.failed;
        bg.count--;
        bg.busy = 1;
        pthread_mutex_unlock(&bg.mu);
        if (st == SELSYNC_OK) st = comm_sum_f32v(&g, job.segs, job.nseg, job.scale);
        pthread_mutex_lock(&bg.mu);
        if (bg.failed == SELSYNC_OK) bg.failed = st;
        bg.busy = 0;
        pthread_cond_broadcast(&bg.cv);
    }
    pthread_mutex_unlock(&bg.mu);
    return NULL;
}

/* Waits until the background thread has nothing to do (without the
 * thread: runs the deferred sums here, in order); their failure. */
static selsync_status bg_idle(void)
{
    selsync_status st;
    if (!bg.started) {
        draining = 1;
        for (; bg.count; bg.count--) {
            bg_sum job = bg.q[bg.head++];
            if (bg.failed == SELSYNC_OK) bg.failed = comm_sum_f32v(&g, job.segs, job.nseg, job.scale);
        }
        draining = 0;
        return bg.failed;
    }
    pthread_mutex_lock(&bg.mu);
    while (bg.count || bg.busy) pthread_cond_wait(&bg.cv, &bg.mu);
    st = bg.failed;
    pthread_mutex_unlock(&bg.mu);
    return st;
}

/* Stops the background thread (after its queue). */
static void bg_stop(void)
{
    if (bg.started) {
        pthread_mutex_lock(&bg.mu);
        bg.stop = 1;
        pthread_cond_broadcast(&bg.cv);
        pthread_mutex_unlock(&bg.mu);
        pthread_join(bg.thread, NULL);
    }
    free(bg.q);
    bg.q = NULL;
    bg.cap = bg.head = bg.count = 0;
    bg.started = bg.stop = 0;
    bg.failed = SELSYNC_OK;
}

/* Queues the sum (the segments checked here, on the caller's thread) for
 * the background thread; or, where MPI allows one thread only, there is
 * one rank, or every rank shares one host, defers it to the next wait (or
 * op) on this thread: on one host a sum is the CPU's work (copies and adds
 * in shared memory), which a second thread, or sums between the layers of
 * the backward pass, would only take from the computation. */
static selsync_status comm_sum_f32v_start(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    selsync_status s;
    int ok = ctx == &g && g.active && (segs || nseg == 0);
    int deferred = !g.threads_ok || g.size == 1 || !g.background || (g.background < 0 && g.one_host);
    for (size_t k = 0; ok && k < nseg; k++) ok = segs[k].data || segs[k].count == 0;
    if (!ok) return check_segments(ctx, segs, nseg, "sum_f32v"); /* after the queue: the message */
    pthread_mutex_lock(&bg.mu);
    s = bg.failed;
    if (s == SELSYNC_OK && bg.count == 0) bg.head = 0;
    if (s == SELSYNC_OK && bg.head + bg.count == bg.cap) {
        size_t cap = bg.cap ? 2 * bg.cap : 16;
        bg_sum *q = realloc(bg.q, cap * sizeof *q);
        if (!q) {
            set_error("sum_f32v_start: out of memory");
            s = SELSYNC_ENOMEM;
        } else {
            bg.q = q;
            bg.cap = cap;
        }
    }
    if (s == SELSYNC_OK && !bg.started && !deferred) {
        int e = pthread_create(&bg.thread, NULL, bg_main, NULL);
        if (e != 0) {
            set_error("sum_f32v_start: pthread_create failed: %s", strerror(e));
            s = SELSYNC_ECOMM;
        } else {
            bg.started = 1;
        }
    }
    if (s == SELSYNC_OK) {
        bg.q[bg.head + bg.count++] = (bg_sum){segs, nseg, scale};
        pthread_cond_broadcast(&bg.cv);
    }
    pthread_mutex_unlock(&bg.mu);
    return s;
}

static selsync_status comm_wait_sums(void *ctx)
{
    (void)ctx;
    selsync_status st = bg_idle();
    g.bytes += g.bytes_bg; /* the thread is idle: nobody else writes it now */
    g.bytes_bg = 0;
    return st;
}

static const selsync_comm_ops mpi_ops = {
    .name = "mpi",
    .rank = comm_rank,
    .size = comm_size,
    .any = comm_any,
    .sum_f32 = comm_sum_f32,
    .sum_f32v = comm_sum_f32v,
    .sum_f64 = comm_sum_f64,
    .bcast = comm_bcast,
    .bytes_sent = comm_bytes_sent,
    .abort = comm_abort,
    .send = comm_send,
    .recv = comm_recv,
    .last_error = comm_last_error,
    .step_begins = comm_step_begins,
    .sum_f32v_among = comm_sum_f32v_among,
    .sum_f32v_start = comm_sum_f32v_start,
    .wait_sums = comm_wait_sums,
};

static void at_exit_handler(void)
{
    if (!g.active || g.aborting) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    abort_with(1, "exited without finishing; aborting the job");
}

/* Frees the communicators (after the notices still in flight and those
 * that arrived), finalises MPI if this module initialised it, and frees
 * the watch's arrays. */
static void release(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && g.watch != MPI_COMM_NULL && g.reached && g.note_req) {
        watch_poll(0);
        MPI_Waitall(g.size, g.note_req, MPI_STATUSES_IGNORE);
    }
    MPI_Comm *comms[] = {&g.watch, &g.p2p, &g.comm};
    for (size_t i = 0; i < sizeof comms / sizeof comms[0] && !fin; ++i)
        if (*comms[i] != MPI_COMM_NULL) MPI_Comm_free(comms[i]);
    if (!fin && g.own_init) MPI_Finalize();
    g.comm = g.p2p = g.watch = MPI_COMM_NULL;
    g.own_init = 0;
    free(g.reached);
    free(g.note_buf);
    free(g.note_req);
    g.reached = g.note_buf = NULL;
    g.note_req = NULL;
}

/* *out = the whole seconds >= 0 in environment variable name (def when
 * unset or empty); 0 with the message in last_error when it holds anything
 * else. */
static int env_seconds(const char *name, double def, double *out)
{
    const char *v = getenv(name);
    size_t digits = v ? strspn(v, "0123456789") : 0;
    *out = def;
    if (!v || !*v) return 1;
    if (digits == 0 || v[digits] != '\0' || digits > 9) {
        set_error("%s=%s: expected whole seconds from 0 to 999999999 (0 turns it off)", name, v);
        return 0;
    }
    *out = (double)strtol(v, NULL, 10);
    return 1;
}

/* A world ring's sum of 4 MiB: the slowest rank's seconds (the median of
 * three after one untimed). */
static double ring_trial(float *buf, size_t n)
{
    double t[3], slowest;
    selsync_segment one = {buf, n};
    ring_plan world = {NULL, (size_t)g.size, (size_t)g.rank, n, 0};
    for (int i = 0; i < 4; i++) {
        double t0 = now_s();
        if (set_segments(&one, 1, &n) != SELSYNC_OK || ring(&world, 1.0f) != SELSYNC_OK) return 1e30;
        if (i) t[i - 1] = now_s() - t0;
    }
    double mid = t[0] > t[1] ? (t[1] > t[2] ? t[1] : t[0] > t[2] ? t[2] : t[0])
                             : (t[0] > t[2] ? t[0] : t[1] > t[2] ? t[2] : t[1]);
    MPI_Allreduce(&mid, &slowest, 1, MPI_DOUBLE, MPI_MAX, g.comm);
    return slowest;
}

/* The world ring's links (SELSYNC_RING_LINKS, checked before MPI starts):
 * mpi; tcp (an error when they cannot be made); auto (the default): TCP
 * when every rank has a host of its own and a 4 MiB trial sum is faster
 * over TCP than over MPI, else MPI. Collective. */
enum { LINKS_MPI, LINKS_AUTO, LINKS_TCP };
/* The ring's listener closed a connection that was not its neighbour's. */
static void ignored_connection(void *user, const char *why)
{
    (void)user;
    fprintf(stderr, "selsync: rank %d: the ring's listener ignored a connection %s\n", g.rank, why);
    fflush(stderr);
}

/* Fills token with random bytes (rank 0's is the job's); 0 on failure. */
static int job_token(unsigned char token[TCP_TOKEN_BYTES])
{
    if (g.rank != 0) return 1;
    size_t got = 0;
    while (got < TCP_TOKEN_BYTES) {
        ssize_t k = getrandom(token + got, TCP_TOKEN_BYTES - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        got += (size_t)k;
    }
    return 1;
}

static selsync_status ring_links(const char *mode)
{
    int want = !mode || !*mode || !strcmp(mode, "auto") ? LINKS_AUTO : !strcmp(mode, "tcp") ? LINKS_TCP : LINKS_MPI;
    int lfd = -1, ok, all;
    char why[200] = "", ifn[16] = "";
    struct sockaddr_in me;
    MPI_Comm node;
    int n = 0, alone;
    snprintf(g.links, sizeof g.links, "MPI");
    if (MPI_Comm_split_type(g.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &n);
        MPI_Comm_free(&node);
    }
    g.one_host = n == g.size;
    if (want == LINKS_MPI || g.size == 1) return SELSYNC_OK;
    if (want == LINKS_AUTO) {
        alone = n == 1;
        MPI_Allreduce(&alone, &all, 1, MPI_INT, MPI_LAND, g.comm);
        if (!all) {
            snprintf(g.links, sizeof g.links, "MPI (ranks share a host)");
            return SELSYNC_OK;
        }
    }
    ok = tcp_listen(getenv("SELSYNC_RING_IFNAME"), &lfd, &me, ifn, why, sizeof why) == 0;
    uint32_t mine[3] = {me.sin_addr.s_addr, me.sin_port, (uint32_t)ok}, *peers = malloc((size_t)g.size * sizeof mine);
    if (!peers || MPI_Allgather(mine, 3, MPI_UINT32_T, peers, 3, MPI_UINT32_T, g.comm) != MPI_SUCCESS) ok = 0;
    int right = (g.rank + 1) % g.size, left = (g.rank + g.size - 1) % g.size;
    /* only the left neighbour may connect: from its address, with the job's token */
    tcp_peer self = {g.rank, me.sin_addr, {0}}, expect = {left, {0}, {0}};
    if (ok && !job_token(self.token)) {
        snprintf(why, sizeof why, "no random bytes for the job's token: %s", strerror(errno));
        ok = 0;
    }
    if (MPI_Bcast(self.token, TCP_TOKEN_BYTES, MPI_BYTE, 0, g.comm) != MPI_SUCCESS) ok = 0;
    memcpy(expect.token, self.token, TCP_TOKEN_BYTES);
    if (peers) expect.addr.s_addr = peers[3 * left];
    if (ok && peers[3 * right + 2]) {
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = (in_port_t)peers[3 * right + 1]};
        to.sin_addr.s_addr = peers[3 * right];
        ok = tcp_connect(&self, &to, &g.tcp_out, why, sizeof why) == 0;
    } else if (ok) {
        snprintf(why, sizeof why, "rank %d has no listening socket", right);
        ok = 0;
    }
    free(peers);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, g.comm); /* every connection is queued before any accept */
    if (all) ok = tcp_accept(lfd, &expect, 30, ignored_connection, NULL, &g.tcp_in, why, sizeof why) == 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, g.comm);
    if (lfd >= 0) close(lfd);
    if (all && want == LINKS_AUTO) { /* the faster of the two */
        size_t n = (size_t)1 << 20;
        float *buf = calloc(n, sizeof *buf);
        int out = g.tcp_out;
        double t_tcp = buf ? ring_trial(buf, n) : 1e30, t_mpi;
        g.tcp_out = -1;
        t_mpi = buf ? ring_trial(buf, n) : 0;
        free(buf);
        g.bytes = g.bytes_bg = 0;
        if (t_tcp < t_mpi) {
            g.tcp_out = out;
            snprintf(g.links, sizeof g.links, "TCP on %s (4 MiB sums: %.1f ms, over MPI %.1f ms)", ifn, 1e3 * t_tcp,
                     1e3 * t_mpi);
            return SELSYNC_OK;
        }
        close(out);
        close(g.tcp_in);
        g.tcp_in = -1;
        snprintf(g.links, sizeof g.links, "MPI (4 MiB sums: %.1f ms, over TCP on %s %.1f ms)", 1e3 * t_mpi, ifn,
                 1e3 * t_tcp);
        return SELSYNC_OK;
    }
    if (all) {
        snprintf(g.links, sizeof g.links, "TCP on %s", ifn);
        return SELSYNC_OK;
    }
    if (g.tcp_out >= 0) close(g.tcp_out);
    if (g.tcp_in >= 0) close(g.tcp_in);
    g.tcp_out = g.tcp_in = -1;
    if (want == LINKS_TCP) {
        set_error("SELSYNC_RING_LINKS=tcp: rank %d: the ring's TCP links could not be made: %s", g.rank,
                  ok ? "a link of another rank failed" : why);
        return SELSYNC_ECOMM;
    }
    snprintf(g.links, sizeof g.links, "MPI (TCP links failed: %.150s)", ok ? "on another rank" : why);
    return SELSYNC_OK;
}

static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

selsync_status selsync_mpi_init(int *argc, char ***argv, selsync_comm *out, char *err,
                                size_t errlen)
{
    copy_err(err, errlen, "");
    if (!out) {
        copy_err(err, errlen, "selsync_mpi_init: NULL out");
        return SELSYNC_EINVAL;
    }
    if (g.active) {
        out->ops = &mpi_ops;
        out->ctx = &g;
        return SELSYNC_OK;
    }
    if (!launched_by_mpi()) {
        *out = selsync_comm_single();
        return SELSYNC_OK;
    }
    const char *links = getenv("SELSYNC_RING_LINKS");
    if (!env_seconds("SELSYNC_STALL_WARN", 60, &g.stall_warn) ||
        !env_seconds("SELSYNC_STALL_TIMEOUT", 0, &g.stall_timeout)) {
        copy_err(err, errlen, g.last_error);
        return SELSYNC_ECONFIG;
    }
    if (links && *links && strcmp(links, "auto") && strcmp(links, "mpi") && strcmp(links, "tcp")) {
        set_error("SELSYNC_RING_LINKS=%.100s: expected auto, mpi or tcp", links);
        copy_err(err, errlen, g.last_error);
        return SELSYNC_ECONFIG;
    }
    int init = 0, fin = 0, rc;
    MPI_Finalized(&fin);
    if (fin) {
        set_error("selsync_mpi_init: MPI was already finalised");
        copy_err(err, errlen, g.last_error);
        return SELSYNC_ESTATE;
    }
    MPI_Initialized(&init);
    int provided = MPI_THREAD_SINGLE;
    if (!init) {
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            mpi_fail("MPI_Init_thread", rc);
            copy_err(err, errlen, g.last_error);
            return SELSYNC_ECOMM;
        }
        g.own_init = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_FUNNELED) {
        set_error("MPI provides thread level %d, less than MPI_THREAD_FUNNELED (%d)", provided,
                  MPI_THREAD_FUNNELED);
        copy_err(err, errlen, g.last_error);
        if (g.own_init) {
            MPI_Finalize();
            g.own_init = 0;
        }
        return SELSYNC_ECOMM;
    }
    g.threads_ok = provided >= MPI_THREAD_SERIALIZED;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &g.comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(g.comm, &g.rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(g.comm, &g.size);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(g.comm, &g.p2p);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(g.p2p, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(g.comm, &g.watch);
    selsync_status st = SELSYNC_OK;
    if (rc != MPI_SUCCESS) st = mpi_fail("MPI communicator setup", rc);
    const char *alg = getenv("SELSYNC_MPI_SUM");
    if (st == SELSYNC_OK && alg && strcmp(alg, "reduce_scatter_block") == 0) g.sum_alg = SELSYNC_MPI_SUM_RSB;
    else if (st == SELSYNC_OK && alg && *alg && strcmp(alg, "ring") != 0) {
        set_error("SELSYNC_MPI_SUM=%s: expected ring or reduce_scatter_block", alg);
        st = SELSYNC_ECONFIG;
    }
    if (st == SELSYNC_OK) {
        g.reached = calloc((size_t)g.size, sizeof *g.reached);
        g.note_buf = calloc((size_t)g.size, sizeof *g.note_buf);
        g.note_req = malloc((size_t)g.size * sizeof *g.note_req);
        if (!g.reached || !g.note_buf || !g.note_req) {
            set_error("selsync_mpi_init: out of memory");
            st = SELSYNC_ENOMEM;
        }
        for (int r = 0; g.note_req && r < g.size; ++r) g.note_req[r] = MPI_REQUEST_NULL;
    }
    if (st != SELSYNC_OK) {
        copy_err(err, errlen, g.last_error);
        release();
        return st;
    }
    g.active = 1;
    g.aborting = 0;
    g.bytes = g.bytes_bg = 0;
    g.seq = 0;
    g.step = -1;
    g.op = "a trial sum of the ring's links";
    if ((st = ring_links(links)) != SELSYNC_OK) { /* every rank fails here: finalised after it reported */
        copy_err(err, errlen, g.last_error);
        g.active = 0;
        g.unfinished = 1;
        return st;
    }
    g.seq = 0;
    /* Registered after MPI_Init_thread, so it runs before anything MPI
     * registered during initialisation. */
    if (!g.atexit_done && atexit(at_exit_handler) == 0) g.atexit_done = 1;
    out->ops = &mpi_ops;
    out->ctx = &g;
    return SELSYNC_OK;
}

void selsync_mpi_finalize(void)
{
    if (g.unfinished) {
        g.unfinished = 0;
        release();
        return;
    }
    if (!g.active) return;
    bg_stop();
    g.active = 0;
    if (g.tcp_out >= 0) close(g.tcp_out);
    if (g.tcp_in >= 0) close(g.tcp_in);
    g.tcp_out = g.tcp_in = -1;
    release();
    for (int i = 0; i < 2; i++) {
        free(g.iov[i]);
        g.iov[i] = NULL;
        g.iov_cap[i] = 0;
    }
    free(g.scratch);
    free(g.pack);
    free(g.start);
    free(g.len);
    free(g.disp);
    free(g.out_req);
    free(g.out_peer);
    free(g.out_type);
    g.out_req = NULL;
    g.out_peer = NULL;
    g.out_type = NULL;
    g.out_cap = g.out_peer_cap = g.out_type_cap = 0;
    g.scratch = g.pack = NULL;
    g.start = NULL;
    g.len = NULL;
    g.disp = NULL;
    g.scratch_cap = g.pack_cap = g.start_cap = g.map_cap = 0;
}

int selsync_mpi_active(void)
{
    return g.active;
}

void selsync_mpi_set_step(int64_t step)
{
    __atomic_store_n(&g.step, step, __ATOMIC_RELAXED);
}

const char *selsync_mpi_ring_links(void)
{
    return g.active ? g.links : "";
}

const char *selsync_mpi_last_error(void)
{
    return g.last_error;
}

int selsync_mpi_set_background_sums(int mode)
{
    int prev = g.background;
    g.background = mode < 0 ? -1 : mode > 0;
    return prev;
}

size_t selsync_mpi_set_chunk_bytes(size_t bytes)
{
    size_t prev = g.chunk_bytes;
    g.chunk_bytes = bytes ? bytes : DEFAULT_CHUNK_BYTES;
    return prev;
}

selsync_mpi_sum_algorithm selsync_mpi_set_sum_algorithm(selsync_mpi_sum_algorithm alg)
{
    selsync_mpi_sum_algorithm prev = g.sum_alg;
    if (alg == SELSYNC_MPI_SUM_RING || alg == SELSYNC_MPI_SUM_RSB) g.sum_alg = alg;
    return prev;
}
