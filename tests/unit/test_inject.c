/* Unit tests for data injection (plugin/core/inject.c), against the
 * scripted mock communicator. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "mock_comm.h"
#include "selsync/inject.h"
#include "selsync/rng.h"

static void assert_contains(const char *s, const char *needle)
{
    if (!strstr(s, needle)) fail_msg("expected \"%s\" in \"%s\"", needle, s);
}

/* A config with inject_alpha on line 7 and inject_beta on line 8. */
static selsync_config injecting(const char *alpha, const char *beta)
{
    selsync_config c;
    char err[256];
    selsync_config_default(&c, "net.cfg", 2);
    if (selsync_config_set(&c, "inject_alpha", alpha, 7, err, sizeof err) ||
        selsync_config_set(&c, "inject_beta", beta, 8, err, sizeof err))
        fail_msg("%s", err);
    return c;
}

/* ---- plan ---- */

static void test_plan_table(void **state)
{
    static const struct { int batch, world; const char *alpha, *beta; int k, own, shared; } rows[] = {
        /* the paper's settings */
        {32, 2, "0.5", "0.5", 1, 21, 11},  {32, 4, "0.5", "0.5", 2, 16, 8},  {32, 16, "0.5", "0.5", 8, 8, 3},
        {64, 2, "0.5", "0.5", 1, 43, 21},  {64, 4, "0.5", "0.5", 2, 32, 16}, {64, 16, "0.5", "0.5", 8, 16, 6},
        {32, 2, "0.75", "0.75", 2, 14, 9}, {32, 4, "0.75", "0.75", 3, 11, 7}, {32, 16, "0.75", "0.75", 12, 8, 2},
        {64, 2, "0.75", "0.75", 2, 26, 19}, {64, 4, "0.75", "0.75", 3, 22, 14}, {64, 16, "0.75", "0.75", 12, 16, 4},
        /* edges: k rounds half up, at least 1, at most world */
        {10, 3, "1", "1", 3, 4, 2}, {5, 8, "0.1", "0.2", 1, 4, 1}, {16, 4, "0.01", "1", 1, 8, 8},
        {3, 2, "1", "1", 2, 1, 1}, {7, 4, "0.125", "0.5", 1, 5, 2}, /* 0.125 * 4 = 0.5 rounds up */
    };
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        selsync_config c = injecting(rows[i].alpha, rows[i].beta);
        selsync_inject_sizes sz;
        char err[256];
        if (selsync_inject_plan(&c, rows[i].world, rows[i].batch, &sz, err, sizeof err)) fail_msg("%s", err);
        if (sz.senders != rows[i].k || sz.own != rows[i].own || sz.shared != rows[i].shared)
            fail_msg("row %zu: k %d b' %d s %d", i, sz.senders, sz.own, sz.shared);
        assert_int_equal(sz.load, sz.own + sz.shared);
        assert_int_equal(sz.own + sz.senders * sz.shared, rows[i].batch);             /* a non-sender */
        assert_int_equal(sz.load + (sz.senders - 1) * sz.shared, rows[i].batch);      /* a sender */
    }
}

/* The invariants over a grid of settings that plan. */
static void test_plan_invariants(void **state)
{
    static const char *fr[] = {"0.05", "0.25", "0.5", "0.75", "1"};
    int planned = 0;
    (void)state;
    for (int world = 2; world <= 20; world += 3)
        for (int batch = 1; batch <= 130; batch += 7)
            for (int a = 0; a < 5; a++)
                for (int b = 0; b < 5; b++) {
                    selsync_config c = injecting(fr[a], fr[b]);
                    selsync_inject_sizes sz;
                    selsync_status st = selsync_inject_plan(&c, world, batch, &sz, NULL, 0);
                    if (st != SELSYNC_OK) {
                        assert_int_equal(st, SELSYNC_ECONFIG);
                        continue;
                    }
                    planned++;
                    assert_true(sz.senders >= 1 && sz.senders <= world && sz.own >= 1 && sz.shared >= 1);
                    assert_int_equal(sz.own + sz.senders * sz.shared, batch);
                    assert_int_equal(sz.load, sz.own + sz.shared);
                }
    assert_true(planned > 500);
}

static void test_plan_errors(void **state)
{
    selsync_config c = injecting("0.5", "0.5");
    selsync_inject_sizes sz = {-1, -1, -1, -1};
    char err[512];
    (void)state;
    assert_int_equal(selsync_inject_plan(&c, 1, 32, &sz, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "net.cfg:7: [selsync] inject_alpha = 0.5: injection needs at least 2 ranks");
    assert_int_equal(sz.senders, -1); /* untouched on error */

    c = injecting("1", "1");
    assert_int_equal(selsync_inject_plan(&c, 16, 4, &sz, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "net.cfg:8: [selsync] inject_beta = 1: a batch of 4 leaves no sample to share");
    assert_contains(err, "; allowed: larger batch or inject_beta");
    c = injecting("0.5", "0.5");
    assert_int_equal(selsync_inject_plan(&c, 2, 1, &sz, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "a batch of 1 leaves no sample to share");

    selsync_config_default(&c, "net.cfg", 2); /* off: names the key, at the section's line */
    assert_int_equal(selsync_inject_plan(&c, 4, 32, &sz, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "net.cfg:2: [selsync] inject_alpha = 0: data injection is off; allowed:");
    c.inject_alpha = 0.5;
    assert_int_equal(selsync_inject_plan(&c, 4, 32, &sz, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "inject_beta = 0: data injection is off");
    c.inject_beta = 1.5;
    assert_int_equal(selsync_inject_plan(&c, 4, 32, &sz, err, sizeof err), SELSYNC_ECONFIG);
    assert_contains(err, "inject_beta = 1.5: out of range");

    c = injecting("0.5", "0.5");
    assert_int_equal(selsync_inject_plan(&c, 4, 0, &sz, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_plan(NULL, 4, 32, &sz, err, sizeof err), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_plan(&c, 4, 32, NULL, NULL, 0), SELSYNC_EINVAL);
    assert_int_equal(sz.senders, -1);
}

/* ---- senders ---- */

/* The documented draw, with the explicit array. */
static void reference_senders(uint64_t seed, uint64_t step, int world, int k, int *out)
{
    int perm[64];
    selsync_rng r = selsync_rng_stream(seed, 0x1ec7, step);
    for (int i = 0; i < world; i++) perm[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + (int)selsync_rng_below(&r, (uint64_t)(world - i)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int i = 0; i < k; i++) { /* selection sort of perm[0..k) */
        int min = world, at = i;
        for (int j = i; j < k; j++)
            if (perm[j] < min) min = perm[at = j];
        perm[at] = perm[i];
        perm[i] = min;
        out[i] = min;
    }
}

static void test_senders_match_partial_fisher_yates(void **state)
{
    int got[64], want[64];
    (void)state;
    for (int world = 1; world <= 40; world += 3)
        for (int k = 1; k <= world; k++)
            for (uint64_t step = 0; step < 25; step++) {
                selsync_inject_senders(9, step, world, k, got);
                reference_senders(9, step, world, k, want);
                assert_memory_equal(got, want, (size_t)k * sizeof *got);
                for (int i = 0; i < k; i++) {
                    assert_true(got[i] >= 0 && got[i] < world);
                    if (i) assert_true(got[i] > got[i - 1]); /* distinct, ascending */
                }
            }
}

static void test_senders_same_everywhere_and_vary(void **state)
{
    int first[16][3], again[3], counts[16] = {0}, differ = 0;
    (void)state;
    for (uint64_t step = 0; step < 16; step++) selsync_inject_senders(42, step, 16, 3, first[step]);
    for (int rank = 0; rank < 16; rank++) /* every rank, later, computes the same draws */
        for (uint64_t step = 0; step < 16; step++) {
            selsync_inject_senders(42, step, 16, 3, again);
            assert_memory_equal(again, first[step], sizeof again);
        }
    for (int step = 1; step < 16; step++) differ += memcmp(first[step], first[0], sizeof again) != 0;
    assert_true(differ >= 14);
    selsync_inject_senders(43, 0, 16, 3, again);
    assert_memory_not_equal(again, first[0], sizeof again); /* the seed matters */
    for (uint64_t step = 0; step < 3200; step++) { /* each rank about 3200 * 3/16 = 600 times */
        selsync_inject_senders(5, step, 16, 3, again);
        for (int i = 0; i < 3; i++) counts[again[i]]++;
    }
    for (int r = 0; r < 16; r++) assert_true(counts[r] > 500 && counts[r] < 700);
    for (int k = 6; k <= 9; k += 3) { /* k = world: everybody; k > world: capped */
        int all[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
        selsync_inject_senders(5, 0, 6, k, all);
        for (int i = 0; i < 9; i++) assert_int_equal(all[i], i < 6 ? i : -1);
    }
}

/* ---- exchange ---- */

enum { WORLD = 4, ROW = 3, OWN = 4, SHARED = 2, LOAD = OWN + SHARED, BATCH = OWN + 2 * SHARED };

static const selsync_inject_sizes SZ = {2, OWN, SHARED, LOAD};
static const int SENDERS[2] = {1, 3};

/* Rank r's loaded rows: value r*1000 + row*10 + column. */
static void fill_rows(int r, float *rows)
{
    for (int i = 0; i < LOAD; i++)
        for (int j = 0; j < ROW; j++) rows[i * ROW + j] = (float)(r * 1000 + i * 10 + j);
}

typedef struct net {
    float rows[WORLD][LOAD * ROW];
    mock_comm mock;
    selsync_comm comm;
} net;

static void setup_rank(net *n, int rank)
{
    for (int r = 0; r < WORLD; r++) fill_rows(r, n->rows[r]);
    mock_init(&n->mock, rank, WORLD);
    for (int r = 0; r < WORLD; r++) { /* what a remote root would broadcast: its first rows */
        n->mock.bcast_from[r] = n->rows[r];
        n->mock.bcast_from_n[r] = SHARED * ROW * sizeof(float);
    }
    n->comm = mock_as_comm(&n->mock);
}

static void check_batch(const net *n, int rank, const float *batch)
{
    int mine = rank == 1 || rank == 3, k = 0;
    float want[BATCH * ROW];
    memcpy(want, n->rows[rank], (size_t)(mine ? LOAD : OWN) * ROW * sizeof(float));
    k = (mine ? LOAD : OWN) * ROW;
    for (int s = 0; s < 2; s++)
        if (SENDERS[s] != rank) {
            memcpy(want + k, n->rows[SENDERS[s]], SHARED * ROW * sizeof(float));
            k += SHARED * ROW;
        }
    assert_int_equal(k, BATCH * ROW);
    assert_memory_equal(batch, want, sizeof want);
}

static void test_exchange_every_rank(void **state)
{
    net n;
    (void)state;
    for (int rank = 0; rank < WORLD; rank++) {
        float batch[BATCH * ROW + 1];
        uint64_t bytes = 12345;
        int mine = rank == 1 || rank == 3;
        setup_rank(&n, rank);
        batch[BATCH * ROW] = -7; /* guard */
        assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, SENDERS, n.rows[rank], ROW, batch, &bytes), SELSYNC_OK);
        check_batch(&n, rank, batch);
        assert_true(batch[BATCH * ROW] == -7);
        assert_int_equal(n.mock.bcast_calls, 2); /* one per sender, ascending */
        assert_int_equal(n.mock.bcast_root[0], 1);
        assert_int_equal(n.mock.bcast_root[1], 3);
        assert_int_equal(n.mock.bcast_bytes[0], SHARED * ROW * sizeof(float));
        assert_int_equal(n.mock.bcast_bytes[1], SHARED * ROW * sizeof(float));
        /* the mock counts bytes x (size-1) at the root */
        assert_int_equal(bytes, mine ? SHARED * ROW * sizeof(float) * (WORLD - 1) : 0);
        if (mine) { /* a sender broadcast its first `shared` loaded rows */
            assert_int_equal(n.mock.bcast_sent_n, SHARED * ROW * sizeof(float));
            assert_memory_equal(n.mock.bcast_sent, n.rows[rank], SHARED * ROW * sizeof(float));
        }
    }
}

/* The paper's setting on 4 ranks, batch 32, one float per row: every rank's
 * batch is exactly 32 rows whatever its role. */
static void test_exchange_planned_sizes(void **state)
{
    selsync_config c = injecting("0.5", "0.5");
    selsync_inject_sizes sz;
    int senders[4];
    float rows[4][32], batch[33];
    (void)state;
    assert_int_equal(selsync_inject_plan(&c, 4, 32, &sz, NULL, 0), SELSYNC_OK);
    selsync_inject_senders(c.seed, 17, 4, sz.senders, senders);
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 32; i++) rows[r][i] = (float)(r * 100 + i);
    for (int rank = 0; rank < 4; rank++) {
        mock_comm m;
        selsync_comm comm;
        int mine = 0, k = 0;
        mock_init(&m, rank, 4);
        for (int r = 0; r < 4; r++) {
            m.bcast_from[r] = rows[r];
            m.bcast_from_n[r] = sizeof rows[r];
        }
        comm = mock_as_comm(&m);
        batch[32] = -1;
        assert_int_equal(selsync_inject_exchange(&comm, &sz, senders, rows[rank], 1, batch, NULL), SELSYNC_OK);
        assert_true(batch[32] == -1);
        for (int s = 0; s < sz.senders; s++) mine |= senders[s] == rank;
        for (; k < (mine ? sz.load : sz.own); k++) assert_true(batch[k] == rows[rank][k]);
        for (int s = 0; s < sz.senders; s++)
            for (int i = 0; senders[s] != rank && i < sz.shared; i++, k++) assert_true(batch[k] == rows[senders[s]][i]);
        assert_int_equal(k, 32);
        assert_int_equal(m.bcast_calls, sz.senders);
    }
}

static void test_exchange_in_place(void **state)
{
    net n;
    float buf[BATCH * ROW];
    (void)state;
    setup_rank(&n, 0);
    memcpy(buf, n.rows[0], sizeof n.rows[0]); /* loaded straight into the batch */
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, SENDERS, buf, ROW, buf, NULL), SELSYNC_OK);
    check_batch(&n, 0, buf);
}

static void test_exchange_errors(void **state)
{
    net n;
    float batch[BATCH * ROW];
    uint64_t bytes = 99;
    selsync_inject_sizes bad = SZ;
    const int unsorted[2] = {3, 1}, twice[2] = {1, 1}, outside[2] = {1, 4};
    (void)state;
    setup_rank(&n, 1);
    n.mock.fail_bcast_call = 2;
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, SENDERS, n.rows[1], ROW, batch, &bytes), SELSYNC_ECOMM);
    assert_int_equal(n.mock.bcast_calls, 2);
    assert_int_equal(bytes, SHARED * ROW * sizeof(float) * (WORLD - 1)); /* its own broadcast went out */

    setup_rank(&n, 0);
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, unsorted, n.rows[0], ROW, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, twice, n.rows[0], ROW, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, outside, n.rows[0], ROW, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_exchange(NULL, &SZ, SENDERS, n.rows[0], ROW, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_exchange(&n.comm, NULL, SENDERS, n.rows[0], ROW, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, NULL, n.rows[0], ROW, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, SENDERS, NULL, ROW, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, SENDERS, n.rows[0], 0, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_inject_exchange(&n.comm, &SZ, SENDERS, n.rows[0], ROW, NULL, NULL), SELSYNC_EINVAL);
    bad.load = LOAD + 1;
    assert_int_equal(selsync_inject_exchange(&n.comm, &bad, SENDERS, n.rows[0], ROW, batch, NULL), SELSYNC_EINVAL);
    bad = SZ;
    bad.senders = WORLD + 1;
    assert_int_equal(selsync_inject_exchange(&n.comm, &bad, SENDERS, n.rows[0], ROW, batch, NULL), SELSYNC_EINVAL);
    assert_int_equal(n.mock.bcast_calls, 0); /* nothing started */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_table),
        cmocka_unit_test(test_plan_invariants),
        cmocka_unit_test(test_plan_errors),
        cmocka_unit_test(test_senders_match_partial_fisher_yates),
        cmocka_unit_test(test_senders_same_everywhere_and_vary),
        cmocka_unit_test(test_exchange_every_rank),
        cmocka_unit_test(test_exchange_planned_sizes),
        cmocka_unit_test(test_exchange_in_place),
        cmocka_unit_test(test_exchange_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
