/* Unit tests for the engine (plugin/core/engine.c) and the one-process
 * communicator (plugin/core/comm_single.c), against the scripted mock. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mock_comm.h"
#include "selsync/engine.h"

/* The model: layer 0 = w0[4] b0[2], layer 1 = w1[3] + BN statistic s1[2],
 * layer 2 = nothing (e.g. a pooling layer), layer 3 = w3[5]. The fused
 * order is w0 b0 w1 s1 w3: 14 trained elements, 16 with statistics. */
enum { N_TRAINED = 14, N_ALL = 16, N_LAYERS = 4, N_TENSORS = 5 };

typedef struct fx {
    float w0[4], gw0[4], b0[2], gb0[2], w1[3], gw1[3], s1[2], w3[5], gw3[5];
    selsync_tensor t[N_TENSORS];
    selsync_model model;
    selsync_config cfg;
    mock_comm mock;
    selsync_comm comm;
    selsync_engine *e;
    char err[1024];
} fx;

static float *params[N_TENSORS], *grads[N_TENSORS]; /* filled per fixture, read-only in tests */
static const size_t counts[N_TENSORS] = {4, 2, 3, 2, 5};

/* The defaults with the paper's rule alone: the tests of other rules count
 * any's calls (the paper's agreement) and decide at the step, without a
 * bound; the tests of drift, agree = mean, max_local and lag set theirs. */
static void paper_rule(selsync_config *cfg)
{
    selsync_config_default(cfg, "test.cfg", 1);
    cfg->drift = 0;
    cfg->agree = SELSYNC_AGREE_ANY;
    cfg->max_local = 0;
    cfg->lag = 0;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    float *p[N_TENSORS] = {f->w0, f->b0, f->w1, f->s1, f->w3};
    float *g[N_TENSORS] = {f->gw0, f->gb0, f->gw1, NULL, f->gw3};
    const size_t layer[N_TENSORS] = {0, 0, 1, 1, 3};
    float v = 1.0f;
    for (int i = 0; i < N_TENSORS; i++) {
        params[i] = p[i];
        grads[i] = g[i];
        for (size_t j = 0; j < counts[i]; j++, v += 1.0f) {
            p[i][j] = v;
            if (g[i]) g[i][j] = 1.0f;
        }
        f->t[i] = (selsync_tensor){p[i], g[i], counts[i], layer[i],
                                   g[i] ? SELSYNC_TENSOR_TRAINED : SELSYNC_TENSOR_STAT, 0, 0};
    }
    f->model = (selsync_model){f->t, N_TENSORS, N_LAYERS, 0, 0};
    paper_rule(&f->cfg);
    mock_init(&f->mock, 0, 2);
    f->comm = mock_as_comm(&f->mock);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    selsync_engine_destroy(f->e);
    free(f);
    return 0;
}

static void make(fx *f)
{
    assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
    if (selsync_engine_create(&f->cfg, &f->comm, &f->model, &f->e, f->err, sizeof f->err) != SELSYNC_OK)
        fail_msg("selsync_engine_create: %s", f->err);
}

/* A step without a host update; returns its record. */
static const selsync_step *step(fx *f)
{
    assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    return selsync_engine_last_step(f->e);
}

static void set_grads(float v)
{
    for (int i = 0; i < N_TENSORS; i++)
        for (size_t j = 0; grads[i] && j < counts[i]; j++) grads[i][j] = v;
}

/* Copies all params in fused order. */
static void snapshot(float *out)
{
    for (int i = 0, n = 0; i < N_TENSORS; n += (int)counts[i], i++) memcpy(out + n, params[i], counts[i] * 4);
}

static void assert_close(double got, double want, double rel)
{
    if (isinf(want) ? got != want : !(fabs(got - want) <= rel * fabs(want) + 1e-300))
        fail_msg("got %.17g, expected %.17g", got, want);
}

static void assert_contains(const char *s, const char *needle)
{
    if (!strstr(s, needle)) fail_msg("expected \"%s\" in \"%s\"", needle, s);
}

/* ---- EWMA and change ---- */

/* s_t computed directly from its definition. */
static double ewma(const double *x, int t, int window, double a)
{
    double num = 0, den = 0;
    for (int i = 0; i < window && i <= t; i++) {
        num += pow(1 - a, i) * x[t - i];
        den += pow(1 - a, i);
    }
    return num / den;
}

static void check_sequence(fx *f, int world, double smoothing, double a, int window)
{
    const float v[] = {1, 2, 3, 1, 4, 2, 2, 0.5f, 3};
    double x[9], prev = 0;
    mock_init(&f->mock, 0, world);
    f->cfg.smoothing = smoothing;
    f->cfg.window = window;
    f->cfg.warmup = 0;
    f->cfg.delta = 0.3;
    make(f);
    for (int t = 0; t < 9; t++) {
        const selsync_step *s;
        double sm, ch;
        set_grads(v[t]);
        x[t] = N_TRAINED * (double)v[t] * v[t];
        s = step(f);
        sm = ewma(x, t, window, a);
        ch = t == 0 ? INFINITY : fabs(sm - prev) / prev;
        assert_int_equal(s->step, t);
        assert_close(s->grad_norm, x[t], 1e-15);
        assert_close(s->smoothed, sm, 1e-12);
        assert_close(s->change, ch, 1e-9);
        assert_int_equal(s->local_flag, ch >= 0.3);
        assert_int_equal(s->decision, ch >= 0.3 ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
        prev = sm;
    }
}

static void test_ewma_known_sequence(void **state)
{
    check_sequence(*state, 2, 0.5, 0.5, 3);
}

static void test_ewma_auto_smoothing(void **state)
{
    check_sequence(*state, 4, 0, 0.04, 5); /* auto = N/100 */
}

static void test_zero_norms_sync(void **state)
{
    fx *f = *state;
    const float v[] = {0, 0, 1, 1, 1, 1};
    const int sync[] = {1, 1, 1, 0, 0, 0}; /* no previous, then previous smoothed 0 twice */
    f->cfg.warmup = 0;
    f->cfg.delta = 1e30;
    make(f);
    for (int t = 0; t < 6; t++) {
        set_grads(v[t]);
        const selsync_step *s = step(f);
        assert_int_equal(s->decision, sync[t] ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
        assert_int_equal(!!isinf(s->change), sync[t]);
    }
    assert_int_equal(f->mock.sum_calls, 3);
}

/* A NaN gradient, an infinite gradient, a NaN parameter: every method
 * stops, selsync measuring the change and the others checking finiteness
 * alone (their records carry no norm). */
static void test_nonfinite_stops(void **state)
{
    fx *f = *state;
    static const char *const why[] = {"the gradient is not finite", "the gradient is not finite",
                                      "a trained parameter is not finite"};
    static const selsync_method methods[] = {SELSYNC_METHOD_SELSYNC, SELSYNC_METHOD_BSP, SELSYNC_METHOD_FEDAVG,
                                             SELSYNC_METHOD_LOCAL};
    for (size_t m = 0; m < sizeof methods / sizeof *methods; m++)
        for (int k = 0; k < 3; k++) {
            mock_init(&f->mock, 1, 2);
            f->cfg.method = methods[m];
            make(f);
            set_grads(1);
            step(f);
            assert_true(m == 0 ? selsync_engine_last_step(f->e)->grad_norm > 0
                               : isnan(selsync_engine_last_step(f->e)->grad_norm));
            step(f);
            if (k == 0) f->gw1[1] = NAN;
            if (k == 1) f->gw3[0] = INFINITY;
            if (k == 2) f->w0[3] = NAN;
            assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_ENONFINITE);
            assert_contains(selsync_engine_error(f->e), "step 2: rank 1: ");
            assert_contains(selsync_engine_error(f->e), why[k]);
            assert_contains(selsync_engine_error(f->e), "; stopping");
            selsync_engine_destroy(f->e);
            f->e = NULL;
            f->w0[3] = 0;
        }
}

/* An infinite loss with a finite gradient (softmax cross-entropy of an
 * underflowed probability) is a step like any other. */
static void test_infinite_loss_finite_gradient_goes_on(void **state)
{
    fx *f = *state;
    make(f);
    set_grads(1);
    step(f);
    assert_int_equal(selsync_engine_before_update(f->e, INFINITY, 0.1), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    assert_true(selsync_engine_last_step(f->e)->decision != SELSYNC_SKIP_STEP);
}

static void test_nonfinite_skips(void **state)
{
    fx *f = *state;
    /* skip: the bad step synchronises nowhere and leaves the smoothing
     * alone, so the steps after it see no change */
    f->cfg.on_nonfinite = SELSYNC_NONFINITE_SKIP;
    f->cfg.window = 2;
    f->cfg.smoothing = 0.5;
    f->cfg.warmup = 1;
    f->cfg.delta = 0.3;
    make(f);
    for (int t = 0; t < 8; t++) {
        set_grads(1);
        if (t == 4) f->gw1[1] = NAN;
        int calls = f->mock.any_calls;
        const selsync_step *s = step(f);
        const selsync_decision want = t == 0 ? SELSYNC_SYNC_STEP : t == 4 ? SELSYNC_SKIP_STEP : SELSYNC_LOCAL_STEP;
        if (s->decision != want) fail_msg("step %d: decision %d", t, s->decision);
        if (t == 4) assert_true(isnan(s->change));
        else if (t > 0) assert_true(s->change == 0);
        assert_int_equal(f->mock.any_calls - calls, 1); /* warm-up too: the flag travels */
        if (t > 0) assert_int_equal(f->mock.any_last_n, 2); /* model group + non-finite flag */
    }
    selsync_totals tot;
    selsync_engine_get_totals(f->e, &tot);
    assert_int_equal(tot.skipped_steps, 1);
    assert_int_equal(tot.synced_steps, 1);

    /* another rank's flag makes this one skip too (bsp) */
    selsync_engine_destroy(f->e);
    f->cfg.method = SELSYNC_METHOD_BSP;
    f->cfg.delta = 0.3; /* ignored by bsp in the engine */
    make(f);
    f->mock.any_queue[0][0] = 1;
    f->mock.any_queued = 1;
    set_grads(1);
    assert_int_equal(step(f)->decision, SELSYNC_SKIP_STEP);
    assert_int_equal(step(f)->decision, SELSYNC_SYNC_STEP);
}

static void test_constant_norms_local_after_warmup(void **state)
{
    fx *f = *state;
    f->cfg.warmup = 3;
    f->cfg.window = 10;
    f->cfg.smoothing = 0.5;
    f->cfg.delta = 0.01;
    make(f);
    for (int t = 0; t < 8; t++) {
        const selsync_step *s = step(f);
        assert_int_equal(f->mock.any_calls, t < 3 ? 0 : t - 2); /* none during warm-up */
        assert_int_equal(s->decision, t < 3 ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
        if (t > 0) assert_true(s->change < 1e-12);
    }
    assert_int_equal(f->mock.sum_calls, 3);
}

static void test_residual_is_subtracted(void **state)
{
    fx *f = *state;
    f->model.grad_keeps_residual = 1;
    f->cfg.warmup = 0;
    f->cfg.delta = 1e30;
    make(f);
    set_grads(0);
    for (int t = 0; t < 6; t++) {
        double own = 0, whole = 0;
        for (int i = 0; i < N_TENSORS; i++) /* backward adds G_t to the residual */
            for (size_t j = 0; grads[i] && j < counts[i]; j++) {
                float g = (float)(t + 1) * 0.25f - (float)j * 0.5f;
                grads[i][j] += g;
                own += (double)g * g;
                whole += (double)grads[i][j] * grads[i][j];
            }
        assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
        for (int i = 0; i < N_TENSORS; i++) /* the host's update leaves momentum * grad */
            for (size_t j = 0; grads[i] && j < counts[i]; j++) grads[i][j] *= 0.9f;
        assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
        assert_close(selsync_engine_last_step(f->e)->grad_norm, own, 1e-5);
        if (t > 0) assert_true(fabs(whole - own) > 0.1 * own); /* the residual mattered */
    }
}

/* Six steps of SGD with momentum and weight decay in Darknet's arithmetic,
 * the weights' tensors decaying; with described, the engine is told the
 * update (selsync_engine_note_host_update), whose momentum the host's
 * update replaces by momentum. Each step's norm and change into norm[] and
 * change[]. Leaves the engine made. */
static void sgd_steps(fx *f, int described, float momentum, double *norm, double *change)
{
    const selsync_host_update sgd = {0.9f, -0.0005f * 64, NULL};
    selsync_engine_destroy(f->e);
    f->e = NULL;
    for (int i = 0; i < N_TENSORS; i++)
        for (size_t j = 0; j < counts[i]; j++) {
            params[i][j] = 0.1f * (float)(i + 1) - 0.03f * (float)j;
            if (grads[i]) grads[i][j] = 0;
        }
    make(f);
    for (int t = 0; t < 6; t++) {
        for (int i = 0; i < N_TENSORS; i++) /* backward adds this step's gradient to the residual */
            for (size_t j = 0; grads[i] && j < counts[i]; j++) grads[i][j] += 0.37f * (float)(t + 1) - 0.21f * (float)j;
        if (described) selsync_engine_note_host_update(f->e, &sgd);
        assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
        for (int i = 0; i < N_TENSORS; i++) /* the host's update */
            for (size_t j = 0; grads[i] && j < counts[i]; j++) {
                float u = grads[i][j] + (f->t[i].decays ? sgd.decay : 0) * params[i][j];
                params[i][j] += 0.01f * u;
                grads[i][j] = u * momentum;
            }
        assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
        norm[t] = selsync_engine_last_step(f->e)->grad_norm;
        change[t] = selsync_engine_last_step(f->e)->change;
    }
}

/* A described update: the residual written while measuring gives every
 * step the same norm and change, bit for bit, as the copy after the
 * update, with and without a synchronisation in between. */
static void test_described_update_same_change(void **state)
{
    fx *f = *state;
    double norm[3][6], change[3][6];
    f->model.grad_keeps_residual = 1;
    f->t[0].decays = f->t[2].decays = f->t[4].decays = 1; /* w0, w1, w3; not b0 */
    f->cfg.warmup = 0;
    f->cfg.delta = 0.2; /* some steps synchronise, some do not */
    for (int described = 0; described < 2; described++)
        sgd_steps(f, described, 0.9f, norm[described], change[described]);
    sgd_steps(f, 1, 0.8f, norm[2], change[2]); /* an update other than the one described */
    for (int t = 0; t < 6; t++) {
        assert_true(norm[0][t] > 0);
        assert_memory_equal(&norm[0][t], &norm[1][t], sizeof(double));
        if (t > 0) assert_memory_equal(&change[0][t], &change[1][t], sizeof(double));
        if (t > 0) assert_true(norm[2][t] != norm[0][t]); /* so the description was what counted */
    }
}

/* A tensor of many blocks and a tail: the float-lane norm of the own
 * gradient (residual subtracted) within 1e-6 of a double sum; squares that
 * overflow a float still give a finite norm; an infinite gradient or a NaN
 * parameter anywhere in a block is caught. */
static void test_norm_of_a_large_tensor(void **state)
{
    enum { N = 4090 }; /* 3 blocks of 1024, 62 lanes' worth and a tail of 2 (the mock sums at most 4096) */
    fx *f = *state;
    static float p[N], g[N];
    selsync_tensor t = {p, g, N, 0, SELSYNC_TENSOR_TRAINED, 0, 0};
    selsync_model m = {&t, 1, 1, 1, 0};
    double own = 0;
    f->cfg.warmup = 0;
    f->cfg.delta = 1e30;
    assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, &m, &f->e, f->err, sizeof f->err), SELSYNC_OK);
    for (size_t j = 0; j < N; j++) {
        p[j] = 1.0f;
        g[j] = (float)sin((double)j) * 3.0f;
    }
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    for (size_t j = 0; j < N; j++) g[j] *= 0.9f; /* the residual */
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    for (size_t j = 0; j < N; j++) {
        float x = (float)cos((double)j * 0.37) * (j % 7 == 0 ? 100.0f : 0.01f);
        g[j] += x;
        own += (double)x * x;
    }
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    assert_close(selsync_engine_last_step(f->e)->grad_norm, own, 1e-6);

    for (size_t j = 0; j < N; j++) g[j] = 0.0f; /* squares of 1e40: past a float, not a double */
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    for (size_t j = 0; j < N; j++) g[j] = 1e20f;
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    assert_close(selsync_engine_last_step(f->e)->grad_norm, N * (double)1e20f * (double)1e20f, 1e-6);

    for (int k = 0; k < 2; k++) { /* an infinite gradient, a NaN parameter, in the middle of block 2 */
        selsync_engine_destroy(f->e);
        assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, &m, &f->e, f->err, sizeof f->err), SELSYNC_OK);
        for (size_t j = 0; j < N; j++) g[j] = 1.0f;
        if (k == 0) g[2100] = INFINITY;
        else p[2100] = NAN;
        assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_ENONFINITE);
        assert_contains(selsync_engine_error(f->e), k == 0 ? "the gradient is not finite"
                                                           : "a trained parameter is not finite");
        p[2100] = 1.0f;
    }
}

/* ---- decisions and collectives ---- */

static void test_delta_zero_syncs_every_step(void **state)
{
    fx *f = *state;
    f->cfg.warmup = 0;
    f->cfg.delta = 0;
    make(f);
    for (int t = 0; t < 5; t++) assert_int_equal(step(f)->decision, SELSYNC_SYNC_STEP);
    assert_int_equal(f->mock.sum_calls, 5);
    assert_int_equal(f->mock.any_calls, 5);
}

static void test_huge_delta_syncs_only_in_warmup(void **state)
{
    fx *f = *state;
    f->cfg.warmup = 4;
    f->cfg.delta = 1e30;
    make(f);
    for (int t = 0; t < 10; t++) {
        set_grads(1.0f + (float)t);
        const selsync_step *s = step(f);
        assert_int_equal(s->decision, t < 4 ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
        assert_int_equal(s->layers_synced, t < 4 ? 3 : 0); /* layer 2 has nothing */
        assert_int_equal(f->mock.sum_calls, t < 4 ? t + 1 : 4);
        assert_int_equal(f->mock.any_calls, t < 4 ? 0 : t - 3);
    }
}

static void test_remote_flag_syncs(void **state)
{
    fx *f = *state;
    const uint8_t one = 1;
    float before[N_ALL], after[N_ALL];
    f->cfg.warmup = 0;
    f->cfg.delta = 1e30;
    make(f);
    f->mock.remote_scale = 3; /* the other rank holds 3x: average = 2x */
    assert_int_equal(step(f)->decision, SELSYNC_SYNC_STEP); /* no previous value */
    assert_int_equal(step(f)->decision, SELSYNC_LOCAL_STEP);
    snapshot(before);
    mock_script_any(&f->mock, &one, 1);
    const selsync_step *s = step(f);
    assert_int_equal(s->local_flag, 0);
    assert_int_equal(s->decision, SELSYNC_SYNC_STEP);
    assert_int_equal(f->mock.sum_calls, 2);
    snapshot(after);
    for (int i = 0; i < N_ALL; i++) assert_true(after[i] == 2 * before[i]);
    assert_int_equal(step(f)->decision, SELSYNC_LOCAL_STEP);
}

/* max_local: after that many local steps the next one synchronises, on
 * every rank alike (the run is counted from agreed decisions). */
static void test_max_local_guard(void **state)
{
    fx *f = *state;
    f->cfg.warmup = 1;
    f->cfg.delta = 1e30;
    f->cfg.max_local = 3;
    make(f);
    for (int t = 0; t < 13; t++) {
        set_grads(1.0f + (float)t);
        const selsync_step *s = step(f);
        int want = t == 0 || t % 4 == 0; /* warm-up, then after every 3 local steps */
        if (s->decision != (want ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP))
            fail_msg("step %d: %s", t, selsync_decision_name(s->decision));
        assert_int_equal(s->local_flag, t == 0);
    }
    assert_int_equal(f->mock.sum_calls, 4);
}

/* qsr_alpha (the quadratic synchronisation rule): the bound is
 * max(max_local, floor((qsr_alpha / lr)^2)) at the previous step's learning
 * rate, so it grows as the rate decays: with qsr_alpha = 0.2 and
 * max_local = 2, 2 local steps in a row at lr 0.2 ((0.2/0.2)^2 = 1 is
 * below max_local), 4 at lr 0.1 and 16 at lr 0.05, each run ended by a
 * synchronised step. */
static void test_qsr_bound_grows_as_the_rate_decays(void **state)
{
    fx *f = *state;
    f->cfg.warmup = 1;
    f->cfg.delta = 1e30;
    f->cfg.max_local = 2;
    f->cfg.qsr_alpha = 0.2;
    make(f);
    const double rates[3] = {0.2, 0.1, 0.05};
    const int runs[3] = {2, 4, 16};
    int t = 0;
    for (int k = -1; k < 3; k++) {
        double lr = rates[k < 0 ? 0 : k];
        for (int i = 0; i <= (k < 0 ? 0 : runs[k]); i++, t++) { /* the run of local steps, then a sync */
            int want = k < 0 || i == runs[k]; /* k < 0: the warm-up step */
            set_grads(1.0f + (float)t);
            assert_int_equal(selsync_engine_before_update(f->e, 1.0, lr), SELSYNC_OK);
            assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
            if (selsync_engine_last_step(f->e)->decision != (want ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP))
                fail_msg("lr %g, step %d: %s", lr, t, selsync_decision_name(selsync_engine_last_step(f->e)->decision));
        }
    }
    assert_int_equal(f->mock.sum_calls, 4);
}

/* A step at learning rate lr; its decision. */
static selsync_decision step_at(fx *f, double lr, int t)
{
    set_grads(1.0f + (float)t);
    assert_int_equal(selsync_engine_before_update(f->e, 1.0, lr), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    return selsync_engine_last_step(f->e)->decision;
}

/* The quadratic rule's bound goes on across a checkpoint: a run restored in
 * the middle of a run of local steps at lr 0.1 (bound 4, max_local 2) ends
 * it where the uninterrupted run does. */
static void test_qsr_bound_survives_a_restore(void **state)
{
    fx *f = *state;
    selsync_decision whole[11];
    f->cfg.warmup = 1;
    f->cfg.delta = 1e30;
    f->cfg.max_local = 2;
    f->cfg.qsr_alpha = 0.2;
    make(f);
    void *saved = NULL;
    size_t len = 0;
    for (int t = 0; t < 11; t++) {
        whole[t] = step_at(f, 0.1, t);
        if (t == 2) { /* two local steps in a row so far */
            len = selsync_engine_snapshot_size(f->e);
            saved = malloc(len);
            assert_int_equal(selsync_engine_snapshot(f->e, saved, len), SELSYNC_OK);
        }
        assert_int_equal(whole[t], t % 5 == 0 ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
    }
    selsync_engine_destroy(f->e);
    f->e = NULL;
    make(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_OK);
    for (int t = 3; t < 11; t++)
        if (step_at(f, 0.1, t) != whole[t]) fail_msg("restored run, step %d: another decision", t);
    free(saved);
}

/* A fresh start for a test that runs several engines: the fixture's params
 * (1, 2, ... in fused order), the default cfg, a 2-rank mock whose other
 * rank holds remote_scale times this one's values (async: background sums). */
static void restart(fx *f, int async, float remote_scale)
{
    float v = 1.0f;
    for (int i = 0; i < N_TENSORS; i++)
        for (size_t j = 0; j < counts[i]; j++, v += 1.0f) params[i][j] = v;
    mock_init(&f->mock, 0, 2);
    f->mock.async = async;
    f->mock.remote_scale = remote_scale;
    f->comm = mock_as_comm(&f->mock);
    paper_rule(&f->cfg);
}

/* The drift rule, each rank as every other (the mock's sum_f64 multiplies
 * by the ranks; its averages keep the params): delta never fires, the
 * host moves w3[0] by 1 every step, so k steps after an average the drift
 * is k^2 / |a|^2 (|a|^2: the anchor's squared norm, 1300 after step 0:
 * the trained params 1 .. 9 and 12 .. 16 with w3[0] moved once). With
 * drift = 10 / 1275, steps 1-4 after one are local (k^2 = 0, 1, 4, 9) and
 * the fifth (16) synchronises; its average is the new anchor (the next step
 * measures 0), whether the average is applied at once or one step late
 * (async: at the next step's before_update). The metrics file has the
 * drift column. */
static void test_drift_rule(void **state)
{
    fx *f = *state;
    for (int async = 0; async <= 1; async++) {
        char dir[] = "/tmp/selsync-drift-XXXXXX", path[64], line[512];
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/m.0.tsv", dir);
        restart(f, async, 1);
        f->cfg.warmup = 1;
        f->cfg.delta = 1e30;
        f->cfg.drift = 10.0 / 1275;
        snprintf(f->cfg.log, sizeof f->cfg.log, "%s/m.%%r.tsv", dir);
        make(f);
        for (int t = 0; t < 12; t++) {
            int k = t == 0 ? 0 : (t - 1) % 5; /* steps since the last average */
            int want = t == 0 || k == 4;
            assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
            params[4][0] += 1.0f; /* the host's update */
            assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
            const selsync_step *s = selsync_engine_last_step(f->e);
            if (s->decision != (want ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP))
                fail_msg("async %d, step %d: %s", async, t, selsync_decision_name(s->decision));
            int anchored = t == 0 ? 0 : t - 1 - k; /* the step whose average is the anchor */
            double w = 13 + anchored; /* w3[0] in the anchor */
            assert_close(s->drift, (double)(k * k) / (1275 - 144 + w * w), 1e-9);
        }
        assert_int_equal(f->mock.f64_calls, 11); /* the agreement of every step after the warm-up */
        assert_int_equal(f->mock.any_calls, 0);
        selsync_engine_destroy(f->e);
        f->e = NULL;
        FILE *m = fopen(path, "r");
        assert_non_null(m);
        assert_non_null(fgets(line, sizeof line, m));
        assert_contains(line, "\tdrift\n");
        fclose(m);
        unlink(path);
        rmdir(dir);
    }
}

/* The engine's sum of squared differences (plugin/core/engine_state.h),
 * which the drift rule runs over every parameter each step: float lanes
 * over blocks equal a double reference to 1e-6 relatively, over lengths that
 * end inside a block and inside a lane; a block whose float sum overflows
 * (values of 1e20) is summed in double, so the result is finite. */
double engine_sq_diff(const float *x, const float *y, size_t n);
static void test_sq_diff(void **state)
{
    (void)state;
    enum { N = 100003 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    srand(7);
    for (size_t j = 0; j < N; j++) {
        x[j] = (float)rand() / RAND_MAX - 0.5f;
        y[j] = x[j] + 1e-3f * ((float)rand() / RAND_MAX - 0.5f);
    }
    const size_t lengths[] = {0, 5, 16, 1000, 1024, 1037, 5000, N};
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++) {
        size_t n = lengths[k];
        double diff = 0, norm = 0;
        for (size_t j = 0; j < n; j++) {
            double d = (double)x[j] - (double)y[j];
            diff += d * d;
            norm += (double)x[j] * (double)x[j];
        }
        assert_close(engine_sq_diff(x, y, n), diff, 1e-6);
        assert_close(engine_sq_diff(x, NULL, n), norm, 1e-6);
    }
    for (size_t j = 0; j < 2048; j++) x[j] = 1e20f;
    double big = engine_sq_diff(x, NULL, 2048);
    assert_true(isfinite(big));
    assert_close(big, 2048 * (double)1e20f * (double)1e20f, 1e-6);
    free(x);
    free(y);
}

/* The drift is taken in the pass that measures the gradients: over two
 * tensors of random values whose lengths end inside a block and inside a
 * lane, with and without a residual snapshot, the drift of a step equals,
 * bit for bit, sum ||x - a||^2 / sum ||a||^2 from engine_sq_diff's own
 * passes over the params and the anchor (the params after step 0's
 * average; one rank, selsync_comm_single). */
static void test_drift_taken_while_measuring(void **state)
{
    fx *f = *state;
    enum { A = 100003, B = 5021 };
    static float pa[A], ga[A], pb[B], gb[B], anchor[A + B];
    for (int residual = 0; residual <= 1; residual++) {
        selsync_tensor t[2] = {{pa, ga, A, 0, SELSYNC_TENSOR_TRAINED, 0, 1}, {pb, gb, B, 1, SELSYNC_TENSOR_TRAINED, 0, 0}};
        selsync_model model = {t, 2, 2, residual, 0};
        srand(11 + residual);
        for (size_t j = 0; j < A + B; j++) {
            float *p = j < A ? &pa[j] : &pb[j - A], *g = j < A ? &ga[j] : &gb[j - A];
            *p = (float)rand() / RAND_MAX - 0.5f;
            *g = 1e-2f * ((float)rand() / RAND_MAX - 0.5f);
        }
        restart(f, 0, 1);
        f->comm = selsync_comm_single();
        f->cfg.warmup = 1;
        f->cfg.delta = 1e30;
        f->cfg.drift = 1e6; /* measured, never reached */
        assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
        assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, &model, &f->e, f->err, sizeof f->err), SELSYNC_OK);
        for (int k = 0; k < 3; k++) {
            /* what the step's drift must be: separate passes over the params it measures and the anchor */
            double want = (engine_sq_diff(pa, anchor, A) + engine_sq_diff(pb, anchor + A, B)) /
                          (engine_sq_diff(anchor, NULL, A) + engine_sq_diff(anchor + A, NULL, B));
            assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
            for (size_t j = 0; j < A + B; j++) { /* the host's update */
                float *p = j < A ? &pa[j] : &pb[j - A];
                *p -= 1e-3f * ((float)rand() / RAND_MAX - 0.5f);
            }
            assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
            const selsync_step *s = selsync_engine_last_step(f->e);
            if (k == 0) { /* the warm-up step's average: the anchor */
                assert_int_equal(s->decision, SELSYNC_SYNC_STEP);
                memcpy(anchor, pa, sizeof pa);
                memcpy(anchor + A, pb, sizeof pb);
                continue;
            }
            assert_int_equal(s->decision, SELSYNC_LOCAL_STEP);
            assert_true(k == 1 ? want == 0 : want > 0); /* step 1 measures the anchor itself */
            if (s->drift != want) fail_msg("residual %d, step %d: drift %.17g, separate passes %.17g", residual, k,
                                           s->drift, want);
        }
        selsync_engine_destroy(f->e);
        f->e = NULL;
    }
}

/* The drift rule with lag = 2 over the same moves: step t applies the drift
 * measured at t - 2, and only when that was measured after the last
 * average (2 local steps since): the drift measured just before an average
 * no longer counts after it. The steps after the warm-up with no agreement
 * yet synchronise. */
static void test_drift_rule_with_lag(void **state)
{
    fx *f = *state;
    enum { K = 2, STEPS = 20 };
    int since[STEPS], last = -1, run = 0, syncs = 0, stale = 0;
    restart(f, 0, 1);
    f->cfg.warmup = 1;
    f->cfg.delta = 1e30;
    f->cfg.drift = 10.0 / 1275; /* 4 steps' moves exceed it, 3 do not (test_drift_rule) */
    f->cfg.lag = K;
    make(f);
    for (int t = 0; t < STEPS; t++) {
        since[t] = t - 1 - last; /* steps since the last average, as measured at t */
        int old = t >= 1 + K && since[t - K] >= 4;
        int want = t < 1 + K || (old && run >= K);
        stale += old && run < K;
        assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
        params[4][0] += 1.0f;
        assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
        if (selsync_engine_last_step(f->e)->decision != (want ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP))
            fail_msg("step %d: %s, expected %s", t, selsync_decision_name(selsync_engine_last_step(f->e)->decision),
                     want ? "sync" : "local");
        if (want) last = t, run = 0, syncs++;
        else run++;
    }
    assert_true(syncs >= 5 && stale >= 2); /* averages by drift, and out-of-date drifts ignored */
}

/* The drift rule averages the ranks' drift: another rank that has moved
 * far makes this one synchronise, one that has not moved delays it. */
static void test_drift_is_the_ranks_mean(void **state)
{
    fx *f = *state;
    double remote[2] = {0, 0}; /* the other rank: its flag, its drift */
    f->mock.remote_scale = 1;
    f->mock.remote_f64 = remote;
    f->cfg.warmup = 1;
    f->cfg.delta = 1e30;
    f->cfg.drift = 0.01;
    make(f);
    step(f); /* warm-up */
    remote[1] = 0.03; /* mean 0.015 although this rank has not moved */
    const selsync_step *s = step(f);
    assert_int_equal(s->decision, SELSYNC_SYNC_STEP);
    assert_close(s->drift, 0.015, 1e-12);
    remote[1] = 0.019; /* mean 0.0095 */
    s = step(f);
    assert_int_equal(s->decision, SELSYNC_LOCAL_STEP);
    assert_close(s->drift, 0.0095, 1e-12);
    remote[0] = 1; /* the other rank's delta flag still counts */
    s = step(f);
    assert_int_equal(s->decision, SELSYNC_SYNC_STEP);
}

/* agree = mean: a step synchronises when the ranks' mean Delta reaches
 * delta, agreed in one sum_f64 (the other rank's Delta in remote[0]). With
 * smoothing 1 this rank's Delta is |S - S'| / S' of its squared gradient
 * norms; grads scaled by sqrt(1.4) give 0.4, which any rank's flag would
 * synchronise on and the mean with a rank at 0 does not. */
static void test_agree_mean(void **state)
{
    fx *f = *state;
    double remote[2] = {0, 0}; /* the other rank: its Delta, its drift */
    static const struct { float grad; double other, own; int sync; } steps[] = {
        {1.0f, 0.61, 0, 1},        /* mean 0.305 */
        {1.0f, 0.59, 0, 0},        /* mean 0.295: any would synchronise */
        {1.1832160f, 0, 0.4, 0},   /* mean 0.2 although this rank's flag is up */
        {1.0f, 0.35, 0.4 / 1.4, 1}, /* mean 0.318 although this rank's flag is down */
        {1.0f, INFINITY, 0, 1},
    };
    f->mock.remote_scale = 1;
    f->mock.remote_f64 = remote;
    f->cfg.warmup = 1;
    f->cfg.smoothing = 1;
    f->cfg.delta = 0.3;
    f->cfg.agree = SELSYNC_AGREE_MEAN;
    make(f);
    step(f); /* warm-up */
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        set_grads(steps[i].grad);
        remote[0] = steps[i].other;
        const selsync_step *s = step(f);
        assert_close(s->change, steps[i].own, 1e-5);
        assert_int_equal(s->local_flag, steps[i].own >= 0.3);
        if (s->decision != (steps[i].sync ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP))
            fail_msg("step %zu: %s", i + 1, selsync_decision_name(s->decision));
    }
    assert_int_equal(f->mock.f64_calls, 5);
    assert_int_equal(f->mock.any_calls, 0);
}

/* The outer step on every average (outer_momentum beta, outer_lr alpha):
 * the other rank holds 3x this one's params, so each average is x_avg =
 * 2x and, with the anchor a (the params after the previous average),
 * u = beta u + (a - x_avg) / lr and x = a - alpha lr u, element by element
 * (computed here in double); the BN statistic is averaged plainly (2x).
 * Applied at once (after_update) and a step late (async: at the next
 * before_update, with the rate of the step that started it). */
static void test_outer_step(void **state)
{
    fx *f = *state;
    const double lr = 0.1, beta = 0.5, alpha = 1.5;
    for (int async = 0; async <= 1; async++) {
        float p0[N_ALL], got[N_ALL];
        double want[5][N_ALL], u[N_ALL] = {0}; /* want[j]: after j averages */
        restart(f, async, 3);
        f->cfg.delta = 0;
        f->cfg.outer_momentum = beta;
        f->cfg.outer_lr = alpha;
        snapshot(p0);
        for (int k = 0; k < N_ALL; k++) want[0][k] = p0[k];
        for (int j = 1; j < 5; j++)
            for (int k = 0; k < N_ALL; k++) {
                double a = want[j - 1][k];
                u[k] = beta * u[k] + (a - 2 * a) / lr;
                want[j][k] = k == 9 || k == 10 ? 2 * a : a - alpha * lr * u[k]; /* s1: a plain average */
            }
        make(f);
        for (int t = 0; t < 5; t++) {
            int applied = async ? t : t + 1; /* a step late: step t's before_update applies step t - 1's */
            assert_int_equal(selsync_engine_before_update(f->e, 1.0, lr), SELSYNC_OK);
            if (async) {
                snapshot(got);
                for (int k = 0; k < N_ALL; k++) assert_close(got[k], want[applied][k], 1e-6);
            }
            assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
            if (!async && applied < 5) {
                snapshot(got);
                for (int k = 0; k < N_ALL; k++) assert_close(got[k], want[applied][k], 1e-6);
            }
        }
        assert_int_equal(f->mock.start_calls, async ? 5 : 0);
        selsync_engine_destroy(f->e);
        f->e = NULL;
    }
}

/* sync_momentum: a parameter average also averages the trained tensors'
 * grad (the host's momentum after its update), sent after the params: at
 * once (after_update) it replaces each grad; a step late (async) the grad
 * becomes the average plus the gradient the next backward pass added. The
 * other rank holds r; without the key the grads are left alone and the
 * average carries the params alone. */
static void test_sync_momentum(void **state)
{
    fx *f = *state;
    float r[N_ALL + N_TRAINED];
    for (int i = 0; i < N_ALL + N_TRAINED; i++) r[i] = 0.25f * (float)i + 1.0f;
    for (int on = 0; on <= 1; on++)
        for (int async = 0; async <= 1; async++) {
            restart(f, async, 0);
            f->mock.remote = r;
            f->mock.remote_n = N_ALL + N_TRAINED;
            f->cfg.warmup = 100;
            f->cfg.sync_momentum = on;
            make(f);
            set_grads(2.0f); /* the momentum the host's update leaves */
            assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
            assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
            if (async) {
                for (int i = 0; i < N_TENSORS; i++) /* the next backward pass */
                    for (size_t j = 0; grads[i] && j < counts[i]; j++) grads[i][j] += 0.5f;
                assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
                assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
            }
            assert_int_equal(f->mock.start_calls, async ? 2 : 0);
            assert_int_equal(selsync_engine_last_step(f->e)->bytes_sent, 4 * (N_ALL + on * N_TRAINED));
            for (int i = 0, k = 0; i < N_TENSORS; i++)
                for (size_t j = 0; grads[i] && j < counts[i]; j++, k++) {
                    float want = (on ? (2.0f + r[N_ALL + k]) * 0.5f : 2.0f) + (async ? 0.5f : 0.0f);
                    if (grads[i][j] != want)
                        fail_msg("on %d async %d, tensor %d element %zu: %g, expected %g", on, async, i, j,
                                 grads[i][j], want);
                }
            selsync_engine_destroy(f->e);
            f->e = NULL;
        }
}

/* The drift rule's anchor and the outer momentum go on across a
 * checkpoint: a run restored at step 5 makes the decisions and ends with
 * the bits of the uninterrupted run. */
static void test_policy_arrays_survive_a_restore(void **state)
{
    fx *f = *state;
    selsync_decision whole[12];
    float end[N_ALL], got[N_ALL];
    f->mock.remote_scale = 1;
    f->cfg.warmup = 1;
    f->cfg.delta = 1e30;
    f->cfg.drift = 10.0 / 1275;
    f->cfg.outer_momentum = 0.5;
    make(f);
    void *saved = NULL;
    size_t len = selsync_engine_snapshot_size(f->e);
    for (int t = 0; t < 12; t++) {
        assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
        params[4][0] += 1.0f;
        assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
        whole[t] = selsync_engine_last_step(f->e)->decision;
        if (t == 5) {
            saved = malloc(len);
            assert_int_equal(selsync_engine_snapshot(f->e, saved, len), SELSYNC_OK);
        }
    }
    snapshot(end);
    selsync_engine_destroy(f->e);
    f->e = NULL;
    make(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_OK);
    for (int t = 6; t < 12; t++) {
        assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
        params[4][0] += 1.0f;
        assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
        if (selsync_engine_last_step(f->e)->decision != whole[t]) fail_msg("restored run, step %d: another decision", t);
    }
    snapshot(got);
    assert_memory_equal(got, end, sizeof end);
    int syncs = 0;
    for (int t = 1; t < 12; t++) syncs += whole[t] == SELSYNC_SYNC_STEP;
    assert_true(syncs >= 1 && syncs <= 8); /* the rule decided, not every step */
    selsync_engine_destroy(f->e);
    f->e = NULL;
    f->cfg.outer_momentum = 0; /* a snapshot with the outer momentum does not restore without it */
    make(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_EMISMATCH);
    assert_contains(selsync_engine_error(f->e), "drift, lag or outer step");
    free(saved);
}

/* sync_until (post-local SGD): every step synchronises, whatever delta says,
 * until the step after the rate first falls (decay) or stops rising
 * (burn_in); then the steps are selective (delta huge: local), and the
 * switch survives a checkpoint. */
static void test_sync_until(void **state)
{
    fx *f = *state;
    /* a burn-in from 0.025 to 0.1 over 3 steps, 0.1 for 2 steps, then a decay */
    const double rates[10] = {0.025, 0.05, 0.075, 0.1, 0.1, 0.1, 0.05, 0.05, 0.02, 0.02};
    static const struct { selsync_sync_until until; int first_local; } cases[] = {
        {SELSYNC_SYNC_UNTIL_BURN_IN, 5}, /* step 4's rate did not rise: local from step 5 */
        {SELSYNC_SYNC_UNTIL_DECAY, 7},   /* step 6's rate fell */
        {SELSYNC_SYNC_UNTIL_NONE, 1},    /* the warm-up alone */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        selsync_engine_destroy(f->e);
        f->cfg = (selsync_config){0};
        selsync_config_default(&f->cfg, "test.cfg", 1);
        f->cfg.warmup = 1;
        f->cfg.delta = 1e30;
        f->cfg.max_local = 0; /* decided at the step, unbounded: local from its first step */
        f->cfg.lag = 0;
        f->cfg.sync_until = cases[c].until;
        make(f);
        void *saved = NULL;
        size_t len = 0;
        for (int t = 0; t < 10; t++) {
            if (t == 5) { /* a checkpoint here and a restored engine go on alike */
                len = selsync_engine_snapshot_size(f->e);
                saved = malloc(len);
                assert_int_equal(selsync_engine_snapshot(f->e, saved, len), SELSYNC_OK);
                selsync_engine_destroy(f->e);
                make(f);
                assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_OK);
                free(saved);
            }
            selsync_decision want = t < cases[c].first_local ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP;
            if (step_at(f, rates[t], t) != want) fail_msg("case %zu, step %d: not %s", c, t, selsync_decision_name(want));
        }
    }
}

/* A synchronisation the flags asked for starts the run of local steps anew. */
static void test_max_local_counts_from_the_last_sync(void **state)
{
    fx *f = *state;
    const uint8_t one = 1;
    f->cfg.warmup = 0;
    f->cfg.delta = 1e30;
    f->cfg.max_local = 2;
    make(f);
    assert_int_equal(step(f)->decision, SELSYNC_SYNC_STEP); /* step 0: no previous value */
    assert_int_equal(step(f)->decision, SELSYNC_LOCAL_STEP);
    mock_script_any(&f->mock, &one, 1);
    assert_int_equal(step(f)->decision, SELSYNC_SYNC_STEP); /* asked for elsewhere */
    assert_int_equal(step(f)->decision, SELSYNC_LOCAL_STEP);
    assert_int_equal(step(f)->decision, SELSYNC_LOCAL_STEP);
    assert_int_equal(step(f)->decision, SELSYNC_SYNC_STEP); /* the guard */
}

/* target_sync: delta moves by exp(0.1 (synced - target)) per step after the
 * warm-up, and the share of synchronised steps settles near the target. */
static void test_target_sync_adapts_delta(void **state)
{
    fx *f = *state;
    const double target = 0.25;
    double delta = 0.3;
    int synced = 0;
    f->cfg.warmup = 5;
    f->cfg.window = 1;
    f->cfg.smoothing = 1;
    f->cfg.delta = delta;
    f->cfg.target_sync = target;
    make(f);
    for (int t = 0; t < 1200; t++) {
        set_grads(1.0f + (float)((t * 7919) % 13) / 13.0f); /* changes of 0 to ~90 % */
        const selsync_step *s = step(f);
        assert_close(s->delta, delta, 1e-9);
        if (t >= 5) delta *= exp(0.1 * ((s->decision == SELSYNC_SYNC_STEP) - target));
        if (t >= 600) synced += s->decision == SELSYNC_SYNC_STEP;
    }
    assert_true(fabs(delta - 0.3) > 1e-3); /* it moved */
    if (fabs(synced / 600.0 - target) > 0.05) fail_msg("%d of 600 steps synchronised, target %.2f", synced, target);
}

static void test_no_agreement_for_baselines(void **state)
{
    fx *f = *state;
    const selsync_method m[] = {SELSYNC_METHOD_BSP, SELSYNC_METHOD_FEDAVG, SELSYNC_METHOD_LOCAL};
    const int sums[] = {6, 3, 0};
    for (int i = 0; i < 3; i++) {
        selsync_config_default(&f->cfg, "test.cfg", 1);
        f->cfg.method = m[i];
        f->cfg.fedavg_interval = 2;
        mock_init(&f->mock, 0, 2);
        selsync_engine_destroy(f->e);
        make(f);
        for (int t = 0; t < 6; t++) {
            const selsync_step *s = step(f);
            assert_int_equal(s->decision, m[i] == SELSYNC_METHOD_BSP || (m[i] == SELSYNC_METHOD_FEDAVG && t % 2)
                                              ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
        }
        assert_int_equal(f->mock.any_calls, 0);
        assert_int_equal(f->mock.sum_calls, sums[i]);
    }
}

static void test_layer_granularity(void **state)
{
    fx *f = *state;
    float before[N_ALL], after[N_ALL];
    const uint8_t remote[N_LAYERS] = {0, 1, 0, 0};
    f->cfg.granularity = SELSYNC_GRANULARITY_LAYER;
    f->cfg.smoothing = 1; /* s_t = x_t */
    f->cfg.warmup = 0;
    f->cfg.delta = 0.5;
    make(f);
    f->mock.remote_scale = 3;

    const selsync_step *s = step(f); /* every layer with a trained tensor */
    assert_int_equal(f->mock.any_last_n, N_LAYERS);
    assert_memory_equal(f->mock.any_last_in, ((uint8_t[]){1, 1, 0, 1}), N_LAYERS);
    assert_int_equal(s->layers_synced, 3);
    assert_int_equal(f->mock.sum_last_n, N_ALL);

    assert_int_equal(step(f)->decision, SELSYNC_LOCAL_STEP); /* nothing changed */
    assert_int_equal(f->mock.sum_calls, 1);

    for (int j = 0; j < 5; j++) f->gw3[j] = 2; /* layer 3: x x4, change 3 */
    snapshot(before);
    s = step(f);
    snapshot(after);
    assert_int_equal(s->layers_synced, 1);
    assert_int_equal(f->mock.sum_last_n, 5);
    assert_memory_equal(f->mock.sum_last_in, before + 11, 5 * sizeof(float));
    for (int i = 0; i < N_ALL; i++) assert_true(after[i] == (i >= 11 ? 2 : 1) * before[i]);
    assert_close(s->change, (14.0 + 15.0) / 14.0 - 1, 1e-12); /* whole model: 14 -> 29 */

    mock_script_any(&f->mock, remote, N_LAYERS); /* layer 1 flagged elsewhere only */
    snapshot(before);
    s = step(f);
    snapshot(after);
    assert_int_equal(s->local_flag, 0);
    assert_int_equal(s->layers_synced, 1);
    assert_int_equal(f->mock.sum_last_n, 5); /* w1[3] + s1[2] */
    for (int i = 0; i < N_ALL; i++) assert_true(after[i] == (i >= 6 && i < 11 ? 2 : 1) * before[i]);
}

/* ---- what is averaged, and when ---- */

static void check_params(fx *f, int sync_bn)
{
    float r[N_ALL], before[N_ALL], host[N_ALL], after[N_ALL], gsave[N_TRAINED];
    mock_init(&f->mock, 1, 3);
    f->mock.remote_scale = 0;
    for (int i = 0; i < N_ALL; i++) r[i] = 0.37f * (float)i - 1.0f;
    f->mock.remote = r;
    f->mock.remote_n = N_ALL;
    f->cfg.warmup = 100;
    f->cfg.aggregate = SELSYNC_AGGREGATE_PARAMS;
    f->cfg.sync_bn_stats = sync_bn;
    make(f);
    set_grads(0.5f);
    snapshot(before);
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    snapshot(host);
    assert_memory_equal(host, before, sizeof host); /* nothing before the update */
    for (int i = 0, k = 0; i < N_TENSORS; i++) /* the host's update */
        for (size_t j = 0; grads[i] && j < counts[i]; j++) {
            params[i][j] -= 0.1f * grads[i][j];
            gsave[k++] = grads[i][j];
        }
    snapshot(host);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    snapshot(after);
    assert_int_equal(f->mock.sum_calls, 1);
    assert_int_equal(f->mock.sum_last_n, sync_bn ? N_ALL : N_TRAINED);
    for (int i = 0, k = 0; i < N_ALL; i++) {
        int stat = i == 9 || i == 10;
        float want = stat && !sync_bn ? host[i] : (host[i] + r[k]) * (1.0f / 3.0f);
        k += !stat || sync_bn;
        if (after[i] != want) fail_msg("element %d: %.9g, expected %.9g", i, after[i], want);
    }
    for (int i = 0, k = 0; i < N_TENSORS; i++) /* grads untouched */
        for (size_t j = 0; grads[i] && j < counts[i]; j++) assert_true(grads[i][j] == gsave[k++]);
}

static void test_aggregate_params(void **state) { check_params(*state, 1); }
static void test_aggregate_params_no_bn(void **state) { check_params(*state, 0); }

static void check_grads(fx *f, int sync_bn)
{
    float r[N_ALL], before[N_ALL], g0[N_TRAINED], host[N_ALL], after[N_ALL];
    mock_init(&f->mock, 0, 2);
    f->mock.remote_scale = 0;
    for (int i = 0; i < N_ALL; i++) r[i] = 1.5f + (float)i;
    f->mock.remote = r;
    f->mock.remote_n = N_ALL;
    f->cfg.method = SELSYNC_METHOD_BSP; /* default aggregate: grads */
    f->cfg.sync_bn_stats = sync_bn;
    make(f);
    for (int i = 0, k = 0; i < N_TENSORS; i++)
        for (size_t j = 0; grads[i] && j < counts[i]; j++, k++) g0[k] = grads[i][j] = 0.25f * (float)k;
    snapshot(before);
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    assert_int_equal(f->mock.sum_last_n, sync_bn ? N_ALL : N_TRAINED);
    snapshot(host);
    for (int i = 0, k = 0, n = 0; i < N_TENSORS; n += (int)counts[i], i++) {
        size_t packed = 0; /* one bucket, packed from the last tensor to the first */
        for (int m = i + 1; m < N_TENSORS; m++) packed += grads[m] || sync_bn ? counts[m] : 0;
        for (size_t j = 0; j < counts[i]; j++) {
            int idx = n + (int)j;
            if (grads[i]) { /* averaged grad, untouched param */
                assert_true(grads[i][j] == (g0[k] + r[packed + j]) * 0.5f);
                assert_true(host[idx] == before[idx]);
                k++;
            } else {
                assert_true(host[idx] == (sync_bn ? (before[idx] + r[packed + j]) * 0.5f : before[idx]));
            }
        }
    }
    for (int i = 0; i < N_TENSORS; i++)
        for (size_t j = 0; grads[i] && j < counts[i]; j++) params[i][j] -= grads[i][j];
    snapshot(host);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    snapshot(after);
    assert_memory_equal(after, host, sizeof after); /* nothing after the update */
    assert_int_equal(f->mock.sum_calls, 1);
}

static void test_aggregate_grads(void **state) { check_grads(*state, 1); }
static void test_aggregate_grads_no_bn(void **state) { check_grads(*state, 0); }

/* ---- gradient buckets and overlap ---- */

/* The fixture's communicator: 2 ranks, background sums deferred to the wait. */
static void use_async_mock(fx *f)
{
    mock_init(&f->mock, 0, 2);
    f->mock.async = 1;
    f->comm = mock_as_comm(&f->mock);
}

/* One bsp step with 12-byte buckets (3 floats): from the last tensor, the
 * buckets are [gw3] (5 floats), [s1 gw1] (2 + 3), [gb0 gw0] (2 + 4).
 * async: the mock defers started sums to wait_sums; the layers are reported
 * ready from the last to the first. Leaves the grads and stats in out. */
static void bucketed_step(fx *f, selsync_method method, int async, int overlap, float *out)
{
    float r[N_ALL];
    mock_init(&f->mock, 0, 2);
    f->mock.async = async;
    f->comm = mock_as_comm(&f->mock);
    f->mock.remote_scale = 0;
    for (int i = 0; i < N_ALL; i++) r[i] = 0.75f * (float)i - 2.0f;
    f->mock.remote = r;
    f->mock.remote_n = N_ALL;
    f->cfg.method = method;
    f->cfg.aggregate = SELSYNC_AGGREGATE_GRADS;
    f->cfg.bucket_mb = 12e-6;
    f->cfg.overlap = overlap;
    make(f);
    for (int i = 0, k = 0, n = 0; i < N_TENSORS; i++)
        for (size_t j = 0; j < counts[i]; j++, n++) {
            params[i][j] = 1.0f + (float)n;
            if (grads[i]) grads[i][j] = 0.3f * (float)k++ + 0.1f;
        }
    for (size_t l = N_LAYERS; l-- > 0;) assert_int_equal(selsync_engine_layer_ready(f->e, l), SELSYNC_OK);
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    for (int i = 0, n = 0; i < N_TENSORS; n += (int)counts[i], i++)
        memcpy(out + n, grads[i] ? grads[i] : params[i], counts[i] * sizeof(float));
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
}

static void test_buckets_cover_every_tensor_once(void **state)
{
    fx *f = *state;
    float got[N_ALL];
    const float *want[] = {grads[4], params[3], grads[2], grads[1], grads[0]};
    bucketed_step(f, SELSYNC_METHOD_BSP, 1, 1, got);
    assert_int_equal(f->mock.start_calls, 3);
    assert_int_equal(f->mock.wait_calls, 1);
    assert_int_equal(f->mock.sum_calls, 3);
    assert_int_equal(f->mock.sum_total_n, N_ALL);
    assert_int_equal(f->mock.started_segs, 5);
    for (int i = 0; i < 5; i++) assert_ptr_equal(f->mock.started_seg[i], want[i]);
    assert_int_equal(selsync_engine_last_step(f->e)->decision, SELSYNC_SYNC_STEP);
}

/* The buckets start as soon as their layers are ready, not later. */
static void test_buckets_start_when_their_layers_are_ready(void **state)
{
    fx *f = *state;
    use_async_mock(f);
    f->cfg.method = SELSYNC_METHOD_BSP;
    f->cfg.bucket_mb = 12e-6;
    make(f);
    for (int s = 0; s < 2; s++) {
        int base = 3 * s;
        assert_int_equal(selsync_engine_layer_ready(f->e, 3), SELSYNC_OK);
        assert_int_equal(f->mock.start_calls, base + 1);
        assert_int_equal(selsync_engine_layer_ready(f->e, 2), SELSYNC_OK);
        assert_int_equal(f->mock.start_calls, base + 1);
        assert_int_equal(selsync_engine_layer_ready(f->e, 1), SELSYNC_OK);
        assert_int_equal(f->mock.start_calls, base + 2);
        assert_int_equal(f->mock.sum_calls, 3 * s); /* none run before the wait */
        assert_int_equal(selsync_engine_layer_ready(f->e, 0), SELSYNC_OK);
        assert_int_equal(f->mock.start_calls, base + 3);
        step(f);
        assert_int_equal(f->mock.wait_calls, s + 1);
        assert_int_equal(f->mock.sum_calls, 3 * (s + 1));
    }
}

/* Overlapped or not, deferred or not: the same bits, and the norm of the
 * rank's own gradient (selsync averaging gradients in its warm-up). */
static void test_overlap_gives_the_same_bits(void **state)
{
    fx *f = *state;
    float a[N_ALL], b[N_ALL], c[N_ALL];
    double norm;
    bucketed_step(f, SELSYNC_METHOD_SELSYNC, 1, 1, a);
    norm = selsync_engine_last_step(f->e)->grad_norm;
    selsync_engine_destroy(f->e);
    f->e = NULL;
    bucketed_step(f, SELSYNC_METHOD_SELSYNC, 0, 0, b);
    assert_int_equal(f->mock.sum_calls, 3);
    assert_true(selsync_engine_last_step(f->e)->grad_norm == norm);
    selsync_engine_destroy(f->e);
    f->e = NULL;
    bucketed_step(f, SELSYNC_METHOD_SELSYNC, 1, 0, c);
    assert_int_equal(f->mock.start_calls, 0);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(a, c, sizeof a);
    for (int i = 0, k = 0; i < N_TENSORS; i++) /* and the values: (own + remote) / 2 */
        for (size_t j = 0; grads[i] && j < counts[i]; j++, k++) assert_true(a[k + (i > 3 ? 2 : 0)] != 0.3f * (float)k + 0.1f);
}

/* selsync overlaps its warm-up steps and the steps max_local forces, not
 * the steps it decides after the backward pass; on_nonfinite = skip never. */
static void test_overlap_only_where_the_step_is_known_to_sync(void **state)
{
    fx *f = *state;
    use_async_mock(f);
    f->cfg.aggregate = SELSYNC_AGGREGATE_GRADS;
    f->cfg.window = 2;
    f->cfg.warmup = 1;
    f->cfg.delta = 1e9; /* never significant after the warm-up */
    f->cfg.max_local = 2;
    make(f);
    const int starts[] = {1, 0, 0, 1, 0, 0, 1};
    const int synced[] = {1, 0, 0, 1, 0, 0, 1};
    for (int s = 0; s < 7; s++) {
        int before = f->mock.start_calls;
        set_grads(1.0f);
        for (size_t l = N_LAYERS; l-- > 0;) assert_int_equal(selsync_engine_layer_ready(f->e, l), SELSYNC_OK);
        if ((f->mock.start_calls > before) != starts[s]) fail_msg("step %d: started %d", s, f->mock.start_calls - before);
        assert_int_equal(step(f)->decision, synced[s] ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
    }
    selsync_engine_destroy(f->e);
    f->e = NULL;
    use_async_mock(f);
    selsync_config_default(&f->cfg, "test.cfg", 1);
    f->cfg.method = SELSYNC_METHOD_BSP;
    f->cfg.on_nonfinite = SELSYNC_NONFINITE_SKIP;
    make(f);
    assert_int_equal(f->cfg.overlap, 0);
    for (size_t l = N_LAYERS; l-- > 0;) assert_int_equal(selsync_engine_layer_ready(f->e, l), SELSYNC_OK);
    assert_int_equal(step(f)->decision, SELSYNC_SYNC_STEP);
    assert_int_equal(f->mock.start_calls, 0);
    assert_int_equal(f->mock.sum_calls, 1);
}

/* A started sum that fails fails the step, with the message. */
static void test_overlap_failure(void **state)
{
    fx *f = *state;
    use_async_mock(f);
    f->mock.fail_sum_call = 1;
    f->cfg.method = SELSYNC_METHOD_BSP;
    make(f);
    assert_int_equal(selsync_engine_layer_ready(f->e, N_LAYERS), SELSYNC_EINVAL); /* says why */
    assert_contains(selsync_engine_error(f->e), "selsync_engine_layer_ready for layer 4 of 4");
    for (size_t l = N_LAYERS; l-- > 0;) assert_int_equal(selsync_engine_layer_ready(f->e, l), SELSYNC_OK);
    assert_int_equal(f->mock.start_calls, 1);
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_ECOMM);
    assert_contains(selsync_engine_error(f->e), "started during the backward pass");
    assert_int_equal(selsync_engine_layer_ready(f->e, 0), SELSYNC_ECOMM);
    assert_int_equal(selsync_engine_layer_ready(f->e, N_LAYERS), SELSYNC_EINVAL);
    assert_contains(selsync_engine_error(f->e), "started during the backward pass"); /* the first failure's */
}

/* aggregate = params, overlap = 1: the average starts after the update,
 * runs during the next step and is applied by its before_update (a STAT
 * tensor keeps what that step's forward pass added); its bytes are the next
 * step's; consensus and finish apply a pending one first. */
static void test_parameter_average_one_step_late(void **state)
{
    fx *f = *state;
    float r[N_ALL], host[N_ALL], got[N_ALL], cur[N_ALL];
    selsync_totals tot;
    use_async_mock(f);
    f->mock.remote_scale = 0;
    for (int i = 0; i < N_ALL; i++) r[i] = 0.5f * (float)i - 3.0f;
    f->mock.remote = r;
    f->mock.remote_n = N_ALL;
    f->cfg.aggregate = SELSYNC_AGGREGATE_PARAMS;
    f->cfg.overlap = 1;
    f->cfg.line[SELSYNC_KEY_OVERLAP] = 9; /* as if set in the cfg */
    f->cfg.warmup = 100;
    make(f);
    assert_int_equal(f->cfg.overlap, 1);
    for (int s = 0; s < 3; s++) {
        set_grads(0.25f);
        snapshot(cur);
        assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
        assert_int_equal(f->mock.wait_calls, s); /* step s applies the average of step s - 1 */
        assert_int_equal(f->mock.sum_calls, s);
        snapshot(got);
        for (int i = 0; s > 0 && i < N_ALL; i++) {
            float avg = (host[i] + r[i]) * 0.5f;
            float want = i == 9 || i == 10 ? cur[i] + (avg - host[i]) : avg;
            if (got[i] != want) fail_msg("step %d, element %d: %.9g, expected %.9g", s, i, got[i], want);
        }
        for (int i = 0; i < N_TENSORS; i++) /* the host's update */
            for (size_t j = 0; grads[i] && j < counts[i]; j++) params[i][j] -= 0.1f * grads[i][j];
        snapshot(host);
        assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
        assert_int_equal(f->mock.start_calls, s + 1);
        snapshot(got);
        assert_memory_equal(got, host, sizeof got); /* nothing applied yet */
        assert_int_equal(selsync_engine_last_step(f->e)->decision, SELSYNC_SYNC_STEP);
        assert_int_equal(selsync_engine_last_step(f->e)->bytes_sent, s == 0 ? 0 : 4 * N_ALL);
        params[3][0] += 0.5f; /* the next forward pass moves a statistic */
    }
    assert_int_equal(f->mock.start_calls, 3);
    snapshot(host);
    assert_non_null(selsync_engine_consensus(f->e)); /* applies the pending average first */
    assert_int_equal(f->mock.wait_calls, 3);
    snapshot(got);
    for (int i = 0; i < N_ALL; i++)
        if (i != 9 && i != 10 && got[i] != (host[i] + r[i]) * 0.5f) fail_msg("element %d", i);
    assert_int_equal(selsync_engine_finish(f->e), SELSYNC_OK);
    assert_int_equal(f->mock.start_calls, 3);
    selsync_engine_get_totals(f->e, &tot);
    assert_int_equal(tot.bytes_sent, 4 * (4 * N_ALL)); /* three averages and the final one, not the consensus */
    assert_int_equal(tot.late_averages, 3);
}

/* fedavg with overlap (its default, as selsync's): each round's average
 * starts after its update and is applied by the next step; the rounds and
 * bytes are fedavg's. With fedavg_fraction < 1 (members only) the average
 * is at once. */
static void test_fedavg_average_one_step_late(void **state)
{
    fx *f = *state;
    selsync_totals tot;
    use_async_mock(f);
    f->cfg.method = SELSYNC_METHOD_FEDAVG;
    f->cfg.fedavg_interval = 2;
    make(f);
    assert_int_equal(f->cfg.overlap, 1);
    for (int s = 0; s < 6; s++) {
        const selsync_step *x = step(f);
        assert_int_equal(x->decision, s % 2 == 1 ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
        assert_int_equal(f->mock.start_calls, (s + 1) / 2); /* started after each round's update */
        assert_int_equal(f->mock.wait_calls, s / 2);         /* applied by the step after it */
    }
    assert_int_equal(selsync_engine_finish(f->e), SELSYNC_OK);
    assert_int_equal(f->mock.wait_calls, 3); /* the pending round first */
    selsync_engine_get_totals(f->e, &tot);
    assert_int_equal(tot.late_averages, 3);
    assert_int_equal(tot.synced_steps, 3);
}

/* With overlap = 0, or without a background sum, the average is at once. */
static void test_parameter_average_at_once(void **state)
{
    fx *f = *state;
    use_async_mock(f);
    f->cfg.aggregate = SELSYNC_AGGREGATE_PARAMS;
    f->cfg.overlap = 0;
    f->cfg.line[SELSYNC_KEY_OVERLAP] = 9;
    make(f);
    step(f);
    assert_int_equal(f->mock.start_calls, 0);
    assert_int_equal(f->mock.sum_calls, 1);
    assert_int_equal(selsync_engine_last_step(f->e)->bytes_sent, 4 * N_ALL);
    selsync_engine_destroy(f->e);
    f->e = NULL;
    mock_init(&f->mock, 0, 2); /* no sum_f32v_start */
    f->comm = mock_as_comm(&f->mock);
    selsync_config_default(&f->cfg, "test.cfg", 1);
    f->cfg.overlap = 1;
    f->cfg.line[SELSYNC_KEY_OVERLAP] = 9;
    make(f);
    step(f);
    assert_int_equal(f->mock.sum_calls, 1);
}

static void test_fedavg_members(void **state)
{
    fx *f = *state;
    enum { WORLD = 5, STEPS = 8 };
    float r[N_ALL], before[N_ALL], after[N_ALL];
    int members[STEPS] = {0}, differ = 0, was[WORLD][STEPS];
    for (int i = 0; i < N_ALL; i++) r[i] = 100.0f + (float)i;
    for (int rank = 0; rank < WORLD; rank++) {
        teardown(state);
        setup(state);
        f = *state;
        mock_init(&f->mock, rank, WORLD);
        f->mock.remote_scale = 0;
        f->mock.remote = r;
        f->mock.remote_n = N_ALL;
        f->cfg.method = SELSYNC_METHOD_FEDAVG;
        f->cfg.fedavg_interval = 2;
        f->cfg.fedavg_fraction = 0.4; /* k = 2 */
        f->cfg.seed = 7;
        make(f);
        for (int t = 0; t < STEPS; t++) {
            int calls = f->mock.sum_calls, member = 1;
            snapshot(before);
            const selsync_step *s = step(f);
            snapshot(after);
            assert_int_equal(f->mock.sum_calls, calls + (t % 2));
            assert_int_equal(s->decision, t % 2 ? SELSYNC_SYNC_STEP : SELSYNC_LOCAL_STEP);
            if (t % 2 == 0) continue;
            for (int i = 0; i < N_ALL; i++) member &= f->mock.sum_last_in[i] != 0;
            if (!member)
                for (int i = 0; i < N_ALL; i++) assert_true(f->mock.sum_last_in[i] == 0);
            for (int i = 0; i < N_ALL; i++) /* everyone receives sum / k */
                assert_true(after[i] == ((member ? before[i] : 0.0f) + r[i]) * 0.5f);
            members[t] += member;
            was[rank][t] = member;
        }
    }
    for (int t = 1; t < STEPS; t += 2) {
        assert_int_equal(members[t], 2); /* every rank computed the same draw */
        for (int rank = 0; rank < WORLD; rank++) differ |= was[rank][t] != was[rank][1];
    }
    assert_true(differ); /* the draw depends on the step */
}

static void test_fedavg_all_ranks(void **state)
{
    fx *f = *state;
    float before[N_ALL], after[N_ALL];
    mock_init(&f->mock, 2, 4);
    f->mock.remote_scale = 1; /* sum = 2x, average over 4 = x/2 */
    f->cfg.method = SELSYNC_METHOD_FEDAVG;
    f->cfg.fedavg_interval = 3;
    make(f);
    for (int t = 0; t < 6; t++) {
        snapshot(before);
        step(f);
        snapshot(after);
        for (int i = 0; i < N_ALL; i++) assert_true(after[i] == (t % 3 == 2 ? 0.5f : 1.0f) * before[i]);
    }
    assert_int_equal(f->mock.sum_calls, 2);
}

/* FedAvg with C < 1 sums over the members alone (sum_f32v_among): every
 * rank passes the same ascending list, which names exactly the ranks whose
 * values are in the average; a non-member contributes and sends nothing;
 * bsp_bytes is still reckoned for a sum over all ranks. A communicator
 * without the op (no_among): one sum_f32v over all ranks, non-members
 * contributing zeros, with the same draw and the same averages. */
static void test_fedavg_members_only(void **state)
{
    fx *f = *state;
    enum { WORLD = 5, K = 3, STEPS = 6 };
    float r[N_ALL], before[N_ALL], after[N_ALL];
    int list[WORLD][STEPS][K], member[2][WORLD][STEPS];
    for (int i = 0; i < N_ALL; i++) r[i] = 100.0f + (float)i;
    for (int without = 0; without < 2; without++)
        for (int rank = 0; rank < WORLD; rank++) {
            teardown(state);
            setup(state);
            f = *state;
            mock_init(&f->mock, rank, WORLD);
            f->mock.no_among = without;
            f->comm = mock_as_comm(&f->mock);
            f->mock.remote_scale = 0; /* the other members' sum is r */
            f->mock.remote = r;
            f->mock.remote_n = N_ALL;
            f->cfg.method = SELSYNC_METHOD_FEDAVG;
            f->cfg.fedavg_interval = 1;
            f->cfg.fedavg_fraction = 0.5; /* k = round(2.5) = 3 */
            f->cfg.seed = 11;
            make(f);
            for (int t = 0; t < STEPS; t++) {
                snapshot(before);
                const selsync_step *s = step(f);
                snapshot(after);
                int in = after[0] == (before[0] + r[0]) * (1.0f / K);
                for (int i = 0; i < N_ALL; i++) {
                    assert_true(after[i] == ((in ? before[i] : 0.0f) + r[i]) * (1.0f / K));
                    assert_true((f->mock.sum_last_in[i] != 0) == in);
                }
                member[without][rank][t] = in;
                assert_int_equal(f->mock.sum_calls, t + 1);
                assert_int_equal(f->mock.among_calls, without ? 0 : t + 1);
                assert_int_equal(s->bytes_sent, without || in ? 4 * N_ALL : 0);
                if (without) continue;
                assert_int_equal(f->mock.among_k, K);
                memcpy(list[rank][t], f->mock.among_members, sizeof list[rank][t]);
            }
            selsync_totals tot;
            selsync_engine_get_totals(f->e, &tot);
            if (!without) /* the ratio before any sum over all ranks: 2 (N-1)/N */
                assert_int_equal(tot.bsp_bytes, (uint64_t)(STEPS * 4.0 * N_ALL * (2.0 * (WORLD - 1) / WORLD) + 0.5));
        }
    for (int t = 0; t < STEPS; t++) {
        int n_in = 0;
        for (int rank = 0; rank < WORLD; rank++) {
            int listed = 0;
            assert_memory_equal(list[rank][t], list[0][t], sizeof list[0][t]); /* the same list everywhere */
            for (int c = 0; c < K; c++) listed |= list[0][t][c] == rank;
            assert_int_equal(member[0][rank][t], listed); /* exactly the listed ranks are averaged */
            assert_int_equal(member[1][rank][t], listed); /* the fallback draws the same */
            n_in += listed;
        }
        assert_int_equal(n_in, K);
        for (int c = 1; c < K; c++) assert_true(list[0][t][c - 1] < list[0][t][c]);
    }
}

/* ---- finish, totals, metrics ---- */

static void test_finish_and_totals(void **state)
{
    fx *f = *state;
    float r[N_ALL], before[N_ALL], after[N_ALL];
    selsync_totals tot;
    uint64_t per_step = 0;
    mock_init(&f->mock, 0, 4);
    f->cfg.warmup = 2;
    f->cfg.delta = 1e30;
    make(f);
    for (int t = 0; t < 6; t++) {
        set_grads(1.0f + (float)t);
        const selsync_step *s = step(f);
        assert_int_equal(s->bytes_sent, t < 2 ? 4 * N_ALL : 1); /* fused floats, or one flag */
        per_step += s->bytes_sent;
    }
    for (int i = 0; i < N_ALL; i++) r[i] = 3.0f * (float)i;
    f->mock.remote_scale = 0;
    f->mock.remote = r;
    f->mock.remote_n = N_ALL;
    snapshot(before);
    assert_int_equal(selsync_engine_finish(f->e), SELSYNC_OK);
    snapshot(after);
    assert_int_equal(f->mock.sum_last_n, N_ALL);
    for (int i = 0; i < N_ALL; i++) assert_true(after[i] == (before[i] + r[i]) * 0.25f);
    selsync_engine_get_totals(f->e, &tot);
    assert_int_equal(tot.steps, 6);
    assert_int_equal(tot.synced_steps, 2);
    assert_int_equal(tot.bytes_sent, per_step + 4 * N_ALL);
    assert_int_equal(tot.bytes_sent, 2 * 64 + 4 + 64);
    assert_int_equal(tot.bsp_bytes, 6 * 4 * N_ALL); /* the mock sends 1 byte per payload byte */
    assert_true(tot.t_compute >= 0 && tot.t_measure >= 0 && tot.t_agree >= 0 && tot.t_transfer >= 0);
    assert_true(tot.t_compute + tot.t_measure + tot.t_agree + tot.t_transfer > 0);
}

static void test_finish_without_bn(void **state)
{
    fx *f = *state;
    float before[N_ALL], after[N_ALL];
    f->cfg.method = SELSYNC_METHOD_LOCAL;
    f->cfg.sync_bn_stats = 0;
    make(f);
    f->mock.remote_scale = 3;
    for (int t = 0; t < 3; t++) assert_int_equal(step(f)->decision, SELSYNC_LOCAL_STEP);
    assert_int_equal(f->mock.sum_calls, 0);
    snapshot(before);
    assert_int_equal(selsync_engine_finish(f->e), SELSYNC_OK);
    snapshot(after);
    assert_int_equal(f->mock.sum_last_n, N_TRAINED);
    for (int i = 0; i < N_ALL; i++) assert_true(after[i] == (i == 9 || i == 10 ? 1 : 2) * before[i]);
}

static const char *const header =
    "step\tloss\tlr\tgrad_norm\tsmoothed\tchange\tlocal_flag\tdecision\t"
    "layers_synced\tbytes_sent\tinject_bytes\tt_compute\tt_measure\tt_agree\tt_transfer\n";

static void test_metrics_file(void **state)
{
    fx *f = *state;
    char dir[] = "/tmp/selsync-test-XXXXXX", path[256], line[1024];
    FILE *in;
    int n = 0;
    assert_non_null(mkdtemp(dir));
    mock_init(&f->mock, 3, 4);
    snprintf(f->cfg.log, sizeof f->cfg.log, "%s/m_%%r.tsv", dir);
    f->cfg.warmup = 2;
    f->cfg.delta = 1e30;
    make(f);
    for (int t = 0; t < 5; t++) {
        set_grads(1.0f + (float)t);
        if (t % 2) selsync_engine_note_injection(f->e, 1000u * (unsigned)t);
        assert_int_equal(selsync_engine_before_update(f->e, 1.5 + t, 0.125), SELSYNC_OK);
        assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    }
    selsync_engine_destroy(f->e);
    f->e = NULL;
    snprintf(path, sizeof path, "%s/m_3.tsv", dir);
    assert_non_null(in = fopen(path, "r"));
    assert_non_null(fgets(line, sizeof line, in));
    assert_string_equal(line, header);
    while (fgets(line, sizeof line, in)) {
        char *field[16], *save = NULL;
        int k = 0;
        for (char *p = strtok_r(line, "\t\n", &save); p && k < 16; p = strtok_r(NULL, "\t\n", &save)) field[k++] = p;
        assert_int_equal(k, 15);
        assert_int_equal(atoi(field[0]), n);
        assert_close(atof(field[1]), 1.5 + n, 1e-12);
        assert_string_equal(field[2], "0.125");
        assert_close(atof(field[3]), N_TRAINED * (1.0 + n) * (1.0 + n), 1e-9);
        if (n == 0) assert_string_equal(field[5], "inf");
        assert_string_equal(field[7], n < 2 ? "sync" : "local");
        assert_int_equal(atoi(field[8]), n < 2 ? 3 : 0);
        assert_int_equal(atoi(field[9]), n < 2 ? 64 : 1);
        assert_int_equal(atoi(field[10]), n % 2 ? 1000 * n : 0);
        for (int j = 11; j < 15; j++) assert_true(atof(field[j]) >= 0); /* times */
        n++;
    }
    fclose(in);
    assert_int_equal(n, 5);
    assert_int_equal(remove(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_injection_bytes(void **state)
{
    fx *f = *state;
    selsync_totals tot;
    f->cfg.method = SELSYNC_METHOD_BSP;
    make(f);
    selsync_engine_note_injection(f->e, 100);
    assert_int_equal(step(f)->inject_bytes, 100);
    assert_int_equal(step(f)->inject_bytes, 0); /* per step, not cumulative */
    selsync_engine_note_injection(f->e, 5);
    selsync_engine_note_injection(f->e, 7);
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    selsync_engine_note_injection(f->e, 30); /* mid-step: belongs to the next one */
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    assert_int_equal(selsync_engine_last_step(f->e)->inject_bytes, 12);
    assert_int_equal(selsync_engine_last_step(f->e)->bytes_sent, 4 * N_ALL); /* not mixed with the model's */
    assert_int_equal(step(f)->inject_bytes, 30);
    selsync_engine_get_totals(f->e, &tot);
    assert_int_equal(tot.inject_bytes, 142);
    assert_int_equal(tot.bytes_sent, 4 * 4 * N_ALL);
    selsync_engine_note_injection(NULL, 1); /* harmless */
}

/* Reads a whole small file into buf. */
static void slurp(const char *path, char *buf, size_t len)
{
    FILE *in = fopen(path, "r");
    size_t n;
    assert_non_null(in);
    n = fread(buf, 1, len - 1, in);
    buf[n] = '\0';
    fclose(in);
}

static void test_log_notes(void **state)
{
    fx *f = *state;
    char dir[] = "/tmp/selsync-test-XXXXXX", path[256], text[4096], want[1024];
    assert_non_null(mkdtemp(dir));
    mock_init(&f->mock, 1, 2);
    snprintf(f->cfg.log, sizeof f->cfg.log, "%s/m_%%r.tsv", dir);
    snprintf(path, sizeof path, "%s/m_1.tsv", dir);
    f->cfg.method = SELSYNC_METHOD_BSP;
    make(f);
    assert_int_equal(selsync_engine_log_note(f->e, "partition = label:2\nrank 1: 120 samples\n"), SELSYNC_OK);
    assert_int_equal(selsync_engine_log_note(f->e, "classes 2 3"), SELSYNC_OK);
    assert_int_equal(selsync_engine_log_note(f->e, ""), SELSYNC_OK); /* nothing */
    assert_int_equal(selsync_engine_log_note(f->e, NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    assert_int_equal(selsync_engine_log_note(f->e, "too late"), SELSYNC_ESTATE); /* in the middle of a step */
    assert_contains(selsync_engine_error(f->e), "selsync_engine_log_note in the middle of a step");
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    assert_int_equal(selsync_engine_log_note(f->e, "between steps"), SELSYNC_OK);
    step(f);
    selsync_engine_destroy(f->e);
    f->e = NULL;
    slurp(path, text, sizeof text);
    snprintf(want, sizeof want, "# partition = label:2\n# rank 1: 120 samples\n# classes 2 3\n%s0\t", header);
    if (strncmp(text, want, strlen(want)) != 0) fail_msg("file starts \"%.300s\"", text);
    assert_null(strstr(text, "too late"));
    assert_non_null(strstr(text, "\n# between steps\n1\t")); /* between the steps' lines */
    assert_int_equal(remove(path), 0);

    /* no step: the header still comes, after the notes (at finish, or destroy) */
    for (int fin = 0; fin < 2; fin++) {
        make(f);
        assert_int_equal(selsync_engine_log_note(f->e, "only a note"), SELSYNC_OK);
        if (fin) assert_int_equal(selsync_engine_finish(f->e), SELSYNC_OK);
        selsync_engine_destroy(f->e);
        f->e = NULL;
        slurp(path, text, sizeof text);
        snprintf(want, sizeof want, "# only a note\n%s", header);
        assert_string_equal(text, want);
        assert_int_equal(remove(path), 0);
    }
    assert_int_equal(rmdir(dir), 0);
}

static void test_log_note_without_file(void **state)
{
    fx *f = *state;
    make(f);
    assert_int_equal(selsync_engine_log_note(f->e, "no file"), SELSYNC_OK);
    step(f);
    assert_int_equal(selsync_engine_log_note(f->e, "no file"), SELSYNC_OK); /* a no-op */
    assert_int_equal(selsync_engine_log_note(NULL, "x"), SELSYNC_EINVAL);
}

static void test_metrics_open_failure(void **state)
{
    fx *f = *state;
    mock_init(&f->mock, 2, 4);
    snprintf(f->cfg.log, sizeof f->cfg.log, "/nonexistent-selsync/m_%%r.tsv");
    assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, &f->model, &f->e, f->err, sizeof f->err), SELSYNC_EIO);
    assert_null(f->e);
    assert_contains(f->err, "/nonexistent-selsync/m_2.tsv");
    assert_contains(f->err, strerror(ENOENT));
}

/* ---- errors ---- */

static selsync_status try_create(fx *f)
{
    selsync_status st = selsync_engine_create(&f->cfg, &f->comm, &f->model, &f->e, f->err, sizeof f->err);
    if (st != SELSYNC_OK) {
        assert_null(f->e);
        assert_true(f->err[0] != '\0');
    }
    return st;
}

static void test_create_rejects(void **state)
{
    fx *f = *state;
    selsync_comm no_ops = {NULL, NULL};
    assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(selsync_engine_create(NULL, &f->comm, &f->model, &f->e, f->err, sizeof f->err), SELSYNC_EINVAL);
    assert_int_equal(selsync_engine_create(&f->cfg, NULL, &f->model, &f->e, f->err, sizeof f->err), SELSYNC_EINVAL);
    assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, NULL, &f->e, f->err, sizeof f->err), SELSYNC_EINVAL);
    assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, &f->model, NULL, f->err, sizeof f->err), SELSYNC_EINVAL);
    assert_int_equal(selsync_engine_create(&f->cfg, &no_ops, &f->model, &f->e, NULL, 0), SELSYNC_EINVAL);

    f->t[4].layer = N_LAYERS;
    assert_int_equal(try_create(f), SELSYNC_EINVAL);
    assert_contains(f->err, "layer");
    f->t[4].layer = 3;
    f->t[1].count = 0;
    assert_int_equal(try_create(f), SELSYNC_EINVAL);
    f->t[1].count = 2;
    f->t[0].param = NULL;
    assert_int_equal(try_create(f), SELSYNC_EINVAL);
    f->t[0].param = f->w0;
    f->t[2].grad = NULL;
    assert_int_equal(try_create(f), SELSYNC_EINVAL);
    assert_contains(f->err, "grad");
    f->t[2].grad = f->gw1;
    f->model.n_tensors = 0;
    assert_int_equal(try_create(f), SELSYNC_EINVAL);
    f->model.n_tensors = N_TENSORS;
    f->mock.rank = 2; /* of 2 */
    assert_int_equal(try_create(f), SELSYNC_EINVAL);
    f->mock.rank = 0;

    f->cfg.aggregate = SELSYNC_AGGREGATE_DEFAULT; /* config not finished */
    assert_int_equal(try_create(f), SELSYNC_EINVAL);
    selsync_config_default(&f->cfg, "test.cfg", 1); /* lag unresolved */
    f->cfg.aggregate = SELSYNC_AGGREGATE_PARAMS;
    assert_int_equal(try_create(f), SELSYNC_EINVAL);
    selsync_config_default(&f->cfg, "test.cfg", 1);
    f->cfg.method = SELSYNC_METHOD_SSP; /* a worker whose server does not answer */
    assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
    f->mock.rank = 1;
    assert_int_equal(try_create(f), SELSYNC_ECOMM);
    assert_contains(f->err, "ssp worker");
    f->mock.rank = 0;
    selsync_config_default(&f->cfg, "test.cfg", 1);
    assert_int_equal(selsync_config_finish(&f->cfg, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(try_create(f), SELSYNC_OK);
}

static void test_state_errors(void **state)
{
    fx *f = *state;
    assert_int_equal(selsync_engine_before_update(NULL, 0, 0), SELSYNC_EINVAL);
    assert_int_equal(selsync_engine_after_update(NULL), SELSYNC_EINVAL);
    assert_int_equal(selsync_engine_finish(NULL), SELSYNC_EINVAL);
    assert_null(selsync_engine_last_step(NULL));
    make(f);
    assert_null(selsync_engine_last_step(f->e));
    assert_string_equal(selsync_engine_error(f->e), "");
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_ESTATE);
    assert_contains(selsync_engine_error(f->e), "without");
    assert_int_equal(selsync_engine_before_update(f->e, 0, 0), SELSYNC_OK);
    assert_int_equal(selsync_engine_before_update(f->e, 0, 0), SELSYNC_ESTATE);
    assert_int_equal(selsync_engine_finish(f->e), SELSYNC_ESTATE);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_ESTATE);
    assert_int_equal(selsync_engine_last_step(f->e)->step, 0);
}

static void test_comm_failures(void **state)
{
    fx *f = *state;
    f->cfg.warmup = 1;
    make(f);
    f->mock.fail_sum_call = 1;
    assert_int_equal(selsync_engine_before_update(f->e, 0, 0), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_ECOMM);
    assert_contains(selsync_engine_error(f->e), "sum_f32");
    assert_int_equal(selsync_engine_before_update(f->e, 0, 0), SELSYNC_ECOMM); /* stays failed */

    selsync_engine_destroy(f->e);
    mock_init(&f->mock, 0, 2);
    f->mock.fail_any_call = 1;
    make(f);
    assert_int_equal(selsync_engine_before_update(f->e, 0, 0), SELSYNC_OK); /* warm-up: no any */
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    assert_int_equal(selsync_engine_before_update(f->e, 0, 0), SELSYNC_ECOMM);
    assert_contains(selsync_engine_error(f->e), "any");
    assert_int_equal(f->mock.abort_calls, 0); /* the host decides */
}

static void test_comm_single(void **state)
{
    fx *f = *state;
    selsync_comm c = selsync_comm_single();
    float buf[3] = {1, 2, 3}, before[N_ALL], after[N_ALL];
    double d[2] = {4, 5};
    uint8_t flags[2] = {0, 1};
    selsync_totals tot;
    assert_int_equal(c.ops->rank(c.ctx), 0);
    assert_int_equal(c.ops->size(c.ctx), 1);
    assert_int_equal(c.ops->any(c.ctx, flags, 2), SELSYNC_OK);
    assert_int_equal(c.ops->sum_f32(c.ctx, buf, 3), SELSYNC_OK);
    assert_int_equal(c.ops->sum_f64(c.ctx, d, 2), SELSYNC_OK);
    assert_int_equal(c.ops->bcast(c.ctx, buf, sizeof buf, 0), SELSYNC_OK);
    assert_true(flags[0] == 0 && flags[1] == 1 && buf[0] == 1 && buf[2] == 3 && d[1] == 5);
    assert_int_equal(c.ops->bytes_sent(c.ctx), 0);

    f->comm = c;
    f->cfg.method = SELSYNC_METHOD_BSP;
    make(f);
    snapshot(before);
    for (int t = 0; t < 3; t++) assert_int_equal(step(f)->decision, SELSYNC_SYNC_STEP);
    assert_int_equal(selsync_engine_finish(f->e), SELSYNC_OK);
    snapshot(after);
    assert_memory_equal(before, after, sizeof after);
    selsync_engine_get_totals(f->e, &tot);
    assert_int_equal(tot.bytes_sent, 0);
    assert_int_equal(tot.bsp_bytes, 0);
}

/* ---- evaluation and checkpoints ---- */

static void test_consensus(void **state)
{
    fx *f = *state;
    float remote[N_ALL], want[N_ALL];
    for (int j = 0; j < N_ALL; j++) remote[j] = 3.0f * (float)j; /* the other three ranks' sum */
    mock_init(&f->mock, 0, 4);
    f->mock.remote = remote;
    f->mock.remote_n = N_ALL;
    f->mock.remote_scale = 0;
    f->cfg.method = SELSYNC_METHOD_LOCAL;
    make(f);
    snapshot(want);
    for (int j = 0; j < N_ALL; j++) want[j] = (want[j] + remote[j]) * 0.25f;
    float before[N_ALL], after[N_ALL];
    snapshot(before);
    const float *mean = selsync_engine_consensus(f->e);
    assert_non_null(mean);
    for (int j = 0; j < N_ALL; j++) assert_true(mean[j] == want[j]);
    snapshot(after);
    assert_memory_equal(before, after, sizeof before); /* the model is left alone */
    assert_int_equal(f->mock.sum_last_n, N_ALL);       /* statistics included */
    assert_int_equal(selsync_engine_before_update(f->e, 1, 0.1), SELSYNC_OK);
    assert_null(selsync_engine_consensus(f->e)); /* not in the middle of a step */
}

static void test_eval_rows_and_excluded_time(void **state)
{
    fx *f = *state;
    char dir[] = "/tmp/selsync-test-XXXXXX", path[256], text[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(f->cfg.log, sizeof f->cfg.log, "%s/m_%%r.tsv", dir);
    snprintf(path, sizeof path, "%s/m_0.tsv", dir);
    make(f);
    step(f);
    step(f);
    nanosleep(&(struct timespec){0, 300000000L}, NULL); /* an "evaluation" of 0.3 s */
    assert_int_equal(selsync_engine_log_eval(f->e, "top1", 0.8125, 0.3), SELSYNC_OK);
    selsync_engine_exclude_time(f->e);
    step(f);
    selsync_totals tot;
    selsync_engine_get_totals(f->e, &tot);
    assert_true(tot.t_excluded >= 0.29);
    assert_true(selsync_engine_last_step(f->e)->t_compute < 0.29); /* not counted as compute */
    selsync_engine_destroy(f->e);
    f->e = NULL;
    slurp(path, text, sizeof text);
    const char *row = strstr(text, "\n# eval\tstep=2\twall_s=");
    assert_non_null(row);
    double wall = -1, train = -1, score = -1, eval = -1;
    assert_int_equal(sscanf(row, "\n# eval\tstep=2\twall_s=%lf\ttrain_s=%lf\ttop1=%lf\teval_s=%lf", &wall, &train,
                            &score, &eval), 4);
    assert_true(wall >= 0 && wall < 0.29 && train == wall); /* nothing excluded before it */
    assert_close(score, 0.8125, 1e-12);
    assert_close(eval, 0.3, 1e-12);
    assert_non_null(strstr(row + 1, "\n2\t")); /* the third step follows */
    assert_int_equal(remove(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* Runs steps [from, to) with gradients that vary by step and a host
 * "update" (params -= 0.1 * grad; grad *= 0.9 afterwards, a residual). */
static void run_steps(fx *f, int from, int to, selsync_step *records)
{
    for (int t = from; t < to; t++) {
        for (int i = 0; i < N_TENSORS; i++)
            for (size_t j = 0; grads[i] && j < counts[i]; j++) grads[i][j] += 1.0f + 0.5f * (float)((t * 7 + (int)j) % 5);
        assert_int_equal(selsync_engine_before_update(f->e, 1.0 + t, 0.1), SELSYNC_OK);
        for (int i = 0; i < N_TENSORS; i++)
            for (size_t j = 0; grads[i] && j < counts[i]; j++) {
                params[i][j] -= 0.1f * grads[i][j];
                grads[i][j] *= 0.9f;
            }
        assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
        if (records) records[t] = *selsync_engine_last_step(f->e);
    }
}

/* A run of 12 steps and the same run saved before step `at` and restored
 * into a new engine end alike (with lag: the agreements of the lag steps
 * before `at` in flight at the snapshot); the run's records into whole. */
static void snapshot_restore_continues(fx *f, int lag, int at, selsync_step whole[12])
{
    selsync_step split[12];
    float p_whole[N_ALL], p_split[N_ALL], g_whole[N_TENSORS][5];
    f->model.grad_keeps_residual = 1;
    f->cfg.window = 4;
    f->cfg.warmup = 2;
    f->cfg.delta = 0.05;
    f->cfg.lag = lag;
    make(f);
    run_steps(f, 0, at, whole);
    size_t len = selsync_engine_snapshot_size(f->e);
    void *saved = malloc(len);
    assert_int_equal(selsync_engine_snapshot(f->e, saved, len), SELSYNC_OK);
    run_steps(f, at, 12, whole);
    snapshot(p_whole);
    for (int i = 0; i < N_TENSORS; i++)
        if (grads[i]) memcpy(g_whole[i], grads[i], counts[i] * sizeof(float));
    selsync_totals t_whole, t_split;
    selsync_engine_get_totals(f->e, &t_whole);
    selsync_engine_destroy(f->e);
    f->e = NULL;

    /* a new engine over scrambled arrays, restored from the snapshot */
    for (int i = 0; i < N_TENSORS; i++)
        for (size_t j = 0; j < counts[i]; j++) {
            params[i][j] = -7;
            if (grads[i]) grads[i][j] = 42;
        }
    make(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_OK);
    run_steps(f, at, 12, split);
    snapshot(p_split);
    assert_memory_equal(p_whole, p_split, sizeof p_whole);
    for (int i = 0; i < N_TENSORS; i++)
        if (grads[i]) assert_memory_equal(g_whole[i], grads[i], counts[i] * sizeof(float));
    for (int t = at; t < 12; t++) {
        assert_int_equal(split[t].step, t);
        assert_true(split[t].smoothed == whole[t].smoothed);
        assert_true(split[t].change == whole[t].change || (isinf(split[t].change) && isinf(whole[t].change)));
        assert_int_equal(split[t].decision, whole[t].decision);
    }
    selsync_engine_get_totals(f->e, &t_split);
    assert_int_equal(t_split.steps, t_whole.steps);
    assert_int_equal(t_split.synced_steps, t_whole.synced_steps);
    assert_int_equal(t_split.bytes_sent, t_whole.bytes_sent);
    free(saved);
}

static void test_snapshot_restore_continues(void **state)
{
    selsync_step whole[12];
    snapshot_restore_continues(*state, 0, 5, whole);
}

/* lag = 3 over the same gradients as lag = 0: steps 2-4, the first after
 * the warm-up, synchronise, and step t >= 5 decides as lag = 0 did at
 * t - 3. Saved before step 9, the agreements of steps 6-8 travel in the
 * snapshot (lag = 0 took those steps locally, so a restore that lost them
 * would synchronise). A slot in a state no snapshot holds, and a snapshot
 * of another lag, are refused. */
static void test_snapshot_restore_with_lag(void **state)
{
    fx *f = *state;
    selsync_step now[12], late[12];
    snapshot_restore_continues(f, 0, 5, now);
    selsync_engine_destroy(f->e);
    snapshot_restore_continues(f, 3, 9, late);
    for (int t = 2; t < 12; t++)
        if (late[t].decision != (t < 5 ? SELSYNC_SYNC_STEP : now[t - 3].decision))
            fail_msg("lag 3, step %d: decision %d, lag 0 decided %d at step %d", t, late[t].decision,
                     now[t - 3].decision, t - 3);
    assert_int_equal(now[6].decision, SELSYNC_LOCAL_STEP); /* what the snapshot's agreements decide */
    assert_int_equal(now[7].decision, SELSYNC_LOCAL_STEP);
    selsync_engine_destroy(f->e);
    f->cfg.lag = 3;
    make(f);
    run_steps(f, 0, 5, NULL);
    size_t len = selsync_engine_snapshot_size(f->e), at_slots = len - 3 - 3 * 3 * sizeof(double);
    unsigned char *saved = malloc(len);
    assert_non_null(saved);
    assert_int_equal(selsync_engine_snapshot(f->e, saved, len), SELSYNC_OK);
    assert_int_equal(saved[at_slots], 2); /* the slot of step 3: summed */
    selsync_engine_destroy(f->e);
    saved[at_slots] = 1; /* "still summing" */
    make(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_EMISMATCH);
    assert_contains(selsync_engine_error(f->e), "its pending agreements are not complete");
    selsync_engine_destroy(f->e);
    saved[at_slots] = 2;
    f->cfg.lag = 2;
    make(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_EMISMATCH);
    assert_contains(selsync_engine_error(f->e), "drift, lag or outer step");
    free(saved);
}

/* Three ranks' BatchNorm statistics restored as one: the means averaged,
 * the variances those of the ranks' data pooled (the mean of the ranks'
 * variances plus the variance of their means); a variance tensor that
 * does not follow its statistic is refused at creation. */
static void test_restore_mean_pools_variances(void **state)
{
    fx *f = *state;
    float w[2] = {1, 2}, gw[2] = {0}, mean[2], var[2];
    selsync_tensor t[3] = {{w, gw, 2, 0, SELSYNC_TENSOR_TRAINED, 0, 0}, {mean, NULL, 2, 0, SELSYNC_TENSOR_STAT, 0, 0},
                           {var, NULL, 2, 0, SELSYNC_TENSOR_STAT, 1, 0}};
    f->model = (selsync_model){t, 3, 1, 0, 0};
    make(f);
    size_t len = selsync_engine_snapshot_size(f->e);
    unsigned char *saved = malloc(3 * len);
    assert_non_null(saved);
    const void *states[3];
    for (int r = 0; r < 3; r++) { /* rank r: means r and 10 r, variances 1 and 2 */
        mean[0] = (float)r, mean[1] = 10.0f * (float)r, var[0] = 1, var[1] = 2;
        assert_int_equal(selsync_engine_snapshot(f->e, saved + r * len, len), SELSYNC_OK);
        states[r] = saved + r * len;
    }
    selsync_engine_destroy(f->e);
    f->e = NULL;
    make(f);
    assert_int_equal(selsync_engine_restore_mean(f->e, states, 3, len), SELSYNC_OK);
    assert_close(mean[0], 1, 1e-6);
    assert_close(mean[1], 10, 1e-6);
    assert_close(var[0], 1 + 2.0 / 3, 1e-6);   /* {0, 1, 2} spread 2/3 */
    assert_close(var[1], 2 + 200.0 / 3, 1e-5); /* {0, 10, 20} spread 200/3 */
    selsync_engine_destroy(f->e);
    f->e = NULL;
    free(saved);
    t[1].variance = 1; /* after a trained tensor */
    assert_int_equal(selsync_engine_create(&f->cfg, &f->comm, &f->model, &f->e, f->err, sizeof f->err),
                     SELSYNC_EINVAL);
    assert_contains(f->err, "variances not after a statistic");
}

/* Two ranks' snapshots restored as one (another rank count): every param,
 * the statistic too, is their mean; the step and delta are the first's;
 * the gradients (momentum) are 0; a damaged second snapshot is refused. */
static void test_restore_mean_of_two_ranks(void **state)
{
    fx *f = *state;
    float mine[2][N_ALL], got[N_ALL];
    f->cfg.delta = 0.3;
    f->cfg.window = 3;
    f->cfg.warmup = 1;
    f->cfg.target_sync = 0.5;
    make(f);
    size_t len = selsync_engine_snapshot_size(f->e);
    unsigned char *saved[2] = {malloc(len), malloc(len)};
    assert_non_null(saved[0]);
    assert_non_null(saved[1]);
    for (int r = 0; r < 2; r++) { /* the second "rank": 4 steps more, its params moved */
        for (int t = 0; t < 3 + 4 * r; t++) step(f);
        for (int i = 0; i < N_TENSORS; i++)
            for (size_t j = 0; j < counts[i]; j++) params[i][j] += 0.5f * (float)(r + 1) * (float)(j + 1);
        snapshot(mine[r]);
        assert_int_equal(selsync_engine_snapshot(f->e, saved[r], len), SELSYNC_OK);
    }
    double delta0 = 0;
    memcpy(&delta0, saved[0] + 8 + 8 * 8 + 2 * 8, sizeof delta0); /* the head's delta (test_restore_validates_fields) */
    selsync_engine_destroy(f->e);
    f->e = NULL;
    set_grads(7);
    make(f);
    const void *both[2] = {saved[0], saved[1]};
    assert_int_equal(selsync_engine_restore_mean(f->e, both, 2, len), SELSYNC_OK);
    snapshot(got);
    for (int k = 0; k < N_ALL; k++) assert_close(got[k], ((double)mine[0][k] + mine[1][k]) / 2, 1e-6);
    for (int i = 0; i < N_TENSORS; i++)
        for (size_t j = 0; grads[i] && j < counts[i]; j++) assert_true(grads[i][j] == 0);
    assert_int_equal(selsync_engine_steps(f->e), 3);
    assert_true(delta0 > 0 && delta0 != 0.3); /* target_sync moved it */
    assert_int_equal(selsync_engine_before_update(f->e, 1.0, 0.1), SELSYNC_OK);
    assert_int_equal(selsync_engine_after_update(f->e), SELSYNC_OK);
    assert_true(selsync_engine_last_step(f->e)->delta == delta0); /* the first's adapted delta goes on */
    selsync_engine_destroy(f->e);
    f->e = NULL;
    make(f);
    saved[1][0] ^= 1; /* its format tag */
    assert_int_equal(selsync_engine_restore_mean(f->e, both, 2, len), SELSYNC_EMISMATCH);
    assert_contains(selsync_engine_error(f->e), "written by another version");
    free(saved[0]);
    free(saved[1]);
}

/* A snapshot flushes the metrics rows up to it. A metrics file whose
 * writer died in the middle of a row: the restored engine cuts the torn
 * part before it appends, so its note and rows start lines of their own,
 * and the header stays the only one. */
static void test_restore_cuts_a_torn_row(void **state)
{
    fx *f = *state;
    char dir[] = "/tmp/test_engine_metrics.XXXXXX", path[64], line[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(f->cfg.log, sizeof f->cfg.log, "%s/m.%%r.tsv", dir);
    snprintf(path, sizeof path, "%s/m.0.tsv", dir); /* the mock's rank 0 */
    make(f);
    for (int t = 0; t < 3; t++) step(f);
    size_t len = selsync_engine_snapshot_size(f->e);
    unsigned char *saved = malloc(len);
    assert_non_null(saved);
    assert_int_equal(selsync_engine_snapshot(f->e, saved, len), SELSYNC_OK);
    FILE *now = fopen(path, "r"); /* the snapshot flushed every row up to it */
    assert_non_null(now);
    int flushed = 0;
    while (fgets(line, sizeof line, now)) flushed += line[0] >= '0' && line[0] <= '9';
    fclose(now);
    assert_int_equal(flushed, 3);
    selsync_engine_destroy(f->e);
    f->e = NULL;
    FILE *torn = fopen(path, "a");
    assert_non_null(torn);
    fputs("3\t0.51", torn); /* the killed job's last row, cut */
    fclose(torn);
    make(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_OK);
    assert_int_equal(selsync_engine_log_note(f->e, "resumed"), SELSYNC_OK);
    step(f);
    selsync_engine_destroy(f->e);
    f->e = NULL;
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    int rows = 0, headers = 0, notes = 0;
    while (fgets(line, sizeof line, in)) {
        assert_true(strchr(line, '\n') != NULL);
        assert_null(strstr(line, "0.51#"));
        if (!strncmp(line, "step\t", 5)) headers++;
        else if (!strcmp(line, "# resumed\n")) notes++;
        else if (line[0] != '#') rows++, assert_true(strncmp(line, "3\t0.51\t", 7) != 0 || strlen(line) > 20);
    }
    fclose(in);
    unlink(path);
    rmdir(dir);
    free(saved);
    assert_int_equal(headers, 1);
    assert_int_equal(notes, 1);
    assert_int_equal(rows, 4); /* steps 0-2, then 3 again */
}

/* Restored fields are checked before any is taken: a NaN ratio, a huge
 * ratio_n, step counters out of order, negative times, NaN norms. The
 * snapshot head is magic[8], seven u64 (n_track, window, n_params,
 * n_trained, has_snap, step, ratio_n), the doubles ratio and wall, then
 * the totals (six u64, five doubles, two u64), the last learning rate and
 * sync_until's switch (u64), has_anchor, has_outer and lag (u64); the
 * norms follow. */
static void test_restore_validates_fields(void **state)
{
    fx *f = *state;
    const size_t at_ratio_n = 8 + 6 * 8, at_local_run = at_ratio_n + 8, at_ratio = at_local_run + 8,
                 at_wall = at_ratio + 8, at_delta = at_wall + 8, at_steps = at_delta + 8,
                 at_t_compute = at_steps + 6 * 8, at_lr = at_t_compute + 5 * 8 + 3 * 8, at_done = at_lr + 8,
                 at_norms = at_done + 8 + 3 * 8; /* after has_anchor, has_outer, lag */
    make(f);
    set_grads(1);
    for (int t = 0; t < 3; t++) step(f);
    size_t len = selsync_engine_snapshot_size(f->e);
    unsigned char *saved = malloc(len), *bad = malloc(len);
    assert_non_null(saved);
    assert_non_null(bad);
    assert_int_equal(selsync_engine_snapshot(f->e, saved, len), SELSYNC_OK);
    selsync_engine_destroy(f->e);
    const double nan = NAN, neg = -1;
    const uint64_t huge = UINT64_MAX / 2;
    struct { size_t at; const void *v; size_t n; const char *why; } cases[] = {
        {at_ratio, &nan, 8, "transfer ratio"},       {at_ratio_n, &huge, 8, "transfer ratio"},
        {at_steps, &huge, 8, "step counters"},       {at_wall, &neg, 8, "times"},
        {at_t_compute, &nan, 8, "times"},            {at_norms, &nan, 8, "gradient norms"},
        {at_local_run, &huge, 8, "run of local steps"}, {at_delta, &nan, 8, "delta"},
        {at_delta, &neg, 8, "delta"},               {at_lr, &nan, 8, "learning rate"},
        {at_lr, &neg, 8, "learning rate"},           {at_done, &huge, 8, "learning rate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, saved, len);
        memcpy(bad + cases[i].at, cases[i].v, cases[i].n);
        make(f);
        assert_int_equal(selsync_engine_restore(f->e, bad, len), SELSYNC_EMISMATCH);
        assert_contains(selsync_engine_error(f->e), "the saved state is damaged");
        assert_contains(selsync_engine_error(f->e), cases[i].why);
        selsync_engine_destroy(f->e);
    }
    make(f); /* the untouched snapshot restores */
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_OK);
    free(bad);
    free(saved);
}

static void test_restore_rejects(void **state)
{
    fx *f = *state;
    make(f);
    size_t len = selsync_engine_snapshot_size(f->e);
    unsigned char *saved = malloc(len);
    assert_int_equal(selsync_engine_snapshot(f->e, saved, len - 1), SELSYNC_EINVAL);
    assert_int_equal(selsync_engine_snapshot(f->e, saved, len), SELSYNC_OK);
    selsync_engine_destroy(f->e);
    f->cfg.window = 7; /* another window */
    make(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_EMISMATCH);
    assert_contains(selsync_engine_error(f->e), "another network or another [selsync] window");
    assert_int_equal(selsync_engine_restore(f->e, saved, 10), SELSYNC_EMISMATCH);
    selsync_engine_destroy(f->e);
    f->cfg.window = 25;
    make(f);
    memcpy(saved, "SSENG06", 8); /* the previous format */
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_EMISMATCH);
    assert_contains(selsync_engine_error(f->e), "in format 'SSENG06', written by another version of this program; "
                                                "this one reads 'SSENG07'");
    selsync_engine_destroy(f->e);
    make(f);
    step(f);
    assert_int_equal(selsync_engine_restore(f->e, saved, len), SELSYNC_ESTATE); /* after a step */
    free(saved);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_ewma_known_sequence),
        T(test_ewma_auto_smoothing),
        T(test_zero_norms_sync),
        T(test_nonfinite_stops),
        T(test_infinite_loss_finite_gradient_goes_on),
        T(test_constant_norms_local_after_warmup),
        T(test_residual_is_subtracted),
        T(test_described_update_same_change),
        T(test_norm_of_a_large_tensor),
        T(test_delta_zero_syncs_every_step),
        T(test_huge_delta_syncs_only_in_warmup),
        T(test_max_local_guard),
        T(test_max_local_counts_from_the_last_sync),
        T(test_qsr_bound_grows_as_the_rate_decays),
        T(test_qsr_bound_survives_a_restore),
        T(test_sq_diff),
        T(test_drift_rule),
        T(test_drift_taken_while_measuring),
        T(test_drift_rule_with_lag),
        T(test_drift_is_the_ranks_mean),
        T(test_agree_mean),
        T(test_outer_step),
        T(test_sync_momentum),
        T(test_policy_arrays_survive_a_restore),
        T(test_sync_until),
        T(test_target_sync_adapts_delta),
        T(test_remote_flag_syncs),
        T(test_no_agreement_for_baselines),
        T(test_layer_granularity),
        T(test_aggregate_params),
        T(test_aggregate_params_no_bn),
        T(test_aggregate_grads),
        T(test_aggregate_grads_no_bn),
        T(test_buckets_cover_every_tensor_once),
        T(test_buckets_start_when_their_layers_are_ready),
        T(test_overlap_gives_the_same_bits),
        T(test_overlap_only_where_the_step_is_known_to_sync),
        T(test_overlap_failure),
        T(test_parameter_average_one_step_late),
        T(test_fedavg_average_one_step_late),
        T(test_parameter_average_at_once),
        T(test_fedavg_members),
        T(test_fedavg_all_ranks),
        T(test_fedavg_members_only),
        T(test_finish_and_totals),
        T(test_finish_without_bn),
        T(test_metrics_file),
        T(test_injection_bytes),
        T(test_log_notes),
        T(test_log_note_without_file),
        T(test_metrics_open_failure),
        T(test_create_rejects),
        T(test_state_errors),
        T(test_comm_failures),
        T(test_comm_single),
        T(test_nonfinite_skips),
        T(test_consensus),
        T(test_eval_rows_and_excluded_time),
        T(test_snapshot_restore_continues),
        T(test_snapshot_restore_with_lag),
        T(test_restore_mean_of_two_ranks),
        T(test_restore_mean_pools_variances),
        T(test_restore_cuts_a_torn_row),
        T(test_restore_rejects),
        T(test_restore_validates_fields),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
