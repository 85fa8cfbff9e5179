/* Virtual time (selsync/vclock.h): a communicator that carries each rank's
 * virtual clock beside the collectives of the one it wraps. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "selsync/vclock.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* ---- the network model ---- */

/* A decimal number at *p ("12", "0.5"), advancing *p; -1 when none. */
static double decimal(const char **p)
{
    const char *s = *p;
    size_t whole = strspn(s, "0123456789"), frac = 0;
    if (!whole) return -1;
    if (s[whole] == '.') {
        frac = strspn(s + whole + 1, "0123456789");
        if (!frac) return -1;
    }
    *p = s + whole + (frac ? frac + 1 : 0);
    return strtod(s, NULL);
}

typedef struct unit {
    const char *name;
    double mul, div; /* the value is x * mul / div: exact for whole x */
} unit;

/* A number at the start of v followed by one of units, up to end; -1 when
 * it is anything else. */
static double quantity(const char *v, const char *end, const unit *units)
{
    double x = decimal(&v);
    if (x < 0) return -1;
    for (; units->name; units++)
        if ((size_t)(end - v) == strlen(units->name) && strncmp(v, units->name, (size_t)(end - v)) == 0)
            return x * units->mul / units->div;
    return -1;
}

static const unit rates[] = {{"Gbit", 1e9, 8}, {"Mbit", 1e6, 8}, {"kbit", 1e3, 8}, {NULL, 0, 1}};
static const unit times[] = {{"s", 1, 1}, {"ms", 1, 1e3}, {"us", 1, 1e6}, {NULL, 0, 1}};

/* slow=R:F[+R:F...]: this rank's factor (1 when not listed). */
static int slowdown(const char *v, const char *end, int rank, double *out)
{
    *out = 1.0;
    while (v < end) {
        const char *p = v;
        double r = decimal(&p), f;
        if (r < 0 || *p != ':' || r != floor(r)) return 0;
        p++;
        if ((f = decimal(&p)) < 1 || (p != end && *p != '+')) return 0;
        if ((int)r == rank) *out = f;
        if (p != end && p + 1 == end) return 0; /* a '+' with nothing after it */
        v = p + (p != end);
    }
    return 1;
}

/* jitter=P:TIME[:SEED]: P in [0,1], TIME a time, SEED a whole number. */
static int jitter(const char *v, const char *end, selsync_vnet *n)
{
    const char *p = v, *colon;
    double prob = decimal(&p), seed = 1;
    if (prob < 0 || prob > 1 || *p != ':') return 0;
    p++;
    colon = memchr(p, ':', (size_t)(end - p));
    double t = quantity(p, colon ? colon : end, times);
    if (t < 0) return 0;
    if (colon) {
        const char *q = colon + 1;
        seed = decimal(&q);
        if (seed < 0 || seed != floor(seed) || seed > 1e15 || q != end) return 0;
    }
    n->jitter_p = prob;
    n->jitter_t = t;
    n->jitter_seed = (uint64_t)seed;
    return 1;
}

/* splitmix64's finaliser: consecutive inputs give unrelated outputs. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

int selsync_vnet_pauses(const selsync_vnet *net, int rank, uint64_t step)
{
    if (!(net->jitter_p > 0) || !(net->jitter_t > 0)) return 0;
    uint64_t h = mix64(mix64(mix64(net->jitter_seed) ^ (uint64_t)(uint32_t)rank) ^ step);
    return (double)(h >> 11) * 0x1.0p-53 < net->jitter_p;
}

selsync_status selsync_vnet_parse(const char *spec, int rank, selsync_vnet *out, char *err, size_t errlen)
{
    static const char *const form = "expected bandwidth=RATE,latency=TIME[,slow=RANK:FACTOR[+RANK:FACTOR...]]"
                                    "[,jitter=P:TIME[:SEED]][,compute=cpu|wall] with RATE such as 1Gbit or 100Mbit, "
                                    "TIME such as 50us or 1ms, FACTOR >= 1 and P from 0 to 1";
    selsync_vnet n = {.bandwidth = -1, .latency = -1, .slowdown = 1.0, .jitter_seed = 1};
    const char *p = spec ? spec : "";
    while (*p) {
        const char *end = p + strcspn(p, ","), *eq = memchr(p, '=', (size_t)(end - p));
        size_t klen = eq ? (size_t)(eq - p) : 0;
        int ok = eq != NULL;
        if (ok && klen == 9 && strncmp(p, "bandwidth", 9) == 0) ok = (n.bandwidth = quantity(eq + 1, end, rates)) > 0;
        else if (ok && klen == 7 && strncmp(p, "latency", 7) == 0) ok = (n.latency = quantity(eq + 1, end, times)) >= 0;
        else if (ok && klen == 4 && strncmp(p, "slow", 4) == 0) ok = slowdown(eq + 1, end, rank, &n.slowdown);
        else if (ok && klen == 6 && strncmp(p, "jitter", 6) == 0) ok = jitter(eq + 1, end, &n);
        else if (ok && klen == 7 && strncmp(p, "compute", 7) == 0) {
            size_t vlen = (size_t)(end - eq - 1);
            n.wall = vlen == 4 && strncmp(eq + 1, "wall", 4) == 0;
            ok = n.wall || (vlen == 3 && strncmp(eq + 1, "cpu", 3) == 0);
        }
        else ok = 0;
        if (!ok)
            return selsync_fail(err, errlen, SELSYNC_ECONFIG, "SELSYNC_VIRTUAL=%s: '%.*s' is not understood; %s",
                                spec, (int)(end - p), p, form);
        p = end + (*end == ',');
    }
    if (n.bandwidth <= 0 || n.latency < 0)
        return selsync_fail(err, errlen, SELSYNC_ECONFIG, "SELSYNC_VIRTUAL=%s: %s is missing; %s", spec ? spec : "",
                            n.bandwidth <= 0 ? "bandwidth" : "latency", form);
    *out = n;
    return SELSYNC_OK;
}

void selsync_vnet_describe(const selsync_vnet *net, char *buf, size_t len)
{
    double bits = net->bandwidth * 8;
    int n = snprintf(buf, len, "%g %s/s, latency %g us", bits >= 1e9 ? bits / 1e9 : bits >= 1e6 ? bits / 1e6 : bits / 1e3,
                     bits >= 1e9 ? "Gbit" : bits >= 1e6 ? "Mbit" : "kbit", net->latency * 1e6);
    if (net->slowdown != 1.0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", this rank %gx slower", net->slowdown);
    if (net->jitter_p > 0 && net->jitter_t > 0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", pauses of %g ms with probability %g per step (seed %llu)",
                      net->jitter_t * 1e3, net->jitter_p, (unsigned long long)net->jitter_seed);
    if (net->wall && n >= 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, ", computation in wall time");
}

double selsync_vnet_ring(const selsync_vnet *net, int ranks, double bytes)
{
    if (ranks < 2) return 0.0;
    return 2.0 * (ranks - 1) / ranks * bytes / net->bandwidth + 2.0 * (ranks - 1) * net->latency;
}

double selsync_vnet_tree(const selsync_vnet *net, int ranks, double bytes)
{
    int rounds = 0;
    while ((1 << rounds) < ranks && rounds < 30) rounds++;
    return rounds * (net->latency + bytes / net->bandwidth);
}

double selsync_vnet_among(const selsync_vnet *net, int ranks, int members, double bytes)
{
    double t = selsync_vnet_ring(net, members, bytes);
    if (members < ranks) { /* a non-member takes the whole sum; a member sends its part to each */
        double out = (double)(ranks - members) / members * bytes;
        t += net->latency + (out > bytes ? out : bytes) / net->bandwidth;
    }
    return t;
}

double selsync_vnet_message(const selsync_vnet *net, double bytes)
{
    return net->latency + bytes / net->bandwidth;
}

static double seconds_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double selsync_thread_cpu_seconds(void) { return seconds_of(CLOCK_THREAD_CPUTIME_ID); }
double selsync_wall_seconds(void) { return seconds_of(CLOCK_MONOTONIC); }

/* ---- the communicator ---- */

typedef struct vcomm {
    selsync_comm inner;
    selsync_vnet net;
    double (*cpu)(void);
    int rank, size, held;
    double mark;          /* cpu() when computation was last counted */
    selsync_vclock clock; /* up to mark */
    double *clocks;       /* size: the clocks of a collective */
    struct started { double clock, bytes; } *started; /* the background sums not yet waited for */
    size_t n_started, cap_started;
    double *start_clocks; /* cap_started x size: their start clocks on every rank */
    struct small { double end, own; } *small; /* the sums of sum_f64_start not yet waited for, oldest first:
                                                 when they end, and when they would alone */
    size_t n_small, cap_small;
    uint64_t hidden;      /* bytes of the clocks and message stamps */
    unsigned char *scratch;
    size_t scratch_cap;
} vcomm;

/* Counts the computation since the last mark. */
static void count_compute(vcomm *v)
{
    double now = v->cpu(), dt = now - v->mark;
    if (!v->held && dt > 0) {
        v->clock.compute += dt * v->net.slowdown;
        v->clock.now += dt * v->net.slowdown;
    }
    v->mark = now;
}

static void advance_to(vcomm *v, double start, double cost)
{
    if (start > v->clock.now) {
        v->clock.wait += start - v->clock.now;
        v->clock.now = start;
    }
    v->clock.network += cost;
    v->clock.now += cost;
}

/* Sums the n clocks (each rank filled its own entries, zeros elsewhere);
 * the bytes are not counted. */
static selsync_status trade(vcomm *v, double *clocks, size_t n)
{
    uint64_t b0 = v->inner.ops->bytes_sent(v->inner.ctx);
    selsync_status st = v->inner.ops->sum_f64(v->inner.ctx, clocks, n);
    v->hidden += v->inner.ops->bytes_sent(v->inner.ctx) - b0;
    return st;
}

/* The latest of the size clocks at c. */
static double latest_of(const vcomm *v, const double *c)
{
    double latest = c[0];
    for (int r = 1; r < v->size; r++)
        if (c[r] > latest) latest = c[r];
    return latest;
}

/* Before a collective: the latest clock of all ranks into *latest. */
static selsync_status exchange(vcomm *v, double *latest)
{
    count_compute(v);
    if (v->held) return SELSYNC_OK;
    memset(v->clocks, 0, (size_t)v->size * sizeof *v->clocks);
    v->clocks[v->rank] = v->clock.now;
    selsync_status st = trade(v, v->clocks, (size_t)v->size);
    *latest = latest_of(v, v->clocks);
    return st;
}

/* After a collective (st its status): the clock at latest + cost; what
 * the transport did in between is not computation. */
static selsync_status settle(vcomm *v, selsync_status st, double latest, double cost)
{
    if (st == SELSYNC_OK && !v->held) advance_to(v, latest, cost);
    v->mark = v->cpu();
    return st;
}

static int v_rank(void *ctx) { return ((vcomm *)ctx)->rank; }
static int v_size(void *ctx) { return ((vcomm *)ctx)->size; }

static selsync_status v_any(void *ctx, uint8_t *flags, size_t n)
{
    vcomm *v = ctx;
    double t = 0;
    selsync_status st = exchange(v, &t);
    if (st == SELSYNC_OK) st = v->inner.ops->any(v->inner.ctx, flags, n);
    return settle(v, st, t, selsync_vnet_tree(&v->net, v->size, (double)n));
}

static selsync_status v_sum_f32(void *ctx, float *buf, size_t n)
{
    vcomm *v = ctx;
    double t = 0;
    selsync_status st = exchange(v, &t);
    if (st == SELSYNC_OK) st = v->inner.ops->sum_f32(v->inner.ctx, buf, n);
    return settle(v, st, t, selsync_vnet_ring(&v->net, v->size, 4.0 * (double)n));
}

static double count_of(const selsync_segment *segs, size_t nseg)
{
    double n = 0;
    for (size_t i = 0; i < nseg; i++) n += (double)segs[i].count;
    return n;
}

static selsync_status v_sum_f32v(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    vcomm *v = ctx;
    double t = 0;
    selsync_status st = exchange(v, &t);
    if (st == SELSYNC_OK) st = v->inner.ops->sum_f32v(v->inner.ctx, segs, nseg, scale);
    return settle(v, st, t, selsync_vnet_ring(&v->net, v->size, 4.0 * count_of(segs, nseg)));
}

static selsync_status v_sum_f32v_among(void *ctx, const selsync_segment *segs, size_t nseg, float scale,
                                       const int *members, int k)
{
    vcomm *v = ctx;
    double t = 0;
    selsync_status st = exchange(v, &t);
    if (st == SELSYNC_OK) st = v->inner.ops->sum_f32v_among(v->inner.ctx, segs, nseg, scale, members, k);
    return settle(v, st, t, selsync_vnet_among(&v->net, v->size, k, 4.0 * count_of(segs, nseg)));
}

static selsync_status v_sum_f64(void *ctx, double *buf, size_t n)
{
    vcomm *v = ctx;
    double t = 0;
    selsync_status st = exchange(v, &t);
    if (st == SELSYNC_OK) st = v->inner.ops->sum_f64(v->inner.ctx, buf, n);
    return settle(v, st, t, selsync_vnet_tree(&v->net, v->size, 8.0 * (double)n));
}

static selsync_status v_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    vcomm *v = ctx;
    double t = 0;
    selsync_status st = exchange(v, &t);
    if (st == SELSYNC_OK) st = v->inner.ops->bcast(v->inner.ctx, buf, bytes, root);
    return settle(v, st, t, selsync_vnet_tree(&v->net, v->size, (double)bytes));
}

static uint64_t v_bytes_sent(void *ctx)
{
    vcomm *v = ctx;
    return v->inner.ops->bytes_sent(v->inner.ctx) - v->hidden;
}

static void v_abort(void *ctx, int code, const char *message)
{
    vcomm *v = ctx;
    v->inner.ops->abort(v->inner.ctx, code, message);
}

static unsigned char *scratch(vcomm *v, size_t bytes)
{
    if (bytes > v->scratch_cap) {
        unsigned char *p = realloc(v->scratch, bytes);
        if (!p) return NULL;
        v->scratch = p;
        v->scratch_cap = bytes;
    }
    return v->scratch;
}

/* A message is its sender's clock when it started, then the payload. */
static selsync_status v_send(void *ctx, int dest, int tag, const void *buf, size_t bytes)
{
    vcomm *v = ctx;
    double start, cost = selsync_vnet_message(&v->net, (double)bytes);
    count_compute(v);
    start = v->clock.now;
    unsigned char *msg = scratch(v, sizeof start + bytes);
    if (!msg) return SELSYNC_ENOMEM;
    memcpy(msg, &start, sizeof start);
    if (bytes) memcpy(msg + sizeof start, buf, bytes);
    selsync_status st = v->inner.ops->send(v->inner.ctx, dest, tag, msg, sizeof start + bytes);
    if (st == SELSYNC_OK) v->hidden += sizeof start;
    return settle(v, st, start, cost);
}

static selsync_status v_recv(void *ctx, int source, int tag, void *buf, size_t bytes, selsync_msg *got)
{
    vcomm *v = ctx;
    selsync_msg m;
    double start;
    count_compute(v);
    unsigned char *msg = scratch(v, sizeof start + bytes);
    if (!msg) return SELSYNC_ENOMEM;
    selsync_status st = v->inner.ops->recv(v->inner.ctx, source, tag, msg, sizeof start + bytes, &m);
    if (st == SELSYNC_OK && m.bytes < sizeof start) st = SELSYNC_ECOMM; /* not from a virtual-time rank */
    if (st != SELSYNC_OK) return settle(v, st, 0, 0);
    memcpy(&start, msg, sizeof start);
    m.bytes -= sizeof start;
    if (m.bytes) memcpy(buf, msg + sizeof start, m.bytes);
    if (got) *got = m;
    return settle(v, st, start, selsync_vnet_message(&v->net, (double)m.bytes));
}

static const char *v_last_error(void *ctx)
{
    vcomm *v = ctx;
    return v->inner.ops->last_error ? v->inner.ops->last_error(v->inner.ctx) : NULL;
}

/* A step of training starts: the jitter's pause, if this step draws one. */
static void v_step_begins(void *ctx, uint64_t step)
{
    vcomm *v = ctx;
    count_compute(v);
    if (!v->held && selsync_vnet_pauses(&v->net, v->rank, step)) {
        v->clock.paused += v->net.jitter_t;
        v->clock.now += v->net.jitter_t;
        v->clock.pauses++;
    }
    if (v->inner.ops->step_begins) v->inner.ops->step_begins(v->inner.ctx, step);
}

/* A background sum: its start clock and bytes are noted (vclock.h); the
 * transport sums in the background, or here and now where it cannot. */
static selsync_status v_sum_f32v_start(void *ctx, const selsync_segment *segs, size_t nseg, float scale)
{
    vcomm *v = ctx;
    selsync_status st;
    count_compute(v);
    if (!v->held) {
        if (v->n_started == v->cap_started) {
            size_t cap = v->cap_started ? 2 * v->cap_started : 16;
            struct started *a = realloc(v->started, cap * sizeof *a);
            double *b = a ? realloc(v->start_clocks, cap * (size_t)v->size * sizeof *b) : NULL;
            if (a) v->started = a;
            if (!b) return SELSYNC_ENOMEM;
            v->start_clocks = b;
            v->cap_started = cap;
        }
        v->started[v->n_started++] = (struct started){v->clock.now, 4.0 * count_of(segs, nseg)};
    }
    st = v->inner.ops->sum_f32v_start ? v->inner.ops->sum_f32v_start(v->inner.ctx, segs, nseg, scale)
                                      : v->inner.ops->sum_f32v(v->inner.ctx, segs, nseg, scale);
    v->mark = v->cpu();
    return st;
}

/* The background sums run one after another, each from the latest start
 * clock of its participants or the end of the one before; the clock moves
 * on to the last end where that is later: by the network where this rank's
 * own starts would have ended then, by waiting for the others beyond. */
static selsync_status v_wait_sums(void *ctx)
{
    vcomm *v = ctx;
    size_t k = v->n_started;
    double all = 0, own = 0; /* the last end; the same from this rank's starts alone (never later) */
    count_compute(v);
    v->n_started = 0;
    selsync_status st = v->inner.ops->wait_sums ? v->inner.ops->wait_sums(v->inner.ctx) : SELSYNC_OK;
    if (st != SELSYNC_OK || v->held || k == 0) return settle(v, st, 0, 0);
    memset(v->start_clocks, 0, k * (size_t)v->size * sizeof *v->start_clocks);
    for (size_t i = 0; i < k; i++) v->start_clocks[i * (size_t)v->size + (size_t)v->rank] = v->started[i].clock;
    st = trade(v, v->start_clocks, k * (size_t)v->size);
    for (size_t i = 0; i < k && st == SELSYNC_OK; i++) {
        double latest = latest_of(v, v->start_clocks + i * (size_t)v->size);
        double cost = selsync_vnet_ring(&v->net, v->size, v->started[i].bytes);
        all = (latest > all ? latest : all) + cost;
        own = (v->started[i].clock > own ? v->started[i].clock : own) + cost;
    }
    if (st == SELSYNC_OK && all > v->clock.now) {
        double net = own > v->clock.now ? own - v->clock.now : 0;
        v->clock.network += net;
        v->clock.wait += all - v->clock.now - net;
        v->clock.now = all;
    }
    v->mark = v->cpu();
    return st;
}

/* A small sum started without blocking: the clocks are traded at once (a
 * real wait that the clock does not count) and its end noted, the latest
 * clock plus a small all-reduce; the transport starts the sum, or sums
 * here and now where it cannot. Computation goes on meanwhile. */
static selsync_status v_sum_f64_start(void *ctx, double *buf, size_t n)
{
    vcomm *v = ctx;
    double t = 0, cost = selsync_vnet_tree(&v->net, v->size, 8.0 * (double)n);
    selsync_status st = exchange(v, &t);
    if (st == SELSYNC_OK && v->n_small == v->cap_small) {
        size_t cap = v->cap_small ? 2 * v->cap_small : 16;
        struct small *a = realloc(v->small, cap * sizeof *a);
        if (!a) st = SELSYNC_ENOMEM;
        else {
            v->small = a;
            v->cap_small = cap;
        }
    }
    if (st == SELSYNC_OK)
        st = v->inner.ops->sum_f64_start ? v->inner.ops->sum_f64_start(v->inner.ctx, buf, n)
                                         : v->inner.ops->sum_f64(v->inner.ctx, buf, n);
    if (st == SELSYNC_OK)
        v->small[v->n_small++] = v->held ? (struct small){-HUGE_VAL, -HUGE_VAL}
                                         : (struct small){t + cost, v->clock.now + cost};
    v->mark = v->cpu();
    return st;
}

/* The oldest small sum's end: the clock moves on to it where that is
 * later, by the network up to when it would have ended alone, by waiting
 * for the others beyond. */
static selsync_status v_wait_f64(void *ctx)
{
    vcomm *v = ctx;
    count_compute(v);
    selsync_status st = v->inner.ops->sum_f64_start ? v->inner.ops->wait_f64(v->inner.ctx) : SELSYNC_OK;
    if (v->n_small == 0) return settle(v, st, 0, 0);
    struct small s = v->small[0];
    memmove(v->small, v->small + 1, --v->n_small * sizeof *v->small);
    if (st == SELSYNC_OK && !v->held && s.end > v->clock.now) {
        double net = s.own > v->clock.now ? s.own - v->clock.now : 0;
        v->clock.network += net;
        v->clock.wait += s.end - v->clock.now - net;
        v->clock.now = s.end;
    }
    v->mark = v->cpu();
    return st;
}

static const selsync_comm_ops virtual_ops = {
    .version = SELSYNC_COMM_OPS_VERSION,
    .name = "virtual time",
    .rank = v_rank,
    .size = v_size,
    .any = v_any,
    .sum_f32 = v_sum_f32,
    .sum_f32v = v_sum_f32v,
    .sum_f64 = v_sum_f64,
    .bcast = v_bcast,
    .bytes_sent = v_bytes_sent,
    .abort = v_abort,
    .send = v_send,
    .recv = v_recv,
    .last_error = v_last_error,
    .step_begins = v_step_begins,
    .sum_f32v_among = v_sum_f32v_among,
    .sum_f32v_start = v_sum_f32v_start,
    .wait_sums = v_wait_sums,
    .sum_f64_start = v_sum_f64_start,
    .wait_f64 = v_wait_f64,
};

selsync_status selsync_comm_virtual(selsync_comm inner, const selsync_vnet *net, double (*cpu)(void),
                                    selsync_comm *out, char *err, size_t errlen)
{
    if (!inner.ops || !net || !out || !(net->bandwidth > 0) || !(net->latency >= 0) || !(net->slowdown >= 1) ||
        !(net->jitter_p >= 0 && net->jitter_p <= 1) || !(net->jitter_t >= 0))
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "virtual time: no transport, or a network without "
                            "bandwidth, latency, slow-down >= 1 or a jitter of probability 0..1 and time >= 0");
    if (!inner.ops->send || !inner.ops->recv || !inner.ops->sum_f32v_among)
        return selsync_fail(err, errlen, SELSYNC_EINVAL, "virtual time: the %s transport lacks point-to-point "
                            "messages or sums among members", inner.ops->name);
    vcomm *v = calloc(1, sizeof *v);
    int size = inner.ops->size(inner.ctx);
    if (v) v->clocks = calloc(size > 0 ? (size_t)size : 1, sizeof *v->clocks);
    if (!v || !v->clocks) {
        if (v) free(v);
        return selsync_fail(err, errlen, SELSYNC_ENOMEM, "virtual time: out of memory");
    }
    v->inner = inner;
    v->net = *net;
    v->cpu = cpu ? cpu : net->wall ? selsync_wall_seconds : selsync_thread_cpu_seconds;
    v->rank = inner.ops->rank(inner.ctx);
    v->size = size;
    v->held = 1;
    v->mark = v->cpu();
    out->ops = &virtual_ops;
    out->ctx = v;
    return SELSYNC_OK;
}

void selsync_comm_virtual_free(selsync_comm *c)
{
    if (!c || c->ops != &virtual_ops) return;
    vcomm *v = c->ctx;
    free(v->clocks);
    free(v->started);
    free(v->start_clocks);
    free(v->small);
    free(v->scratch);
    free(v);
    c->ops = NULL;
    c->ctx = NULL;
}

int selsync_virtual_clock(const selsync_comm *c, selsync_vclock *out)
{
    if (!c || c->ops != &virtual_ops) return 0;
    count_compute(c->ctx);
    if (out) *out = ((vcomm *)c->ctx)->clock;
    return 1;
}

void selsync_virtual_hold(const selsync_comm *c, int hold)
{
    if (!c || c->ops != &virtual_ops) return;
    vcomm *v = c->ctx;
    count_compute(v);
    v->held = hold != 0;
}
