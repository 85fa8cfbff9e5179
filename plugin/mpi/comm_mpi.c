/* The MPI transport: see comm_mpi.h for the contract, the algorithms and
 * the bytes_sent estimates. The only file of the project that includes
 * mpi.h. One module-wide context: MPI_COMM_WORLD exists once per process. */
#include "comm_mpi.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#define DEFAULT_CHUNK_BYTES ((size_t)1 << 30)
/* Ring reduce-scatter: bytes per MPI_Sendrecv segment, which is also the
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

typedef struct mpi_ctx {
    MPI_Comm comm;
    MPI_Comm p2p;        /* send/recv: a duplicate, so never matched by the ring */
    int rank, size;
    int active;          /* comm is live */
    int own_init;        /* we called MPI_Init_thread */
    int atexit_done;     /* handler registered */
    volatile int aborting;
    float *scratch;      /* sum_f32 scratch, kept between calls */
    size_t scratch_cap;  /* in floats */
    float *pack;         /* reduce_scatter_block sum_f32v: the packed array */
    size_t pack_cap;     /* in floats */
    /* The ring's array: segments seg[0 .. nseg) back to back, segment k
     * from element start[k]; start and the type map (len, disp) are kept
     * between calls. */
    const selsync_segment *seg;
    size_t nseg, *start, start_cap;
    int *len;
    MPI_Aint *disp;
    size_t map_cap;
    size_t chunk_bytes;  /* cap on bytes per MPI call */
    selsync_mpi_sum_algorithm sum_alg;
    uint64_t bytes;      /* bytes_sent estimate */
    char last_error[MPI_MAX_ERROR_STRING + 160];
} mpi_ctx;

static mpi_ctx g = {
    .comm = MPI_COMM_NULL,
    .p2p = MPI_COMM_NULL,
    .rank = 0,
    .size = 1,
    .chunk_bytes = DEFAULT_CHUNK_BYTES,
    .sum_alg = SELSYNC_MPI_SUM_RING,
};

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

static selsync_status check_live(void *ctx, const void *buf, size_t n, const char *op)
{
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
    int rc = MPI_Reduce_scatter_block(buf, g.scratch, (int)block, MPI_FLOAT, MPI_SUM, g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Reduce_scatter_block", rc);
    rc = MPI_Allgather(g.scratch, (int)block, MPI_FLOAT, buf, (int)block, MPI_FLOAT, g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Allgather", rc);
    g.bytes += ring_bytes(n, sizeof(float));
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
    int rc = MPI_Reduce_scatter_block(all, mine, (int)block, MPI_FLOAT, MPI_SUM, g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Reduce_scatter_block", rc);
    rc = MPI_Allgather(mine, (int)block, MPI_FLOAT, all, (int)block, MPI_FLOAT, g.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Allgather", rc);
    memcpy(buf, all, n * sizeof(float));
    g.bytes += ring_bytes(padded, sizeof(float));
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
    g.start[0] = 0;
    for (size_t k = 0; k < nseg; k++) g.start[k + 1] = g.start[k] + segs[k].count;
    *n = g.start[nseg];
    return SELSYNC_OK;
}

/* Element pos (< the array's length) of the array; *run: how many follow
 * it contiguously in its segment, itself included. */
static float *at(size_t pos, size_t *run)
{
    size_t lo = 0, hi = g.nseg;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (g.start[mid] <= pos) lo = mid;
        else hi = mid;
    }
    *run = g.start[lo + 1] - pos;
    return g.seg[lo].data + (pos - g.start[lo]);
}

/* Elements [off, off + n) of the array as an MPI buffer: the segment itself
 * when one holds them all, else MPI_BOTTOM and one element of a new
 * hindexed type over their pieces (*type, to be freed). */
static selsync_status view(size_t off, size_t n, void **buf, int *count, MPI_Datatype *type)
{
    size_t run, pieces = 0;
    *type = MPI_FLOAT;
    *count = (int)n;
    *buf = n ? at(off, &run) : g.scratch;
    if (n == 0 || run >= n) return SELSYNC_OK;
    for (size_t d = 0; d < n; d += run, pieces++) at(off + d, &run);
    size_t cap = g.map_cap;
    selsync_status st = reserve((void **)&g.len, &cap, pieces, sizeof *g.len);
    if (st == SELSYNC_OK) st = reserve((void **)&g.disp, &g.map_cap, pieces, sizeof *g.disp);
    if (st != SELSYNC_OK) return st;
    pieces = 0;
    for (size_t d = 0; d < n; d += run, pieces++) {
        float *p = at(off + d, &run);
        if (run > n - d) run = n - d;
        g.len[pieces] = (int)run;
        MPI_Get_address(p, &g.disp[pieces]);
    }
    int rc = MPI_Type_create_hindexed((int)pieces, g.len, g.disp, MPI_FLOAT, type);
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

/* Ring reduce-scatter then ring allgather, in place in the array of
 * set_segments (n elements), over MPI_Sendrecv. Reduce-scatter step s
 * (0 .. p-2): send block (r-s-1) to the right neighbour, receive block
 * (r-s-2) from the left one, segment by segment, into the scratch and add
 * it into the array; after p-1 steps rank r alone holds the complete sum of
 * block r, which it multiplies by scale as it completes. Allgather step s: send
 * block (r-s) right, receive block (r-s-1) from the left straight into the
 * array. Segments: at most RING_SEGMENT_BYTES in the reduce-scatter,
 * chunk_elems() in the allgather (<= INT_MAX elements, <= chunk_bytes).
 * A message whose elements span several of the caller's segments travels
 * as an hindexed type over them. The scratch is allocated once and kept,
 * so calls do not page-fault. */
static selsync_status ring(size_t n, float scale)
{
    size_t p = (size_t)g.size, r = (size_t)g.rank;
    int right = (int)((r + 1) % p), left = (int)((r + p - 1) % p);
    size_t seg_rs = (g.chunk_bytes < RING_SEGMENT_BYTES ? g.chunk_bytes : RING_SEGMENT_BYTES) /
                    sizeof(float);
    if (seg_rs == 0) seg_rs = 1;
    size_t seg_ag = chunk_elems(sizeof(float));
    size_t maxblk = blk_len(n, p, 0);
    size_t need = p > 1 ? (maxblk < seg_rs ? maxblk : seg_rs) : 0;
    selsync_status st = reserve((void **)&g.scratch, &g.scratch_cap, need, sizeof(float));
    float *tmp = g.scratch;
    uint64_t sent = 0;
    if (p == 1 && st == SELSYNC_OK) st = apply(0, n, NULL, scale);
    for (int phase = 0; phase < 2 && st == SELSYNC_OK; ++phase) {
        size_t seg = phase == 0 ? seg_rs : seg_ag;
        for (size_t s = 0; s + 1 < p && st == SELSYNC_OK; ++s) {
            size_t sb = phase == 0 ? (r + 2 * p - s - 1) % p : (r + p - s) % p;
            size_t rb = (sb + p - 1) % p;
            size_t so = blk_off(n, p, sb), ro = blk_off(n, p, rb);
            size_t sl = blk_len(n, p, sb), rl = blk_len(n, p, rb);
            /* Every rank runs the same number of segments per step (those
             * of the largest block), so each send has its matching receive
             * even where a block is shorter or empty. */
            for (size_t o = 0; o < maxblk && st == SELSYNC_OK; o += seg) {
                size_t sc = o < sl ? (sl - o < seg ? sl - o : seg) : 0;
                size_t rc = o < rl ? (rl - o < seg ? rl - o : seg) : 0;
                MPI_Datatype stype = MPI_FLOAT, rtype = MPI_FLOAT;
                void *sbuf, *rbuf = tmp;
                int scount, rcount = (int)rc;
                st = view(so + o, sc, &sbuf, &scount, &stype);
                if (st == SELSYNC_OK && phase == 1) st = view(ro + o, rc, &rbuf, &rcount, &rtype);
                if (st == SELSYNC_OK) {
                    int e = MPI_Sendrecv(sbuf, scount, stype, right, 0, rbuf, rcount, rtype, left, 0,
                                         g.comm, MPI_STATUS_IGNORE);
                    if (e != MPI_SUCCESS) st = mpi_fail("MPI_Sendrecv", e);
                }
                if (stype != MPI_FLOAT) MPI_Type_free(&stype);
                if (rtype != MPI_FLOAT) MPI_Type_free(&rtype);
                /* The last reduce-scatter step completes block r: scaled here. */
                if (st == SELSYNC_OK && phase == 0) st = apply(ro + o, rc, tmp, s + 2 == p ? scale : 1.0f);
                sent += sc * sizeof(float);
            }
        }
    }
    g.bytes += sent;
    return st;
}

static selsync_status comm_sum_f32(void *ctx, float *buf, size_t n)
{
    selsync_status s = check_live(ctx, buf, n, "sum_f32");
    if (s != SELSYNC_OK || n == 0 || g.size == 1) return s;
    if (g.sum_alg == SELSYNC_MPI_SUM_RSB) return sum_f32_rsb(buf, n);
    selsync_segment one = {buf, n};
    if ((s = set_segments(&one, 1, &n)) != SELSYNC_OK) return s;
    return ring(n, 1.0f);
}

/* The ring in place; reduce_scatter_block on a packed copy. */
static selsync_status comm_sum_f32v(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    size_t n;
    selsync_status s = check_live(ctx, segs, nseg, "sum_f32v");
    for (size_t k = 0; k < nseg && s == SELSYNC_OK; k++) s = check_live(ctx, segs[k].data, segs[k].count, "sum_f32v");
    if (s != SELSYNC_OK || (s = set_segments(segs, nseg, &n)) != SELSYNC_OK || n == 0) return s;
    if (g.sum_alg == SELSYNC_MPI_SUM_RING || g.size == 1) return ring(n, scale);
    if ((s = reserve((void **)&g.pack, &g.pack_cap, n, sizeof *g.pack)) != SELSYNC_OK) return s;
    for (size_t k = 0; k < nseg; k++)
        memcpy(g.pack + g.start[k], segs[k].data, segs[k].count * sizeof(float));
    if ((s = sum_f32_rsb(g.pack, n)) != SELSYNC_OK) return s;
    for (size_t k = 0; k < nseg; k++)
        for (size_t i = 0; i < segs[k].count; i++) segs[k].data[i] = g.pack[g.start[k] + i] * scale;
    return SELSYNC_OK;
}

static selsync_status allreduce_chunks(void *buf, size_t n, size_t esize, MPI_Datatype type,
                                       MPI_Op op)
{
    if (n == 0 || g.size == 1) return SELSYNC_OK;
    size_t step = chunk_elems(esize);
    for (size_t pos = 0; pos < n; pos += step) {
        size_t cnt = n - pos < step ? n - pos : step;
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + pos * esize, (int)cnt, type, op, g.comm);
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Allreduce", rc);
        g.bytes += ring_bytes(cnt, esize);
    }
    return SELSYNC_OK;
}

static selsync_status comm_any(void *ctx, uint8_t *flags, size_t n)
{
    selsync_status s = check_live(ctx, flags, n, "any");
    if (s != SELSYNC_OK) return s;
    return allreduce_chunks(flags, n, sizeof(uint8_t), MPI_UINT8_T, MPI_BOR);
}

static selsync_status comm_sum_f64(void *ctx, double *buf, size_t n)
{
    selsync_status s = check_live(ctx, buf, n, "sum_f64");
    if (s != SELSYNC_OK) return s;
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
    if (root < 0 || root >= g.size) {
        set_error("bcast: root %d out of range [0, %d)", root, g.size);
        return SELSYNC_EINVAL;
    }
    if (bytes == 0 || g.size == 1) return SELSYNC_OK;
    size_t step = chunk_elems(1);
    for (size_t pos = 0; pos < bytes; pos += step) {
        size_t cnt = bytes - pos < step ? bytes - pos : step;
        int rc = MPI_Bcast((char *)buf + pos, (int)cnt, MPI_BYTE, root, g.comm);
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Bcast", rc);
    }
    g.bytes += (uint64_t)binomial_children(root) * (uint64_t)bytes;
    return SELSYNC_OK;
}

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

static void comm_abort(void *ctx, int code, const char *message)
{
    (void)ctx;
    g.aborting = 1;
    fprintf(stderr, "selsync: rank %d: %s\n", g.rank, message ? message : "aborting");
    fflush(stderr);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    grace_before_abort();
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code);
    /* Not reached with MPI running; without it there is nobody to tell. */
    _Exit(code ? code : 1);
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
    size_t piece = chunk_elems(1), pos = 0, n;
    do {
        n = bytes - pos < piece ? bytes - pos : piece;
        int rc = MPI_Send((const char *)buf + pos, (int)n, MPI_BYTE, dest, tag, g.p2p);
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Send", rc);
        pos += n;
    } while (n == piece);
    g.bytes += bytes;
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
    do {
        MPI_Status st;
        int rc = MPI_Recv((char *)buf + pos, (int)(bytes - pos < piece ? bytes - pos : piece), MPI_BYTE,
                          src, tg, g.p2p, &st);
        if (rc == MPI_SUCCESS) rc = MPI_Get_count(&st, MPI_BYTE, &n);
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Recv", rc);
        src = st.MPI_SOURCE; /* the other pieces come from the same sender, same tag */
        tg = st.MPI_TAG;
        pos += (size_t)n;
    } while ((size_t)n == piece);
    if (got) *got = (selsync_msg){src, tg, pos};
    return SELSYNC_OK;
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
};

static void at_exit_handler(void)
{
    if (!g.active || g.aborting) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    g.aborting = 1;
    fprintf(stderr, "selsync: rank %d exited without finishing; aborting the job\n", g.rank);
    fflush(stderr);
    grace_before_abort();
    MPI_Abort(MPI_COMM_WORLD, 1);
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
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
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
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &g.comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(g.comm, &g.rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(g.comm, &g.size);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(g.comm, &g.p2p);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(g.p2p, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        mpi_fail("MPI communicator setup", rc);
        copy_err(err, errlen, g.last_error);
        if (g.p2p != MPI_COMM_NULL) MPI_Comm_free(&g.p2p);
        if (g.comm != MPI_COMM_NULL) MPI_Comm_free(&g.comm);
        if (g.own_init) {
            MPI_Finalize();
            g.own_init = 0;
        }
        return SELSYNC_ECOMM;
    }
    const char *alg = getenv("SELSYNC_MPI_SUM");
    if (alg && strcmp(alg, "reduce_scatter_block") == 0) g.sum_alg = SELSYNC_MPI_SUM_RSB;
    else if (alg && *alg && strcmp(alg, "ring") != 0) {
        set_error("SELSYNC_MPI_SUM=%s: expected ring or reduce_scatter_block", alg);
        copy_err(err, errlen, g.last_error);
        MPI_Comm_free(&g.p2p);
        MPI_Comm_free(&g.comm);
        if (g.own_init) {
            MPI_Finalize();
            g.own_init = 0;
        }
        return SELSYNC_ECONFIG;
    }
    g.active = 1;
    g.aborting = 0;
    g.bytes = 0;
    /* Registered after MPI_Init_thread, so it runs before anything MPI
     * registered during initialisation. */
    if (!g.atexit_done && atexit(at_exit_handler) == 0) g.atexit_done = 1;
    out->ops = &mpi_ops;
    out->ctx = &g;
    return SELSYNC_OK;
}

void selsync_mpi_finalize(void)
{
    if (!g.active) return;
    g.active = 0;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
        MPI_Comm_free(&g.p2p);
        MPI_Comm_free(&g.comm);
        if (g.own_init) MPI_Finalize();
    }
    g.comm = g.p2p = MPI_COMM_NULL;
    g.own_init = 0;
    free(g.scratch);
    free(g.pack);
    free(g.start);
    free(g.len);
    free(g.disp);
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

const char *selsync_mpi_last_error(void)
{
    return g.last_error;
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
