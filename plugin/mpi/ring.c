/* The ring sum: the caller's segments seen as one array, a ring
 * reduce-scatter then allgather of it over MPI, among every rank or a list
 * of members; see comm_mpi.h for the order of the additions, which fixes
 * the bits. */
#include "mpi_ctx.h"

#include <limits.h>

/* Elements of esize bytes per MPI call: >= 1, <= INT_MAX, <= chunk_bytes. */
size_t ring_chunk_elems(const mpi_ctx *c, size_t esize)
{
    size_t k = c->chunk_bytes / esize;
    if (k > (size_t)INT_MAX) k = (size_t)INT_MAX;
    return k ? k : 1;
}

/* Estimated bytes this rank sends in a reduce-scatter + allgather (or ring
 * allreduce) of count elements of esize bytes. */
uint64_t ring_bytes(const mpi_ctx *c, size_t count, size_t esize)
{
    size_t p = (size_t)c->size;
    size_t block = (count + p - 1) / p;
    return 2u * (uint64_t)(p - 1) * (uint64_t)block * (uint64_t)esize;
}

/* Block b of n elements over p ranks: the first n % p blocks have one
 * element more. */
size_t ring_block_off(size_t n, size_t p, size_t b)
{
    return b * (n / p) + (b < n % p ? b : n % p);
}

size_t ring_block_len(size_t n, size_t p, size_t b)
{
    return n / p + (b < n % p);
}

/* The ring works on segs as one array of *n elements. */
selsync_status ring_set_array(mpi_ctx *c, const selsync_segment *segs, size_t nseg, size_t *n)
{
    selsync_status st = ctx_reserve(c, (void **)&c->start, &c->start_cap, nseg + 1, sizeof *c->start);
    if (st != SELSYNC_OK) return st;
    c->seg = segs;
    c->nseg = nseg;
    c->rot = 0;
    c->start[0] = 0;
    for (size_t k = 0; k < nseg; k++) c->start[k + 1] = c->start[k] + segs[k].count;
    *n = c->start[nseg];
    return SELSYNC_OK;
}

/* Element pos (< the array's length) of the array seen from element rot
 * (element (pos + rot) mod length); *run: how many follow it contiguously
 * in its segment, itself included (never past the array's end). */
static float *ring_at(mpi_ctx *c, size_t pos, size_t *run)
{
    size_t lo = 0, hi = c->nseg;
    if ((pos += c->rot) >= c->start[c->nseg]) pos -= c->start[c->nseg];
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->start[mid] <= pos) lo = mid;
        else hi = mid;
    }
    *run = c->start[lo + 1] - pos;
    return c->seg[lo].data + (pos - c->start[lo]);
}

/* The array's elements [off, off + n) as pieces c->iov[0 .. *count), each
 * a run of one caller segment. */
static selsync_status ring_pieces(mpi_ctx *c, size_t off, size_t n, int *count)
{
    size_t run, k = 0;
    for (size_t d = 0; d < n; d += run, k++) ring_at(c, off + d, &run);
    selsync_status st = ctx_reserve(c, (void **)&c->iov, &c->iov_cap, k ? k : 1, sizeof *c->iov);
    if (st != SELSYNC_OK) return st;
    k = 0;
    for (size_t d = 0; d < n; d += run, k++) {
        float *q = ring_at(c, off + d, &run);
        if (run > n - d) run = n - d;
        c->iov[k] = (struct iovec){q, run * sizeof(float)};
    }
    *count = (int)k;
    return SELSYNC_OK;
}

/* Elements [off, off + n) of the array as an MPI buffer: the segment itself
 * when one holds them all, else MPI_BOTTOM and one element of a new
 * hindexed type over their ring_pieces (*type, to be freed). Uses c->iov. */
selsync_status ring_view(mpi_ctx *c, size_t off, size_t n, void **buf, int *count, MPI_Datatype *type)
{
    int k = 0;
    selsync_status st = n ? ring_pieces(c, off, n, &k) : SELSYNC_OK;
    *type = MPI_FLOAT;
    *count = (int)n;
    *buf = n ? c->iov[0].iov_base : c->scratch;
    if (st != SELSYNC_OK || k <= 1) return st;
    size_t cap = c->map_cap;
    st = ctx_reserve(c, (void **)&c->len, &cap, (size_t)k, sizeof *c->len);
    if (st == SELSYNC_OK) st = ctx_reserve(c, (void **)&c->disp, &c->map_cap, (size_t)k, sizeof *c->disp);
    if (st != SELSYNC_OK) return st;
    for (int i = 0; i < k; i++) {
        c->len[i] = (int)(c->iov[i].iov_len / sizeof(float));
        MPI_Get_address(c->iov[i].iov_base, &c->disp[i]);
    }
    int rc = MPI_Type_create_hindexed(k, c->len, c->disp, MPI_FLOAT, type);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(type);
    if (rc != MPI_SUCCESS) return ctx_mpi_failed(c, "MPI_Type_create_hindexed", rc);
    *buf = MPI_BOTTOM;
    *count = 1;
    return SELSYNC_OK;
}

/* Elements [off, off + n) of the array: x = x + src[i] (when src), then
 * x = x * scale (unless 1), piece by piece. Without a scale the sum is
 * MPI_Reduce_local (the library's vectorised op, measured faster here than
 * a plain C loop); with one, a single loop computes (x + src[i]) * scale,
 * the same operations (float addition commutes), in one pass. */
selsync_status ring_apply(mpi_ctx *c, size_t off, size_t n, const float *src, float scale)
{
    size_t run;
    for (size_t d = 0; d < n; d += run) {
        float *p = ring_at(c, off + d, &run);
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
        if (rc != MPI_SUCCESS) return ctx_mpi_failed(c, "MPI_Reduce_local", rc);
    }
    return SELSYNC_OK;
}

/* Where block b (b <= p) starts. The world: blocks of n/p or n/p + 1
 * elements. Members (rot: where the world's block rank[0] starts): block
 * c is the world's blocks rank[c] .. rank[c+1] - 1, the last one wrapping
 * around to rank[0] - 1. The world ring sums the elements of its block b
 * in the order b+1, b+2, ..., b (mod size); among members, the same order
 * with the non-members left out. */
static size_t ring_plan_off(mpi_ctx *c, const ring_plan *pl, size_t b)
{
    if (!pl->rank) return ring_block_off(pl->n, pl->p, b);
    return b == pl->p ? pl->n : ring_block_off(pl->n, (size_t)c->size, (size_t)pl->rank[b]) - pl->rot;
}

static int ring_plan_rank(const ring_plan *pl, size_t pos)
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
static selsync_status ring_post(mpi_ctx *c, ring_msg *m, int phase, size_t o, size_t seg, size_t so, size_t sl,
                                size_t ro, size_t rl, float *slot, int left, int right)
{
    void *sbuf, *rbuf = slot;
    int scount, rcount;
    m->sc = o < sl ? (sl - o < seg ? sl - o : seg) : 0;
    m->rc = o < rl ? (rl - o < seg ? rl - o : seg) : 0;
    m->stype = m->rtype = MPI_FLOAT;
    rcount = (int)m->rc;
    selsync_status st = ring_view(c, so + o, m->sc, &sbuf, &scount, &m->stype);
    if (st == SELSYNC_OK && phase == 1) st = ring_view(c, ro + o, m->rc, &rbuf, &rcount, &m->rtype);
    if (st != SELSYNC_OK) return st;
    int e = MPI_Irecv(rbuf, rcount, m->rtype, left, TAG_RING, c->comm, &m->rq[0]);
    if (e == MPI_SUCCESS) e = MPI_Isend(sbuf, scount, m->stype, right, TAG_RING, c->comm, &m->rq[1]);
    return e == MPI_SUCCESS ? SELSYNC_OK : ctx_mpi_failed(c, "MPI_Isend/MPI_Irecv", e);
}

/* The reduce-scatter's segment, in bytes, for blocks of at most maxblk
 * floats (see RING_SEGMENT_BYTES in mpi_ctx.h). */
static size_t ring_segment_bytes(const mpi_ctx *c, size_t maxblk)
{
    size_t share = maxblk * sizeof(float) / RING_SEGMENTS_PER_STEP;
    if (c->one_host || share < RING_SEGMENT_BYTES) return RING_SEGMENT_BYTES;
    return share < RING_SEGMENT_BYTES_HOSTS ? share : RING_SEGMENT_BYTES_HOSTS;
}

/* Ring reduce-scatter then ring allgather of plan pl, in place, each
 * exchange an MPI_Irecv from the left and an MPI_Isend to the right,
 * waited for together, RING_DEPTH exchanges in flight. Reduce-scatter step
 * s (0 .. p-2): send block (r-s-1) to the right neighbour, receive block
 * (r-s-2) from the left one, segment by segment, into scratch slots and
 * add it into the array; after p-1 steps position r alone holds the
 * complete sum of block r, which it multiplies by scale as it completes.
 * Allgather step s: send block (r-s) right, receive block (r-s-1) from the
 * left straight into the array. Segments: RING_SEGMENT_BYTES on one host,
 * a quarter of a block within [RING_SEGMENT_BYTES, RING_SEGMENT_BYTES_HOSTS]
 * between hosts (see mpi_ctx.h), in the reduce-scatter;
 * ring_chunk_elems() in the allgather (<= INT_MAX elements, <= chunk_bytes).
 * A message whose elements span several of the caller's segments travels
 * as an hindexed type over them. The scratch is allocated once and kept,
 * so calls do not page-fault. */
selsync_status ring_run(mpi_ctx *c, const ring_plan *pl, float scale)
{
    size_t p = pl->p, r = pl->me, n = pl->n, maxblk = 0;
    int right = ring_plan_rank(pl, (r + 1) % p), left = ring_plan_rank(pl, (r + p - 1) % p);
    int peer[2] = {left, right};
    size_t seg_ag = ring_chunk_elems(c, sizeof(float));
    for (size_t b = 0; b < p; b++) {
        size_t len = ring_plan_off(c, pl, b + 1) - ring_plan_off(c, pl, b);
        if (len > maxblk) maxblk = len;
    }
    size_t seg_bytes = ring_segment_bytes(c, maxblk);
    size_t seg_rs = (c->chunk_bytes < seg_bytes ? c->chunk_bytes : seg_bytes) / sizeof(float);
    if (seg_rs == 0) seg_rs = 1;
    size_t slot = p > 1 ? (maxblk < seg_rs ? maxblk : seg_rs) : 0;
    selsync_status st = ctx_reserve(c, (void **)&c->scratch, &c->scratch_cap, RING_DEPTH * slot, sizeof(float));
    uint64_t sent = 0;
    c->rot = pl->rot;
    if (p == 1 && st == SELSYNC_OK) st = ring_apply(c, 0, n, NULL, scale);
    for (int phase = 0; phase < 2 && st == SELSYNC_OK; ++phase) {
        size_t seg = phase == 0 ? seg_rs : seg_ag;
        for (size_t s = 0; s + 1 < p && st == SELSYNC_OK; ++s) {
            size_t sb = phase == 0 ? (r + 2 * p - s - 1) % p : (r + p - s) % p;
            size_t rb = (sb + p - 1) % p;
            size_t so = ring_plan_off(c, pl, sb), ro = ring_plan_off(c, pl, rb);
            size_t sl = ring_plan_off(c, pl, sb + 1) - so, rl = ring_plan_off(c, pl, rb + 1) - ro;
            /* Every rank runs the same number of exchanges per step (those
             * of the largest block), so each send has its matching receive
             * even where a block is shorter or empty. */
            size_t count = (maxblk + seg - 1) / seg, posted = 0;
            ring_msg m[RING_DEPTH];
            for (size_t k = 0; k < count && st == SELSYNC_OK; ++k) {
                while (st == SELSYNC_OK && posted < count && posted < k + RING_DEPTH) {
                    st = ring_post(c, &m[posted % RING_DEPTH], phase, posted * seg, seg, so, sl, ro, rl,
                                   c->scratch + posted % RING_DEPTH * slot, left, right);
                    posted++;
                }
                ring_msg *x = &m[k % RING_DEPTH];
                if (st == SELSYNC_OK) st = stall_wait(c, 2, x->rq, peer, MPI_STATUSES_IGNORE, "MPI_Isend/MPI_Irecv");
                if (x->stype != MPI_FLOAT) MPI_Type_free(&x->stype);
                if (x->rtype != MPI_FLOAT) MPI_Type_free(&x->rtype);
                /* The last reduce-scatter step completes block r: scaled here. */
                if (st == SELSYNC_OK && phase == 0)
                    st = ring_apply(c, ro + k * seg, x->rc, c->scratch + k % RING_DEPTH * slot,
                                    s + 2 == p ? scale : 1.0f);
                sent += x->sc * sizeof(float);
            }
        }
    }
    ctx_count_bytes(c, sent);
    c->rot = 0;
    return st;
}
