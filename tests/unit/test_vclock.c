/* Unit tests for virtual time (plugin/core/vclock.c): the SELSYNC_VIRTUAL
 * parser, the network model's costs, and the clock's rules against the
 * scripted mock with a clock of computation the test sets: the latest
 * clock plus the cost of each collective, background sums that overlap
 * computation, slow-down, point-to-point stamps
 * and the queue of a receiver, holds, bytes, failures; with the real
 * thread CPU clock, a rank that sleeps adds no computation (with compute=wall
 * it does). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mock_comm.h"
#include "selsync/vclock.h"

enum { RANKS = 4 };

static double fake_cpu; /* the clock of computation the tests advance */
static double cpu(void) { return fake_cpu; }

/* 1 Gbit/s (125e6 bytes/s), 50 us */
static const selsync_vnet gigabit = {.bandwidth = 125e6, .latency = 50e-6, .slowdown = 1.0};

typedef struct fx {
    mock_comm mock;
    selsync_comm vc;
    double remote[8]; /* the other ranks' clocks in the next exchange (and the test's sum_f64 of 5) */
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    char err[256];
    fake_cpu = 100.0;
    mock_init(&f->mock, 0, RANKS);
    f->mock.remote_f64 = f->remote;
    assert_int_equal(selsync_comm_virtual(mock_as_comm(&f->mock), &gigabit, cpu, &f->vc, err, sizeof err), SELSYNC_OK);
    selsync_virtual_hold(&f->vc, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    selsync_comm_virtual_free(&f->vc);
    assert_null(f->vc.ops);
    free(f);
    return 0;
}

static selsync_vclock clock_of(const selsync_comm *c)
{
    selsync_vclock v;
    assert_int_equal(selsync_virtual_clock(c, &v), 1);
    return v;
}

/* ---- the parser ---- */

static void parse_accepts_rates_times_and_slowdowns(void **state)
{
    (void)state;
    selsync_vnet n;
    char err[512], text[128];
    assert_int_equal(selsync_vnet_parse("bandwidth=1Gbit,latency=50us", 0, &n, err, sizeof err), SELSYNC_OK);
    assert_true(n.bandwidth == 125e6 && n.latency == 50e-6 && n.slowdown == 1.0);
    selsync_vnet_describe(&n, text, sizeof text);
    assert_string_equal(text, "1 Gbit/s, latency 50 us");
    assert_int_equal(selsync_vnet_parse("latency=0.2ms,bandwidth=100Mbit,slow=1:2+3:1.5", 3, &n, err, sizeof err),
                     SELSYNC_OK);
    assert_true(n.bandwidth == 12.5e6 && fabs(n.latency - 2e-4) < 1e-12 && n.slowdown == 1.5);
    selsync_vnet_describe(&n, text, sizeof text);
    assert_string_equal(text, "100 Mbit/s, latency 200 us, this rank 1.5x slower");
    assert_int_equal(selsync_vnet_parse("bandwidth=10Gbit,latency=0s,slow=1:2", 2, &n, err, sizeof err), SELSYNC_OK);
    assert_true(n.bandwidth == 1.25e9 && n.latency == 0.0 && n.slowdown == 1.0 && !n.wall);
    assert_int_equal(selsync_vnet_parse("bandwidth=1Gbit,latency=50us,compute=wall", 0, &n, err, sizeof err),
                     SELSYNC_OK);
    assert_true(n.wall);
    selsync_vnet_describe(&n, text, sizeof text);
    assert_string_equal(text, "1 Gbit/s, latency 50 us, computation in wall time");
    assert_int_equal(selsync_vnet_parse("compute=cpu,bandwidth=1Gbit,latency=50us", 0, &n, err, sizeof err),
                     SELSYNC_OK);
    assert_true(!n.wall && n.jitter_p == 0);
    assert_int_equal(selsync_vnet_parse("bandwidth=1Gbit,latency=50us,jitter=0.02:50ms:7", 0, &n, err, sizeof err),
                     SELSYNC_OK);
    assert_true(n.jitter_p == 0.02 && fabs(n.jitter_t - 0.05) < 1e-12 && n.jitter_seed == 7);
    selsync_vnet_describe(&n, text, sizeof text);
    assert_string_equal(text, "1 Gbit/s, latency 50 us, pauses of 50 ms with probability 0.02 per step (seed 7)");
    assert_int_equal(selsync_vnet_parse("jitter=1:2s,bandwidth=1Gbit,latency=50us", 0, &n, err, sizeof err),
                     SELSYNC_OK);
    assert_true(n.jitter_p == 1 && n.jitter_t == 2 && n.jitter_seed == 1);
}

/* ---- the jitter's draws ---- */

static void jitter_draws_follow_seed_rank_and_step(void **state)
{
    (void)state;
    selsync_vnet a = gigabit, b = gigabit, never = gigabit, always = gigabit;
    a.jitter_p = b.jitter_p = 0.02;
    a.jitter_t = b.jitter_t = never.jitter_t = always.jitter_t = 0.1;
    a.jitter_seed = 1;
    b.jitter_seed = 2;
    always.jitter_p = 1;
    int in_a = 0, in_b = 0, differ_seed = 0, differ_rank = 0;
    for (uint64_t step = 0; step < 20000; step++) {
        int pa = selsync_vnet_pauses(&a, 3, step);
        assert_int_equal(pa, selsync_vnet_pauses(&a, 3, step)); /* a function of its inputs */
        in_a += pa;
        in_b += selsync_vnet_pauses(&b, 3, step);
        differ_seed += pa != selsync_vnet_pauses(&b, 3, step);
        differ_rank += pa != selsync_vnet_pauses(&a, 4, step);
        assert_false(selsync_vnet_pauses(&never, 3, step));
        assert_true(selsync_vnet_pauses(&always, 3, step));
    }
    /* 400 expected of 20000 at 2 %, standard deviation 20: 6 of them either side */
    assert_in_range(in_a, 280, 520);
    assert_in_range(in_b, 280, 520);
    /* two independent draws at 2 % disagree on about 3.9 % of the steps */
    assert_in_range(differ_seed, 500, 1100);
    assert_in_range(differ_rank, 500, 1100);
    a.jitter_t = 0; /* pauses of no time are no pauses */
    assert_false(selsync_vnet_pauses(&a, 3, 0) || selsync_vnet_pauses(&always, 3, 0) == 0);
}

static void parse_refuses_what_it_does_not_understand(void **state)
{
    (void)state;
    static const struct { const char *spec, *names; } bad[] = {
        {"bandwidth=1Gbit", "latency is missing"},
        {"latency=50us", "bandwidth is missing"},
        {"", "bandwidth is missing"},
        {"bandwidth=1GB,latency=50us", "'bandwidth=1GB'"},
        {"bandwidth=0Gbit,latency=50us", "'bandwidth=0Gbit'"},
        {"bandwidth=0x10Gbit,latency=50us", "'bandwidth=0x10Gbit'"},
        {"bandwidth=1Gbit,latency=-5us", "'latency=-5us'"},
        {"bandwidth=1Gbit,latency=50", "'latency=50'"},
        {"bandwidth=1Gbit,latency=50us,slow=1:0.5", "'slow=1:0.5'"},
        {"bandwidth=1Gbit,latency=50us,slow=1.5:2", "'slow=1.5:2'"},
        {"bandwidth=1Gbit,latency=50us,slow=1:2+", "'slow=1:2+'"},
        {"bandwidth=1Gbit,latency=50us,jitter=1ms", "'jitter=1ms'"},
        {"bandwidth=1Gbit,latency=50us,jitter=1.5:1ms", "'jitter=1.5:1ms'"},
        {"bandwidth=1Gbit,latency=50us,jitter=0.1:1", "'jitter=0.1:1'"},
        {"bandwidth=1Gbit,latency=50us,jitter=0.1:1ms:", "'jitter=0.1:1ms:'"},
        {"bandwidth=1Gbit,latency=50us,jitter=0.1:1ms:2.5", "'jitter=0.1:1ms:2.5'"},
        {"bandwidth=1Gbit,latency=50us,jitter=0.1:1ms:3:4", "'jitter=0.1:1ms:3:4'"},
        {"bandwidth=1Gbit,latency=50us,compute=walls", "'compute=walls'"},
        {"bandwidth=1Gbit,latency=50us,compute=", "'compute='"},
        {"bandwidth=1Gbit,,latency=50us", "''"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        selsync_vnet n = {.bandwidth = 7, .latency = 7, .slowdown = 7};
        char err[512] = "";
        assert_int_equal(selsync_vnet_parse(bad[i].spec, 0, &n, err, sizeof err), SELSYNC_ECONFIG);
        assert_non_null(strstr(err, "SELSYNC_VIRTUAL="));
        if (!strstr(err, bad[i].names)) fail_msg("'%s': message '%s' lacks '%s'", bad[i].spec, err, bad[i].names);
        assert_true(n.bandwidth == 7); /* untouched */
    }
}

/* ---- the costs ---- */

static void costs_follow_the_model(void **state)
{
    (void)state;
    const selsync_vnet *n = &gigabit;
    assert_true(selsync_vnet_ring(n, 1, 1e9) == 0.0 && selsync_vnet_tree(n, 1, 1e9) == 0.0);
    /* 2(N-1)/N S/B + 2(N-1) L */
    assert_true(fabs(selsync_vnet_ring(n, 4, 1e6) - (1.5 * 1e6 / 125e6 + 6 * 50e-6)) < 1e-12);
    /* ceil(log2 N) (L + S/B) */
    assert_true(fabs(selsync_vnet_tree(n, 16, 1000) - 4 * (50e-6 + 1000 / 125e6)) < 1e-12);
    assert_true(fabs(selsync_vnet_tree(n, 5, 1000) - 3 * (50e-6 + 1000 / 125e6)) < 1e-12);
    assert_true(fabs(selsync_vnet_message(n, 1e6) - (50e-6 + 1e6 / 125e6)) < 1e-12);
    /* all members: the ring; 1 of 4: each of 3 non-members takes it all from the one member */
    assert_true(selsync_vnet_among(n, 4, 4, 1e6) == selsync_vnet_ring(n, 4, 1e6));
    assert_true(fabs(selsync_vnet_among(n, 4, 1, 1e6) - (50e-6 + 3e6 / 125e6)) < 1e-12);
    /* 2 of 4: a non-member takes the whole sum, 1e6 bytes */
    assert_true(fabs(selsync_vnet_among(n, 4, 2, 1e6) - (selsync_vnet_ring(n, 2, 1e6) + 50e-6 + 1e6 / 125e6)) < 1e-12);
}

/* ---- the clock ---- */

static void the_clock_starts_held_at_zero(void **state)
{
    (void)state;
    mock_comm m;
    selsync_comm vc;
    char err[256];
    float x[2] = {1, 2};
    fake_cpu = 5.0;
    mock_init(&m, 0, RANKS);
    assert_int_equal(selsync_comm_virtual(mock_as_comm(&m), &gigabit, cpu, &vc, err, sizeof err), SELSYNC_OK);
    fake_cpu = 9.0; /* building the network, loading weights: not training */
    assert_int_equal(vc.ops->sum_f32(vc.ctx, x, 2), SELSYNC_OK);
    assert_int_equal(m.f64_calls, 0); /* no clocks exchanged while held */
    assert_true(clock_of(&vc).now == 0.0);
    selsync_virtual_hold(&vc, 0);
    fake_cpu = 10.0;
    assert_true(clock_of(&vc).now == 1.0 && clock_of(&vc).compute == 1.0);
    selsync_comm_virtual_free(&vc);
}

static void a_collective_takes_the_latest_clock_plus_its_cost(void **state)
{
    fx *f = *state;
    float x[1000] = {0};
    fake_cpu += 1.0; /* this rank computes 1 s */
    f->remote[1] = 3.0, f->remote[2] = 0.5, f->remote[3] = 2.0;
    assert_int_equal(f->vc.ops->sum_f32(f->vc.ctx, x, 1000), SELSYNC_OK);
    selsync_vclock v = clock_of(&f->vc);
    double cost = selsync_vnet_ring(&gigabit, RANKS, 4000);
    assert_true(v.now == 3.0 + cost);
    assert_true(v.compute == 1.0 && v.wait == 2.0 && v.network == cost);
    assert_int_equal(f->mock.f64_calls, 1);
    assert_int_equal(f->mock.sum_calls, 1); /* and the sum itself */
    /* the latest clock is this rank's own: no waiting */
    memset(f->remote, 0, sizeof f->remote);
    fake_cpu += 0.25;
    assert_int_equal(f->vc.ops->sum_f32(f->vc.ctx, x, 10), SELSYNC_OK);
    v = clock_of(&f->vc);
    assert_true(fabs(v.now - (3.25 + cost + selsync_vnet_ring(&gigabit, RANKS, 40))) < 1e-12);
    assert_true(v.wait == 2.0);
}

/* Background sums: computation goes on while they run; they run one after
 * another, each from the latest start of its participants; wait_sums moves
 * the clock on only by what was not hidden. */
static void background_sums_overlap_computation(void **state)
{
    fx *f = *state;
    float a[1000] = {0}, b[1000] = {0};
    selsync_segment sa = {a, 1000}, sb = {b, 1000};
    double cost = selsync_vnet_ring(&gigabit, RANKS, 4000);
    selsync_vclock v0 = clock_of(&f->vc), v;
    /* hidden: 1 s of computation after the start, the others started earlier */
    assert_int_equal(f->vc.ops->sum_f32v_start(f->vc.ctx, &sa, 1, 0.25f), SELSYNC_OK);
    assert_int_equal(f->mock.sum_calls, 1); /* the mock sums at once; the clock does not move */
    assert_true(clock_of(&f->vc).now == v0.now);
    fake_cpu += 1.0;
    assert_int_equal(f->vc.ops->wait_sums(f->vc.ctx), SELSYNC_OK);
    v = clock_of(&f->vc);
    assert_true(v.now == v0.now + 1.0 && v.network == v0.network && v.wait == v0.wait);
    assert_int_equal(f->mock.f64_calls, 1); /* the start clocks, at the wait */
    /* two sums back to back, 1e-4 s of computation: the rest of both is exposed */
    v0 = v;
    assert_int_equal(f->vc.ops->sum_f32v_start(f->vc.ctx, &sa, 1, 0.25f), SELSYNC_OK);
    assert_int_equal(f->vc.ops->sum_f32v_start(f->vc.ctx, &sb, 1, 0.25f), SELSYNC_OK);
    fake_cpu += 1e-4;
    assert_int_equal(f->vc.ops->wait_sums(f->vc.ctx), SELSYNC_OK);
    v = clock_of(&f->vc);
    assert_true(fabs(v.now - (v0.now + 2 * cost)) < 1e-12);
    assert_true(fabs(v.network - (v0.network + 2 * cost - 1e-4)) < 1e-12 && v.wait == v0.wait);
    /* rank 2 starts the second sum 0.5 s later: this rank waits for it */
    v0 = v;
    memset(f->remote, 0, sizeof f->remote);
    f->remote[RANKS + 2] = v0.now + 0.5;
    assert_int_equal(f->vc.ops->sum_f32v_start(f->vc.ctx, &sa, 1, 0.25f), SELSYNC_OK);
    assert_int_equal(f->vc.ops->sum_f32v_start(f->vc.ctx, &sb, 1, 0.25f), SELSYNC_OK);
    fake_cpu += 0.2;
    assert_int_equal(f->vc.ops->wait_sums(f->vc.ctx), SELSYNC_OK);
    v = clock_of(&f->vc);
    assert_true(fabs(v.now - (v0.now + 0.5 + cost)) < 1e-12);
    assert_true(v.network == v0.network); /* its own two sums would have ended within the 0.2 s */
    assert_true(fabs(v.wait - (v0.wait + 0.3 + cost)) < 1e-12);
    /* a wait with nothing started exchanges nothing */
    assert_int_equal(f->vc.ops->wait_sums(f->vc.ctx), SELSYNC_OK);
    assert_int_equal(f->mock.f64_calls, 3);
}

/* Small sums started without blocking (sum_f64_start): the clocks are
 * traded at the start, computation goes on, and wait_f64 waits only for a
 * rank that started later, oldest sum first. */
static void small_sums_wait_only_for_later_starts(void **state)
{
    fx *f = *state;
    double a[3] = {1, 2, 3}, b[3] = {0};
    double cost = selsync_vnet_tree(&gigabit, RANKS, 24);
    selsync_vclock v0 = clock_of(&f->vc), v;
    /* every rank started at this rank's clock: 1 s of computation hides it */
    memset(f->remote, 0, sizeof f->remote);
    assert_int_equal(f->vc.ops->sum_f64_start(f->vc.ctx, a, 3), SELSYNC_OK);
    assert_int_equal(f->mock.f64_calls, 2); /* the clocks, then the sum (the mock's at once) */
    assert_true(clock_of(&f->vc).now == v0.now);
    /* rank 3 starts the second one 2 s later than this rank */
    f->remote[3] = v0.now + 2.0;
    fake_cpu += 0.5;
    assert_int_equal(f->vc.ops->sum_f64_start(f->vc.ctx, b, 3), SELSYNC_OK);
    fake_cpu += 0.5;
    assert_int_equal(f->vc.ops->wait_f64(f->vc.ctx), SELSYNC_OK); /* the first: hidden */
    v = clock_of(&f->vc);
    assert_true(v.now == v0.now + 1.0 && v.wait == v0.wait && v.network == v0.network);
    assert_int_equal(f->vc.ops->wait_f64(f->vc.ctx), SELSYNC_OK); /* the second: rank 3's start + cost */
    v = clock_of(&f->vc);
    assert_true(fabs(v.now - (v0.now + 2.0 + cost)) < 1e-12);
    assert_true(fabs(v.wait - (v0.wait + 1.0 + cost)) < 1e-12 && v.network == v0.network);
    /* a wait with nothing started moves nothing */
    assert_int_equal(f->vc.ops->wait_f64(f->vc.ctx), SELSYNC_OK);
    assert_true(clock_of(&f->vc).now == v.now);
    /* started while held: no clock traded, the wait moves nothing */
    selsync_virtual_hold(&f->vc, 1);
    assert_int_equal(f->vc.ops->sum_f64_start(f->vc.ctx, a, 3), SELSYNC_OK);
    selsync_virtual_hold(&f->vc, 0);
    assert_int_equal(f->mock.f64_calls, 5);
    assert_int_equal(f->vc.ops->wait_f64(f->vc.ctx), SELSYNC_OK);
    assert_true(clock_of(&f->vc).now == v.now);
}

static void each_collective_has_its_cost(void **state)
{
    fx *f = *state;
    uint8_t flags[3] = {0, 1, 0};
    double d[5] = {0};
    float a[6] = {0}, b[4] = {0};
    selsync_segment segs[2] = {{a, 6}, {b, 4}};
    int members[2] = {0, 2};
    char bytes[300] = {0};
    const struct { const char *what; double cost; } want[] = {
        {"any", selsync_vnet_tree(&gigabit, RANKS, 3)},
        {"sum_f64", selsync_vnet_tree(&gigabit, RANKS, 40)},
        {"bcast", selsync_vnet_tree(&gigabit, RANKS, 300)},
        {"sum_f32v", selsync_vnet_ring(&gigabit, RANKS, 40)},
        {"sum_f32v_among", selsync_vnet_among(&gigabit, RANKS, 2, 40)},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double before = clock_of(&f->vc).now;
        selsync_status st = i == 0 ? f->vc.ops->any(f->vc.ctx, flags, 3)
                            : i == 1 ? f->vc.ops->sum_f64(f->vc.ctx, d, 5)
                            : i == 2 ? f->vc.ops->bcast(f->vc.ctx, bytes, 300, 0)
                            : i == 3 ? f->vc.ops->sum_f32v(f->vc.ctx, segs, 2, 0.5f)
                                     : f->vc.ops->sum_f32v_among(f->vc.ctx, segs, 2, 0.5f, members, 2);
        assert_int_equal(st, SELSYNC_OK);
        double took = clock_of(&f->vc).now - before;
        if (fabs(took - want[i].cost) > 1e-15) fail_msg("%s: %.9g s, want %.9g s", want[i].what, took, want[i].cost);
    }
    assert_int_equal(f->mock.any_calls, 1);
    assert_int_equal(f->mock.bcast_calls, 1);
    assert_int_equal(f->mock.among_calls, 1);
    assert_int_equal(f->mock.f64_calls, 5 + 1); /* a clock exchange each, and the sum_f64 itself */
}

/* *vc: rank 1 of RANKS over the mock m (the others' clocks all 0 in
 * remote), with net, the fake CPU clock at 0. */
static void virtual_rank_1(mock_comm *m, double *remote, const selsync_vnet *net, selsync_comm *vc)
{
    char err[256];
    fake_cpu = 0;
    mock_init(m, 1, RANKS);
    m->remote_f64 = remote;
    assert_int_equal(selsync_comm_virtual(mock_as_comm(m), net, cpu, vc, err, sizeof err), SELSYNC_OK);
}

static void a_slow_rank_computes_longer(void **state)
{
    (void)state;
    mock_comm m;
    selsync_comm vc;
    selsync_vnet slow = gigabit;
    double remote[RANKS] = {0};
    uint8_t flag = 0;
    slow.slowdown = 2.5;
    virtual_rank_1(&m, remote, &slow, &vc);
    selsync_virtual_hold(&vc, 0);
    fake_cpu = 2.0;
    assert_true(clock_of(&vc).compute == 5.0);
    assert_int_equal(vc.ops->any(vc.ctx, &flag, 1), SELSYNC_OK);
    assert_true(clock_of(&vc).now == 5.0 + selsync_vnet_tree(&slow, RANKS, 1));
    selsync_comm_virtual_free(&vc);
}

static void a_pausing_rank_is_late_to_the_next_collective(void **state)
{
    (void)state;
    mock_comm m;
    selsync_comm vc;
    selsync_vnet jit = gigabit;
    double remote[RANKS] = {0};
    char err[256];
    uint8_t flag = 0;
    jit.jitter_p = 1;
    jit.jitter_t = 0.5;
    virtual_rank_1(&m, remote, &jit, &vc);
    vc.ops->step_begins(vc.ctx, 0); /* held: no pause */
    assert_true(clock_of(&vc).now == 0 && clock_of(&vc).pauses == 0);
    selsync_virtual_hold(&vc, 0);
    fake_cpu = 1.0;
    vc.ops->step_begins(vc.ctx, 1);
    selsync_vclock c = clock_of(&vc);
    assert_true(c.compute == 1.0 && c.paused == 0.5 && c.pauses == 1 && c.now == 1.5);
    assert_int_equal(vc.ops->any(vc.ctx, &flag, 1), SELSYNC_OK);
    assert_true(clock_of(&vc).now == 1.5 + selsync_vnet_tree(&jit, RANKS, 1));
    jit.jitter_p = 1.5;
    selsync_comm bad;
    assert_int_equal(selsync_comm_virtual(mock_as_comm(&m), &jit, cpu, &bad, err, sizeof err), SELSYNC_EINVAL);
    selsync_comm_virtual_free(&vc);
}

/* The mock's sum_f32, behind one that spins for 5 s of CPU time. */
static selsync_status (*mock_sum_f32)(void *ctx, float *buf, size_t n);
static selsync_status spinning_sum_f32(void *ctx, float *buf, size_t n)
{
    fake_cpu += 5.0;
    return mock_sum_f32(ctx, buf, n);
}

static void time_inside_a_collective_is_not_computation(void **state)
{
    (void)state;
    mock_comm m;
    selsync_comm vc, inner;
    selsync_comm_ops spinning;
    char err[256];
    float x[4] = {0};
    fake_cpu = 0;
    mock_init(&m, 0, 1);
    inner = mock_as_comm(&m);
    spinning = *inner.ops;
    mock_sum_f32 = spinning.sum_f32;
    spinning.sum_f32 = spinning_sum_f32;
    inner.ops = &spinning;
    assert_int_equal(selsync_comm_virtual(inner, &gigabit, cpu, &vc, err, sizeof err), SELSYNC_OK);
    selsync_virtual_hold(&vc, 0);
    fake_cpu += 1.0;
    assert_int_equal(vc.ops->sum_f32(vc.ctx, x, 4), SELSYNC_OK);
    assert_true(fake_cpu == 6.0);
    assert_true(clock_of(&vc).compute == 1.0 && clock_of(&vc).now == 1.0);  /* one rank: no cost */
    selsync_comm_virtual_free(&vc);
}

static void holding_stops_the_clock(void **state)
{
    fx *f = *state;
    float x[8] = {0};
    fake_cpu += 1.0;
    selsync_virtual_hold(&f->vc, 1); /* an evaluation */
    double at = clock_of(&f->vc).now;
    uint64_t bytes = f->mock.bytes;
    fake_cpu += 30.0;
    f->remote[2] = 1e6;
    assert_int_equal(f->vc.ops->sum_f32(f->vc.ctx, x, 8), SELSYNC_OK);
    assert_true(clock_of(&f->vc).now == at && at == 1.0);
    assert_int_equal(f->mock.f64_calls, 0);
    assert_int_equal(f->mock.bytes - bytes, 32); /* the sum alone */
    selsync_virtual_hold(&f->vc, 0);
    f->remote[2] = 0;
    fake_cpu += 0.5;
    assert_true(clock_of(&f->vc).now == 1.5);
}

static void clocks_and_stamps_are_not_counted_as_bytes(void **state)
{
    fx *f = *state;
    float x[10] = {0};
    char msg[100] = {0};
    assert_int_equal(f->vc.ops->sum_f32(f->vc.ctx, x, 10), SELSYNC_OK);
    assert_int_equal(f->vc.ops->bytes_sent(f->vc.ctx), 40);
    assert_int_equal(f->vc.ops->send(f->vc.ctx, 1, 7, msg, sizeof msg), SELSYNC_OK);
    assert_int_equal(f->vc.ops->bytes_sent(f->vc.ctx), 140);
    assert_true(f->mock.bytes > 140); /* what the transport really moved */
}

static void a_message_carries_its_start_and_occupies_both_links(void **state)
{
    fx *f = *state;
    unsigned char payload[100], out[100], stamped[8 + 100];
    selsync_msg got;
    double start;
    for (int i = 0; i < 100; i++) payload[i] = (unsigned char)i;
    fake_cpu += 2.0;
    assert_int_equal(f->vc.ops->send(f->vc.ctx, 3, 5, payload, sizeof payload), SELSYNC_OK);
    double cost = selsync_vnet_message(&gigabit, 100);
    /* the transport carried the start, then the payload */
    assert_int_equal(f->mock.outbox_n, 1);
    assert_int_equal(f->mock.outbox[0].bytes, 108);
    memcpy(&start, f->mock.outbox[0].data, sizeof start);
    assert_true(start == 2.0);
    assert_memory_equal(f->mock.outbox[0].data + 8, payload, 100);
    assert_true(clock_of(&f->vc).now == 2.0 + cost); /* the sender's link was busy */
    /* a message that started later than this clock: waits for it, then its transfer */
    start = 10.0;
    memcpy(stamped, &start, 8);
    memcpy(stamped + 8, payload, 100);
    mock_script_msg(&f->mock, 2, 9, stamped, sizeof stamped);
    /* and one that started earlier: queued behind the first on this rank's link */
    start = 1.0;
    memcpy(stamped, &start, 8);
    mock_script_msg(&f->mock, 1, 9, stamped, sizeof stamped);
    assert_int_equal(f->vc.ops->recv(f->vc.ctx, SELSYNC_ANY, 9, out, sizeof out, &got), SELSYNC_OK);
    assert_true(got.source == 2 && got.tag == 9 && got.bytes == 100);
    assert_memory_equal(out, payload, 100);
    assert_true(clock_of(&f->vc).now == 10.0 + cost);
    assert_int_equal(f->vc.ops->recv(f->vc.ctx, SELSYNC_ANY, 9, out, sizeof out, &got), SELSYNC_OK);
    assert_true(clock_of(&f->vc).now == 10.0 + 2 * cost);
    assert_true(clock_of(&f->vc).wait == 10.0 - (2.0 + cost));
}

static void a_message_without_a_clock_is_refused(void **state)
{
    fx *f = *state;
    char out[16];
    mock_script_msg(&f->mock, 1, 0, "abc", 3);
    assert_int_equal(f->vc.ops->recv(f->vc.ctx, 1, 0, out, sizeof out, NULL), SELSYNC_ECOMM);
}

static void failures_pass_through_and_leave_the_clock(void **state)
{
    fx *f = *state;
    float x[4] = {0};
    fake_cpu += 1.0;
    f->remote[1] = 50.0;
    f->mock.fail_sum_call = 1;
    assert_int_equal(f->vc.ops->sum_f32(f->vc.ctx, x, 4), SELSYNC_ECOMM);
    assert_true(clock_of(&f->vc).now == 1.0);
    assert_string_equal(f->vc.ops->last_error(f->vc.ctx), "mock communicator: call failed as scripted");
    f->vc.ops->abort(f->vc.ctx, 3, "stop");
    assert_int_equal(f->mock.abort_calls, 1);
    assert_int_equal(f->vc.ops->rank(f->vc.ctx), 0);
    assert_int_equal(f->vc.ops->size(f->vc.ctx), RANKS);
}

static void only_virtual_communicators_have_a_clock(void **state)
{
    (void)state;
    selsync_comm single = selsync_comm_single();
    selsync_vnet none = {.slowdown = 1};
    selsync_comm out;
    char err[256];
    assert_int_equal(selsync_virtual_clock(&single, NULL), 0);
    selsync_virtual_hold(&single, 1); /* no effect, no crash */
    assert_int_equal(selsync_comm_virtual(single, &none, NULL, &out, err, sizeof err), SELSYNC_EINVAL);
}

static void a_rank_that_sleeps_adds_no_computation(void **state)
{
    (void)state;
    mock_comm m;
    selsync_comm vc;
    char err[256];
    struct timespec nap = {0, 200 * 1000 * 1000};
    volatile double sink = 0;
    mock_init(&m, 0, 1);
    assert_int_equal(selsync_comm_virtual(mock_as_comm(&m), &gigabit, NULL, &vc, err, sizeof err), SELSYNC_OK);
    selsync_virtual_hold(&vc, 0);
    nanosleep(&nap, NULL);
    double slept = clock_of(&vc).compute;
    assert_true(slept < 0.1); /* 0.2 s asleep: next to nothing on this thread's CPU clock */
    for (long i = 0; i < 20 * 1000 * 1000; i++) sink += (double)i * 1e-9;
    assert_true(clock_of(&vc).compute > slept); /* work is counted */
    selsync_comm_virtual_free(&vc);
}

static void with_compute_wall_a_rank_that_sleeps_computes(void **state)
{
    (void)state;
    mock_comm m;
    selsync_comm vc;
    char err[256];
    struct timespec nap = {0, 200 * 1000 * 1000};
    selsync_vnet wall = gigabit;
    wall.wall = 1;
    mock_init(&m, 0, 1);
    assert_int_equal(selsync_comm_virtual(mock_as_comm(&m), &wall, NULL, &vc, err, sizeof err), SELSYNC_OK);
    selsync_virtual_hold(&vc, 0);
    nanosleep(&nap, NULL);
    assert_true(clock_of(&vc).compute >= 0.2); /* the host's time, whatever the thread did */
    selsync_comm_virtual_free(&vc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_accepts_rates_times_and_slowdowns),
        cmocka_unit_test(parse_refuses_what_it_does_not_understand),
        cmocka_unit_test(costs_follow_the_model),
        cmocka_unit_test(the_clock_starts_held_at_zero),
        cmocka_unit_test_setup_teardown(a_collective_takes_the_latest_clock_plus_its_cost, setup, teardown),
        cmocka_unit_test_setup_teardown(each_collective_has_its_cost, setup, teardown),
        cmocka_unit_test_setup_teardown(background_sums_overlap_computation, setup, teardown),
        cmocka_unit_test_setup_teardown(small_sums_wait_only_for_later_starts, setup, teardown),
        cmocka_unit_test(a_slow_rank_computes_longer),
        cmocka_unit_test(jitter_draws_follow_seed_rank_and_step),
        cmocka_unit_test(a_pausing_rank_is_late_to_the_next_collective),
        cmocka_unit_test(time_inside_a_collective_is_not_computation),
        cmocka_unit_test_setup_teardown(holding_stops_the_clock, setup, teardown),
        cmocka_unit_test_setup_teardown(clocks_and_stamps_are_not_counted_as_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(a_message_carries_its_start_and_occupies_both_links, setup, teardown),
        cmocka_unit_test_setup_teardown(a_message_without_a_clock_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(failures_pass_through_and_leave_the_clock, setup, teardown),
        cmocka_unit_test(only_virtual_communicators_have_a_clock),
        cmocka_unit_test(a_rank_that_sleeps_adds_no_computation),
        cmocka_unit_test(with_compute_wall_a_rank_that_sleeps_computes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
