/* The communicator of a job with one process: rank 0 of 1, every collective
 * is the identity and nothing is sent. */
#include "selsync/comm.h"

#include <stdio.h>

static int single_rank(void *ctx) { (void)ctx; return 0; }
static int single_size(void *ctx) { (void)ctx; return 1; }

static selsync_status single_any(void *ctx, uint8_t *flags, size_t n)
{
    (void)ctx, (void)flags, (void)n;
    return SELSYNC_OK;
}

static selsync_status single_sum_f32(void *ctx, float *buf, size_t n)
{
    (void)ctx, (void)buf, (void)n;
    return SELSYNC_OK;
}

static selsync_status single_sum_f32v(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    (void)ctx;
    for (size_t k = 0; k < nseg && scale != 1.0f; k++)
        for (size_t i = 0; i < segs[k].count; i++) segs[k].data[i] *= scale;
    return SELSYNC_OK;
}

/* The only member list of one process is {0}: sum_f32v. */
static selsync_status single_sum_f32v_among(void *ctx, const selsync_segment *segs, size_t nseg, float scale,
                                            const int *members, int k)
{
    if (!members || k != 1 || members[0] != 0) return SELSYNC_EINVAL;
    return single_sum_f32v(ctx, segs, nseg, scale);
}

static selsync_status single_sum_f64(void *ctx, double *buf, size_t n)
{
    (void)ctx, (void)buf, (void)n;
    return SELSYNC_OK;
}

static selsync_status single_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    (void)ctx, (void)buf, (void)bytes;
    return root == 0 ? SELSYNC_OK : SELSYNC_ECOMM; /* there is no other rank */
}

static uint64_t single_bytes_sent(void *ctx) { (void)ctx; return 0; }

/* Prints the message and returns: the host decides how to end. */
static void single_abort(void *ctx, int code, const char *message)
{
    (void)ctx;
    fprintf(stderr, "[selsync] abort (code %d): %s\n", code, message ? message : "");
}

/* There is no other rank to talk to. */
static selsync_status single_send(void *ctx, int dest, int tag, const void *buf, size_t bytes)
{
    (void)ctx, (void)dest, (void)tag, (void)buf, (void)bytes;
    return SELSYNC_ECOMM;
}

static selsync_status single_recv(void *ctx, int source, int tag, void *buf, size_t bytes, selsync_msg *got)
{
    (void)ctx, (void)source, (void)tag, (void)buf, (void)bytes, (void)got;
    return SELSYNC_ECOMM;
}

static const char *single_last_error(void *ctx)
{
    (void)ctx;
    return "there is no other rank (one process)";
}

static const selsync_comm_ops single_ops = {
    .version = SELSYNC_COMM_OPS_VERSION,
    .name = "single",
    .rank = single_rank,
    .size = single_size,
    .any = single_any,
    .sum_f32 = single_sum_f32,
    .sum_f32v = single_sum_f32v,
    .sum_f64 = single_sum_f64,
    .bcast = single_bcast,
    .bytes_sent = single_bytes_sent,
    .abort = single_abort,
    .send = single_send,
    .recv = single_recv,
    .last_error = single_last_error,
    .sum_f32v_among = single_sum_f32v_among,
};

selsync_comm selsync_comm_single(void)
{
    selsync_comm c = {&single_ops, NULL};
    return c;
}

int selsync_comm_rank(const selsync_comm *c) { return c->ops->rank(c->ctx); }

int selsync_comm_size(const selsync_comm *c) { return c->ops->size(c->ctx); }

void selsync_comm_abort(const selsync_comm *c, int code, const char *message) { c->ops->abort(c->ctx, code, message); }

const char *selsync_comm_error(const selsync_comm *c, selsync_status st)
{
    const char *why = c->ops->last_error ? c->ops->last_error(c->ctx) : NULL;
    return why && *why ? why : selsync_status_str(st);
}
