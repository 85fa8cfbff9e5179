/* A scripted communicator for tests (mock_comm.h). */
#include "mock_comm.h"

#include <stdio.h>
#include <string.h>

static int m_rank(void *ctx) { return ((mock_comm *)ctx)->rank; }
static int m_size(void *ctx) { return ((mock_comm *)ctx)->size; }

static selsync_status m_any(void *ctx, uint8_t *flags, size_t n)
{
    mock_comm *m = ctx;
    m->any_calls++;
    m->any_last_n = n;
    m->bytes += n;
    if (m->any_calls == m->fail_any_call || n > MOCK_MAX_FLAGS) return SELSYNC_ECOMM;
    memcpy(m->any_last_in, flags, n);
    if (m->any_queued > 0) {
        for (size_t i = 0; i < n; i++) flags[i] |= m->any_queue[0][i];
        memmove(m->any_queue[0], m->any_queue[1], (size_t)--m->any_queued * sizeof m->any_queue[0]);
    }
    return SELSYNC_OK;
}

static selsync_status m_sum_f32(void *ctx, float *buf, size_t n)
{
    mock_comm *m = ctx;
    m->sum_calls++;
    m->sum_last_n = n;
    m->sum_total_n += n;
    m->bytes += 4 * (uint64_t)n;
    if (m->sum_calls == m->fail_sum_call || n > MOCK_MAX_ELEMS || (m->remote && m->remote_n < n))
        return SELSYNC_ECOMM;
    memcpy(m->sum_last_in, buf, n * sizeof *buf);
    for (size_t i = 0; i < n; i++) buf[i] += m->remote_scale * buf[i] + (m->remote ? m->remote[i] : 0.0f);
    return SELSYNC_OK;
}

/* m_sum_f32 over a packed copy (zeros when !contribute), then x * scale
 * back into the segments. */
static selsync_status sum_packed(void *ctx, const selsync_segment *segs, size_t nseg, float scale, int contribute)
{
    static float packed[MOCK_MAX_ELEMS];
    size_t n = 0;
    selsync_status st;
    for (size_t k = 0; k < nseg; n += segs[k].count, k++)
        if (n + segs[k].count <= MOCK_MAX_ELEMS) memcpy(packed + n, segs[k].data, segs[k].count * sizeof(float));
    if (!contribute) memset(packed, 0, (n < MOCK_MAX_ELEMS ? n : MOCK_MAX_ELEMS) * sizeof(float));
    if ((st = m_sum_f32(ctx, packed, n)) != SELSYNC_OK) return st; /* n > MOCK_MAX_ELEMS fails */
    n = 0;
    for (size_t k = 0; k < nseg; n += segs[k].count, k++)
        for (size_t i = 0; i < segs[k].count; i++) segs[k].data[i] = packed[n + i] * scale;
    return SELSYNC_OK;
}

static selsync_status m_sum_f32v(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    return sum_packed(ctx, segs, nseg, scale, 1);
}

static selsync_status m_sum_f32v_among(void *ctx, const selsync_segment *segs, size_t nseg, float scale,
                                       const int *members, int k)
{
    mock_comm *m = ctx;
    uint64_t bytes = m->bytes;
    int member = 0;
    selsync_status st;
    m->among_calls++;
    m->among_k = k;
    for (int i = 0; i < k; i++) {
        if (i < MOCK_MAX_RANKS) m->among_members[i] = members[i];
        if (members[i] < 0 || members[i] >= m->size || (i && members[i] <= members[i - 1])) return SELSYNC_EINVAL;
        member |= members[i] == m->rank;
    }
    if (k < 1 || k > m->size) return SELSYNC_EINVAL;
    st = sum_packed(ctx, segs, nseg, scale, member);
    if (!member) m->bytes = bytes;
    return st;
}

static selsync_status m_sum_f64(void *ctx, double *buf, size_t n)
{
    mock_comm *m = ctx;
    m->f64_calls++;
    m->bytes += 8 * (uint64_t)n;
    for (size_t i = 0; i < n; i++) buf[i] = m->remote_f64 ? buf[i] + m->remote_f64[i] : buf[i] * m->size;
    return SELSYNC_OK;
}

static selsync_status m_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    mock_comm *m = ctx;
    int call = m->bcast_calls++;
    if (call < MOCK_MAX_QUEUE) {
        m->bcast_root[call] = root;
        m->bcast_bytes[call] = bytes;
    }
    if (m->bcast_calls == m->fail_bcast_call || root < 0 || root >= m->size || root >= MOCK_MAX_RANKS)
        return SELSYNC_ECOMM;
    if (root == m->rank) {
        m->bytes += (uint64_t)bytes * (uint64_t)(m->size - 1);
        m->bcast_sent_n = bytes < sizeof m->bcast_sent ? bytes : sizeof m->bcast_sent;
        memcpy(m->bcast_sent, buf, m->bcast_sent_n);
    } else if (m->bcast_from[root]) {
        if (m->bcast_from_n[root] < bytes) return SELSYNC_ECOMM;
        memcpy(buf, m->bcast_from[root], bytes);
        if (m->bcast_from_once[root]) m->bcast_from[root] = NULL;
    }
    return SELSYNC_OK;
}

static uint64_t m_bytes_sent(void *ctx) { return ((mock_comm *)ctx)->bytes; }

static void m_abort(void *ctx, int code, const char *message)
{
    mock_comm *m = ctx;
    m->abort_calls++;
    m->abort_code = code;
    snprintf(m->abort_message, sizeof m->abort_message, "%s", message ? message : "");
}

static selsync_status m_send(void *ctx, int dest, int tag, const void *buf, size_t bytes)
{
    mock_comm *m = ctx;
    mock_msg *o = &m->outbox[m->outbox_n];
    m->send_calls++;
    if (m->send_calls == m->fail_send_call || dest < 0 || dest >= m->size || tag < 0 ||
        m->outbox_n == MOCK_MAX_MSGS)
        return SELSYNC_ECOMM;
    m->outbox_n++;
    *o = (mock_msg){dest, tag, bytes, m->recv_calls, {0}};
    memcpy(o->data, buf, bytes < MOCK_MSG_BYTES ? bytes : MOCK_MSG_BYTES);
    m->bytes += bytes;
    return SELSYNC_OK;
}

static selsync_status m_recv(void *ctx, int source, int tag, void *buf, size_t bytes, selsync_msg *got)
{
    mock_comm *m = ctx;
    m->recv_calls++;
    if (m->recv_calls == m->fail_recv_call) return SELSYNC_ECOMM;
    for (int i = 0; i < m->inbox_n; i++) {
        mock_msg *in = &m->inbox[i];
        if ((source != SELSYNC_ANY && source != in->peer) || (tag != SELSYNC_ANY && tag != in->tag)) continue;
        if (in->bytes > bytes || in->bytes > MOCK_MSG_BYTES) return SELSYNC_ECOMM;
        memcpy(buf, in->data, in->bytes);
        if (got) *got = (selsync_msg){in->peer, in->tag, in->bytes};
        memmove(in, in + 1, (size_t)(--m->inbox_n - i) * sizeof *in);
        return SELSYNC_OK;
    }
    m->recv_starved++;
    return SELSYNC_ECOMM;
}

static const char *m_last_error(void *ctx)
{
    (void)ctx;
    return "mock communicator: call failed as scripted";
}

static selsync_status m_sum_f32v_start(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    mock_comm *m = ctx;
    m->start_calls++;
    if (m->pending_n == MOCK_MAX_STARTS) return SELSYNC_EINVAL;
    for (size_t k = 0; k < nseg; k++)
        if (m->started_segs < MOCK_MAX_SEGS) m->started_seg[m->started_segs++] = segs[k].data;
    m->pending[m->pending_n].segs = segs;
    m->pending[m->pending_n].nseg = nseg;
    m->pending[m->pending_n++].scale = scale;
    return SELSYNC_OK;
}

static selsync_status m_wait_sums(void *ctx)
{
    mock_comm *m = ctx;
    selsync_status st = SELSYNC_OK;
    m->wait_calls++;
    for (int i = 0; i < m->pending_n && st == SELSYNC_OK; i++)
        st = m_sum_f32v(ctx, m->pending[i].segs, m->pending[i].nseg, m->pending[i].scale);
    m->pending_n = 0;
    return st;
}

/* [no_among][async] */
#define MOCK_OPS(among, start, wait)                                                                           \
    {.version = SELSYNC_COMM_OPS_VERSION, .name = "mock", .rank = m_rank, .size = m_size, .any = m_any,       \
     .sum_f32 = m_sum_f32, .sum_f32v = m_sum_f32v, .sum_f64 = m_sum_f64, .bcast = m_bcast,                     \
     .bytes_sent = m_bytes_sent, .abort = m_abort, .send = m_send, .recv = m_recv, .last_error = m_last_error, \
     .sum_f32v_among = among, .sum_f32v_start = start, .wait_sums = wait}
static const selsync_comm_ops mock_ops[2][2] = {
    {MOCK_OPS(m_sum_f32v_among, NULL, NULL), MOCK_OPS(m_sum_f32v_among, m_sum_f32v_start, m_wait_sums)},
    {MOCK_OPS(NULL, NULL, NULL), MOCK_OPS(NULL, m_sum_f32v_start, m_wait_sums)},
};

void mock_init(mock_comm *m, int rank, int size)
{
    memset(m, 0, sizeof *m);
    m->rank = rank;
    m->size = size;
    m->remote_scale = (float)(size - 1); /* by default every rank holds the same values */
}

selsync_comm mock_as_comm(mock_comm *m)
{
    selsync_comm c = {&mock_ops[m->no_among != 0][m->async != 0], m};
    return c;
}

void mock_script_any(mock_comm *m, const uint8_t *flags, size_t n)
{
    if (m->any_queued >= MOCK_MAX_QUEUE || n > MOCK_MAX_FLAGS) return;
    memset(m->any_queue[m->any_queued], 0, MOCK_MAX_FLAGS);
    memcpy(m->any_queue[m->any_queued], flags, n);
    m->any_queued++;
}

void mock_script_msg(mock_comm *m, int source, int tag, const void *data, size_t bytes)
{
    mock_msg *in = &m->inbox[m->inbox_n];
    if (m->inbox_n >= MOCK_MAX_MSGS || bytes > MOCK_MSG_BYTES) return;
    m->inbox_n++;
    *in = (mock_msg){source, tag, bytes, 0, {0}};
    if (data) memcpy(in->data, data, bytes);
}
