/* The [selsync] section: the key table, one parser per key, defaults,
 * strict parsing of key = value lines, the settings derived from the keys
 * and the description line. One table row per key holds its parser, the
 * methods it applies to and the text shown as "allowed" in messages. The
 * value syntax is in config_values.c, the rules between keys and with the
 * ranks in config_rules.c (which uses this file, not the other way). */
#include "selsync/config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

#define ALL_METHODS (BIT(NMETHODS) - 1u)
#define SELSYNC_ONLY BIT(SELSYNC_METHOD_SELSYNC)

static const char *const method_names[NMETHODS] = {"selsync", "bsp", "fedavg", "ssp", "local"};
static const char *const granularity_names[] = {"model", "layer"};
static const char *const aggregate_names[] = {"params", "grads"};
static const char *const nonfinite_names[] = {"stop", "skip"};
static const char *const sync_until_names[] = {"none", "decay", "burn_in"};
static const char *const agree_names[] = {"any", "mean"};
static const char *const resume_batch_names[] = {"rank", "global"};
static const char *const speed_batches_names[] = {"off", "on", "auto"};
static const char *const partition_names[] = {"iid", "seldp", "label", "dirichlet"};

static const char *const key_names[SELSYNC_KEY_COUNT] = {
#define SELSYNC_CONFIG_KEY_NAME(id, name) name,
    SELSYNC_CONFIG_KEYS(SELSYNC_CONFIG_KEY_NAME)
#undef SELSYNC_CONFIG_KEY_NAME
};

/* ---- messages (config_internal.h) ---- */

msg msg_start(char *err, size_t errlen)
{
    msg m = {err, err ? errlen : 0, 0};
    if (m.cap) m.buf[0] = '\0';
    return m;
}

void msg_put(msg *m, const char *fmt, ...)
{
    va_list ap;
    size_t start = m->len;
    int n;
    if (m->cap == 0 || m->len + 1 >= m->cap) return;
    va_start(ap, fmt);
    n = vsnprintf(m->buf + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (n < 0) { m->buf[m->len] = '\0'; return; }
    m->len += (size_t)n < m->cap - m->len ? (size_t)n : m->cap - m->len - 1;
    for (char *p = m->buf + start; *p; p++) /* keep it one line whatever the input */
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

void msg_head(msg *m, const selsync_config *cfg, int line)
{
    msg_put(m, "%s:%d: [selsync] ", cfg->file[0] ? cfg->file : "<cfg>", line);
}

void msg_methods(msg *m, unsigned mask)
{
    const char *sep = "";
    for (int i = 0; i < NMETHODS; i++)
        if (mask & BIT(i)) { msg_put(m, "%s%s", sep, method_names[i]); sep = ", "; }
}

int key_line(const selsync_config *cfg, selsync_config_key k)
{
    return cfg->line[k] > 0 ? cfg->line[k] : cfg->section_line;
}

/* A parser setting FIELD (an enum of type TYPE) to the index of the word
 * of NAMES the value is. */
#define WORD_PARSER(fn, field, names, type)                                                 \
    static const char *fn(selsync_config *c, const char *v)                                 \
    {                                                                                       \
        int i;                                                                              \
        const char *e = config_parse_word(v, names, (int)(sizeof names / sizeof names[0]), &i);   \
        if (!e) c->field = (type)i;                                                         \
        return e;                                                                           \
    }

/* ---- one parser per key ---- */

WORD_PARSER(p_method, method, method_names, selsync_method)

static const char *p_delta(selsync_config *c, const char *v) { return config_parse_real(v, 0, 0, HUGE_VAL, &c->delta); }
static const char *p_window(selsync_config *c, const char *v) { return config_parse_int(v, 1, 1000000, &c->window); }

static const char *p_smoothing(selsync_config *c, const char *v)
{
    if (strcmp(v, "auto") == 0) { c->smoothing = 0; return NULL; }
    return config_parse_real(v, 0, 1, 1, &c->smoothing);
}

static const char *p_warmup(selsync_config *c, const char *v) { return config_parse_int(v, 0, 1000000, &c->warmup); }
static const char *p_max_local(selsync_config *c, const char *v) { return config_parse_int(v, 0, 1000000, &c->max_local); }
static const char *p_target_sync(selsync_config *c, const char *v) { return config_parse_real(v, 0, 0, 1, &c->target_sync); }
static const char *p_qsr_alpha(selsync_config *c, const char *v) { return config_parse_real(v, 0, 0, 1e6, &c->qsr_alpha); }
static const char *p_drift(selsync_config *c, const char *v) { return config_parse_real(v, 0, 0, 1e6, &c->drift); }
static const char *p_outer_momentum(selsync_config *c, const char *v) { return config_parse_real(v, 0, 0, 0.999, &c->outer_momentum); }
static const char *p_outer_lr(selsync_config *c, const char *v) { return config_parse_real(v, 0, 1, 10, &c->outer_lr); }

WORD_PARSER(p_sync_until, sync_until, sync_until_names, selsync_sync_until)

WORD_PARSER(p_agree, agree, agree_names, selsync_agree_rule)

static const char *p_lag(selsync_config *c, const char *v) { return config_parse_int(v, 0, SELSYNC_LAG_MAX, &c->lag); }

WORD_PARSER(p_granularity, granularity, granularity_names, selsync_granularity)

WORD_PARSER(p_aggregate, aggregate, aggregate_names, selsync_aggregate)

static const char *p_overlap(selsync_config *c, const char *v) { return config_parse_int(v, 0, 1, &c->overlap); }
static const char *p_bucket_mb(selsync_config *c, const char *v) { return config_parse_real(v, 0, 1, 1024, &c->bucket_mb); }
static const char *p_sync_bn(selsync_config *c, const char *v) { return config_parse_int(v, 0, 1, &c->sync_bn_stats); }
static const char *p_sync_momentum(selsync_config *c, const char *v) { return config_parse_int(v, 0, 1, &c->sync_momentum); }
static const char *p_sync_batchnorm(selsync_config *c, const char *v) { return config_parse_int(v, 0, 1, &c->sync_batchnorm); }
static const char *p_fedavg_interval(selsync_config *c, const char *v) { return config_parse_int(v, 1, 1000000, &c->fedavg_interval); }
static const char *p_fedavg_fraction(selsync_config *c, const char *v) { return config_parse_real(v, 0, 1, 1, &c->fedavg_fraction); }
static const char *p_ssp_staleness(selsync_config *c, const char *v) { return config_parse_int(v, 0, 1000000, &c->ssp_staleness); }

static const char *p_partition(selsync_config *c, const char *v)
{
    const char *e;
    int k = 0;
    double a = 0;
    size_t label = strlen(partition_names[SELSYNC_PARTITION_LABEL]);
    size_t dirichlet = strlen(partition_names[SELSYNC_PARTITION_DIRICHLET]);
    for (int p = SELSYNC_PARTITION_IID; p <= SELSYNC_PARTITION_SELDP; p++)
        if (strcmp(v, partition_names[p]) == 0) {
            c->partition = (selsync_partition)p;
            return NULL;
        }
    if (strncmp(v, partition_names[SELSYNC_PARTITION_LABEL], label) == 0 && v[label] == ':') {
        if ((e = config_parse_int(v + label + 1, 1, 1000000, &k)) != NULL) return e;
        c->partition = SELSYNC_PARTITION_LABEL;
        c->partition_k = k;
        return NULL;
    }
    if (strncmp(v, partition_names[SELSYNC_PARTITION_DIRICHLET], dirichlet) == 0 && v[dirichlet] == ':') {
        if ((e = config_parse_real(v + dirichlet + 1, 0, 1, HUGE_VAL, &a)) != NULL) return e;
        c->partition = SELSYNC_PARTITION_DIRICHLET;
        c->partition_alpha = a;
        return NULL;
    }
    return "not an allowed value";
}

static const char *p_inject_alpha(selsync_config *c, const char *v) { return config_parse_real(v, 0, 0, 1, &c->inject_alpha); }
static const char *p_inject_beta(selsync_config *c, const char *v) { return config_parse_real(v, 0, 0, 1, &c->inject_beta); }
static const char *p_seed(selsync_config *c, const char *v) { return config_parse_u64(v, &c->seed); }

static const char *p_log(selsync_config *c, const char *v)
{
    size_t n = strlen(v);
    if (n >= sizeof c->log) return "too long";
    for (const char *p = strchr(v, '%'); p; p = strchr(p + 2, '%'))
        if (p[1] != 'r') return "unsupported % sequence";
    memcpy(c->log, v, n + 1);
    return NULL;
}

static const char *p_eval_every(selsync_config *c, const char *v) { return config_parse_int(v, 0, 100000000, &c->eval_every); }
static const char *p_chart_every(selsync_config *c, const char *v) { return config_parse_int(v, 0, 100000000, &c->chart_every); }
static const char *p_checkpoint_every(selsync_config *c, const char *v)
{
    return config_parse_int(v, 0, 100000000, &c->checkpoint_every);
}

static const char *p_bn_recalibrate(selsync_config *c, const char *v)
{
    return config_parse_int(v, 0, 1000000, &c->bn_recalibrate);
}

WORD_PARSER(p_on_nonfinite, on_nonfinite, nonfinite_names, selsync_nonfinite)

WORD_PARSER(p_resume_batch, resume_batch, resume_batch_names, selsync_resume_batch)

WORD_PARSER(p_speed_batches, speed_batches, speed_batches_names, selsync_speed_batches)

static const char *p_speed_every(selsync_config *c, const char *v) { return config_parse_int(v, 1, 1000000, &c->speed_every); }

static const struct key_info {
    const char *(*parse)(selsync_config *cfg, const char *value);
    unsigned methods; /* BIT(method) for each method the key applies to */
    const char *allowed;
} keys[SELSYNC_KEY_COUNT] = {
    [SELSYNC_KEY_METHOD] = {p_method, ALL_METHODS, "selsync, bsp, fedavg, ssp, local"},
    [SELSYNC_KEY_DELTA] = {p_delta, SELSYNC_ONLY, "a real number >= 0"},
    [SELSYNC_KEY_WINDOW] = {p_window, SELSYNC_ONLY, "an integer from 1 to 1000000"},
    [SELSYNC_KEY_SMOOTHING] = {p_smoothing, SELSYNC_ONLY, "a real number in (0,1], or auto (= ranks/100)"},
    [SELSYNC_KEY_WARMUP] = {p_warmup, SELSYNC_ONLY, "an integer from 0 to 1000000"},
    [SELSYNC_KEY_GRANULARITY] = {p_granularity, SELSYNC_ONLY, "model, layer"},
    [SELSYNC_KEY_MAX_LOCAL] = {p_max_local, SELSYNC_ONLY, "an integer from 0 to 1000000 (0 = no bound)"},
    [SELSYNC_KEY_TARGET_SYNC] = {p_target_sync, SELSYNC_ONLY, "a real number in [0,1] (0 = a fixed delta)"},
    [SELSYNC_KEY_QSR_ALPHA] = {p_qsr_alpha, SELSYNC_ONLY, "a real number in [0,1000000] (0 = off)"},
    [SELSYNC_KEY_SYNC_UNTIL] = {p_sync_until, SELSYNC_ONLY, "none, decay, burn_in"},
    [SELSYNC_KEY_AGREE] = {p_agree, SELSYNC_ONLY, "any, mean"},
    [SELSYNC_KEY_DRIFT] = {p_drift, SELSYNC_ONLY, "a real number in [0,1000000] (0 = off)"},
    [SELSYNC_KEY_LAG] = {p_lag, SELSYNC_ONLY, "an integer from 0 to 1000 (0 = decide at the step)"},
    [SELSYNC_KEY_OUTER_MOMENTUM] = {p_outer_momentum, SELSYNC_ONLY | BIT(SELSYNC_METHOD_FEDAVG),
                                    "a real number in [0,0.999] (0 = off)"},
    [SELSYNC_KEY_OUTER_LR] = {p_outer_lr, SELSYNC_ONLY | BIT(SELSYNC_METHOD_FEDAVG), "a real number in (0,10]"},
    [SELSYNC_KEY_SYNC_MOMENTUM] = {p_sync_momentum, SELSYNC_ONLY | BIT(SELSYNC_METHOD_FEDAVG), "0, 1"},
    [SELSYNC_KEY_AGGREGATE] = {p_aggregate, SELSYNC_ONLY | BIT(SELSYNC_METHOD_BSP), "params, grads"},
    [SELSYNC_KEY_OVERLAP] = {p_overlap, SELSYNC_ONLY | BIT(SELSYNC_METHOD_BSP) | BIT(SELSYNC_METHOD_FEDAVG), "0, 1"},
    [SELSYNC_KEY_BUCKET_MB] = {p_bucket_mb, SELSYNC_ONLY | BIT(SELSYNC_METHOD_BSP), "a real number in (0,1024]"},
    [SELSYNC_KEY_SYNC_BN_STATS] = {p_sync_bn, ALL_METHODS, "0, 1"},
    [SELSYNC_KEY_SYNC_BATCHNORM] = {p_sync_batchnorm, ALL_METHODS & ~BIT(SELSYNC_METHOD_SSP), "0, 1"},
    [SELSYNC_KEY_FEDAVG_INTERVAL] = {p_fedavg_interval, BIT(SELSYNC_METHOD_FEDAVG), "an integer from 1 to 1000000"},
    [SELSYNC_KEY_FEDAVG_FRACTION] = {p_fedavg_fraction, BIT(SELSYNC_METHOD_FEDAVG), "a real number in (0,1]"},
    [SELSYNC_KEY_SSP_STALENESS] = {p_ssp_staleness, BIT(SELSYNC_METHOD_SSP), "an integer from 0 to 1000000"},
    [SELSYNC_KEY_PARTITION] = {p_partition, ALL_METHODS,
                               "iid, seldp, label:K (integer K from 1 to 1000000), dirichlet:A (real A > 0)"},
    [SELSYNC_KEY_INJECT_ALPHA] = {p_inject_alpha, ALL_METHODS, "a real number in [0,1]"},
    [SELSYNC_KEY_INJECT_BETA] = {p_inject_beta, ALL_METHODS, "a real number in [0,1]"},
    [SELSYNC_KEY_SEED] = {p_seed, ALL_METHODS, "an integer from 0 to 18446744073709551615"},
    [SELSYNC_KEY_LOG] = {p_log, ALL_METHODS,
                         "a path shorter than 512 bytes; %r stands for the rank, no other % sequence"},
    [SELSYNC_KEY_EVAL_EVERY] = {p_eval_every, ALL_METHODS, "an integer from 0 to 100000000 (0 = never)"},
    [SELSYNC_KEY_CHECKPOINT_EVERY] = {p_checkpoint_every, ALL_METHODS & ~BIT(SELSYNC_METHOD_SSP),
                                      "an integer from 0 to 100000000 (0 = never)"},
    [SELSYNC_KEY_CHART_EVERY] = {p_chart_every, ALL_METHODS, "an integer from 0 to 100000000 (0 = no chart)"},
    [SELSYNC_KEY_ON_NONFINITE] = {p_on_nonfinite, ALL_METHODS & ~BIT(SELSYNC_METHOD_SSP), "stop, skip"},
    [SELSYNC_KEY_BN_RECALIBRATE] = {p_bn_recalibrate, ALL_METHODS, "an integer from 0 to 1000000 (0 = off)"},
    [SELSYNC_KEY_RESUME_BATCH] = {p_resume_batch, ALL_METHODS & ~BIT(SELSYNC_METHOD_SSP), "rank, global"},
    [SELSYNC_KEY_SPEED_BATCHES] = {p_speed_batches, ALL_METHODS & ~BIT(SELSYNC_METHOD_SSP), "off, on, auto"},
    [SELSYNC_KEY_SPEED_EVERY] = {p_speed_every, ALL_METHODS & ~BIT(SELSYNC_METHOD_SSP),
                                 "an integer from 1 to 1000000"},
};

unsigned config_key_methods(selsync_config_key k) { return (unsigned)k < SELSYNC_KEY_COUNT ? keys[k].methods : 0; }

const char *config_speed_batches_name(int v)
{
    return (unsigned)v < sizeof speed_batches_names / sizeof *speed_batches_names ? speed_batches_names[v] : "?";
}

/* ---- API ---- */

void selsync_config_default(selsync_config *cfg, const char *file, int section_line)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->method = SELSYNC_METHOD_SELSYNC;
    cfg->delta = 0.3;
    cfg->window = 25;
    cfg->smoothing = 0; /* auto */
    cfg->warmup = -1;   /* = window */
    cfg->granularity = SELSYNC_GRANULARITY_MODEL;
    cfg->aggregate = SELSYNC_AGGREGATE_DEFAULT;
    cfg->overlap = 1;
    cfg->bucket_mb = 2;
    cfg->sync_bn_stats = 1;
    cfg->fedavg_interval = 250;
    cfg->fedavg_fraction = 1.0;
    cfg->ssp_staleness = 100;
    cfg->partition = SELSYNC_PARTITION_IID;
    cfg->seed = 1;
    cfg->chart_every = 100;
    cfg->bn_recalibrate = SELSYNC_BN_RECALIBRATE_DEFAULT;
    cfg->outer_lr = 1;
    cfg->agree = SELSYNC_AGREE_DEFAULT;
    cfg->speed_every = 10;
    cfg->drift = -1; /* = SELSYNC_DRIFT_DEFAULT with selsync and aggregate = params, else 0 */
    cfg->max_local = SELSYNC_MAX_LOCAL_DEFAULT;
    cfg->lag = -1; /* = SELSYNC_LAG_DEFAULT with selsync without on_nonfinite = skip, else 0 */
    if (file) snprintf(cfg->file, sizeof cfg->file, "%s", file);
    cfg->section_line = section_line;
}

static void trim(const char **s, size_t *n)
{
    const char *b = *s, *e = b + strlen(b);
    while (b < e && (*b == ' ' || (*b >= '\t' && *b <= '\r'))) b++;
    while (e > b && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r'))) e--;
    *s = b;
    *n = (size_t)(e - b);
}

/* Keeps value (n bytes) in dst for later messages, shortened with "...". */
static void keep_text(char *dst, const char *value, size_t n)
{
    const size_t room = SELSYNC_TEXT_SHOWN - 1;
    if (n <= room) {
        memcpy(dst, value, n);
        dst[n] = '\0';
    } else {
        memcpy(dst, value, room - 3);
        memcpy(dst + room - 3, "...", 4);
    }
}

selsync_status selsync_config_set(selsync_config *cfg, const char *key, const char *value,
                                  int line, char *err, size_t errlen)
{
    msg m = msg_start(err, errlen);
    char buf[SELSYNC_PATH_MAX];
    const char *problem;
    size_t kn, vn;
    int k = 0;

    if (!cfg || !key || !value || line < 1) {
        msg_put(&m, "[selsync] selsync_config_set: NULL argument or line < 1");
        return SELSYNC_EINVAL;
    }
    trim(&key, &kn);
    while (k < SELSYNC_KEY_COUNT && !(strlen(key_names[k]) == kn && memcmp(key, key_names[k], kn) == 0)) k++;
    if (k == SELSYNC_KEY_COUNT) {
        msg_head(&m, cfg, line);
        msg_put(&m, "unknown key '%.*s%s'; known keys: ", (int)(kn < VALUE_SHOWN ? kn : VALUE_SHOWN), key,
            kn > VALUE_SHOWN ? "..." : "");
        for (int i = 0; i < SELSYNC_KEY_COUNT; i++) msg_put(&m, "%s%s", i ? ", " : "", key_names[i]);
        return SELSYNC_ECONFIG;
    }
    trim(&value, &vn);
    if (cfg->line[k] > 0) {
        msg_head(&m, cfg, line);
        msg_put(&m, "%s = '%.*s%s': set twice (first on line %d as '%s'); allowed: each key once per section",
            key_names[k], (int)(vn < VALUE_SHOWN ? vn : VALUE_SHOWN), value, vn > VALUE_SHOWN ? "..." : "",
            cfg->line[k], cfg->text[k]);
        return SELSYNC_ECONFIG;
    }
    if (vn == 0) problem = "empty value";
    else if (vn >= sizeof buf) problem = "too long";
    else {
        memcpy(buf, value, vn);
        buf[vn] = '\0';
        problem = keys[k].parse(cfg, buf);
    }
    if (problem) {
        msg_head(&m, cfg, line);
        msg_put(&m, "%s = '%.*s%s': %s; allowed: %s", key_names[k], (int)(vn < VALUE_SHOWN ? vn : VALUE_SHOWN),
            value, vn > VALUE_SHOWN ? "..." : "", problem, keys[k].allowed);
        return SELSYNC_ECONFIG;
    }
    cfg->line[k] = line;
    keep_text(cfg->text[k], value, vn);
    return SELSYNC_OK;
}

const char *selsync_method_name(selsync_method m)
{
    return (unsigned)m < NMETHODS ? method_names[m] : "?";
}

const char *selsync_config_key_name(selsync_config_key k)
{
    return (unsigned)k < SELSYNC_KEY_COUNT ? key_names[k] : "?";
}

/* The settings derived from the keys. */
int selsync_config_drift(const selsync_config *cfg)
{
    return cfg && cfg->method == SELSYNC_METHOD_SELSYNC && cfg->drift > 0;
}

int selsync_config_outer(const selsync_config *cfg)
{
    return cfg && (cfg->method == SELSYNC_METHOD_SELSYNC || cfg->method == SELSYNC_METHOD_FEDAVG) &&
           (cfg->outer_momentum > 0 || cfg->outer_lr != 1);
}

double selsync_config_smoothing(const selsync_config *cfg, int world)
{
    double s;
    if (cfg && cfg->smoothing > 0) return cfg->smoothing;
    s = (world < 1 ? 1 : world) / 100.0;
    return s > 1.0 ? 1.0 : s;
}

void selsync_config_describe(const selsync_config *c, int world, char *buf, size_t len)
{
    size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
    if (!buf || len == 0) return;
    PUT("%s:%d: method=%s", c->file, c->section_line, selsync_method_name(c->method));
    if (c->method == SELSYNC_METHOD_SELSYNC)
        PUT(" delta=%g window=%d smoothing=%g warmup=%d granularity=%s agree=%s", c->delta, c->window,
            selsync_config_smoothing(c, world), c->warmup, c->granularity == SELSYNC_GRANULARITY_LAYER ? "layer" : "model",
            agree_names[c->agree]);
    if (c->method == SELSYNC_METHOD_SELSYNC && c->max_local) PUT(" max_local=%d", c->max_local);
    if (c->method == SELSYNC_METHOD_SELSYNC && c->target_sync > 0) PUT(" target_sync=%g", c->target_sync);
    if (c->method == SELSYNC_METHOD_SELSYNC && c->qsr_alpha > 0) PUT(" qsr_alpha=%g", c->qsr_alpha);
    if (c->method == SELSYNC_METHOD_SELSYNC && c->sync_until) PUT(" sync_until=%s", sync_until_names[c->sync_until]);
    if (c->method == SELSYNC_METHOD_SELSYNC && c->lag) PUT(" lag=%d", c->lag);
    if (selsync_config_drift(c)) PUT(" drift=%g", c->drift);
    if (selsync_config_outer(c)) PUT(" outer_momentum=%g outer_lr=%g", c->outer_momentum, c->outer_lr);
    if (c->sync_momentum) PUT(" sync_momentum=1");
    if (c->method == SELSYNC_METHOD_FEDAVG)
        PUT(" fedavg_interval=%d fedavg_fraction=%g", c->fedavg_interval, c->fedavg_fraction);
    if (c->method == SELSYNC_METHOD_SSP) PUT(" ssp_staleness=%d", c->ssp_staleness);
    PUT(" aggregate=%s", c->aggregate == SELSYNC_AGGREGATE_GRADS ? "grads" : "params");
    if (keys[SELSYNC_KEY_OVERLAP].methods & BIT(c->method)) PUT(" overlap=%d", c->overlap);
    if (c->aggregate == SELSYNC_AGGREGATE_GRADS) PUT(" bucket_mb=%g", c->bucket_mb);
    PUT(" sync_bn_stats=%d", c->sync_bn_stats);
    if (c->sync_batchnorm) PUT(" sync_batchnorm=1");
    if (c->resume_batch) PUT(" resume_batch=%s", resume_batch_names[c->resume_batch]);
    if (c->speed_batches) PUT(" speed_batches=%s speed_every=%d", speed_batches_names[c->speed_batches], c->speed_every);
    PUT(" bn_recalibrate=%d seed=%llu; %d process%s", c->bn_recalibrate, (unsigned long long)c->seed, world,
        world == 1 ? "" : "es");
#undef PUT
}

const char *selsync_partition_name(selsync_partition p)
{
    return (unsigned)p < sizeof partition_names / sizeof partition_names[0] ? partition_names[p] : "?";
}
