/* The collectives of comm.h over the context: sums (the ring, or
 * MPI_Reduce_scatter_block with SELSYNC_MPI_SUM), the members-only sum and
 * its hand-out, the OR of flags, the sum of doubles and the broadcast. */
#include "mpi_ctx.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* An op's start: the gate, then the stall watch's name for it. */
static selsync_status op_enter(mpi_ctx *c, const void *buf, size_t n, const char *op)
{
    selsync_status s = gate_check(c, buf, n, op);
    if (s == SELSYNC_OK) stall_enter(c, op, 1);
    return s;
}

/* n divisible by size, n / size <= INT_MAX: reduce-scatter from buf into the
 * scratch block, allgather the blocks back into buf. */
static selsync_status rsb_direct(mpi_ctx *c, float *buf, size_t n)
{
    size_t block = n / (size_t)c->size;
    selsync_status s = ctx_reserve(c, (void **)&c->scratch, &c->scratch_cap, block, sizeof(float));
    if (s != SELSYNC_OK) return s;
    if ((s = stall_arrive(c)) != SELSYNC_OK) return s;
    int rc = MPI_Reduce_scatter_block(buf, c->scratch, (int)block, MPI_FLOAT, MPI_SUM, c->comm);
    if (rc != MPI_SUCCESS) return ctx_mpi_failed(c, "MPI_Reduce_scatter_block", rc);
    rc = MPI_Allgather(c->scratch, (int)block, MPI_FLOAT, buf, (int)block, MPI_FLOAT, c->comm);
    if (rc != MPI_SUCCESS) return ctx_mpi_failed(c, "MPI_Allgather", rc);
    ctx_count_bytes(c, ring_bytes(c, n, sizeof(float)));
    return SELSYNC_OK;
}

/* Any n (ceil(n / size) <= INT_MAX): copied into a zero-padded scratch of
 * block * size floats, followed by the block that receives the reduction. */
static selsync_status rsb_padded(mpi_ctx *c, float *buf, size_t n)
{
    size_t p = (size_t)c->size;
    size_t block = (n + p - 1) / p;
    size_t padded = block * p;
    selsync_status s = ctx_reserve(c, (void **)&c->scratch, &c->scratch_cap, padded + block, sizeof(float));
    if (s != SELSYNC_OK) return s;
    float *all = c->scratch, *mine = c->scratch + padded;
    memcpy(all, buf, n * sizeof(float));
    memset(all + n, 0, (padded - n) * sizeof(float));
    if ((s = stall_arrive(c)) != SELSYNC_OK) return s;
    int rc = MPI_Reduce_scatter_block(all, mine, (int)block, MPI_FLOAT, MPI_SUM, c->comm);
    if (rc != MPI_SUCCESS) return ctx_mpi_failed(c, "MPI_Reduce_scatter_block", rc);
    rc = MPI_Allgather(mine, (int)block, MPI_FLOAT, all, (int)block, MPI_FLOAT, c->comm);
    if (rc != MPI_SUCCESS) return ctx_mpi_failed(c, "MPI_Allgather", rc);
    memcpy(buf, all, n * sizeof(float));
    ctx_count_bytes(c, ring_bytes(c, padded, sizeof(float)));
    return SELSYNC_OK;
}

static selsync_status rsb_sum(mpi_ctx *c, float *buf, size_t n)
{
    size_t p = (size_t)c->size;
    /* Per pair of calls: a multiple of p elements, block <= INT_MAX. */
    size_t cap = c->chunk_bytes < RSB_CHUNK_BYTES ? c->chunk_bytes : RSB_CHUNK_BYTES;
    size_t block_max = cap / sizeof(float) / p;
    if (block_max == 0) block_max = 1;
    size_t chunk = block_max * p;
    size_t small = SMALL_PADDED_BYTES / sizeof(float);
    for (size_t pos = 0; pos < n;) {
        size_t piece = n - pos < chunk ? n - pos : chunk;
        size_t tail = piece % p;  /* non-zero only in the last piece */
        selsync_status s;
        if (tail == 0) {
            s = rsb_direct(c, buf + pos, piece);
        } else if (piece <= small) {
            s = rsb_padded(c, buf + pos, piece);
        } else {
            s = rsb_direct(c, buf + pos, piece - tail);
            if (s == SELSYNC_OK) s = rsb_padded(c, buf + pos + piece - tail, tail);
        }
        if (s != SELSYNC_OK) return s;
        pos += piece;
    }
    return SELSYNC_OK;
}

selsync_status comm_mpi_sum_f32(void *ctx, float *buf, size_t n)
{
    mpi_ctx *c = ctx;
    selsync_status s = op_enter(c, buf, n, "sum_f32");
    if (s != SELSYNC_OK) return s;
    if (n == 0 || c->size == 1) return s;
    if (c->sum_alg == SELSYNC_MPI_SUM_RSB) return rsb_sum(c, buf, n);
    selsync_segment one = {buf, n};
    if ((s = ring_set_array(c, &one, 1, &n)) != SELSYNC_OK) return s;
    ring_plan world = {NULL, (size_t)c->size, (size_t)c->rank, n, 0};
    return ring_run(c, &world, 1.0f);
}

/* The segments of ring_set_array (n > 0 elements) summed over all ranks: the
 * ring in place; reduce_scatter_block on a packed copy. */
static selsync_status sum_segments(mpi_ctx *c, const selsync_segment *segs, size_t nseg, size_t n, float scale)
{
    selsync_status s;
    ring_plan world = {NULL, (size_t)c->size, (size_t)c->rank, n, 0};
    if (c->sum_alg == SELSYNC_MPI_SUM_RING || c->size == 1) return ring_run(c, &world, scale);
    if ((s = ctx_reserve(c, (void **)&c->pack, &c->pack_cap, n, sizeof *c->pack)) != SELSYNC_OK) return s;
    for (size_t k = 0; k < nseg; k++)
        if (segs[k].count) memcpy(c->pack + c->start[k], segs[k].data, segs[k].count * sizeof(float));
    if ((s = rsb_sum(c, c->pack, n)) != SELSYNC_OK) return s;
    for (size_t k = 0; k < nseg; k++)
        for (size_t i = 0; i < segs[k].count; i++) segs[k].data[i] = c->pack[c->start[k] + i] * scale;
    return SELSYNC_OK;
}

selsync_status comm_mpi_sum_f32v(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    mpi_ctx *c = ctx;
    size_t n;
    selsync_status s = gate_check_segments(c, segs, nseg, "sum_f32v");
    if (s == SELSYNC_OK) stall_enter(c, "sum_f32v", 1);
    if (s != SELSYNC_OK || (s = ring_set_array(c, segs, nseg, &n)) != SELSYNC_OK || n == 0) return s;
    return sum_segments(c, segs, nseg, n, scale);
}

selsync_status comm_mpi_sum_f32v_start(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    return gate_start_sum(ctx, comm_mpi_sum_f32v, segs, nseg, scale);
}

/* The growable arrays of one hand-out round, for m messages. */
static selsync_status hand_out_reserve(mpi_ctx *c, size_t m)
{
    selsync_status s = ctx_reserve(c, (void **)&c->out_req, &c->out_cap, m, sizeof *c->out_req);
    if (s == SELSYNC_OK) s = ctx_reserve(c, (void **)&c->out_peer, &c->out_peer_cap, m, sizeof *c->out_peer);
    if (s == SELSYNC_OK) s = ctx_reserve(c, (void **)&c->out_type, &c->out_type_cap, m, sizeof *c->out_type);
    return s;
}

/* After the members' ring every member holds the result: member c sends
 * part c of k near-equal parts (blk_off) to every non-member, which
 * receives the k parts at once; in rounds of at most ring_chunk_elems()
 * elements per message, every rank running the rounds of the largest part
 * (empty messages where a part is shorter). me: this rank's position among
 * the members, or -1. */
static selsync_status hand_out(mpi_ctx *c, const int *members, size_t k, int me, size_t n)
{
    size_t p = (size_t)c->size, step = ring_chunk_elems(c, sizeof(float)), m = me >= 0 ? p - k : k;
    size_t maxpart = ring_block_len(n, k, 0);
    selsync_status st = hand_out_reserve(c, m);
    for (size_t r = 0, j = 0, i = 0; st == SELSYNC_OK && r < p; r++) { /* the peers, in rank order */
        int member = i < k && members[i] == (int)r;
        i += (size_t)member;
        if (member != (me >= 0)) c->out_peer[j++] = (int)r;
    }
    for (size_t o = 0; o < maxpart && st == SELSYNC_OK; o += step) {
        int e = MPI_SUCCESS;
        for (size_t i = 0; i < m; i++) c->out_type[i] = MPI_FLOAT;
        for (size_t i = 0; i < m && e == MPI_SUCCESS && st == SELSYNC_OK; i++) {
            size_t part = me >= 0 ? (size_t)me : i, len = ring_block_len(n, k, part);
            size_t cnt = o < len ? (len - o < step ? len - o : step) : 0;
            void *buf;
            int count;
            st = ring_view(c, ring_block_off(n, k, part) + o, cnt, &buf, &count, &c->out_type[i]);
            if (st != SELSYNC_OK) break;
            if (me < 0) {
                e = MPI_Irecv(buf, count, c->out_type[i], c->out_peer[i], TAG_HAND_OUT, c->comm, &c->out_req[i]);
            } else if ((e = MPI_Isend(buf, count, c->out_type[i], c->out_peer[i], TAG_HAND_OUT, c->comm,
                                      &c->out_req[i])) == MPI_SUCCESS) {
                ctx_count_bytes(c, cnt * sizeof(float));
            }
        }
        if (st == SELSYNC_OK)
            st = e == MPI_SUCCESS ? stall_wait(c, (int)m, c->out_req, c->out_peer, MPI_STATUSES_IGNORE,
                                               "MPI_Isend/MPI_Irecv")
                                  : ctx_mpi_failed(c, "MPI_Isend/MPI_Irecv", e);
        for (size_t i = 0; i < m; i++)
            if (c->out_type[i] != MPI_FLOAT) MPI_Type_free(&c->out_type[i]);
    }
    return st;
}

/* Validates sum_f32v_among's member list. */
static selsync_status check_members(mpi_ctx *c, const int *members, int k)
{
    if (!members || k < 1 || k > c->size) {
        ctx_error(c, "sum_f32v_among: %d members%s: expected 1 to %d", k, members ? "" : " at NULL", c->size);
        return SELSYNC_EINVAL;
    }
    for (int i = 0; i < k; i++)
        if (members[i] < 0 || members[i] >= c->size || (i > 0 && members[i] <= members[i - 1])) {
            ctx_error(c, "sum_f32v_among: member %d is rank %d: expected distinct ranks of [0, %d) in ascending order",
                      i, members[i], c->size);
            return SELSYNC_EINVAL;
        }
    return SELSYNC_OK;
}

/* The members' ring_run (plan_off; the ring whatever the sum algorithm), then
 * the hand-out to the non-members. */
selsync_status comm_mpi_sum_f32v_among(void *ctx, const selsync_segment *segs, size_t nseg, float scale,
                                          const int *members, int k)
{
    mpi_ctx *c = ctx;
    size_t n;
    int me = -1;
    selsync_status s = gate_check_segments(c, segs, nseg, "sum_f32v_among");
    if (s == SELSYNC_OK) s = check_members(c, members, k);
    if (s == SELSYNC_OK) stall_enter(c, "sum_f32v_among", 1);
    if (s != SELSYNC_OK || (s = ring_set_array(c, segs, nseg, &n)) != SELSYNC_OK || n == 0) return s;
    for (int i = 0; i < k; i++)
        if (members[i] == c->rank) me = i;
    if (me >= 0) {
        ring_plan among = {members, (size_t)k, (size_t)me, n, ring_block_off(n, (size_t)c->size, (size_t)members[0])};
        s = ring_run(c, &among, scale);
    }
    return s == SELSYNC_OK && k < c->size ? hand_out(c, members, (size_t)k, me, n) : s;
}

static selsync_status allreduce_chunks(mpi_ctx *c, void *buf, size_t n, size_t esize, MPI_Datatype type,
                                       MPI_Op op)
{
    if (n == 0 || c->size == 1) return SELSYNC_OK;
    size_t step = ring_chunk_elems(c, esize);
    for (size_t pos = 0; pos < n; pos += step) {
        size_t cnt = n - pos < step ? n - pos : step;
        MPI_Request rq;
        selsync_status s = stall_wait_collective(c, 
            MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + pos * esize, (int)cnt, type, op, c->comm, &rq), &rq,
            "MPI_Iallreduce");
        if (s != SELSYNC_OK) return s;
        ctx_count_bytes(c, ring_bytes(c, cnt, esize));
    }
    return SELSYNC_OK;
}

selsync_status comm_mpi_any(void *ctx, uint8_t *flags, size_t n)
{
    mpi_ctx *c = ctx;
    selsync_status s = op_enter(c, flags, n, "any");
    if (s != SELSYNC_OK) return s;
    return allreduce_chunks(c, flags, n, sizeof(uint8_t), MPI_UINT8_T, MPI_BOR);
}

selsync_status comm_mpi_sum_f64(void *ctx, double *buf, size_t n)
{
    mpi_ctx *c = ctx;
    selsync_status s = op_enter(c, buf, n, "sum_f64");
    if (s != SELSYNC_OK) return s;
    return allreduce_chunks(c, buf, n, sizeof(double), MPI_DOUBLE, MPI_SUM);
}

static void small_sum_free(struct small_sum *q)
{
    free(q->vals);
    free(q->req);
    free(q->peer);
    q->vals = NULL;
    q->req = NULL;
    q->peer = NULL;
}

void small_sums_free(mpi_ctx *c)
{
    for (size_t i = 0; i < c->small_count; i++) small_sum_free(&c->small_sums[i]);
    free(c->small_sums);
    c->small_sums = NULL;
    c->small_cap = c->small_count = 0;
}

/* One round on the communicator of the small sums (struct small_sum);
 * messages between two ranks on it arrive in the order sent, so the sums
 * complete in the order started. The bytes count at the start: n doubles
 * to each other rank. Not a collective of the stall watch's count: a wait
 * names the ranks whose values have not arrived. */
selsync_status comm_mpi_sum_f64_start(void *ctx, double *buf, size_t n)
{
    mpi_ctx *c = ctx;
    selsync_status s = gate_check(c, buf, n, "sum_f64_start");
    if (s == SELSYNC_OK && n > INT_MAX) {
        ctx_error(c, "sum_f64_start: %zu elements, at most %d", n, INT_MAX);
        s = SELSYNC_EINVAL;
    }
    if (s == SELSYNC_OK)
        s = ctx_reserve(c, (void **)&c->small_sums, &c->small_cap, c->small_count + 1, sizeof *c->small_sums);
    if (s != SELSYNC_OK) return s;
    stall_enter(c, "sum_f64_start", 0);
    struct small_sum *q = &c->small_sums[c->small_count];
    *q = (struct small_sum){.buf = buf, .n = n};
    if (n && c->size > 1) {
        size_t others = (size_t)c->size - 1;
        q->vals = malloc((size_t)c->size * n * sizeof *q->vals);
        q->req = malloc(2 * others * sizeof *q->req);
        q->peer = malloc(2 * others * sizeof *q->peer);
        if (!q->vals || !q->req || !q->peer) {
            small_sum_free(q);
            ctx_error(c, "sum_f64_start: out of memory on rank %d", c->rank);
            return SELSYNC_ENOMEM;
        }
        double *mine = q->vals + (size_t)c->rank * n;
        memcpy(mine, buf, n * sizeof *buf);
        for (int k = 0; k < c->size; k++) {
            if (k == c->rank) continue;
            int rc = MPI_Irecv(q->vals + (size_t)k * n, (int)n, MPI_DOUBLE, k, 0, c->small, &q->req[q->nreq]);
            if (rc == MPI_SUCCESS) q->peer[q->nreq++] = k;
            if (rc == MPI_SUCCESS) rc = MPI_Isend(mine, (int)n, MPI_DOUBLE, k, 0, c->small, &q->req[q->nreq]);
            if (rc == MPI_SUCCESS) q->peer[q->nreq++] = k;
            if (rc != MPI_SUCCESS) return ctx_mpi_failed(c, "MPI_Isend/MPI_Irecv (sum_f64_start)", rc);
        }
        ctx_count_bytes(c, (uint64_t)others * n * sizeof *buf);
    }
    c->small_count++;
    return SELSYNC_OK;
}

/* The oldest started sum: its messages completed, every rank's values
 * added in rank order into the caller's buffer (the same bits on every
 * rank). */
selsync_status comm_mpi_wait_f64(void *ctx)
{
    mpi_ctx *c = ctx;
    selsync_status s = gate_check(c, c, 0, "wait_f64");
    if (s != SELSYNC_OK || c->small_count == 0) return s;
    stall_enter(c, "wait_f64", 0);
    struct small_sum *q = &c->small_sums[0];
    if (q->vals) {
        s = stall_wait(c, q->nreq, q->req, q->peer, MPI_STATUSES_IGNORE, "sum_f64 (wait_f64)");
        for (size_t j = 0; j < q->n && s == SELSYNC_OK; j++) {
            double sum = 0;
            for (int k = 0; k < c->size; k++) sum += q->vals[(size_t)k * q->n + j];
            q->buf[j] = sum;
        }
    }
    small_sum_free(q);
    memmove(c->small_sums, c->small_sums + 1, --c->small_count * sizeof *c->small_sums);
    return s;
}

/* Children of this rank in the binomial broadcast tree rooted at root. */
static unsigned binomial_children(mpi_ctx *c, int root)
{
    unsigned p = (unsigned)c->size;
    unsigned v = ((unsigned)c->rank + p - (unsigned)root) % p;
    unsigned children = 0;
    for (unsigned mask = 1; mask < p && !(v & mask); mask <<= 1) {
        if (v + mask < p) ++children;
    }
    return children;
}

selsync_status comm_mpi_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    mpi_ctx *c = ctx;
    selsync_status s = op_enter(c, buf, bytes, "bcast");
    if (s != SELSYNC_OK) return s;
    if (root < 0 || root >= c->size) {
        ctx_error(c, "bcast: root %d out of range [0, %d)", root, c->size);
        return SELSYNC_EINVAL;
    }
    if (bytes == 0 || c->size == 1) return SELSYNC_OK;
    size_t step = ring_chunk_elems(c, 1);
    for (size_t pos = 0; pos < bytes; pos += step) {
        size_t cnt = bytes - pos < step ? bytes - pos : step;
        MPI_Request rq;
        s = stall_wait_collective(c, MPI_Ibcast((char *)buf + pos, (int)cnt, MPI_BYTE, root, c->comm, &rq), &rq,
                            "MPI_Ibcast");
        if (s != SELSYNC_OK) return s;
    }
    ctx_count_bytes(c, (uint64_t)binomial_children(c, root) * (uint64_t)bytes);
    return SELSYNC_OK;
}
