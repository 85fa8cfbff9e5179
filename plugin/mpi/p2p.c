/* Point-to-point messages (method ssp) on their own communicator, so a
 * collective's messages never match them. */
#include "mpi_ctx.h"

/* A message is a run of pieces of ring_chunk_elems(c, 1) bytes ended by a
 * shorter (possibly empty) one, all with its tag: MPI keeps them in order. */
selsync_status comm_mpi_send(void *ctx, int dest, int tag, const void *buf, size_t bytes)
{
    mpi_ctx *c = ctx;
    selsync_status s = gate_check(c, buf, bytes, "send");
    if (s != SELSYNC_OK) return s;
    if (dest < 0 || dest >= c->size || tag < 0) {
        ctx_error(c, "send: destination %d or tag %d out of range (%d ranks)", dest, tag, c->size);
        return SELSYNC_EINVAL;
    }
    stall_enter(c, "send", 0);
    size_t piece = ring_chunk_elems(c, 1), pos = 0, n;
    do {
        n = bytes - pos < piece ? bytes - pos : piece;
        MPI_Request rq;
        int rc = MPI_Isend((const char *)buf + pos, (int)n, MPI_BYTE, dest, tag, c->p2p, &rq);
        s = rc == MPI_SUCCESS ? stall_wait(c, 1, &rq, &dest, MPI_STATUSES_IGNORE, "MPI_Isend")
                               : ctx_mpi_failed(c, "MPI_Isend", rc);
        if (s != SELSYNC_OK) return s;
        pos += n;
    } while (n == piece);
    ctx_count_bytes(c, bytes);
    return SELSYNC_OK;
}

selsync_status comm_mpi_recv(void *ctx, int source, int tag, void *buf, size_t bytes, selsync_msg *got)
{
    mpi_ctx *c = ctx;
    selsync_status s = gate_check(c, buf, bytes, "recv");
    if (s != SELSYNC_OK) return s;
    if (source < SELSYNC_ANY || source >= c->size || tag < SELSYNC_ANY) {
        ctx_error(c, "recv: source %d or tag %d out of range (%d ranks)", source, tag, c->size);
        return SELSYNC_EINVAL;
    }
    int src = source == SELSYNC_ANY ? MPI_ANY_SOURCE : source;
    int tg = tag == SELSYNC_ANY ? MPI_ANY_TAG : tag, n = 0;
    size_t piece = ring_chunk_elems(c, 1), pos = 0;
    stall_enter(c, "recv", 0);
    do {
        MPI_Status st;
        MPI_Request rq;
        int rc = MPI_Irecv((char *)buf + pos, (int)(bytes - pos < piece ? bytes - pos : piece), MPI_BYTE, src,
                           tg, c->p2p, &rq);
        s = rc == MPI_SUCCESS ? stall_wait(c, 1, &rq, &src, &st, "MPI_Irecv") : ctx_mpi_failed(c, "MPI_Irecv", rc);
        if (s != SELSYNC_OK) return s;
        rc = MPI_Get_count(&st, MPI_BYTE, &n);
        if (rc != MPI_SUCCESS) return ctx_mpi_failed(c, "MPI_Get_count", rc);
        src = st.MPI_SOURCE; /* the other pieces come from the same sender, same tag */
        tg = st.MPI_TAG;
        pos += (size_t)n;
    } while ((size_t)n == piece);
    if (got) *got = (selsync_msg){src, tg, pos};
    return SELSYNC_OK;
}
