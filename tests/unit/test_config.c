/* Unit tests for the [selsync] section parser (plugin/core/config.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "selsync/config.h"

#define FILE_NAME "cfg/x.cfg"

typedef struct fixture {
    selsync_config cfg;
    char err[1024];
} fixture;

static int setup(void **state)
{
    static fixture f; /* large; keep it off the stack */
    memset(&f, 0, sizeof f);
    selsync_config_default(&f.cfg, FILE_NAME, 3);
    *state = &f;
    return 0;
}

static selsync_status set(fixture *f, const char *key, const char *value, int line)
{
    return selsync_config_set(&f->cfg, key, value, line, f->err, sizeof f->err);
}

static void assert_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle)) fail_msg("expected \"%s\" in message \"%s\"", needle, haystack);
}

static void assert_one_line(const char *s)
{
    assert_null(strchr(s, '\n'));
    assert_null(strchr(s, '\r'));
}

/* A set that must fail with ECONFIG and a message naming file, :line:, key
 * and the quoted value. */
static void expect_bad(fixture *f, const char *key, const char *value, int line, const char *problem)
{
    char at[32], quoted[600];
    assert_int_equal(set(f, key, value, line), SELSYNC_ECONFIG);
    snprintf(at, sizeof at, ":%d:", line);
    snprintf(quoted, sizeof quoted, "'%s'", value);
    assert_contains(f->err, FILE_NAME);
    assert_contains(f->err, at);
    assert_contains(f->err, key);
    assert_contains(f->err, quoted);
    assert_contains(f->err, "allowed: ");
    if (problem) assert_contains(f->err, problem);
    assert_one_line(f->err);
}

static selsync_status finish(fixture *f)
{
    return selsync_config_finish(&f->cfg, f->err, sizeof f->err);
}

static selsync_status world(fixture *f, int n)
{
    return selsync_config_check_world(&f->cfg, n, f->err, sizeof f->err);
}

/* ---- defaults and valid values ---- */

static void test_defaults(void **state)
{
    fixture *f = *state;
    const selsync_config *c = &f->cfg;
    assert_int_equal(c->method, SELSYNC_METHOD_SELSYNC);
    assert_true(c->delta == 0.3);
    assert_int_equal(c->window, 25);
    assert_true(c->smoothing == 0);
    assert_int_equal(c->warmup, -1);
    assert_int_equal(c->granularity, SELSYNC_GRANULARITY_MODEL);
    assert_int_equal(c->aggregate, SELSYNC_AGGREGATE_DEFAULT);
    assert_int_equal(c->sync_bn_stats, 1);
    assert_int_equal(c->fedavg_interval, 250);
    assert_true(c->fedavg_fraction == 1.0);
    assert_int_equal(c->ssp_staleness, 100);
    assert_int_equal(c->partition, SELSYNC_PARTITION_IID);
    assert_true(c->inject_alpha == 0 && c->inject_beta == 0);
    assert_true(c->seed == 1);
    assert_string_equal(c->log, "");
    assert_int_equal(c->eval_every, 0);
    assert_int_equal(c->checkpoint_every, 0);
    assert_int_equal(c->chart_every, 100);
    assert_int_equal(c->on_nonfinite, SELSYNC_NONFINITE_STOP);
    assert_string_equal(c->file, FILE_NAME);
    assert_int_equal(c->section_line, 3);
    for (int k = 0; k < SELSYNC_KEY_COUNT; k++) assert_int_equal(c->line[k], 0);
}

static void test_defaults_finish_and_world_ok(void **state)
{
    fixture *f = *state;
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(world(f, 1), SELSYNC_OK);
    assert_int_equal(world(f, 16), SELSYNC_OK);
}

static void test_parse_method(void **state)
{
    static const char *const names[] = {"selsync", "bsp", "fedavg", "ssp", "local"};
    fixture *f = *state;
    for (int m = 0; m < 5; m++) {
        selsync_config_default(&f->cfg, FILE_NAME, 3);
        assert_int_equal(set(f, "method", names[m], 4), SELSYNC_OK);
        assert_int_equal(f->cfg.method, m);
        assert_string_equal(selsync_method_name((selsync_method)m), names[m]);
    }
}

static void test_parse_delta(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "delta", "0.05", 4), SELSYNC_OK);
    assert_true(f->cfg.delta == 0.05);
    selsync_config_default(&f->cfg, FILE_NAME, 3);
    assert_int_equal(set(f, "delta", "0", 4), SELSYNC_OK);
    assert_true(f->cfg.delta == 0);
    selsync_config_default(&f->cfg, FILE_NAME, 3);
    assert_int_equal(set(f, "delta", "1e6", 4), SELSYNC_OK);
    assert_true(f->cfg.delta == 1e6);
}

static void test_parse_window_and_warmup(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "window", "1000000", 4), SELSYNC_OK);
    assert_int_equal(set(f, "warmup", "0", 5), SELSYNC_OK);
    assert_int_equal(f->cfg.window, 1000000);
    assert_int_equal(f->cfg.warmup, 0);
}

static void test_parse_smoothing_auto(void **state)
{
    fixture *f = *state;
    f->cfg.smoothing = 0.5;
    assert_int_equal(set(f, "smoothing", "auto", 4), SELSYNC_OK);
    assert_true(f->cfg.smoothing == 0);
}

static void test_parse_smoothing_value(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "smoothing", "0.16", 4), SELSYNC_OK);
    assert_true(f->cfg.smoothing == 0.16);
    assert_true(selsync_config_smoothing(&f->cfg, 2) == 0.16);
    assert_true(selsync_config_smoothing(&f->cfg, 500) == 0.16);
}

static void test_parse_granularity_aggregate(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "granularity", "layer", 4), SELSYNC_OK);
    assert_int_equal(set(f, "aggregate", "grads", 5), SELSYNC_OK);
    assert_int_equal(f->cfg.granularity, SELSYNC_GRANULARITY_LAYER);
    assert_int_equal(f->cfg.aggregate, SELSYNC_AGGREGATE_GRADS);
    selsync_config_default(&f->cfg, FILE_NAME, 3);
    assert_int_equal(set(f, "granularity", "model", 4), SELSYNC_OK);
    assert_int_equal(set(f, "aggregate", "params", 5), SELSYNC_OK);
    assert_int_equal(f->cfg.granularity, SELSYNC_GRANULARITY_MODEL);
    assert_int_equal(f->cfg.aggregate, SELSYNC_AGGREGATE_PARAMS);
}

static void test_parse_sync_bn_stats(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "sync_bn_stats", "0", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.sync_bn_stats, 0);
}

static void test_parse_fedavg_keys(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "fedavg_interval", "125", 4), SELSYNC_OK);
    assert_int_equal(set(f, "fedavg_fraction", "0.5", 5), SELSYNC_OK);
    assert_int_equal(set(f, "method", "fedavg", 6), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.fedavg_interval, 125);
    assert_true(f->cfg.fedavg_fraction == 0.5);
}

static void test_parse_ssp_staleness(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "ssp", 4), SELSYNC_OK);
    assert_int_equal(set(f, "ssp_staleness", "0", 5), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.ssp_staleness, 0);
}

static void test_parse_partition_words(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "partition", "seldp", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.partition, SELSYNC_PARTITION_SELDP);
    selsync_config_default(&f->cfg, FILE_NAME, 3);
    f->cfg.partition = SELSYNC_PARTITION_SELDP;
    assert_int_equal(set(f, "partition", "iid", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.partition, SELSYNC_PARTITION_IID);
}

static void test_parse_partition_label(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "partition", "label:3", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.partition, SELSYNC_PARTITION_LABEL);
    assert_int_equal(f->cfg.partition_k, 3);
}

static void test_parse_partition_dirichlet(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "partition", "dirichlet:0.5", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.partition, SELSYNC_PARTITION_DIRICHLET);
    assert_true(f->cfg.partition_alpha == 0.5);
}

static void test_parse_inject(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "inject_alpha", "0.5", 4), SELSYNC_OK);
    assert_int_equal(set(f, "inject_beta", "1", 5), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(f->cfg.inject_alpha == 0.5);
    assert_true(f->cfg.inject_beta == 1.0);
}

static void test_parse_seed_max(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "seed", "18446744073709551615", 4), SELSYNC_OK);
    assert_true(f->cfg.seed == UINT64_MAX);
}

static void test_parse_log(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "log", "runs/m-%r.csv", 4), SELSYNC_OK);
    assert_string_equal(f->cfg.log, "runs/m-%r.csv");
}

static void test_parse_eval_every(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "eval_every", "100000000", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.eval_every, 100000000);
}

static void test_parse_chart_every(void **state)
{
    fixture *f = *state;
    expect_bad(f, "chart_every", "-1", 6, "out of range");
    assert_int_equal(set(f, "chart_every", "0", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.chart_every, 0);
}

static void test_parse_bn_recalibrate(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->cfg.bn_recalibrate, SELSYNC_BN_RECALIBRATE_DEFAULT);
    expect_bad(f, "bn_recalibrate", "-1", 6, "out of range; allowed: an integer from 0 to 1000000 (0 = off)");
    expect_bad(f, "bn_recalibrate", "1000001", 7, "out of range");
    expect_bad(f, "bn_recalibrate", "2.5", 8, NULL);
    expect_bad(f, "bn_recalibrate", "many", 9, NULL);
    assert_int_equal(set(f, "bn_recalibrate", "1000000", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.bn_recalibrate, 1000000);
    assert_int_equal(f->cfg.line[SELSYNC_KEY_BN_RECALIBRATE], 4);
    expect_bad(f, "bn_recalibrate", "0", 5, "set twice");
    fixture g;
    memset(&g, 0, sizeof g);
    selsync_config_default(&g.cfg, FILE_NAME, 3);
    assert_int_equal(set(&g, "bn_recalibrate", "0", 4), SELSYNC_OK);
    assert_int_equal(g.cfg.bn_recalibrate, 0);
    for (int m = 0; m < 5; ++m) { /* every method takes it */
        static const char *methods[] = {"selsync", "bsp", "fedavg", "ssp", "local"};
        selsync_config_default(&g.cfg, FILE_NAME, 3);
        assert_int_equal(set(&g, "method", methods[m], 4), SELSYNC_OK);
        assert_int_equal(set(&g, "bn_recalibrate", "200", 5), SELSYNC_OK);
        assert_int_equal(finish(&g), SELSYNC_OK);
    }
}

static void test_parse_checkpoint_and_nonfinite(void **state)
{
    fixture *f = *state;
    expect_bad(f, "on_nonfinite", "ignore", 6, "not an allowed value; allowed: stop, skip");
    expect_bad(f, "checkpoint_every", "-1", 7, "out of range");
    assert_int_equal(set(f, "checkpoint_every", "500", 4), SELSYNC_OK);
    assert_int_equal(set(f, "on_nonfinite", "skip", 5), SELSYNC_OK);
    assert_int_equal(f->cfg.checkpoint_every, 500);
    assert_int_equal(f->cfg.on_nonfinite, SELSYNC_NONFINITE_SKIP);
}

static void test_checkpoint_not_for_ssp(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "ssp", 3), SELSYNC_OK);
    assert_int_equal(set(f, "checkpoint_every", "10", 4), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:4: [selsync] checkpoint_every = '10': does not apply to method = ssp");
}

static void test_whitespace_trimmed(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, " window\t", " \t 40 \r\n", 4), SELSYNC_OK);
    assert_int_equal(f->cfg.window, 40);
    assert_int_equal(set(f, "log", "  a %r b  ", 5), SELSYNC_OK);
    assert_string_equal(f->cfg.log, "a %r b");
}

static void test_records_line(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "delta", "0.5", 17), SELSYNC_OK);
    assert_int_equal(f->cfg.line[SELSYNC_KEY_DELTA], 17);
    assert_int_equal(f->cfg.line[SELSYNC_KEY_WINDOW], 0);
}

/* ---- bad input in set ---- */

static void test_unknown_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "detla", "0.3", 9), SELSYNC_ECONFIG);
    assert_string_equal(f->err, "cfg/x.cfg:9: [selsync] unknown key 'detla'; known keys: method, delta, window, "
                                "smoothing, warmup, granularity, max_local, target_sync, qsr_alpha, sync_until, agree, drift, lag, outer_momentum, outer_lr, sync_momentum, aggregate, overlap, "
                                "bucket_mb, "
                                "sync_bn_stats, sync_batchnorm, fedavg_interval, "
                                "fedavg_fraction, ssp_staleness, partition, inject_alpha, inject_beta, seed, "
                                "log, eval_every, checkpoint_every, chart_every, on_nonfinite, bn_recalibrate, resume_batch, speed_batches, speed_every");
}

static void test_key_case_sensitive(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "Delta", "0.3", 9), SELSYNC_ECONFIG);
    assert_contains(f->err, "unknown key 'Delta'");
}

static void test_empty_value(void **state)
{
    fixture *f = *state;
    expect_bad(f, "delta", "", 6, "empty value");
    expect_bad(f, "log", "", 7, "empty value");
    assert_int_equal(set(f, "window", "   ", 8), SELSYNC_ECONFIG);
    assert_contains(f->err, "empty value");
}

static void test_malformed_number(void **state)
{
    fixture *f = *state;
    expect_bad(f, "delta", "0.3x", 12, "malformed value");
    expect_bad(f, "window", "25 steps", 13, NULL);
    expect_bad(f, "seed", "abc", 14, "malformed value");
    expect_bad(f, "delta", "0.3 0.4", 15, "malformed value");
    assert_true(f->cfg.delta == 0.3);
}

static void test_nan_rejected(void **state)
{
    fixture *f = *state;
    expect_bad(f, "delta", "nan", 12, "not a finite number");
    expect_bad(f, "fedavg_fraction", "NaN", 13, "not a finite number");
}

static void test_inf_rejected(void **state)
{
    fixture *f = *state;
    expect_bad(f, "delta", "inf", 12, "not a finite number");
    expect_bad(f, "delta", "-Infinity", 13, "not a finite number");
    assert_true(f->cfg.delta == 0.3);
}

static void test_overflow_rejected(void **state)
{
    fixture *f = *state;
    expect_bad(f, "delta", "1e999", 12, "out of range");
    expect_bad(f, "window", "99999999999999999999", 13, "out of range");
    expect_bad(f, "seed", "18446744073709551616", 14, "out of range");
    assert_true(f->cfg.seed == 1);
}

static void test_out_of_range(void **state)
{
    fixture *f = *state;
    expect_bad(f, "delta", "-1", 12, "out of range; allowed: a real number >= 0");
    assert_string_equal(f->err, "cfg/x.cfg:12: [selsync] delta = '-1': out of range; allowed: a real number >= 0");
    expect_bad(f, "window", "0", 13, "out of range");
    expect_bad(f, "window", "1000001", 14, "out of range");
    expect_bad(f, "smoothing", "0", 15, "out of range");
    expect_bad(f, "smoothing", "1.5", 16, "out of range");
    expect_bad(f, "warmup", "-1", 17, "out of range");
    expect_bad(f, "sync_bn_stats", "2", 18, "out of range");
    expect_bad(f, "fedavg_interval", "0", 19, "out of range");
    expect_bad(f, "fedavg_fraction", "0", 20, "out of range");
    expect_bad(f, "ssp_staleness", "1000001", 21, "out of range");
    expect_bad(f, "inject_alpha", "1.5", 22, "out of range");
    expect_bad(f, "inject_beta", "-0.1", 23, "out of range");
    expect_bad(f, "eval_every", "100000001", 24, "out of range");
    for (int k = 0; k < SELSYNC_KEY_COUNT; k++) assert_int_equal(f->cfg.line[k], 0);
}

static void test_negative_unsigned(void **state)
{
    fixture *f = *state;
    expect_bad(f, "seed", "-1", 12, "out of range");
    assert_true(f->cfg.seed == 1);
}

static void test_decimal_integer(void **state)
{
    fixture *f = *state;
    expect_bad(f, "window", "2.5", 12, "not an integer");
    expect_bad(f, "seed", "1e3", 13, "not an integer");
    expect_bad(f, "sync_bn_stats", "1.0", 14, "not an integer");
    assert_int_equal(f->cfg.window, 25);
}

/* one syntax for every number: optional sign, digits, optional fraction,
 * optional decimal exponent */
static void test_decimal_forms_accepted(void **state)
{
    static const struct { const char *text; double value; } reals[] = {
        {"+0.5", 0.5}, {".5", 0.5}, {"5.", 5}, {"5e-1", 0.5}, {"2.5E+0", 2.5}, {"007", 7},
    };
    fixture *f = *state;
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        selsync_config_default(&f->cfg, FILE_NAME, 3);
        assert_int_equal(set(f, "delta", reals[i].text, 4), SELSYNC_OK);
        assert_true(f->cfg.delta == reals[i].value);
    }
    assert_int_equal(set(f, "window", "+40", 5), SELSYNC_OK);
    assert_int_equal(set(f, "warmup", "007", 6), SELSYNC_OK);
    assert_int_equal(set(f, "seed", "+18446744073709551615", 7), SELSYNC_OK);
    assert_int_equal(f->cfg.window, 40);
    assert_int_equal(f->cfg.warmup, 7);
    assert_true(f->cfg.seed == UINT64_MAX);
}

static void test_hexadecimal_refused(void **state)
{
    fixture *f = *state;
    expect_bad(f, "delta", "0x10", 12, "not a decimal number; allowed: a real number >= 0");
    expect_bad(f, "delta", "0x1p3", 13, "not a decimal number");
    expect_bad(f, "fedavg_fraction", "0x.8", 14, "not a decimal number");
    expect_bad(f, "window", "0x10", 15, "not a decimal number; allowed: an integer from 1 to 1000000");
    expect_bad(f, "seed", "0X10", 16, "not a decimal number");
    expect_bad(f, "partition", "dirichlet:0x1", 17, "not a decimal number");
    expect_bad(f, "partition", "label:0x2", 18, "not a decimal number");
    assert_true(f->cfg.delta == 0.3);
    assert_int_equal(f->cfg.window, 25);
    assert_int_equal(f->cfg.partition, SELSYNC_PARTITION_IID);
}

static void test_not_numbers_refused(void **state)
{
    static const char *const bad[] = {".", "+", "-", "e5", ".e5", "1e", "1e+", "1.2.3", "--1", "+-1",
                                      "1_000", "1,5", "1e5.5", "0.5f", "five"};
    fixture *f = *state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        expect_bad(f, "delta", bad[i], 12, "malformed value");
        expect_bad(f, "window", bad[i], 13, "malformed value");
    }
    expect_bad(f, "partition", "label: 5", 14, "malformed value");
    expect_bad(f, "window", "inf", 15, "not a finite number");
    expect_bad(f, "seed", "nan", 16, "not a finite number");
    expect_bad(f, "inject_alpha", "infinity", 17, "not a finite number");
}

/* overflow in every kind of number says so and shows the allowed range */
static void test_overflow_shows_range(void **state)
{
    fixture *f = *state;
    expect_bad(f, "delta", "1e400", 12, "out of range; allowed: a real number >= 0");
    expect_bad(f, "delta", "-1e400", 13, "out of range; allowed: a real number >= 0");
    expect_bad(f, "window", "9223372036854775808", 14, "out of range; allowed: an integer from 1 to 1000000");
    expect_bad(f, "warmup", "-9223372036854775809", 15, "out of range; allowed: an integer from 0 to 1000000");
    expect_bad(f, "seed", "99999999999999999999999", 16,
               "out of range; allowed: an integer from 0 to 18446744073709551615");
    expect_bad(f, "window", "1e400", 17, "not an integer; allowed: an integer from 1 to 1000000");
}

/* a very long key is shown cut, ending in "..." */
static void test_long_key_shortened(void **state)
{
    static char key[100000];
    fixture *f = *state;
    memset(key, 'k', sizeof key - 1);
    assert_int_equal(set(f, key, "1", 9), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:9: [selsync] unknown key 'kkk");
    assert_contains(f->err, "k...'; known keys: method,");
    assert_true(strlen(f->err) < 640);
    assert_one_line(f->err);
}

/* ssp_staleness: each kind of bad value names the file, line and key, and
 * leaves the default (and the key unset) */
static void test_bad_ssp_staleness(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "ssp", 11), SELSYNC_OK);
    expect_bad(f, "ssp_staleness", "-1", 12, "out of range; allowed: an integer from 0 to 1000000");
    assert_string_equal(f->err, "cfg/x.cfg:12: [selsync] ssp_staleness = '-1': out of range; "
                                "allowed: an integer from 0 to 1000000");
    expect_bad(f, "ssp_staleness", "1.5", 13, "not an integer");
    expect_bad(f, "ssp_staleness", "2abc", 14, "malformed value");
    assert_int_equal(f->cfg.ssp_staleness, 100);
    assert_int_equal(f->cfg.line[SELSYNC_KEY_SSP_STALENESS], 0);
    assert_int_equal(finish(f), SELSYNC_OK);
}

static void test_bad_words(void **state)
{
    fixture *f = *state;
    expect_bad(f, "method", "BSP", 12, "not an allowed value");
    assert_contains(f->err, "selsync, bsp, fedavg, ssp, local");
    expect_bad(f, "granularity", "layers", 13, NULL);
    expect_bad(f, "aggregate", "gradients", 14, NULL);
    expect_bad(f, "smoothing", "Auto", 15, NULL);
    assert_int_equal(f->cfg.method, SELSYNC_METHOD_SELSYNC);
}

static void test_duplicate_key_long_value_shortened(void **state)
{
    fixture *f = *state;
    const char *path = "runs/a-rather-long-directory-name/metrics.%r.tsv";
    assert_int_equal(set(f, "log", path, 5), SELSYNC_OK);
    assert_int_equal(set(f, "log", "x.tsv", 6), SELSYNC_ECONFIG);
    assert_contains(f->err, "(first on line 5 as 'runs/a-rather-long-directory-name/me...')");
}

static void test_duplicate_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "delta", "0.5", 11), SELSYNC_OK);
    assert_int_equal(set(f, "delta", "0.7", 14), SELSYNC_ECONFIG);
    assert_string_equal(f->err, "cfg/x.cfg:14: [selsync] delta = '0.7': set twice (first on line 11 as '0.5'); "
                                "allowed: each key once per section");
    assert_true(f->cfg.delta == 0.5);
    assert_int_equal(f->cfg.line[SELSYNC_KEY_DELTA], 11);
}

static void test_failed_set_not_recorded(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "delta", "x", 11), SELSYNC_ECONFIG);
    assert_int_equal(f->cfg.line[SELSYNC_KEY_DELTA], 0);
    assert_int_equal(set(f, "delta", "0.5", 12), SELSYNC_OK);
}

static void test_bad_partition(void **state)
{
    fixture *f = *state;
    expect_bad(f, "partition", "label:", 12, "malformed value");
    expect_bad(f, "partition", "label:0", 13, "out of range");
    expect_bad(f, "partition", "label:2.5", 14, "not an integer");
    expect_bad(f, "partition", "label: 3", 15, NULL);
    expect_bad(f, "partition", "dirichlet:-1", 16, "out of range");
    expect_bad(f, "partition", "dirichlet:0", 17, "out of range");
    expect_bad(f, "partition", "dirichlet:abc", 18, "malformed value");
    expect_bad(f, "partition", "dirichlet:inf", 19, "not a finite number");
    expect_bad(f, "partition", "dirichlet: 0.5", 19, "malformed value");
    expect_bad(f, "partition", "label", 20, "not an allowed value");
    expect_bad(f, "partition", "IID", 21, NULL);
    assert_int_equal(f->cfg.partition, SELSYNC_PARTITION_IID);
    assert_int_equal(f->cfg.partition_k, 0);
}

static void test_bad_log(void **state)
{
    fixture *f = *state;
    expect_bad(f, "log", "m-%x.csv", 12, "%r");
    expect_bad(f, "log", "m-%r-%.csv", 13, NULL);
    expect_bad(f, "log", "m-%", 14, NULL);
    expect_bad(f, "log", "m-%%r", 15, NULL);
    assert_string_equal(f->cfg.log, "");
}

static void test_log_too_long(void **state)
{
    fixture *f = *state;
    char path[SELSYNC_PATH_MAX + 1];
    memset(path, 'a', SELSYNC_PATH_MAX);
    path[SELSYNC_PATH_MAX] = '\0';
    assert_int_equal(set(f, "log", path, 12), SELSYNC_ECONFIG);
    assert_contains(f->err, "too long");
    assert_contains(f->err, ":12:");
    path[SELSYNC_PATH_MAX - 1] = '\0'; /* 511 characters: fits */
    assert_int_equal(set(f, "log", path, 13), SELSYNC_OK);
    assert_int_equal(strlen(f->cfg.log), SELSYNC_PATH_MAX - 1);
}

static void test_message_one_line(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "delta", "0.3\nwindow = 4", 12), SELSYNC_ECONFIG);
    assert_one_line(f->err);
    assert_contains(f->err, ":12:");
}

static void test_null_arguments(void **state)
{
    fixture *f = *state;
    assert_int_equal(selsync_config_set(NULL, "delta", "1", 1, f->err, sizeof f->err), SELSYNC_EINVAL);
    assert_int_equal(set(f, NULL, "1", 1), SELSYNC_EINVAL);
    assert_int_equal(set(f, "delta", NULL, 1), SELSYNC_EINVAL);
    assert_int_equal(set(f, "delta", "1", 0), SELSYNC_EINVAL); /* line 0 would mean "not set" */
    assert_int_equal(selsync_config_set(&f->cfg, "delta", "1", 1, NULL, 0), SELSYNC_OK);
    assert_int_equal(selsync_config_finish(NULL, f->err, sizeof f->err), SELSYNC_EINVAL);
    assert_int_equal(selsync_config_check_world(NULL, 2, f->err, sizeof f->err), SELSYNC_EINVAL);
}

static void test_no_file_name(void **state)
{
    fixture *f = *state;
    selsync_config_default(&f->cfg, NULL, 0);
    assert_int_equal(set(f, "delta", "-1", 5), SELSYNC_ECONFIG);
    assert_contains(f->err, "<cfg>:5: [selsync] delta = '-1'");
}

/* ---- finish ---- */

static void test_finish_key_not_for_method_order_independent(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "fedavg_interval", "100", 15), SELSYNC_OK);
    assert_int_equal(set(f, "method", "selsync", 16), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_string_equal(f->err,
                        "cfg/x.cfg:15: [selsync] fedavg_interval = '100': does not apply to method = selsync; "
                        "allowed: this key only with method = fedavg (or remove the line)");
}

static void test_finish_selsync_key_with_bsp(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "bsp", 4), SELSYNC_OK);
    assert_int_equal(set(f, "delta", "0.5", 9), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, ":9: [selsync] delta = '0.5': does not apply to method = bsp; allowed: this key only with method = selsync");
}

static void test_guard_and_target_keys(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "max_local", "50", 3), SELSYNC_OK);
    assert_int_equal(set(f, "target_sync", "0.1", 4), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.max_local, 50);
    assert_true(f->cfg.target_sync == 0.1);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " granularity=model agree=mean max_local=50 target_sync=0.1 lag=1 drift=0.0001 aggregate=params");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "max_local", "-1", 5), SELSYNC_ECONFIG);
    assert_int_equal(set(f, "target_sync", "1.5", 6), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:6: [selsync] target_sync = '1.5'");
    assert_contains(f->err, "a real number in [0,1] (0 = a fixed delta)");
}

static void test_target_sync_needs_a_delta(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "delta", "0", 3), SELSYNC_OK);
    assert_int_equal(set(f, "target_sync", "0.2", 8), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:8: [selsync] target_sync = 0.2: delta adapts by factors from its "
                            "starting value, and delta = 0 cannot change");
}

/* qsr_alpha: a real number in [0, 1e6], selsync only, with max_local as
 * the bound it grows from. */
static void test_qsr_alpha_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "max_local", "4", 3), SELSYNC_OK);
    assert_int_equal(set(f, "qsr_alpha", "0.25", 4), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(f->cfg.qsr_alpha == 0.25);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " max_local=4 qsr_alpha=0.25 lag=1 drift=0.0001 aggregate=params");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "qsr_alpha", "-0.1", 5), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:5: [selsync] qsr_alpha = '-0.1'");
    assert_contains(f->err, "a real number in [0,1000000] (0 = off)");
    assert_int_equal(set(f, "qsr_alpha", "2e6", 6), SELSYNC_ECONFIG);
    assert_int_equal(set(f, "qsr_alpha", "0.5", 7), SELSYNC_OK); /* grows from max_local's default */
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.max_local, SELSYNC_MAX_LOCAL_DEFAULT);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "max_local", "0", 6), SELSYNC_OK); /* no bound to grow from */
    assert_int_equal(set(f, "qsr_alpha", "0.5", 7), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:7: [selsync] qsr_alpha = 0.5: the quadratic rule grows max_local's bound");
    assert_contains(f->err, "allowed: max_local >= 1");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "fedavg", 2), SELSYNC_OK);
    assert_int_equal(set(f, "qsr_alpha", "0.5", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, ":3: [selsync] qsr_alpha = '0.5': does not apply to method = fedavg");
}

/* A word-valued key: the word `bad` refused at line 4 with the allowed
 * words listed, and `good` refused at line 3 under `method` (line 2), for
 * which the key does not apply. */
static void word_key_refusals(fixture *f, const char *key, const char *bad, const char *allowed,
                              const char *good, const char *method)
{
    char want[160];
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, key, bad, 4), SELSYNC_ECONFIG);
    snprintf(want, sizeof want, "cfg/x.cfg:4: [selsync] %s = '%s'", key, bad);
    assert_contains(f->err, want);
    assert_contains(f->err, allowed);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", method, 2), SELSYNC_OK);
    assert_int_equal(set(f, key, good, 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    snprintf(want, sizeof want, ":3: [selsync] %s = '%s': does not apply to method = %s", key, good, method);
    assert_contains(f->err, want);
}

/* KEY at its default is not in the cfg line; set to VALUE with METHOD it
 * is, as SHOWN. */
static void shown_when_set(fixture *f, const char *key, const char *value, const char *method, const char *shown)
{
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(finish(f), SELSYNC_OK);
    selsync_config_describe(&f->cfg, 4, f->err, sizeof f->err);
    assert_null(strstr(f->err, key));
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", method, 2), SELSYNC_OK);
    assert_int_equal(set(f, key, value, 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    selsync_config_describe(&f->cfg, 4, f->err, sizeof f->err);
    assert_contains(f->err, shown);
}

/* sync_batchnorm: 0 (default) or 1, every method but ssp (rank 0 there
 * serves and runs no training pass); the cfg line shows it when on. */
static void test_sync_batchnorm_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->cfg.sync_batchnorm, 0);
    shown_when_set(f, "sync_batchnorm", "1", "bsp", " sync_bn_stats=1 sync_batchnorm=1 bn_recalibrate=0");
    assert_int_equal(f->cfg.sync_batchnorm, 1);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "sync_batchnorm", "2", 4), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:4: [selsync] sync_batchnorm = '2': out of range; allowed: 0, 1");
    word_key_refusals(f, "sync_batchnorm", "yes", "allowed: 0, 1", "1", "ssp");
}

/* KEY1 = VALUE1 on line 5 and KEY2 = VALUE2 on line 6 together: finish
 * refuses them with WANT in the message. */
static void refused_together(fixture *f, const char *key1, const char *value1, const char *key2, const char *value2,
                             const char *want)
{
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, key1, value1, 5), SELSYNC_OK);
    assert_int_equal(set(f, key2, value2, 6), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, want);
}

/* resume_batch: rank (default), global; every method but ssp, which
 * writes no checkpoint. */
static void test_resume_batch_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->cfg.resume_batch, SELSYNC_RESUME_BATCH_RANK);
    shown_when_set(f, "resume_batch", "global", "fedavg", " resume_batch=global bn_recalibrate=0");
    assert_int_equal(f->cfg.resume_batch, SELSYNC_RESUME_BATCH_GLOBAL);
    word_key_refusals(f, "resume_batch", "all", "allowed: rank, global", "rank", "ssp");
}

/* speed_batches: off (default), on, auto; speed_every 1..1000000 (10);
 * neither with ssp; not with data injection, which completes every batch
 * to one size, nor with sync_batchnorm, whose sums are per mini-batch. */
static void test_speed_batches_keys(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->cfg.speed_batches, SELSYNC_SPEED_OFF);
    assert_int_equal(f->cfg.speed_every, 10);
    shown_when_set(f, "speed_batches", "auto", "bsp", " speed_batches=auto speed_every=10 bn_recalibrate=0");
    word_key_refusals(f, "speed_batches", "fast", "allowed: off, on, auto", "on", "ssp");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "speed_every", "0", 4), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:4: [selsync] speed_every = '0': out of range; allowed: an integer from 1");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "speed_batches", "on", 5), SELSYNC_OK);
    assert_int_equal(set(f, "inject_alpha", "0.5", 6), SELSYNC_OK);
    assert_int_equal(set(f, "inject_beta", "0.5", 7), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:5: [selsync] speed_batches = on: batches that follow speed");
    refused_together(f, "speed_batches", "auto", "sync_batchnorm", "1",
                     "cfg/x.cfg:5: [selsync] speed_batches = auto: synchronised BatchNorm sums every mini-batch");
}

/* sync_until: none (default), decay, burn_in; selsync only. */
static void test_sync_until_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->cfg.sync_until, SELSYNC_SYNC_UNTIL_NONE);
    assert_int_equal(set(f, "sync_until", "burn_in", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.sync_until, SELSYNC_SYNC_UNTIL_BURN_IN);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " sync_until=burn_in");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "sync_until", "decay", 3), SELSYNC_OK);
    assert_int_equal(f->cfg.sync_until, SELSYNC_SYNC_UNTIL_DECAY);
    word_key_refusals(f, "sync_until", "warmup", "none, decay, burn_in", "decay", "bsp");
}

/* agree: any or mean, selsync only; by default SELSYNC_AGREE_DEFAULT (mean),
 * and the description names it after granularity. */
static void test_agree_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.agree, SELSYNC_AGREE_MEAN);
    assert_int_equal(SELSYNC_AGREE_DEFAULT, SELSYNC_AGREE_MEAN);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " granularity=model agree=mean max_local=7 lag=1 drift=");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "agree", "any", 3), SELSYNC_OK);
    assert_int_equal(f->cfg.agree, SELSYNC_AGREE_ANY);
    assert_int_equal(finish(f), SELSYNC_OK);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " granularity=model agree=any max_local=7 lag=1 drift=");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "agree", "mean", 2), SELSYNC_OK);
    assert_int_equal(f->cfg.agree, SELSYNC_AGREE_MEAN);
    word_key_refusals(f, "agree", "median", "any, mean", "mean", "fedavg");
}

/* lag: an integer from 0 (not described) to SELSYNC_LAG_MAX, selsync only,
 * SELSYNC_LAG_DEFAULT unless set; refused beside on_nonfinite = skip, whose
 * verdict a step's average needs at once (where lag is not set it is then
 * 0, as for the other methods). */
static void test_lag_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.lag, SELSYNC_LAG_DEFAULT);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " max_local=7 lag=1 drift=");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "lag", "0", 3), SELSYNC_OK);
    assert_int_equal(set(f, "max_local", "0", 4), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.lag, 0);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_null(strstr(f->err, "lag="));
    assert_null(strstr(f->err, "max_local="));
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "on_nonfinite", "skip", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.lag, 0);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "fedavg", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.lag, 0);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "lag", "2", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.lag, 2);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " agree=mean max_local=7 lag=2 drift=");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "lag", "1001", 4), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:4: [selsync] lag = '1001': out of range; allowed: an integer from 0 to 1000");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "lag", "-1", 4), SELSYNC_ECONFIG);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "lag", "3", 5), SELSYNC_OK);
    assert_int_equal(set(f, "on_nonfinite", "skip", 6), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:5: [selsync] lag = 3: on_nonfinite = skip needs every rank's verdict");
    assert_contains(f->err, "allowed: lag = 0, or on_nonfinite = stop");
    word_key_refusals(f, "lag", "x", "an integer from 0 to 1000", "1", "bsp");
}

/* drift: a real number in [0, 1e6], selsync only, with aggregate = params
 * (an average is what brings the replicas back to the anchor); by default
 * SELSYNC_DRIFT_DEFAULT there, 0 elsewhere (aggregate = grads, other
 * methods) without an error. */
static void test_drift_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(f->cfg.drift == SELSYNC_DRIFT_DEFAULT && SELSYNC_DRIFT_DEFAULT > 0);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " drift=0.0001 aggregate=params");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "aggregate", "grads", 2), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(f->cfg.drift == 0);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "fedavg", 2), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(f->cfg.drift == 0);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "drift", "0", 3), SELSYNC_OK); /* off */
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(f->cfg.drift == 0);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "drift", "0.002", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(f->cfg.drift == 0.002);
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " drift=0.002 aggregate=params");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "drift", "-1", 4), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:4: [selsync] drift = '-1'");
    assert_contains(f->err, "a real number in [0,1000000] (0 = off)");
    assert_int_equal(set(f, "drift", "nan", 4), SELSYNC_ECONFIG);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "aggregate", "grads", 2), SELSYNC_OK);
    assert_int_equal(set(f, "drift", "0.01", 5), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:5: [selsync] drift = 0.01: the drift rule measures how far the parameters "
                            "moved since the last average");
    assert_contains(f->err, "allowed: aggregate = params");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "fedavg", 2), SELSYNC_OK);
    assert_int_equal(set(f, "drift", "0.01", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, ":3: [selsync] drift = '0.01': does not apply to method = fedavg");
}

/* outer_momentum in [0, 0.999] and outer_lr in (0, 10] (default 1): selsync
 * and fedavg, on parameter averages only. */
static void test_outer_keys(void **state)
{
    fixture *f = *state;
    assert_true(f->cfg.outer_momentum == 0 && f->cfg.outer_lr == 1);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_false(selsync_config_outer(&f->cfg));
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "fedavg", 2), SELSYNC_OK);
    assert_int_equal(set(f, "outer_momentum", "0.6", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(selsync_config_outer(&f->cfg));
    selsync_config_describe(&f->cfg, 16, f->err, sizeof f->err);
    assert_contains(f->err, " outer_momentum=0.6 outer_lr=1");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "outer_lr", "2", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_true(selsync_config_outer(&f->cfg));
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "outer_momentum", "1", 4), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:4: [selsync] outer_momentum = '1'");
    assert_contains(f->err, "a real number in [0,0.999] (0 = off)");
    assert_int_equal(set(f, "outer_lr", "0", 5), SELSYNC_ECONFIG);
    assert_contains(f->err, "a real number in (0,10]");
    assert_int_equal(set(f, "outer_lr", "11", 5), SELSYNC_ECONFIG);
    refused_together(f, "aggregate", "grads", "outer_momentum", "0.5",
                     "cfg/x.cfg:6: [selsync] outer_momentum = 0.5: the outer step acts on parameter averages");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "bsp", 2), SELSYNC_OK);
    assert_int_equal(set(f, "outer_lr", "2", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, ":3: [selsync] outer_lr = '2': does not apply to method = bsp");
}

/* sync_momentum 0/1 (default 0): selsync and fedavg, on parameter
 * averages only. */
static void test_sync_momentum_key(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->cfg.sync_momentum, 0);
    shown_when_set(f, "sync_momentum", "1", "fedavg", " sync_momentum=1");
    word_key_refusals(f, "sync_momentum", "2", "allowed: 0, 1", "1", "bsp");
    refused_together(f, "aggregate", "grads", "sync_momentum", "1",
                     "cfg/x.cfg:6: [selsync] sync_momentum = 1: momentum buffers travel with parameter averages");
}

static void test_guard_with_bsp(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "bsp", 2), SELSYNC_OK);
    assert_int_equal(set(f, "max_local", "10", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, ":3: [selsync] max_local = '10': does not apply to method = bsp");
}

static void test_overlap_keys(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "bsp", 2), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 1); /* the default where gradients are averaged */
    assert_true(f->cfg.bucket_mb == 2);
    selsync_config_describe(&f->cfg, 2, f->err, sizeof f->err);
    assert_contains(f->err, " aggregate=grads overlap=1 bucket_mb=2 sync_bn_stats=1");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "bsp", 2), SELSYNC_OK);
    assert_int_equal(set(f, "overlap", "0", 3), SELSYNC_OK);
    assert_int_equal(set(f, "bucket_mb", "0.5", 4), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 0);
    assert_true(f->cfg.bucket_mb == 0.5);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "overlap", "2", 5), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:5: [selsync] overlap = '2'");
    assert_int_equal(set(f, "bucket_mb", "0", 6), SELSYNC_ECONFIG);
    assert_contains(f->err, "a real number in (0,1024]");
    assert_int_equal(set(f, "bucket_mb", "2048", 7), SELSYNC_ECONFIG);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1); /* selsync averages parameters by default, late */
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 1);
    selsync_config_describe(&f->cfg, 2, f->err, sizeof f->err);
    assert_contains(f->err, " aggregate=params overlap=1 sync_bn_stats=1");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "overlap", "0", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 0);
    selsync_config_describe(&f->cfg, 2, f->err, sizeof f->err);
    assert_contains(f->err, " aggregate=params overlap=0 sync_bn_stats=1");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1); /* bsp averaging parameters: at once */
    assert_int_equal(set(f, "method", "bsp", 2), SELSYNC_OK);
    assert_int_equal(set(f, "aggregate", "params", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 0);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1); /* fedavg: as selsync, its averages a step late */
    assert_int_equal(set(f, "method", "fedavg", 2), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 1);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "fedavg", 2), SELSYNC_OK);
    assert_int_equal(set(f, "overlap", "0", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 0);
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1); /* methods without the key */
    assert_int_equal(set(f, "method", "local", 2), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 0);
}

static void test_overlap_needs_grads_and_stop(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "bucket_mb", "8", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:3: [selsync] bucket_mb = '8': gradient buckets apply to aggregate = grads");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "local", 2), SELSYNC_OK);
    assert_int_equal(set(f, "overlap", "1", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, ":3: [selsync] overlap = '1': does not apply to method = local");
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "bsp", 2), SELSYNC_OK);
    assert_int_equal(set(f, "on_nonfinite", "skip", 3), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.overlap, 0); /* skip turns the default off */
    selsync_config_default(&f->cfg, "cfg/x.cfg", 1);
    assert_int_equal(set(f, "method", "bsp", 2), SELSYNC_OK);
    assert_int_equal(set(f, "on_nonfinite", "skip", 3), SELSYNC_OK);
    assert_int_equal(set(f, "overlap", "1", 4), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:4: [selsync] overlap = 1: on_nonfinite = skip decides after the backward pass");
}

static void test_finish_aggregate_with_fedavg(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "aggregate", "grads", 7), SELSYNC_OK);
    assert_int_equal(set(f, "method", "fedavg", 8), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:7: [selsync] aggregate = 'grads': does not apply to method = fedavg; "
                            "allowed: this key only with method = selsync, bsp");
}

static void test_finish_aggregate_with_bsp_ok(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "bsp", 4), SELSYNC_OK);
    assert_int_equal(set(f, "aggregate", "params", 5), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.aggregate, SELSYNC_AGGREGATE_PARAMS);
}

static void test_finish_injection_with_seldp(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "partition", "seldp", 4), SELSYNC_OK);
    assert_int_equal(set(f, "inject_alpha", "0.5", 5), SELSYNC_OK);
    assert_int_equal(set(f, "inject_beta", "0.5", 6), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:5: [selsync] inject_alpha = 0.5: data injection");
    assert_contains(f->err, "partition = seldp");
}

static void test_finish_injection_with_label_ok(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "partition", "label:1", 4), SELSYNC_OK);
    assert_int_equal(set(f, "inject_alpha", "0.5", 5), SELSYNC_OK);
    assert_int_equal(set(f, "inject_beta", "0.5", 6), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
}

static void test_finish_only_inject_alpha(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "inject_alpha", "0.5", 10), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:10:");
    assert_contains(f->err, "inject_beta");
}

static void test_finish_only_inject_beta(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "inject_alpha", "0", 10), SELSYNC_OK);
    assert_int_equal(set(f, "inject_beta", "0.75", 11), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:11:");
    assert_contains(f->err, "inject_alpha");
}

static void test_finish_inject_with_ssp(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "inject_alpha", "0.5", 10), SELSYNC_OK);
    assert_int_equal(set(f, "inject_beta", "0.5", 11), SELSYNC_OK);
    assert_int_equal(set(f, "method", "ssp", 12), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:10:");
    assert_contains(f->err, "method = ssp");
}

static void test_finish_inject_zero_with_ssp_ok(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "inject_alpha", "0", 10), SELSYNC_OK);
    assert_int_equal(set(f, "inject_beta", "0", 11), SELSYNC_OK);
    assert_int_equal(set(f, "method", "ssp", 12), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
}

static void test_finish_warmup_defaults_to_window(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "window", "40", 4), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.warmup, 40);
}

static void test_finish_explicit_warmup_kept(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "window", "40", 4), SELSYNC_OK);
    assert_int_equal(set(f, "warmup", "0", 5), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(f->cfg.warmup, 0);
}

static void test_finish_aggregate_per_method(void **state)
{
    static const char *const names[] = {"selsync", "bsp", "fedavg", "ssp", "local"};
    fixture *f = *state;
    for (int m = 0; m < 5; m++) {
        selsync_config_default(&f->cfg, FILE_NAME, 3);
        assert_int_equal(set(f, "method", names[m], 4), SELSYNC_OK);
        assert_int_equal(finish(f), SELSYNC_OK);
        assert_int_equal(f->cfg.aggregate,
                         m == SELSYNC_METHOD_BSP ? SELSYNC_AGGREGATE_GRADS : SELSYNC_AGGREGATE_PARAMS);
    }
}

/* ---- check_world ---- */

static void test_world_below_one(void **state)
{
    fixture *f = *state;
    assert_int_equal(world(f, 0), SELSYNC_EINVAL);
    assert_int_equal(world(f, -3), SELSYNC_EINVAL);
}

static void test_world_ssp_one_rank(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "ssp", 6), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(world(f, 1), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:6:");
    assert_contains(f->err, "ssp");
    assert_int_equal(world(f, 2), SELSYNC_OK);
}

static void test_world_log_without_rank(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "log", "metrics.csv", 8), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(world(f, 1), SELSYNC_OK);
    assert_int_equal(world(f, 2), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:8:");
    assert_contains(f->err, "'metrics.csv'");
    assert_contains(f->err, "%r");
}

static void test_world_log_with_rank(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "log", "metrics-%r.csv", 8), SELSYNC_OK);
    assert_int_equal(world(f, 64), SELSYNC_OK);
}

static void test_world_fedavg_fraction_too_small(void **state)
{
    fixture *f = *state;
    assert_int_equal(set(f, "method", "fedavg", 4), SELSYNC_OK);
    assert_int_equal(set(f, "fedavg_fraction", "0.2", 5), SELSYNC_OK);
    assert_int_equal(finish(f), SELSYNC_OK);
    assert_int_equal(world(f, 4), SELSYNC_ECONFIG);
    assert_contains(f->err, "cfg/x.cfg:5:");
    assert_contains(f->err, "fedavg_fraction");
    assert_int_equal(world(f, 5), SELSYNC_OK);
}

/* ---- messages, smoothing, names ---- */

static void test_truncation_small_buffer(void **state)
{
    fixture *f = *state;
    char buf[16];
    memset(buf, 'Z', sizeof buf);
    assert_int_equal(selsync_config_set(&f->cfg, "delta", "-1", 12, buf, 8), SELSYNC_ECONFIG);
    assert_int_equal(buf[7], '\0');
    assert_int_equal(strlen(buf), 7);
    assert_memory_equal(buf, "cfg/x.c", 7);
    for (size_t i = 8; i < sizeof buf; i++) assert_int_equal(buf[i], 'Z');

    memset(buf, 'Z', sizeof buf);
    assert_int_equal(selsync_config_set(&f->cfg, "detla", "1", 12, buf, 1), SELSYNC_ECONFIG);
    assert_int_equal(buf[0], '\0');
    assert_int_equal(buf[1], 'Z');
}

static void test_truncation_errlen_zero(void **state)
{
    fixture *f = *state;
    char buf[4] = {'Z', 'Z', 'Z', 'Z'};
    assert_int_equal(selsync_config_set(&f->cfg, "delta", "-1", 12, buf, 0), SELSYNC_ECONFIG);
    assert_int_equal(set(f, "ssp_staleness", "5", 13), SELSYNC_OK);
    assert_int_equal(selsync_config_finish(&f->cfg, buf, 0), SELSYNC_ECONFIG);
    assert_int_equal(selsync_config_check_world(&f->cfg, 0, buf, 0), SELSYNC_EINVAL);
    assert_memory_equal(buf, "ZZZZ", 4);
}

static void test_smoothing_auto_by_world(void **state)
{
    fixture *f = *state;
    assert_true(fabs(selsync_config_smoothing(&f->cfg, 2) - 0.02) < 1e-12);
    assert_true(fabs(selsync_config_smoothing(&f->cfg, 16) - 0.16) < 1e-12);
    assert_true(selsync_config_smoothing(&f->cfg, 100) == 1.0);
    assert_true(selsync_config_smoothing(&f->cfg, 200) == 1.0);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(selsync_method_name(SELSYNC_METHOD_FEDAVG), "fedavg");
    assert_string_equal(selsync_method_name((selsync_method)5), "?");
    assert_string_equal(selsync_method_name((selsync_method)-1), "?");
    assert_string_equal(selsync_config_key_name(SELSYNC_KEY_METHOD), "method");
    assert_string_equal(selsync_config_key_name(SELSYNC_KEY_EVAL_EVERY), "eval_every");
    assert_string_equal(selsync_config_key_name(SELSYNC_KEY_COUNT), "?");
}

#define T(fn) cmocka_unit_test_setup(fn, setup)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_defaults),
        T(test_defaults_finish_and_world_ok),
        T(test_parse_method),
        T(test_parse_delta),
        T(test_parse_window_and_warmup),
        T(test_parse_smoothing_auto),
        T(test_parse_smoothing_value),
        T(test_parse_granularity_aggregate),
        T(test_parse_sync_bn_stats),
        T(test_parse_fedavg_keys),
        T(test_parse_ssp_staleness),
        T(test_parse_partition_words),
        T(test_parse_partition_label),
        T(test_parse_partition_dirichlet),
        T(test_parse_inject),
        T(test_parse_seed_max),
        T(test_parse_log),
        T(test_parse_eval_every),
        T(test_parse_chart_every),
        T(test_parse_bn_recalibrate),
        T(test_parse_checkpoint_and_nonfinite),
        T(test_checkpoint_not_for_ssp),
        T(test_whitespace_trimmed),
        T(test_records_line),
        T(test_unknown_key),
        T(test_key_case_sensitive),
        T(test_empty_value),
        T(test_malformed_number),
        T(test_nan_rejected),
        T(test_inf_rejected),
        T(test_overflow_rejected),
        T(test_out_of_range),
        T(test_negative_unsigned),
        T(test_decimal_integer),
        T(test_decimal_forms_accepted),
        T(test_hexadecimal_refused),
        T(test_not_numbers_refused),
        T(test_overflow_shows_range),
        T(test_long_key_shortened),
        T(test_bad_ssp_staleness),
        T(test_bad_words),
        T(test_duplicate_key),
        T(test_duplicate_key_long_value_shortened),
        T(test_failed_set_not_recorded),
        T(test_bad_partition),
        T(test_bad_log),
        T(test_log_too_long),
        T(test_message_one_line),
        T(test_null_arguments),
        T(test_no_file_name),
        T(test_finish_key_not_for_method_order_independent),
        T(test_finish_selsync_key_with_bsp),
        T(test_guard_and_target_keys),
        T(test_target_sync_needs_a_delta),
        T(test_qsr_alpha_key),
        T(test_sync_until_key),
        T(test_agree_key),
        T(test_lag_key),
        T(test_sync_batchnorm_key),
        T(test_resume_batch_key),
        T(test_speed_batches_keys),
        T(test_drift_key),
        T(test_outer_keys),
        T(test_sync_momentum_key),
        T(test_overlap_keys),
        T(test_overlap_needs_grads_and_stop),
        T(test_guard_with_bsp),
        T(test_finish_aggregate_with_fedavg),
        T(test_finish_aggregate_with_bsp_ok),
        T(test_finish_injection_with_seldp),
        T(test_finish_injection_with_label_ok),
        T(test_finish_only_inject_alpha),
        T(test_finish_only_inject_beta),
        T(test_finish_inject_with_ssp),
        T(test_finish_inject_zero_with_ssp_ok),
        T(test_finish_warmup_defaults_to_window),
        T(test_finish_explicit_warmup_kept),
        T(test_finish_aggregate_per_method),
        T(test_world_below_one),
        T(test_world_ssp_one_rank),
        T(test_world_log_without_rank),
        T(test_world_log_with_rank),
        T(test_world_fedavg_fraction_too_small),
        T(test_truncation_small_buffer),
        T(test_truncation_errlen_zero),
        T(test_smoothing_auto_by_world),
        T(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
