/* The rules between the [selsync] section's keys (selsync_config_finish:
 * which keys apply to the method, which combinations are refused, the
 * defaults that depend on other keys) and with the number of ranks
 * (selsync_config_check_world). */
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

selsync_status selsync_config_finish(selsync_config *cfg, char *err, size_t errlen)
{
    msg m = msg_start(err, errlen);
    int a, b;

    if (!cfg) {
        msg_put(&m, "[selsync] selsync_config_finish: NULL argument");
        return SELSYNC_EINVAL;
    }
    if ((unsigned)cfg->method >= NMETHODS) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_METHOD));
        msg_put(&m, "method = %d: not a known method", (int)cfg->method);
        return SELSYNC_ECONFIG;
    }
    for (int k = 0; k < SELSYNC_KEY_COUNT; k++) {
        if (cfg->line[k] > 0 && !(config_key_methods((selsync_config_key)k) & BIT(cfg->method))) {
            msg_head(&m, cfg, cfg->line[k]);
            msg_put(&m, "%s = '%s': does not apply to method = %s; allowed: this key only with method = ",
                selsync_config_key_name(k), cfg->text[k], selsync_method_name(cfg->method));
            msg_methods(&m, config_key_methods((selsync_config_key)k));
            msg_put(&m, " (or remove the line)");
            return SELSYNC_ECONFIG;
        }
    }
    a = cfg->inject_alpha > 0;
    b = cfg->inject_beta > 0;
    if (a != b) {
        selsync_config_key set = a ? SELSYNC_KEY_INJECT_ALPHA : SELSYNC_KEY_INJECT_BETA;
        selsync_config_key other = a ? SELSYNC_KEY_INJECT_BETA : SELSYNC_KEY_INJECT_ALPHA;
        msg_head(&m, cfg, key_line(cfg, set));
        msg_put(&m, "%s = %g: data injection also needs %s > 0 (set both > 0 to inject, or both to 0)",
            selsync_config_key_name(set), a ? cfg->inject_alpha : cfg->inject_beta, selsync_config_key_name(other));
        return SELSYNC_ECONFIG;
    }
    if (a && cfg->method == SELSYNC_METHOD_SSP) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_INJECT_ALPHA));
        msg_put(&m, "inject_alpha = %g, inject_beta = %g: data injection does not apply to method = ssp "
                "(used by: selsync, bsp, fedavg, local)", cfg->inject_alpha, cfg->inject_beta);
        return SELSYNC_ECONFIG;
    }
    if (a && cfg->partition == SELSYNC_PARTITION_SELDP) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_INJECT_ALPHA));
        msg_put(&m, "inject_alpha = %g: data injection mixes skewed partitions, but with partition = seldp "
                "every rank already reads all the data; allowed: partition = iid, label:K or dirichlet:A",
            cfg->inject_alpha);
        return SELSYNC_ECONFIG;
    }
    if (a && cfg->speed_batches != SELSYNC_SPEED_OFF) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_SPEED_BATCHES));
        msg_put(&m, "speed_batches = %s: batches that follow speed change each rank's batch, which data injection "
                "completes to a fixed size; allowed: speed_batches = off with inject_alpha > 0",
            config_speed_batches_name(cfg->speed_batches));
        return SELSYNC_ECONFIG;
    }
    if (cfg->sync_batchnorm && cfg->speed_batches != SELSYNC_SPEED_OFF) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_SPEED_BATCHES));
        msg_put(&m, "speed_batches = %s: synchronised BatchNorm sums every mini-batch's statistics over the ranks, "
                "so every rank must train as many mini-batches as the others; allowed: speed_batches = off with "
                "sync_batchnorm = 1", config_speed_batches_name(cfg->speed_batches));
        return SELSYNC_ECONFIG;
    }
    if (cfg->qsr_alpha > 0 && cfg->max_local == 0) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_QSR_ALPHA));
        msg_put(&m, "qsr_alpha = %g: the quadratic rule grows max_local's bound from its value as the learning rate "
                "decays; allowed: max_local >= 1 (the bound at the start)", cfg->qsr_alpha);
        return SELSYNC_ECONFIG;
    }
    if (cfg->target_sync > 0 && cfg->delta == 0) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_TARGET_SYNC));
        msg_put(&m, "target_sync = %g: delta adapts by factors from its starting value, and delta = 0 cannot "
                "change; allowed: a delta > 0 to start from", cfg->target_sync);
        return SELSYNC_ECONFIG;
    }
    if (cfg->warmup < 0) cfg->warmup = cfg->window;
    if (cfg->aggregate == SELSYNC_AGGREGATE_DEFAULT)
        cfg->aggregate = cfg->method == SELSYNC_METHOD_BSP ? SELSYNC_AGGREGATE_GRADS : SELSYNC_AGGREGATE_PARAMS;
    if (selsync_config_outer(cfg) && cfg->aggregate != SELSYNC_AGGREGATE_PARAMS) {
        selsync_config_key k = cfg->line[SELSYNC_KEY_OUTER_MOMENTUM] > 0 ? SELSYNC_KEY_OUTER_MOMENTUM : SELSYNC_KEY_OUTER_LR;
        msg_head(&m, cfg, key_line(cfg, k));
        msg_put(&m, "%s = %g: the outer step acts on parameter averages, and with aggregate = grads there are none; "
                "allowed: aggregate = params (selsync's default)", selsync_config_key_name(k),
            k == SELSYNC_KEY_OUTER_MOMENTUM ? cfg->outer_momentum : cfg->outer_lr);
        return SELSYNC_ECONFIG;
    }
    if (cfg->sync_momentum && cfg->aggregate != SELSYNC_AGGREGATE_PARAMS) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_SYNC_MOMENTUM));
        msg_put(&m, "sync_momentum = 1: momentum buffers travel with parameter averages, and with aggregate = grads "
                "there are none (every rank applies the same averaged gradients); allowed: aggregate = params");
        return SELSYNC_ECONFIG;
    }
    if (cfg->drift < 0)
        cfg->drift = cfg->method == SELSYNC_METHOD_SELSYNC && cfg->aggregate == SELSYNC_AGGREGATE_PARAMS
                         ? SELSYNC_DRIFT_DEFAULT : 0;
    if (cfg->drift > 0 && cfg->aggregate != SELSYNC_AGGREGATE_PARAMS) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_DRIFT));
        msg_put(&m, "drift = %g: the drift rule measures how far the parameters moved since the last average, and "
                "with aggregate = grads no average brings them together; allowed: aggregate = params "
                "(selsync's default)", cfg->drift);
        return SELSYNC_ECONFIG;
    }
    if (cfg->line[SELSYNC_KEY_BUCKET_MB] > 0 && cfg->aggregate != SELSYNC_AGGREGATE_GRADS) {
        msg_head(&m, cfg, cfg->line[SELSYNC_KEY_BUCKET_MB]);
        msg_put(&m, "bucket_mb = '%s': gradient buckets apply to aggregate = grads, and parameters are averaged here "
                "(aggregate = params); allowed: aggregate = grads, or remove the line", cfg->text[SELSYNC_KEY_BUCKET_MB]);
        return SELSYNC_ECONFIG;
    }
    /* Where parameters are averaged, the average applied one step late is
     * the default for selsync and fedavg, whose averages are few (alike, so
     * that a comparison credits selectivity and overlap apart), and not for
     * bsp, which averages every step and learned less per step with it
     * (docs/performance.md). */
    if (cfg->line[SELSYNC_KEY_OVERLAP] <= 0 && cfg->aggregate == SELSYNC_AGGREGATE_PARAMS)
        cfg->overlap = cfg->method == SELSYNC_METHOD_SELSYNC || cfg->method == SELSYNC_METHOD_FEDAVG;
    if (cfg->lag < 0)
        cfg->lag = cfg->method == SELSYNC_METHOD_SELSYNC && cfg->on_nonfinite != SELSYNC_NONFINITE_SKIP
                       ? SELSYNC_LAG_DEFAULT : 0;
    if (cfg->lag > 0 && cfg->on_nonfinite == SELSYNC_NONFINITE_SKIP) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_LAG));
        msg_put(&m, "lag = %d: on_nonfinite = skip needs every rank's verdict on a step before that step's average, "
                "and with a lag it arrives %d steps later; allowed: lag = 0, or on_nonfinite = stop", cfg->lag,
            cfg->lag);
        return SELSYNC_ECONFIG;
    }
    if (cfg->overlap && cfg->on_nonfinite == SELSYNC_NONFINITE_SKIP) {
        if (cfg->line[SELSYNC_KEY_OVERLAP] > 0) {
            msg_head(&m, cfg, cfg->line[SELSYNC_KEY_OVERLAP]);
            msg_put(&m, "overlap = 1: on_nonfinite = skip decides after the backward pass whether a step may be "
                    "averaged, and overlapped sums have begun by then; allowed: overlap = 0, or on_nonfinite = stop");
            return SELSYNC_ECONFIG;
        }
        cfg->overlap = 0;
    }
    if (!(config_key_methods(SELSYNC_KEY_OVERLAP) & BIT(cfg->method))) cfg->overlap = 0;
    return SELSYNC_OK;
}

selsync_status selsync_config_check_world(const selsync_config *cfg, int world, char *err, size_t errlen)
{
    msg m = msg_start(err, errlen);

    if (!cfg || world < 1) {
        msg_put(&m, "[selsync] selsync_config_check_world: NULL argument or world = %d < 1", world);
        return SELSYNC_EINVAL;
    }
    if (cfg->method == SELSYNC_METHOD_SSP && world < 2) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_METHOD));
        msg_put(&m, "method = 'ssp': needs at least 2 ranks (one parameter server plus at least one worker), "
                "running on %d", world);
        return SELSYNC_ECONFIG;
    }
    if (cfg->log[0] && world > 1 && !strstr(cfg->log, "%r")) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_LOG));
        msg_put(&m, "log = '%.*s': all %d ranks would write the same file; allowed: a path containing %%r (the rank)",
            VALUE_SHOWN, cfg->log, world);
        return SELSYNC_ECONFIG;
    }
    if (cfg->method == SELSYNC_METHOD_FEDAVG && cfg->fedavg_fraction * world < 1) {
        msg_head(&m, cfg, key_line(cfg, SELSYNC_KEY_FEDAVG_FRACTION));
        msg_put(&m, "fedavg_fraction = '%g': no rank would take part on %d ranks; allowed: a real number in [%g,1]",
            cfg->fedavg_fraction, world, 1.0 / world);
        return SELSYNC_ECONFIG;
    }
    return SELSYNC_OK;
}
