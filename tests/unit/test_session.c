/* Unit tests for the training session (plugin/core/session.c): the
 * checkpoint container, the evaluation and checkpoint schedules, the
 * sequential walk's position, the load protocol's errors. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chart_gnuplot.h"
#include "selsync/session.h"

#include "mock_comm.h"

typedef struct fx {
    float w[4], g[4];
    selsync_tensor t;
    selsync_model model;
    selsync_config cfg;
    char dir[64], ckpt[128], chart[128];
    int scores;
    uint64_t scored_at[16];
    float scored_first[16];
    selsync_session *s;
} fx;

static double score(void *user, const float *params)
{
    fx *f = user;
    f->scored_first[f->scores % 16] = params[0];
    f->scored_at[f->scores++ % 16] = selsync_session_steps(f->s);
    return 0.5;
}

static int save_model(void *user, const char *path)
{
    fx *f = user;
    FILE *o = fopen(path, "wb");
    if (!o) return -1;
    fwrite(f->w, sizeof f->w, 1, o); /* the "model file": the parameters */
    return fclose(o);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/selsync-session-XXXXXX");
    if (!f || !mkdtemp(f->dir)) return -1;
    snprintf(f->ckpt, sizeof f->ckpt, "%s/ck.weights", f->dir);
    snprintf(f->chart, sizeof f->chart, "%s/chart.png", f->dir);
    f->t = (selsync_tensor){f->w, f->g, 4, 0, SELSYNC_TENSOR_TRAINED, 0, 0};
    f->model = (selsync_model){&f->t, 1, 1, 0, 0};
    selsync_config_default(&f->cfg, "test.cfg", 1);
    f->cfg.method = SELSYNC_METHOD_BSP;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    char tmp[160];
    selsync_session_destroy(f->s);
    remove(f->ckpt);
    remove(f->chart);
    snprintf(tmp, sizeof tmp, "%s.tmp", f->ckpt);
    remove(tmp);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* What this rank runs: one build and cfg everywhere, the network's layout. */
static const selsync_identity *identity(uint64_t layout)
{
    static selsync_identity id;
    id = (selsync_identity){"host-a", "selsync-darknet 9 (sources 1)", 5, layout};
    return &id;
}

static selsync_session *open_session(fx *f, const selsync_comm *comm)
{
    char err[512];
    selsync_host host = {f, score, save_model, NULL};
    selsync_session_destroy(f->s);
    f->s = NULL;
    assert_int_equal(selsync_config_finish(&f->cfg, err, sizeof err), SELSYNC_OK);
    assert_int_equal(selsync_session_create(&f->cfg, comm, &host, &f->s, err, sizeof err), SELSYNC_OK);
    return f->s;
}

static void train(fx *f, int steps)
{
    for (int i = 0; i < steps; i++) {
        for (int j = 0; j < 4; j++) f->g[j] = 0.1f * (float)(j + 1);
        assert_int_equal(selsync_session_before_update(f->s, 1.0, 0.1, NULL), SELSYNC_OK);
        for (int j = 0; j < 4; j++) f->w[j] -= 0.1f * f->g[j];
        assert_int_equal(selsync_session_after_update(f->s), SELSYNC_OK);
    }
}

static void begin(fx *f, selsync_plan *plan)
{
    selsync_data d = {NULL, 0, 0, NULL, 0, 8, 0, "top1", 10, f->ckpt, f->chart, NULL, 0,
                      selsync_chart_gnuplot()};
    assert_int_equal(selsync_session_begin(f->s, &d, plan), SELSYNC_OK);
}

/* A session of one process, loaded from weights (NULL: none) and begun. */
static void start_single(fx *f, const char *weights)
{
    static selsync_comm one;
    selsync_plan plan;
    one = selsync_comm_single();
    open_session(f, &one);
    assert_int_equal(selsync_session_load(f->s, &f->model, identity(42), weights, weights != NULL), SELSYNC_OK);
    begin(f, &plan);
}

/* A checkpoint written every 2 steps resumes exactly: the steps, the
 * parameters; a damaged one is refused with the file's name. */
static void test_checkpoint_round_trip(void **state)
{
    fx *f = *state;
    selsync_comm one = selsync_comm_single();
    float at4[4];
    f->cfg.checkpoint_every = 2;
    start_single(f, NULL);
    train(f, 4);
    /* written beside training: the resume below needs the second one whole */
    memcpy(at4, f->w, sizeof at4);
    memset(f->w, 0, sizeof f->w);

    start_single(f, f->ckpt);
    assert_int_equal(selsync_session_steps(f->s), 4);
    assert_memory_equal(f->w, at4, sizeof at4);

    FILE *io = fopen(f->ckpt, "r+b");
    assert_non_null(io);
    fseek(io, 3, SEEK_SET);
    fputc(0x7f, io);
    fclose(io);
    open_session(f, &one);
    assert_int_equal(selsync_session_load(f->s, &f->model, identity(42), f->ckpt, 1), SELSYNC_EMISMATCH);
    assert_non_null(strstr(selsync_session_error(f->s), f->ckpt));
    assert_non_null(strstr(selsync_session_error(f->s), "damaged checkpoint"));
}

/* A checkpoint whose writer fails (its temporary file cannot be created:
 * a directory holds the name) fails the session at the next checkpoint,
 * naming the file and the step; training went on meanwhile. */
static void test_checkpoint_writer_fails(void **state)
{
    fx *f = *state;
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->ckpt);
    assert_int_equal(mkdir(tmp, 0700), 0);
    f->cfg.checkpoint_every = 2;
    start_single(f, NULL);
    train(f, 3);
    assert_int_equal(selsync_session_before_update(f->s, 1.0, 0.1, NULL), SELSYNC_OK);
    assert_int_equal(selsync_session_after_update(f->s), SELSYNC_EIO);
    assert_non_null(strstr(selsync_session_error(f->s), f->ckpt));
    assert_non_null(strstr(selsync_session_error(f->s), "of step 2 was not written"));
    assert_null(fopen(f->ckpt, "rb"));
    assert_int_equal(rmdir(tmp), 0);
}

/* Evaluations every 3 steps, of the ranks' mean model, and a final one
 * unless the last step was just evaluated. */
static void test_evaluation_schedule(void **state)
{
    fx *f = *state;
    f->cfg.eval_every = 3;
    start_single(f, NULL);
    train(f, 7);
    assert_int_equal(f->scores, 2);
    assert_int_equal(f->scored_at[0], 3);
    assert_int_equal(f->scored_at[1], 6);
    FILE *devnull = fopen("/dev/null", "w");
    assert_int_equal(selsync_session_end(f->s, devnull), SELSYNC_OK);
    assert_int_equal(f->scores, 3);
    assert_int_equal(f->scored_at[2], 7);
    assert_true(f->scored_first[2] == f->w[0]); /* one rank: the mean is its own model */

    f->scores = 0;
    start_single(f, NULL);
    train(f, 6);
    assert_int_equal(selsync_session_end(f->s, devnull), SELSYNC_OK);
    assert_int_equal(f->scores, 2); /* 3, 6: no second score of step 6 */
    fclose(devnull);
}

/* The training chart: drawn during training and complete at the end (a
 * PNG), with the evaluations; chart_every = 0 draws none. Needs gnuplot
 * (scripts/install-deps.sh installs it). */
static void test_chart_drawn(void **state)
{
    fx *f = *state;
    unsigned char head[8];
    f->cfg.eval_every = 3;
    f->cfg.chart_every = 2;
    start_single(f, NULL);
    train(f, 7);
    FILE *devnull = fopen("/dev/null", "w");
    assert_int_equal(selsync_session_end(f->s, devnull), SELSYNC_OK);
    FILE *png = fopen(f->chart, "rb");
    assert_non_null(png);
    assert_int_equal(fread(head, 1, 8, png), 8);
    fclose(png);
    assert_memory_equal(head, "\x89PNG\r\n\x1a\n", 8);
    remove(f->chart);

    f->cfg.chart_every = 0;
    start_single(f, NULL);
    train(f, 4);
    assert_int_equal(selsync_session_end(f->s, devnull), SELSYNC_OK);
    fclose(devnull);
    assert_null(fopen(f->chart, "rb"));
}

/* The sequential walk: a checkpoint records the position of the batches
 * requested before it, not of loads made since. */
static void test_sequential_position(void **state)
{
    fx *f = *state;
    selsync_comm one = selsync_comm_single();
    selsync_plan plan;
    int labels[10] = {0}, images = 8;
    f->cfg.partition = SELSYNC_PARTITION_SELDP;
    open_session(f, &one);
    assert_int_equal(selsync_session_load(f->s, &f->model, identity(1), NULL, 0), SELSYNC_OK);
    selsync_data d = {labels, 10, 0, NULL, 1, 4, 0, NULL, 0, NULL, NULL, NULL, 0, NULL};
    assert_int_equal(selsync_session_begin(f->s, &d, &plan), SELSYNC_OK);
    assert_true(plan.sequential);
    assert_int_equal(plan.count, 10);
    selsync_session_batch_requested(f->s, &images);
    assert_int_equal(images, 8); /* without injection the trainer's own count */
    for (int i = 0; i < 14; i++) assert_int_equal(selsync_session_next_sample(f->s), (size_t)(i % 10));
}

/* What a rank holds in the agreement, as session.c sends it: host, cfg
 * file, then the values compared (as text, zero-padded). */
typedef struct record {
    char host[64], file[160];
    char value[4][80];
} record;

static record record_of(const char *host, const char *file, const char *build, uint64_t cfg, uint64_t layout)
{
    record r;
    memset(&r, 0, sizeof r);
    snprintf(r.host, sizeof r.host, "%s", host);
    snprintf(r.file, sizeof r.file, "%s", file);
    snprintf(r.value[0], sizeof r.value[0], "%s", build);
    snprintf(r.value[1], sizeof r.value[1], "hash %016llx", (unsigned long long)cfg);
    snprintf(r.value[2], sizeof r.value[2], "layout hash %016llx", (unsigned long long)layout);
    return r;
}

/* Rank 1 of 3 with rank 0's cfg different and rank 2's build different:
 * every rank fails with one message that names, per item, which ranks on
 * which hosts with which cfg file hold which value; no tensor is sent. */
static void test_ranks_disagree(void **state)
{
    fx *f = *state;
    mock_comm m;
    const selsync_identity *me = identity(42);
    record r0 = record_of("host-a", "a.cfg", me->build, 6, 42);
    record r2 = record_of("host-c", "test.cfg", "selsync-darknet 8 (sources 0)", 5, 42);
    uint8_t rank2_flags[3] = {1, 0, 0};
    mock_init(&m, 1, 3);
    m.bcast_from[0] = &r0;
    m.bcast_from_n[0] = sizeof r0;
    m.bcast_from[2] = &r2;
    m.bcast_from_n[2] = sizeof r2;
    mock_script_any(&m, rank2_flags, 3);
    selsync_comm c = mock_as_comm(&m);
    open_session(f, &c);
    assert_int_equal(selsync_session_load(f->s, &f->model, me, NULL, 0), SELSYNC_EMISMATCH);
    const char *e = selsync_session_error(f->s);
    assert_non_null(strstr(e, "test.cfg: the ranks do not run the same thing:"));
    assert_non_null(strstr(e, "the build differs: ranks 0, 1 (first on host-a; a.cfg): selsync-darknet 9 (sources 1); "
                              "rank 2 (host-c; test.cfg): selsync-darknet 8 (sources 0);"));
    assert_non_null(strstr(e, "the cfg (its parsed sections) differs: rank 0 (host-a; a.cfg): hash 0000000000000006; "
                              "ranks 1, 2 (first on host-a; test.cfg): hash 0000000000000005;"));
    assert_null(strstr(e, "the network built from it differs"));
    assert_int_equal(m.bcast_calls, 3); /* rank 0's record, then ranks 1 and 2: no tensor */

    /* all alike: one record and one flag exchange, then the tensors */
    record same = record_of("host-b", "test.cfg", me->build, 5, 42);
    mock_init(&m, 1, 2);
    m.bcast_from[0] = &same;
    m.bcast_from_n[0] = sizeof same;
    m.bcast_from_once[0] = 1;
    c = mock_as_comm(&m);
    open_session(f, &c);
    assert_int_equal(selsync_session_load(f->s, &f->model, me, NULL, 0), SELSYNC_OK);
    assert_int_equal(m.any_calls, 1);
    assert_int_equal(m.any_last_n, 3);
}

/* A training list of another length or content: every rank fails before
 * the engine starts, naming both lists. */
static void test_training_lists_disagree(void **state)
{
    fx *f = *state;
    mock_comm m;
    selsync_plan plan;
    int labels[4] = {0, 1, 0, 1};
    record r0, same = record_of("host-a", "test.cfg", identity(1)->build, 5, 1);
    memset(&r0, 0, sizeof r0);
    strcpy(r0.host, "host-a");
    strcpy(r0.file, "a.data");
    strcpy(r0.value[0], "5 files, hash 0000000000000009");
    mock_init(&m, 1, 2);
    m.bcast_from[0] = &same;
    m.bcast_from_n[0] = sizeof same;
    m.bcast_from_once[0] = 1;
    selsync_comm c = mock_as_comm(&m);
    open_session(f, &c);
    assert_int_equal(selsync_session_load(f->s, &f->model, identity(1), NULL, 0), SELSYNC_OK);
    m.bcast_from[0] = &r0; /* now rank 0's list */
    m.bcast_from_n[0] = sizeof r0;
    selsync_data d = {labels, 4, 9, "b.data", 2, 2, 0, NULL, 0, NULL, NULL, NULL, 0, NULL};
    assert_int_equal(selsync_session_begin(f->s, &d, &plan), SELSYNC_EMISMATCH);
    assert_non_null(strstr(selsync_session_error(f->s), "the training list differs: rank 0 (host-a; a.data): "
                           "5 files, hash 0000000000000009; rank 1 (host-a; b.data): 4 files, hash "
                           "0000000000000009;"));
}

/* A failed collective ends with a message naming what was done. */
static void test_load_errors(void **state)
{
    fx *f = *state;
    mock_comm m;
    mock_init(&m, 0, 2);
    m.fail_bcast_call = 1;
    selsync_comm c = mock_as_comm(&m);
    open_session(f, &c);
    assert_int_equal(selsync_session_load(f->s, &f->model, identity(42), NULL, 0), SELSYNC_ECOMM);
    assert_string_equal(selsync_session_error(f->s),
                        "comparing what the ranks run: mock communicator: call failed as scripted");
}

/* Rank 0 of 3 (a mock) loads and begins with method and a step limit. */
static selsync_status begin_rank0(fx *f, selsync_method method, uint64_t max_steps, selsync_plan *plan)
{
    static int labels[4] = {0, 1, 0, 1};
    mock_comm m;
    mock_init(&m, 0, 3);
    selsync_comm c = mock_as_comm(&m);
    f->cfg.method = method;
    open_session(f, &c);
    selsync_data d = {labels, 4, 0, NULL, 2, 2, 0, NULL, 0, NULL, NULL, NULL, max_steps, NULL};
    assert_int_equal(selsync_session_load(f->s, &f->model, identity(1), NULL, 0), SELSYNC_OK);
    return selsync_session_begin(f->s, &d, plan);
}

/* Method ssp: rank 0 serves and does not train; the workers must finish,
 * so a step limit is required. */
static void test_ssp_server_plan(void **state)
{
    fx *f = *state;
    selsync_plan plan;
    assert_int_equal(begin_rank0(f, SELSYNC_METHOD_SSP, 0, &plan), SELSYNC_ECONFIG);
    assert_non_null(strstr(selsync_session_error(f->s), "method = ssp needs max_batches > 0"));
    assert_int_equal(begin_rank0(f, SELSYNC_METHOD_SSP, 100, &plan), SELSYNC_OK);
    assert_true(plan.serve_only);
    assert_int_equal(plan.count, 4); /* the server only reports the partition */
    assert_false(plan.console);      /* the first worker shows the progress */
    assert_int_equal(plan.training_ranks, 2);
}

/* Without ssp every rank trains and rank 0 shows the progress (with ssp
 * the first worker does: test_ssp_server_plan, and test_ssp.sh on real
 * ranks). */
static void test_plan_console_and_training_ranks(void **state)
{
    fx *f = *state;
    selsync_plan plan;
    assert_int_equal(begin_rank0(f, SELSYNC_METHOD_SELSYNC, 0, &plan), SELSYNC_OK);
    assert_true(plan.console);
    assert_int_equal(plan.training_ranks, 3);
    assert_false(plan.serve_only);
}

/* A communicator whose table has another layout is refused by name. */
static void test_comm_table_of_another_version(void **state)
{
    fx *f = *state;
    mock_comm m;
    char err[512];
    selsync_session *s = NULL;
    selsync_host host = {f, score, save_model, NULL};
    mock_init(&m, 0, 1);
    selsync_comm c = mock_as_comm(&m);
    selsync_comm_ops old = *c.ops;
    old.version = SELSYNC_COMM_OPS_VERSION - 1;
    c.ops = &old;
    assert_int_equal(selsync_config_finish(&f->cfg, err, sizeof err), SELSYNC_OK);
    assert_int_equal(selsync_session_create(&f->cfg, &c, &host, &s, err, sizeof err), SELSYNC_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err, "the communicator 'mock' has a table of version 1; this core reads version 2"));
}

/* bn_recalibrate: the host's recalibrate runs on every rank after the
 * final average and before the final evaluation, which scores the model
 * again with the new statistics. Here rank 0 of 2 (a mock): the
 * statistics go out from rank 0 first (the shift every rank shares), and
 * one sum_f64 of this rank's and the other rank's sums about that shift
 * gives the pooled data's mean and unbiased variance. */
static struct {
    fx *f;
    mock_comm *m;
    float stat[4];              /* a layer of 2 channels: rolling mean[2], variance[2] */
    int calls, scores_before, f64_before, bcasts_before;
    size_t samples;
    double remote[6];
} recal;

/* count, sum and sum of squares about shift of values x[0..n) into acc[c], acc[2 + c], acc[4 + c] */
static void sums(double *acc, int c, const double *x, int n, double shift)
{
    for (int i = 0; i < n; ++i) {
        acc[c] += 1;
        acc[2 + c] += x[i] - shift;
        acc[4 + c] += (x[i] - shift) * (x[i] - shift);
    }
}

static int recalibrate_host(void *user, selsync_session *s, size_t samples)
{
    static const double mine0[] = {1, 2, 3}, mine1[] = {10, 10}, other0[] = {5, 7}, other1[] = {20, 30, 40};
    double acc[6] = {0};
    float shift[2] = {recal.stat[0], recal.stat[1]};
    assert_ptr_equal(user, recal.f);
    recal.calls++;
    recal.samples = samples;
    recal.scores_before = recal.f->scores;
    recal.f64_before = recal.m->f64_calls;
    recal.bcasts_before = recal.m->bcast_calls;
    sums(acc, 0, mine0, 3, shift[0]);
    sums(acc, 1, mine1, 2, shift[1]);
    memset(recal.remote, 0, sizeof recal.remote);
    sums(recal.remote, 0, other0, 2, shift[0]);
    sums(recal.remote, 1, other1, 3, shift[1]);
    recal.m->remote_f64 = recal.remote;
    selsync_status st = selsync_session_bn_combine(s, 2, shift, acc, 1, recal.stat, recal.stat + 2);
    recal.m->remote_f64 = NULL;
    return st ? -1 : 0;
}

/* Trains 6 steps (evaluations at 3 and 6) on rank 0 of 2 with a list of
 * `listed` samples and bn_recalibrate = n, and ends. */
static void run_recalibrated(fx *f, mock_comm *m, int n, size_t listed)
{
    static int labels[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    selsync_tensor t[3] = {{f->w, f->g, 4, 0, SELSYNC_TENSOR_TRAINED, 0, 0},
                           {recal.stat, NULL, 2, 0, SELSYNC_TENSOR_STAT, 0, 0},
                           {recal.stat + 2, NULL, 2, 0, SELSYNC_TENSOR_STAT, 0, 0}};
    selsync_model model = {t, 3, 1, 0, 0};
    selsync_plan plan;
    char err[512];
    memset(&recal, 0, sizeof recal);
    recal.f = f;
    recal.m = m;
    memcpy(recal.stat, (float[4]){2.5f, 15.f, 1.f, 1.f}, sizeof recal.stat);
    mock_init(m, 0, 2);
    selsync_comm c = mock_as_comm(m);
    f->cfg.eval_every = 3;
    f->cfg.bn_recalibrate = n;
    f->cfg.chart_every = 0;
    selsync_host host = {f, score, save_model, recalibrate_host};
    selsync_session_destroy(f->s);
    f->s = NULL;
    assert_int_equal(selsync_config_finish(&f->cfg, err, sizeof err), SELSYNC_OK);
    assert_int_equal(selsync_session_create(&f->cfg, &c, &host, &f->s, err, sizeof err), SELSYNC_OK);
    assert_int_equal(selsync_session_load(f->s, &model, identity(7), NULL, 0), SELSYNC_OK);
    selsync_data d = {labels, listed, 0, NULL, 2, 2, 0, "top1", 10, NULL, NULL, NULL, 0, NULL};
    assert_int_equal(selsync_session_begin(f->s, &d, &plan), SELSYNC_OK);
    train(f, 6);
    FILE *devnull = fopen("/dev/null", "w");
    assert_int_equal(selsync_session_end(f->s, devnull), SELSYNC_OK);
    fclose(devnull);
}

static void test_bn_recalibration(void **state)
{
    fx *f = *state;
    mock_comm m;
    run_recalibrated(f, &m, 300, 8);
    assert_int_equal(recal.calls, 1);
    assert_int_equal(recal.samples, 300);
    assert_int_equal(recal.scores_before, 2);           /* steps 3 and 6, then the final average ... */
    assert_int_equal(f->scores, 3);                     /* ... the recalibration, and step 6 again */
    assert_int_equal(f->scored_at[2], 6);
    assert_int_equal(m.bcast_root[recal.bcasts_before - 1], 0); /* rank 0's statistics went out first */
    assert_int_equal(m.bcast_bytes[recal.bcasts_before - 1], 4 * sizeof(float));
    assert_int_equal(m.f64_calls, recal.f64_before + 2); /* one sum for the layer (and the summary's) */
    /* {1, 2, 3} here and {5, 7} there: mean 3.6, variance 23.2 / 4; {10, 10} and {20, 30, 40}: 22, 680 / 4 */
    assert_true(fabsf(recal.stat[0] - 3.6f) < 1e-6f);
    assert_true(fabsf(recal.stat[1] - 22.f) < 1e-6f);
    assert_true(fabsf(recal.stat[2] - 5.8f) < 1e-6f);
    assert_true(fabsf(recal.stat[3] - 170.f) < 1e-5f);

    run_recalibrated(f, &m, 0, 8); /* off */
    assert_int_equal(recal.calls, 0);
    assert_int_equal(f->scores, 2 + 3);                 /* step 6 was scored: no final score */
    assert_true(recal.stat[0] == 2.5f && recal.stat[2] == 1.f);

    run_recalibrated(f, &m, 300, 0); /* no training list: the host feeds its own data */
    assert_int_equal(recal.calls, 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_checkpoint_round_trip),
        T(test_checkpoint_writer_fails),
        T(test_evaluation_schedule),
        T(test_sequential_position),
        T(test_chart_drawn),
        T(test_ranks_disagree),
        T(test_training_lists_disagree),
        T(test_load_errors),
        T(test_ssp_server_plan),
        T(test_plan_console_and_training_ranks),
        T(test_comm_table_of_another_version),
        T(test_bn_recalibration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
