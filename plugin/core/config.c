/* The [selsync] section: strict parsing of key = value lines, cross-key
 * checks and per-world checks.  One table row per key holds its parser,
 * the methods it applies to and the text shown as "allowed" in messages. */
#include "selsync/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NMETHODS 5
#define BIT(m) (1u << (unsigned)(m))
#define ALL_METHODS (BIT(NMETHODS) - 1u)
#define SELSYNC_ONLY BIT(SELSYNC_METHOD_SELSYNC)
#define VALUE_SHOWN 120 /* longest value quoted in a message */

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

/* ---- messages: bounded appends, always NUL-terminated, one line ---- */

typedef struct msg {
    char *buf;
    size_t cap, len;
} msg;

static msg msg_start(char *err, size_t errlen)
{
    msg m = {err, err ? errlen : 0, 0};
    if (m.cap) m.buf[0] = '\0';
    return m;
}

static void put(msg *m, const char *fmt, ...) SELSYNC_PRINTF(2, 3);
static void put(msg *m, const char *fmt, ...)
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

static void head(msg *m, const selsync_config *cfg, int line)
{
    put(m, "%s:%d: [selsync] ", cfg->file[0] ? cfg->file : "<cfg>", line);
}

static void put_methods(msg *m, unsigned mask)
{
    const char *sep = "";
    for (int i = 0; i < NMETHODS; i++)
        if (mask & BIT(i)) { put(m, "%s%s", sep, method_names[i]); sep = ", "; }
}

static int line_of(const selsync_config *cfg, selsync_config_key k)
{
    return cfg->line[k] > 0 ? cfg->line[k] : cfg->section_line;
}

/* ---- value parsers: return NULL on success or the problem; they write
 *      their output only on success ---- */

/* The one syntax for numbers: an optional sign, decimal digits with an
 * optional fraction (at least one digit in all), and an optional decimal
 * exponent; no hexadecimal, no inf or nan, no spaces.  *integral tells
 * whether the number has neither fraction nor exponent. */
static int is_decimal(const char *v, int *integral)
{
    int digits = 0;
    *integral = 1;
    if (*v == '+' || *v == '-') v++;
    for (; *v >= '0' && *v <= '9'; v++) digits++;
    if (*v == '.') {
        *integral = 0;
        for (v++; *v >= '0' && *v <= '9'; v++) digits++;
    }
    if (digits == 0) return 0;
    if (*v == 'e' || *v == 'E') {
        *integral = 0;
        v++;
        if (*v == '+' || *v == '-') v++;
        if (!(*v >= '0' && *v <= '9')) return 0;
        while (*v >= '0' && *v <= '9') v++;
    }
    return *v == '\0';
}

/* The problem with a value that is_decimal refuses. */
static const char *not_decimal(const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || isspace((unsigned char)*v)) return "malformed value";
    return isfinite(x) ? "not a decimal number" : "not a finite number"; /* hexadecimal, inf, nan */
}

static const char *parse_real(const char *v, double lo, int lo_open, double hi, double *out)
{
    int integral;
    double x;
    if (!is_decimal(v, &integral)) return not_decimal(v);
    errno = 0;
    x = strtod(v, NULL);
    if (errno == ERANGE) return "out of range"; /* overflow, or underflow to a denormal */
    if (x < lo || (lo_open && x == lo) || x > hi) return "out of range";
    *out = x;
    return NULL;
}

static const char *parse_int(const char *v, long long lo, long long hi, int *out)
{
    int integral;
    long long x;
    if (!is_decimal(v, &integral)) return not_decimal(v);
    if (!integral) return "not an integer";
    errno = 0;
    x = strtoll(v, NULL, 10);
    if (errno == ERANGE || x < lo || x > hi) return "out of range";
    *out = (int)x;
    return NULL;
}

static const char *parse_u64(const char *v, uint64_t *out)
{
    int integral;
    unsigned long long x;
    if (!is_decimal(v, &integral)) return not_decimal(v);
    if (!integral) return "not an integer";
    errno = 0;
    x = strtoull(v, NULL, 10);
    if (v[0] == '-' || errno == ERANGE) return "out of range";
#if ULLONG_MAX > UINT64_MAX
    if (x > UINT64_MAX) return "out of range";
#endif
    *out = (uint64_t)x;
    return NULL;
}

static const char *parse_word(const char *v, const char *const *words, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, words[i]) == 0) { *out = i; return NULL; }
    return "not an allowed value";
}

/* A parser setting FIELD (an enum of type TYPE) to the index of the word
 * of NAMES the value is. */
#define WORD_PARSER(fn, field, names, type)                                                 \
    static const char *fn(selsync_config *c, const char *v)                                 \
    {                                                                                       \
        int i;                                                                              \
        const char *e = parse_word(v, names, (int)(sizeof names / sizeof names[0]), &i);   \
        if (!e) c->field = (type)i;                                                         \
        return e;                                                                           \
    }

/* ---- one parser per key ---- */

WORD_PARSER(p_method, method, method_names, selsync_method)

static const char *p_delta(selsync_config *c, const char *v) { return parse_real(v, 0, 0, HUGE_VAL, &c->delta); }
static const char *p_window(selsync_config *c, const char *v) { return parse_int(v, 1, 1000000, &c->window); }

static const char *p_smoothing(selsync_config *c, const char *v)
{
    if (strcmp(v, "auto") == 0) { c->smoothing = 0; return NULL; }
    return parse_real(v, 0, 1, 1, &c->smoothing);
}

static const char *p_warmup(selsync_config *c, const char *v) { return parse_int(v, 0, 1000000, &c->warmup); }
static const char *p_max_local(selsync_config *c, const char *v) { return parse_int(v, 0, 1000000, &c->max_local); }
static const char *p_target_sync(selsync_config *c, const char *v) { return parse_real(v, 0, 0, 1, &c->target_sync); }
static const char *p_qsr_alpha(selsync_config *c, const char *v) { return parse_real(v, 0, 0, 1e6, &c->qsr_alpha); }
static const char *p_drift(selsync_config *c, const char *v) { return parse_real(v, 0, 0, 1e6, &c->drift); }
static const char *p_outer_momentum(selsync_config *c, const char *v) { return parse_real(v, 0, 0, 0.999, &c->outer_momentum); }
static const char *p_outer_lr(selsync_config *c, const char *v) { return parse_real(v, 0, 1, 10, &c->outer_lr); }

WORD_PARSER(p_sync_until, sync_until, sync_until_names, selsync_sync_until)

WORD_PARSER(p_agree, agree, agree_names, selsync_agree_rule)

static const char *p_lag(selsync_config *c, const char *v) { return parse_int(v, 0, SELSYNC_LAG_MAX, &c->lag); }

WORD_PARSER(p_granularity, granularity, granularity_names, selsync_granularity)

WORD_PARSER(p_aggregate, aggregate, aggregate_names, selsync_aggregate)

static const char *p_overlap(selsync_config *c, const char *v) { return parse_int(v, 0, 1, &c->overlap); }
static const char *p_bucket_mb(selsync_config *c, const char *v) { return parse_real(v, 0, 1, 1024, &c->bucket_mb); }
static const char *p_sync_bn(selsync_config *c, const char *v) { return parse_int(v, 0, 1, &c->sync_bn_stats); }
static const char *p_sync_momentum(selsync_config *c, const char *v) { return parse_int(v, 0, 1, &c->sync_momentum); }
static const char *p_sync_batchnorm(selsync_config *c, const char *v) { return parse_int(v, 0, 1, &c->sync_batchnorm); }
static const char *p_fedavg_interval(selsync_config *c, const char *v) { return parse_int(v, 1, 1000000, &c->fedavg_interval); }
static const char *p_fedavg_fraction(selsync_config *c, const char *v) { return parse_real(v, 0, 1, 1, &c->fedavg_fraction); }
static const char *p_ssp_staleness(selsync_config *c, const char *v) { return parse_int(v, 0, 1000000, &c->ssp_staleness); }

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
        if ((e = parse_int(v + label + 1, 1, 1000000, &k)) != NULL) return e;
        c->partition = SELSYNC_PARTITION_LABEL;
        c->partition_k = k;
        return NULL;
    }
    if (strncmp(v, partition_names[SELSYNC_PARTITION_DIRICHLET], dirichlet) == 0 && v[dirichlet] == ':') {
        if ((e = parse_real(v + dirichlet + 1, 0, 1, HUGE_VAL, &a)) != NULL) return e;
        c->partition = SELSYNC_PARTITION_DIRICHLET;
        c->partition_alpha = a;
        return NULL;
    }
    return "not an allowed value";
}

static const char *p_inject_alpha(selsync_config *c, const char *v) { return parse_real(v, 0, 0, 1, &c->inject_alpha); }
static const char *p_inject_beta(selsync_config *c, const char *v) { return parse_real(v, 0, 0, 1, &c->inject_beta); }
static const char *p_seed(selsync_config *c, const char *v) { return parse_u64(v, &c->seed); }

static const char *p_log(selsync_config *c, const char *v)
{
    size_t n = strlen(v);
    if (n >= sizeof c->log) return "too long";
    for (const char *p = strchr(v, '%'); p; p = strchr(p + 2, '%'))
        if (p[1] != 'r') return "unsupported % sequence";
    memcpy(c->log, v, n + 1);
    return NULL;
}

static const char *p_eval_every(selsync_config *c, const char *v) { return parse_int(v, 0, 100000000, &c->eval_every); }
static const char *p_chart_every(selsync_config *c, const char *v) { return parse_int(v, 0, 100000000, &c->chart_every); }
static const char *p_checkpoint_every(selsync_config *c, const char *v)
{
    return parse_int(v, 0, 100000000, &c->checkpoint_every);
}

static const char *p_bn_recalibrate(selsync_config *c, const char *v)
{
    return parse_int(v, 0, 1000000, &c->bn_recalibrate);
}

WORD_PARSER(p_on_nonfinite, on_nonfinite, nonfinite_names, selsync_nonfinite)

WORD_PARSER(p_resume_batch, resume_batch, resume_batch_names, selsync_resume_batch)

WORD_PARSER(p_speed_batches, speed_batches, speed_batches_names, selsync_speed_batches)

static const char *p_speed_every(selsync_config *c, const char *v) { return parse_int(v, 1, 1000000, &c->speed_every); }

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
        put(&m, "[selsync] selsync_config_set: NULL argument or line < 1");
        return SELSYNC_EINVAL;
    }
    trim(&key, &kn);
    while (k < SELSYNC_KEY_COUNT && !(strlen(key_names[k]) == kn && memcmp(key, key_names[k], kn) == 0)) k++;
    if (k == SELSYNC_KEY_COUNT) {
        head(&m, cfg, line);
        put(&m, "unknown key '%.*s%s'; known keys: ", (int)(kn < VALUE_SHOWN ? kn : VALUE_SHOWN), key,
            kn > VALUE_SHOWN ? "..." : "");
        for (int i = 0; i < SELSYNC_KEY_COUNT; i++) put(&m, "%s%s", i ? ", " : "", key_names[i]);
        return SELSYNC_ECONFIG;
    }
    trim(&value, &vn);
    if (cfg->line[k] > 0) {
        head(&m, cfg, line);
        put(&m, "%s = '%.*s%s': set twice (first on line %d as '%s'); allowed: each key once per section",
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
        head(&m, cfg, line);
        put(&m, "%s = '%.*s%s': %s; allowed: %s", key_names[k], (int)(vn < VALUE_SHOWN ? vn : VALUE_SHOWN),
            value, vn > VALUE_SHOWN ? "..." : "", problem, keys[k].allowed);
        return SELSYNC_ECONFIG;
    }
    cfg->line[k] = line;
    keep_text(cfg->text[k], value, vn);
    return SELSYNC_OK;
}

selsync_status selsync_config_finish(selsync_config *cfg, char *err, size_t errlen)
{
    msg m = msg_start(err, errlen);
    int a, b;

    if (!cfg) {
        put(&m, "[selsync] selsync_config_finish: NULL argument");
        return SELSYNC_EINVAL;
    }
    if ((unsigned)cfg->method >= NMETHODS) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_METHOD));
        put(&m, "method = %d: not a known method", (int)cfg->method);
        return SELSYNC_ECONFIG;
    }
    for (int k = 0; k < SELSYNC_KEY_COUNT; k++) {
        if (cfg->line[k] > 0 && !(keys[k].methods & BIT(cfg->method))) {
            head(&m, cfg, cfg->line[k]);
            put(&m, "%s = '%s': does not apply to method = %s; allowed: this key only with method = ",
                key_names[k], cfg->text[k], method_names[cfg->method]);
            put_methods(&m, keys[k].methods);
            put(&m, " (or remove the line)");
            return SELSYNC_ECONFIG;
        }
    }
    a = cfg->inject_alpha > 0;
    b = cfg->inject_beta > 0;
    if (a != b) {
        selsync_config_key set = a ? SELSYNC_KEY_INJECT_ALPHA : SELSYNC_KEY_INJECT_BETA;
        selsync_config_key other = a ? SELSYNC_KEY_INJECT_BETA : SELSYNC_KEY_INJECT_ALPHA;
        head(&m, cfg, line_of(cfg, set));
        put(&m, "%s = %g: data injection also needs %s > 0 (set both > 0 to inject, or both to 0)",
            key_names[set], a ? cfg->inject_alpha : cfg->inject_beta, key_names[other]);
        return SELSYNC_ECONFIG;
    }
    if (a && cfg->method == SELSYNC_METHOD_SSP) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_INJECT_ALPHA));
        put(&m, "inject_alpha = %g, inject_beta = %g: data injection does not apply to method = ssp "
                "(used by: selsync, bsp, fedavg, local)", cfg->inject_alpha, cfg->inject_beta);
        return SELSYNC_ECONFIG;
    }
    if (a && cfg->partition == SELSYNC_PARTITION_SELDP) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_INJECT_ALPHA));
        put(&m, "inject_alpha = %g: data injection mixes skewed partitions, but with partition = seldp "
                "every rank already reads all the data; allowed: partition = iid, label:K or dirichlet:A",
            cfg->inject_alpha);
        return SELSYNC_ECONFIG;
    }
    if (a && cfg->speed_batches != SELSYNC_SPEED_OFF) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_SPEED_BATCHES));
        put(&m, "speed_batches = %s: batches that follow speed change each rank's batch, which data injection "
                "completes to a fixed size; allowed: speed_batches = off with inject_alpha > 0",
            speed_batches_names[cfg->speed_batches]);
        return SELSYNC_ECONFIG;
    }
    if (cfg->sync_batchnorm && cfg->speed_batches != SELSYNC_SPEED_OFF) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_SPEED_BATCHES));
        put(&m, "speed_batches = %s: synchronised BatchNorm sums every mini-batch's statistics over the ranks, "
                "so every rank must train as many mini-batches as the others; allowed: speed_batches = off with "
                "sync_batchnorm = 1", speed_batches_names[cfg->speed_batches]);
        return SELSYNC_ECONFIG;
    }
    if (cfg->qsr_alpha > 0 && cfg->max_local == 0) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_QSR_ALPHA));
        put(&m, "qsr_alpha = %g: the quadratic rule grows max_local's bound from its value as the learning rate "
                "decays; allowed: max_local >= 1 (the bound at the start)", cfg->qsr_alpha);
        return SELSYNC_ECONFIG;
    }
    if (cfg->target_sync > 0 && cfg->delta == 0) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_TARGET_SYNC));
        put(&m, "target_sync = %g: delta adapts by factors from its starting value, and delta = 0 cannot "
                "change; allowed: a delta > 0 to start from", cfg->target_sync);
        return SELSYNC_ECONFIG;
    }
    if (cfg->warmup < 0) cfg->warmup = cfg->window;
    if (cfg->aggregate == SELSYNC_AGGREGATE_DEFAULT)
        cfg->aggregate = cfg->method == SELSYNC_METHOD_BSP ? SELSYNC_AGGREGATE_GRADS : SELSYNC_AGGREGATE_PARAMS;
    if (selsync_config_outer(cfg) && cfg->aggregate != SELSYNC_AGGREGATE_PARAMS) {
        selsync_config_key k = cfg->line[SELSYNC_KEY_OUTER_MOMENTUM] > 0 ? SELSYNC_KEY_OUTER_MOMENTUM : SELSYNC_KEY_OUTER_LR;
        head(&m, cfg, line_of(cfg, k));
        put(&m, "%s = %g: the outer step acts on parameter averages, and with aggregate = grads there are none; "
                "allowed: aggregate = params (selsync's default)", key_names[k],
            k == SELSYNC_KEY_OUTER_MOMENTUM ? cfg->outer_momentum : cfg->outer_lr);
        return SELSYNC_ECONFIG;
    }
    if (cfg->sync_momentum && cfg->aggregate != SELSYNC_AGGREGATE_PARAMS) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_SYNC_MOMENTUM));
        put(&m, "sync_momentum = 1: momentum buffers travel with parameter averages, and with aggregate = grads "
                "there are none (every rank applies the same averaged gradients); allowed: aggregate = params");
        return SELSYNC_ECONFIG;
    }
    if (cfg->drift < 0)
        cfg->drift = cfg->method == SELSYNC_METHOD_SELSYNC && cfg->aggregate == SELSYNC_AGGREGATE_PARAMS
                         ? SELSYNC_DRIFT_DEFAULT : 0;
    if (cfg->drift > 0 && cfg->aggregate != SELSYNC_AGGREGATE_PARAMS) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_DRIFT));
        put(&m, "drift = %g: the drift rule measures how far the parameters moved since the last average, and "
                "with aggregate = grads no average brings them together; allowed: aggregate = params "
                "(selsync's default)", cfg->drift);
        return SELSYNC_ECONFIG;
    }
    if (cfg->line[SELSYNC_KEY_BUCKET_MB] > 0 && cfg->aggregate != SELSYNC_AGGREGATE_GRADS) {
        head(&m, cfg, cfg->line[SELSYNC_KEY_BUCKET_MB]);
        put(&m, "bucket_mb = '%s': gradient buckets apply to aggregate = grads, and parameters are averaged here "
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
    if (cfg->lag > 0 && cfg->on_nonfinite == SELSYNC_NONFINITE_SKIP) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_LAG));
        put(&m, "lag = %d: on_nonfinite = skip needs every rank's verdict on a step before that step's average, "
                "and with a lag it arrives %d steps later; allowed: lag = 0, or on_nonfinite = stop", cfg->lag,
            cfg->lag);
        return SELSYNC_ECONFIG;
    }
    if (cfg->overlap && cfg->on_nonfinite == SELSYNC_NONFINITE_SKIP) {
        if (cfg->line[SELSYNC_KEY_OVERLAP] > 0) {
            head(&m, cfg, cfg->line[SELSYNC_KEY_OVERLAP]);
            put(&m, "overlap = 1: on_nonfinite = skip decides after the backward pass whether a step may be "
                    "averaged, and overlapped sums have begun by then; allowed: overlap = 0, or on_nonfinite = stop");
            return SELSYNC_ECONFIG;
        }
        cfg->overlap = 0;
    }
    if (!(keys[SELSYNC_KEY_OVERLAP].methods & BIT(cfg->method))) cfg->overlap = 0;
    return SELSYNC_OK;
}

selsync_status selsync_config_check_world(const selsync_config *cfg, int world, char *err, size_t errlen)
{
    msg m = msg_start(err, errlen);

    if (!cfg || world < 1) {
        put(&m, "[selsync] selsync_config_check_world: NULL argument or world = %d < 1", world);
        return SELSYNC_EINVAL;
    }
    if (cfg->method == SELSYNC_METHOD_SSP && world < 2) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_METHOD));
        put(&m, "method = 'ssp': needs at least 2 ranks (one parameter server plus at least one worker), "
                "running on %d", world);
        return SELSYNC_ECONFIG;
    }
    if (cfg->log[0] && world > 1 && !strstr(cfg->log, "%r")) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_LOG));
        put(&m, "log = '%.*s': all %d ranks would write the same file; allowed: a path containing %%r (the rank)",
            VALUE_SHOWN, cfg->log, world);
        return SELSYNC_ECONFIG;
    }
    if (cfg->method == SELSYNC_METHOD_FEDAVG && cfg->fedavg_fraction * world < 1) {
        head(&m, cfg, line_of(cfg, SELSYNC_KEY_FEDAVG_FRACTION));
        put(&m, "fedavg_fraction = '%g': no rank would take part on %d ranks; allowed: a real number in [%g,1]",
            cfg->fedavg_fraction, world, 1.0 / world);
        return SELSYNC_ECONFIG;
    }
    return SELSYNC_OK;
}

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

const char *selsync_method_name(selsync_method m)
{
    return (unsigned)m < NMETHODS ? method_names[m] : "?";
}

const char *selsync_config_key_name(selsync_config_key k)
{
    return (unsigned)k < SELSYNC_KEY_COUNT ? key_names[k] : "?";
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
