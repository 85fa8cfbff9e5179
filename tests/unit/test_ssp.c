/* Unit tests for SSP (plugin/core/ssp.c) and the engine's ssp path, against
 * the scripted mock: the server's scaled updates, the staleness bound,
 * queued pulls and their release, DONE, protocol errors, a held pull in
 * virtual time; the worker's clock, update and bytes. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_comm.h"
#include "selsync/engine.h"
#include "selsync/ssp.h"
#include "selsync/vclock.h"

/* The model: w[4] trained (grad g), s[2] a statistic: 6 floats with
 * sync_bn_stats, 4 without. */
enum { N = 6, HDR = sizeof(selsync_ssp_header) };

typedef struct fx {
    float w[4], g[4], s[2];
    selsync_tensor t[2];
    selsync_model model;
    selsync_config cfg;
    mock_comm mock;
    selsync_comm comm;
    selsync_ssp_stats stats;
    char err[1024];
    char *trace;
    size_t trace_len;
    int stamped;  /* the workers' messages carry a virtual-time start: */
    double start; /* this one */
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    const float w[4] = {1, 2, 3, 4}, s[2] = {10, 20};
    memcpy(f->w, w, sizeof w);
    memcpy(f->s, s, sizeof s);
    f->t[0] = (selsync_tensor){f->w, f->g, 4, 0, SELSYNC_TENSOR_TRAINED, 0, 0};
    f->t[1] = (selsync_tensor){f->s, NULL, 2, 0, SELSYNC_TENSOR_STAT, 0, 0};
    f->model = (selsync_model){f->t, 2, 1, 0, 0};
    selsync_config_default(&f->cfg, "test.cfg", 1);
    f->cfg.method = SELSYNC_METHOD_SSP;
    f->cfg.ssp_staleness = 0;
    f->comm = mock_as_comm(&f->mock);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    free(f->trace);
    free(f);
    return 0;
}

static void assert_contains(const char *s, const char *needle)
{
    if (!strstr(s, needle)) fail_msg("expected \"%s\" in \"%s\"", needle, s);
}

/* A worker's message to the server; with f->stamped, as a virtual-time
 * rank sends it: f->start, then the payload. */
static void worker_msg(fx *f, int src, int tag, const void *data, size_t bytes)
{
    unsigned char buf[sizeof f->start + HDR + N * sizeof(float)];
    if (!f->stamped) {
        mock_script_msg(&f->mock, src, tag, data, bytes);
        return;
    }
    assert_true(bytes <= HDR + N * sizeof(float));
    memcpy(buf, &f->start, sizeof f->start);
    memcpy(buf + sizeof f->start, data, bytes);
    mock_script_msg(&f->mock, src, tag, buf, sizeof f->start + bytes);
}

static void hdr_msg(fx *f, int src, int tag, uint64_t clock, uint64_t count, double wait)
{
    selsync_ssp_header h = {clock, 0, count, wait};
    worker_msg(f, src, tag, &h, HDR);
}

static void pull(fx *f, int src) { hdr_msg(f, src, SSP_TAG_PULL, 0, 0, 0); }
static void done(fx *f, int src, uint64_t clock) { hdr_msg(f, src, SSP_TAG_DONE, clock, 0, 0); }

static void push(fx *f, int src, uint64_t clock, const float *delta, size_t n)
{
    hdr_msg(f, src, SSP_TAG_PUSH, clock, n, 0);
    worker_msg(f, src, SSP_TAG_DATA, delta, n * sizeof(float));
}

/* Runs the server on rank 0 of `world` with the script; the trace is kept. */
static selsync_status serve(fx *f, int world)
{
    FILE *tr = open_memstream(&f->trace, &f->trace_len);
    assert_non_null(tr);
    f->mock.rank = 0;
    f->mock.size = world;
    selsync_status st = selsync_ssp_serve(&f->cfg, &f->comm, &f->model, tr, &f->stats, f->err, sizeof f->err);
    fclose(tr);
    return st;
}

typedef struct reply {
    int to, recvs;                /* recvs: messages taken before it was sent */
    selsync_ssp_header h;
    float model[N];
} reply;

/* The i-th reply (header + model) the server sent. */
static reply get_reply(const fx *f, int i, size_t n)
{
    reply r;
    const mock_msg *a = &f->mock.outbox[2 * i], *b = &f->mock.outbox[2 * i + 1];
    assert_true(2 * i + 1 < f->mock.outbox_n);
    assert_int_equal(a->tag, SSP_TAG_REPLY);
    assert_int_equal(a->bytes, HDR);
    assert_int_equal(b->tag, SSP_TAG_DATA);
    assert_int_equal(b->peer, a->peer);
    assert_int_equal(b->bytes, n * sizeof(float));
    r.to = a->peer;
    r.recvs = a->recvs;
    memcpy(&r.h, a->data, HDR);
    memcpy(r.model, b->data, n * sizeof(float));
    assert_int_equal(r.h.count, n);
    return r;
}

/* Every trace line: clock - slowest <= s; returns the number of lines and
 * of queued ones. */
static int check_trace(const fx *f, int *queued)
{
    int lines = 0, rank, q;
    unsigned long long clock, slowest;
    double wait;
    const char *p = f->trace;
    assert_non_null(p);
    assert_true(strncmp(p, "# rank\tclock\tslowest\tqueued\twait_s\n", 35) == 0);
    *queued = 0;
    for (p = strchr(p, '\n') + 1; *p; p = strchr(p, '\n') + 1, lines++) {
        assert_int_equal(sscanf(p, "%d\t%llu\t%llu\t%d\t%lf", &rank, &clock, &slowest, &q, &wait), 5);
        assert_true(clock >= slowest && clock - slowest <= (unsigned long long)f->cfg.ssp_staleness);
        *queued += q;
    }
    return lines;
}

/* ---- the server ---- */

/* s = 0, two workers: each update counts 1/2; the reply after a round is
 * the mean of the workers' models, bit for bit with these values. */
static void test_server_scaled_updates(void **state)
{
    fx *f = *state;
    const float d1[N] = {2, 4, -2, 0, 1, -1}, d2[N] = {4, 0, 2, 8, 3, 1};
    int queued;
    pull(f, 1), pull(f, 2);
    push(f, 1, 1, d1, N);
    push(f, 2, 1, d2, N);
    done(f, 1, 1), done(f, 2, 1);
    assert_int_equal(serve(f, 3), SELSYNC_OK);

    const float want[N] = {4, 4, 3, 8, 12, 20}; /* p0 + (d1 + d2) / 2 */
    assert_memory_equal(f->w, want, 4 * sizeof(float));
    assert_memory_equal(f->s, want + 4, 2 * sizeof(float));
    assert_int_equal(f->mock.outbox_n, 8);
    reply r = get_reply(f, 0, N);
    const float p0[N] = {1, 2, 3, 4, 10, 20};
    assert_int_equal(r.to, 1);
    assert_memory_equal(r.model, p0, sizeof p0);
    assert_int_equal(get_reply(f, 1, N).to, 2);
    r = get_reply(f, 2, N); /* worker 1's pull, held until worker 2 pushed */
    assert_int_equal(r.to, 1);
    assert_int_equal(r.recvs, 6); /* after both headers and both updates */
    assert_int_equal(r.h.clock, 1);
    assert_int_equal(r.h.slowest, 1);
    assert_true(r.h.wait >= 0);
    assert_memory_equal(r.model, want, sizeof want);
    r = get_reply(f, 3, N);
    assert_int_equal(r.to, 2);
    assert_true(r.h.wait == 0); /* answered on arrival */
    assert_memory_equal(r.model, want, sizeof want);

    assert_int_equal(f->stats.pushes, 2);
    assert_int_equal(f->stats.pulls, 4);
    assert_int_equal(f->stats.queued, 1);
    assert_int_equal(f->stats.max_lead, 0);
    assert_int_equal(f->stats.bytes_sent, 4 * (HDR + N * 4));
    assert_int_equal(f->stats.bytes_received, 6 * HDR + 2 * N * 4);
    assert_int_equal(check_trace(f, &queued), 4);
    assert_int_equal(queued, 1);
    assert_int_equal(f->mock.inbox_n, 0);
}

/* A worker whose PULL comes after another's first update still starts
 * from the initial model: the server answers all PULLs first. */
static void test_server_clean_start(void **state)
{
    fx *f = *state;
    const float d[N] = {2, 2, 2, 2, 2, 2}, p0[N] = {1, 2, 3, 4, 10, 20};
    pull(f, 1);
    push(f, 1, 1, d, N);
    pull(f, 2);
    push(f, 2, 1, d, N);
    done(f, 1, 1), done(f, 2, 1);
    assert_int_equal(serve(f, 3), SELSYNC_OK);
    reply r = get_reply(f, 1, N);
    assert_int_equal(r.to, 2);
    assert_int_equal(r.recvs, 2); /* before worker 1's update was taken */
    assert_memory_equal(r.model, p0, sizeof p0);
    const float w[4] = {3, 4, 5, 6};
    assert_memory_equal(f->w, w, sizeof w);
}

/* Without sync_bn_stats the statistics are not part of the model. */
static void test_server_trained_only(void **state)
{
    fx *f = *state;
    const float d[4] = {3, 3, 3, 3};
    f->cfg.sync_bn_stats = 0;
    pull(f, 1);
    push(f, 1, 1, d, 4);
    done(f, 1, 1);
    assert_int_equal(serve(f, 2), SELSYNC_OK); /* one worker: the update counts fully */
    const float w[4] = {4, 5, 6, 7}, s[2] = {10, 20};
    assert_memory_equal(f->w, w, sizeof w);
    assert_memory_equal(f->s, s, sizeof s);
    assert_memory_equal(get_reply(f, 1, 4).model, w, sizeof w);
}

/* s = 1, two workers: worker 1 may run one clock ahead of worker 2, not
 * two; its pull at clock 2 waits for worker 2's first push. */
static void test_server_bound(void **state)
{
    fx *f = *state;
    const float z[N] = {0};
    int queued;
    f->cfg.ssp_staleness = 1;
    pull(f, 1), pull(f, 2);
    push(f, 1, 1, z, N); /* lead 1: answered at once */
    push(f, 1, 2, z, N); /* lead 2: held */
    push(f, 2, 1, z, N); /* slowest 1: releases worker 1, answers worker 2 */
    push(f, 2, 2, z, N);
    push(f, 1, 3, z, N); /* lead 1 */
    done(f, 2, 2);       /* worker 2 leaves; the slowest is worker 1 itself */
    push(f, 1, 4, z, N);
    done(f, 1, 4);
    assert_int_equal(serve(f, 3), SELSYNC_OK);

    static const int to[] = {1, 2, 1, 1, 2, 2, 1, 1};
    static const uint64_t clock[] = {0, 0, 1, 2, 1, 2, 3, 4};
    for (int i = 0; i < 8; i++) {
        reply r = get_reply(f, i, N);
        assert_int_equal(r.to, to[i]);
        assert_int_equal(r.h.clock, clock[i]);
        if (i == 3) assert_int_equal(r.recvs, 8); /* only after worker 2's update */
    }
    assert_int_equal(f->mock.outbox_n, 16);
    assert_int_equal(check_trace(f, &queued), 8);
    assert_int_equal(queued, 1);
    assert_int_equal(f->stats.queued, 1);
    assert_int_equal(f->stats.max_lead, 1);
}

/* the start stamped on the server's i-th message */
static double sent_at(const fx *f, int i)
{
    double start;
    assert_true(i < f->mock.outbox_n);
    memcpy(&start, f->mock.outbox[i].data, sizeof start);
    return start;
}

static double no_computation(void) { return 0; }

/* In virtual time (the server on a virtual-time communicator): a pull that
 * the bound holds is answered only once the push that releases it has
 * arrived on the server's clock, so its worker waits in virtual time for
 * the slow worker, while a pull the bound allows is answered as soon as
 * its push arrives. */
static void test_server_held_pull_in_virtual_time(void **state)
{
    fx *f = *state;
    const float z[N] = {0};
    const selsync_vnet net = {.bandwidth = 125e6, .latency = 50e-6, .slowdown = 1.0}; /* 1 Gbit/s, 50 us */
    selsync_comm plain = f->comm;
    char err[256];
    double header = selsync_vnet_message(&net, HDR), model = selsync_vnet_message(&net, N * sizeof(float));
    f->mock.rank = 0;
    f->mock.size = 3;
    assert_int_equal(selsync_comm_virtual(plain, &net, no_computation, &f->comm, err, sizeof err), SELSYNC_OK);
    selsync_virtual_hold(&f->comm, 0);
    f->cfg.ssp_staleness = 1;
    f->stamped = 1;
    f->start = 0.0, pull(f, 1), pull(f, 2);
    f->start = 1.0, push(f, 1, 1, z, N); /* lead 1: answered at once */
    f->start = 2.0, push(f, 1, 2, z, N); /* lead 2: held */
    f->start = 9.0, push(f, 2, 1, z, N); /* the slow worker's update releases it */
    f->start = 9.5, done(f, 2, 1);
    f->start = 9.6, done(f, 1, 2);
    assert_int_equal(serve(f, 3), SELSYNC_OK);

    /* replies, header then model: to 1 and 2 at clock 0, to 1 at clock 1,
     * to 1 at clock 2 (held), to 2 at clock 1 */
    assert_int_equal(f->mock.outbox_n, 10);
    assert_int_equal(f->mock.outbox[4].peer, 1);
    assert_int_equal(f->mock.outbox[6].peer, 1);
    assert_int_equal(f->mock.outbox[8].peer, 2);
    double allowed = sent_at(f, 4), held = sent_at(f, 6);
    /* the allowed pull: when its push (started at 1.0) had arrived */
    assert_true(allowed >= 1.0 + header + model && allowed < 2.0);
    /* the held one: not before the releasing push (started at 9.0) arrived */
    assert_true(held >= 9.0 + header + model);
    assert_true(sent_at(f, 8) >= held + header + model); /* one link: after the held reply */
    assert_int_equal(f->stats.queued, 1);
    selsync_comm_virtual_free(&f->comm);
    f->comm = plain;
}

/* Several held pulls, released together when the slowest advances; a
 * worker that is done no longer holds the others back. */
static void test_server_release_and_done(void **state)
{
    fx *f = *state;
    const float z[N] = {0};
    int queued;
    f->cfg.ssp_staleness = 0;
    pull(f, 1), pull(f, 2), pull(f, 3);
    push(f, 1, 1, z, N); /* held: workers 2 and 3 at 0 */
    push(f, 2, 1, z, N); /* held: worker 3 at 0 */
    done(f, 3, 0);       /* worker 3 stops: both released */
    push(f, 2, 2, z, N); /* held by worker 1 */
    push(f, 1, 2, z, N);
    done(f, 1, 2), done(f, 2, 2);
    assert_int_equal(serve(f, 4), SELSYNC_OK);
    reply r1 = get_reply(f, 3, N), r2 = get_reply(f, 4, N);
    assert_int_equal(r1.to, 1);
    assert_int_equal(r2.to, 2);
    assert_int_equal(r1.recvs, 8); /* both after worker 3's DONE (the 8th message) */
    assert_int_equal(r2.recvs, 8);
    assert_int_equal(get_reply(f, 5, N).to, 1); /* worker 1 at 2 releases worker 2 at 2 */
    assert_int_equal(get_reply(f, 6, N).to, 2);
    assert_int_equal(f->mock.outbox_n, 14);
    assert_int_equal(check_trace(f, &queued), 7);
    assert_int_equal(queued, 3);
    /* updates scale by 1/3 even after worker 3 left: W is fixed */
    const float d[N] = {3, 3, 3, 3, 3, 3}, w[4] = {2, 3, 4, 5};
    teardown(state), setup(state), f = *state;
    pull(f, 1), pull(f, 2), pull(f, 3);
    done(f, 2, 0), done(f, 3, 0);
    push(f, 1, 1, d, N);
    done(f, 1, 1);
    assert_int_equal(serve(f, 4), SELSYNC_OK);
    assert_memory_equal(f->w, w, sizeof w);
}

static void expect_protocol_error(void (*script)(fx *), const char *what)
{
    fx *f;
    void *st;
    setup(&st);
    f = st;
    script(f);
    assert_int_equal(serve(f, 3), SELSYNC_EMISMATCH);
    assert_contains(f->err, what);
    teardown(&st);
}

static void s_out_of_order(fx *f) { const float z[N] = {0}; pull(f, 1), pull(f, 2); push(f, 1, 2, z, N); }
static void s_wrong_size(fx *f) { const float z[N] = {0}; pull(f, 1), pull(f, 2); push(f, 1, 1, z, 4); }
static void s_from_server(fx *f) { pull(f, 1), pull(f, 2), pull(f, 0); }
static void s_after_done(fx *f) { pull(f, 1), pull(f, 2); done(f, 1, 0); done(f, 1, 0); }
static void s_push_first(fx *f) { const float z[N] = {0}; push(f, 1, 1, z, N); }
static void s_while_pending(fx *f)
{
    const float z[N] = {0};
    pull(f, 1), pull(f, 2);
    push(f, 1, 1, z, N);
    push(f, 1, 2, z, N);
}
static void s_bad_tag(fx *f) { pull(f, 1), pull(f, 2); hdr_msg(f, 1, 7, 0, 0, 0); }
static void s_late_pull(fx *f)
{
    const float z[N] = {0};
    f->cfg.ssp_staleness = 5; /* the push is answered at once */
    pull(f, 1), pull(f, 2);
    push(f, 1, 1, z, N);
    pull(f, 1);
}

static void test_server_protocol_errors(void **state)
{
    fx *f = *state;
    expect_protocol_error(s_out_of_order, "PUSH out of order");
    expect_protocol_error(s_wrong_size, "another model size");
    expect_protocol_error(s_from_server, "no worker");
    expect_protocol_error(s_after_done, "after DONE");
    expect_protocol_error(s_while_pending, "pending");
    expect_protocol_error(s_bad_tag, "unknown tag");
    expect_protocol_error(s_late_pull, "a second PULL");
    expect_protocol_error(s_push_first, "a message before its PULL");
    /* a worker that never finishes: the mock runs dry instead of waiting */
    pull(f, 1);
    assert_int_equal(serve(f, 2), SELSYNC_ECOMM);
    assert_contains(f->err, "receiving from the workers");
    assert_int_equal(f->mock.recv_starved, 1);
}

static void test_server_rejects(void **state)
{
    fx *f = *state;
    f->mock.rank = 1;
    f->mock.size = 3;
    assert_int_equal(selsync_ssp_serve(&f->cfg, &f->comm, &f->model, NULL, NULL, f->err, sizeof f->err),
                     SELSYNC_EINVAL);
    assert_contains(f->err, "server (rank 0)");
    f->mock.rank = 0;
    f->mock.size = 1;
    assert_int_equal(selsync_ssp_serve(&f->cfg, &f->comm, &f->model, NULL, NULL, f->err, sizeof f->err),
                     SELSYNC_EINVAL);
    selsync_comm single = selsync_comm_single();
    assert_int_equal(selsync_ssp_serve(&f->cfg, &single, &f->model, NULL, NULL, f->err, sizeof f->err),
                     SELSYNC_EINVAL);
}

/* ---- a worker ---- */

static void reply_msg(fx *f, uint64_t clock, double wait, const float *model)
{
    selsync_ssp_header h = {clock, 0, N, wait};
    mock_script_msg(&f->mock, 0, SSP_TAG_REPLY, &h, HDR);
    mock_script_msg(&f->mock, 0, SSP_TAG_DATA, model, N * sizeof(float));
}

static void test_worker_step(void **state)
{
    fx *f = *state;
    selsync_ssp_worker *w;
    selsync_ssp_exchange x;
    selsync_ssp_header h;
    const float m0[N] = {5, 6, 7, 8, 1, 2}, m1[N] = {-1, -2, -3, -4, -5, -6};
    f->mock.rank = 2;
    f->mock.size = 3;
    assert_int_equal(selsync_ssp_worker_create(&f->cfg, &f->comm, &f->model, &w, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(f->mock.send_calls, 0);

    reply_msg(f, 0, 0, m0); /* the initial pull */
    assert_int_equal(selsync_ssp_sync(w, &x), SELSYNC_OK);
    assert_int_equal(f->mock.outbox_n, 1);
    assert_int_equal(f->mock.outbox[0].peer, 0);
    assert_int_equal(f->mock.outbox[0].tag, SSP_TAG_PULL);
    memcpy(&h, f->mock.outbox[0].data, HDR);
    assert_int_equal(h.clock, 0);
    assert_memory_equal(f->w, m0, 4 * sizeof(float));
    assert_memory_equal(f->s, m0 + 4, 2 * sizeof(float));
    assert_int_equal(x.bytes_out, HDR);
    assert_int_equal(x.bytes_in, HDR + N * 4);
    assert_int_equal(selsync_ssp_clock(w), 0);

    /* a step moves the parameters; the push carries exactly the change */
    const float after[N] = {5.5f, 6, 6, 8, 1.25f, 2}, delta[N] = {0.5f, 0, -1, 0, 0.25f, 0};
    memcpy(f->w, after, 4 * sizeof(float));
    memcpy(f->s, after + 4, 2 * sizeof(float));
    reply_msg(f, 1, 0.25, m1);
    assert_int_equal(selsync_ssp_sync(w, &x), SELSYNC_OK);
    assert_int_equal(f->mock.outbox_n, 3);
    assert_int_equal(f->mock.outbox[1].tag, SSP_TAG_PUSH);
    memcpy(&h, f->mock.outbox[1].data, HDR);
    assert_int_equal(h.clock, 1);
    assert_int_equal(h.count, N);
    assert_int_equal(f->mock.outbox[2].tag, SSP_TAG_DATA);
    assert_memory_equal(f->mock.outbox[2].data, delta, sizeof delta);
    assert_memory_equal(f->w, m1, 4 * sizeof(float));
    assert_int_equal(selsync_ssp_clock(w), 1);
    assert_true(x.t_wait == 0.25);
    assert_int_equal(x.bytes_out, HDR + N * 4);
    assert_int_equal(x.bytes_in, HDR + N * 4);
    assert_int_equal(f->mock.bytes, 2 * HDR + N * 4);

    /* no step since the pull: a zero update */
    reply_msg(f, 2, 0, m1);
    assert_int_equal(selsync_ssp_sync(w, &x), SELSYNC_OK);
    const float zero[N] = {0};
    assert_memory_equal(f->mock.outbox[4].data, zero, sizeof zero);

    assert_int_equal(selsync_ssp_done(w), SELSYNC_OK);
    assert_int_equal(f->mock.outbox[5].tag, SSP_TAG_DONE);
    memcpy(&h, f->mock.outbox[5].data, HDR);
    assert_int_equal(h.clock, 2);
    assert_int_equal(selsync_ssp_sync(w, &x), SELSYNC_ESTATE);
    assert_int_equal(f->mock.inbox_n, 0);
    selsync_ssp_worker_destroy(w);
}

static void test_worker_errors(void **state)
{
    fx *f = *state;
    selsync_ssp_worker *w;
    const float m0[N] = {0};
    f->mock.rank = 0;
    f->mock.size = 3;
    assert_int_equal(selsync_ssp_worker_create(&f->cfg, &f->comm, &f->model, &w, f->err, sizeof f->err), SELSYNC_EINVAL);
    assert_null(w);
    assert_contains(f->err, "worker");
    f->mock.rank = 1;
    assert_int_equal(selsync_ssp_worker_create(&f->cfg, &f->comm, &f->model, &w, f->err, sizeof f->err), SELSYNC_OK);
    reply_msg(f, 3, 0, m0); /* a reply for another clock */
    assert_int_equal(selsync_ssp_sync(w, NULL), SELSYNC_EMISMATCH);
    assert_contains(selsync_ssp_worker_error(w), "server's reply");
    assert_int_equal(selsync_ssp_sync(w, NULL), SELSYNC_ECOMM); /* stays broken, first message kept */
    assert_contains(selsync_ssp_worker_error(w), "server's reply");
    selsync_ssp_worker_destroy(w);

    f->mock.fail_send_call = f->mock.send_calls + 1;
    assert_int_equal(selsync_ssp_worker_create(&f->cfg, &f->comm, &f->model, &w, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(selsync_ssp_sync(w, NULL), SELSYNC_ECOMM);
    assert_contains(selsync_ssp_worker_error(w), "initial model");
    selsync_ssp_worker_destroy(w);
}

/* ---- the engine's ssp path ---- */

static void test_engine_worker(void **state)
{
    fx *f = *state;
    selsync_engine *e;
    selsync_totals t;
    const float m0[N] = {1, 2, 3, 4, 10, 20};
    f->mock.rank = 1;
    f->mock.size = 3;
    assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
    reply_msg(f, 0, 0, m0);
    assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, &f->model, &e, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(f->mock.outbox[0].tag, SSP_TAG_PULL); /* the initial pull, at create */

    reply_msg(f, 1, 0.5, m0);
    assert_int_equal(selsync_engine_before_update(e, 1.0, 0.1), SELSYNC_OK);
    f->w[0] += 1; /* the host's update */
    assert_int_equal(selsync_engine_after_update(e), SELSYNC_OK);
    const selsync_step *s = selsync_engine_last_step(e);
    assert_int_equal(s->decision, SELSYNC_SYNC_STEP);
    assert_int_equal(s->layers_synced, 1);
    assert_int_equal(s->bytes_sent, 2 * (HDR + N * 4)); /* pushed + pulled */
    assert_true(s->t_agree > 0 && s->t_transfer == 0); /* the wait, capped at the exchange's time */
    assert_int_equal(f->mock.outbox[1].tag, SSP_TAG_PUSH);
    assert_true(f->w[0] == 1); /* the pulled model replaced the local one */
    assert_int_equal(f->mock.sum_calls + f->mock.any_calls, 0); /* no collective */

    assert_int_equal(selsync_engine_finish(e), SELSYNC_OK);
    assert_int_equal(f->mock.outbox[3].tag, SSP_TAG_DONE);
    selsync_engine_get_totals(e, &t);
    assert_int_equal(t.steps, 1);
    assert_int_equal(t.synced_steps, 1);
    assert_int_equal(t.bytes_sent, HDR + (HDR + N * 4) + 2 * (HDR + N * 4) + HDR);
    assert_int_equal(t.bsp_bytes, N * 4); /* ring all-reduce over 2 workers: 2 (W-1)/W */
    assert_int_equal(selsync_engine_serve(e, NULL, NULL), SELSYNC_ESTATE);
    selsync_engine_destroy(e);
}

static void test_engine_server(void **state)
{
    fx *f = *state;
    selsync_engine *e;
    selsync_ssp_stats st;
    selsync_totals t;
    const float d[N] = {1, 1, 1, 1, 1, 1};
    f->mock.rank = 0;
    f->mock.size = 2;
    assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, &f->model, &e, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(f->mock.send_calls + f->mock.recv_calls, 0);
    assert_int_equal(selsync_engine_before_update(e, 0, 0), SELSYNC_ESTATE);
    assert_contains(selsync_engine_error(e), "parameter server");
    pull(f, 1);
    push(f, 1, 1, d, N);
    done(f, 1, 1);
    assert_int_equal(selsync_engine_serve(e, NULL, &st), SELSYNC_OK);
    assert_int_equal(st.pushes, 1);
    assert_true(f->w[3] == 5 && f->s[1] == 21);
    assert_int_equal(selsync_engine_serve(e, NULL, &st), SELSYNC_ESTATE);
    assert_int_equal(selsync_engine_finish(e), SELSYNC_OK);
    selsync_engine_get_totals(e, &t);
    assert_int_equal(t.steps, 0);
    assert_int_equal(t.bytes_sent, 2 * (HDR + N * 4));
    assert_int_equal(t.bsp_bytes, 0);
    selsync_engine_destroy(e);

    /* one process: the configuration already refuses ssp */
    selsync_comm single = selsync_comm_single();
    assert_int_equal(selsync_engine_create(&f->cfg, &single, &f->model, &e, f->err, sizeof f->err), SELSYNC_ECONFIG);
    assert_contains(f->err, "at least 2 ranks");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_server_scaled_updates),
        T(test_server_clean_start),
        T(test_server_trained_only),
        T(test_server_bound),
        T(test_server_release_and_done),
        T(test_server_held_pull_in_virtual_time),
        T(test_server_protocol_errors),
        T(test_server_rejects),
        T(test_worker_step),
        T(test_worker_errors),
        T(test_engine_worker),
        T(test_engine_server),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
