/* Batches that follow speed (speed_batches; see session_state.h): the
 * step's global batch stays N x the rank's batch, in whole mini-batches;
 * every speed_every steps each rank measures its samples per second of
 * computation (the virtual clock's, slow-down included, under virtual
 * time; averaged over the last measurements), the ranks add them in one
 * sum (each fills its own slot), and
 * every rank derives the same shares (selsync_speed_shares). A share
 * applies to the loads requested after it; the trainer has one load in
 * flight, so every rank switches at the same step. The host accumulates
 * a rank's mini-batches before one update and divides its gradient sums by
 * the ranks' mean batch, so averaged sums are those of the global batch
 * whatever its split. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "selsync/speed.h"
#include "selsync/vclock.h"

#include "session_state.h"

/* The weight of the latest measurement in a rank's speed: an average over
 * about the last 5 measurements, so that one measurement's noise (a CPU
 * quota's stall, another process's burst) moves no share, while a lasting
 * change does within a few measurements. */
#define SPEED_WEIGHT 0.2

/* This rank's computation so far: the virtual clock's, or the engine's. */
static double computed(const selsync_session *s)
{
    selsync_vclock vc;
    selsync_totals t;
    if (selsync_virtual_clock(&s->comm, &vc)) return vc.compute;
    selsync_engine_get_totals(s->engine, &t);
    return t.t_compute;
}

selsync_status session_speed_begin(selsync_session *s, const selsync_data *d)
{
    speed_state *p = &s->speed;
    int mini = d->minibatch > 0 ? d->minibatch : d->batch, per = s->batch / mini;
    if (s->cfg.speed_batches == SELSYNC_SPEED_OFF || s->ssp) return SELSYNC_OK;
    if (per < 2) {
        if (s->rank == 0)
            session_say(s, "%s:%d: [selsync] speed_batches = %s: each rank trains one mini-batch per step (the "
                "cfg's subdivisions = 1), which cannot be split; every rank keeps its batch (for shares that follow "
                "speed set subdivisions to 4 or more)", s->cfg.file, s->cfg.line[SELSYNC_KEY_SPEED_BATCHES],
                s->cfg.speed_batches == SELSYNC_SPEED_ON ? "on" : "auto");
        return SELSYNC_OK;
    }
    free(p->shares);
    free(p->speeds);
    p->shares = malloc(2 * (size_t)s->world * sizeof *p->shares);
    p->speeds = malloc((size_t)s->world * sizeof *p->speeds);
    if (!p->shares || !p->speeds) return FAIL(s, SELSYNC_ENOMEM, "out of memory for the batches that follow speed");
    for (int r = 0; r < s->world; ++r) p->shares[r] = per;
    for (int i = 0; i < 3; ++i) p->loaded[i] = s->batch;
    p->mini = mini;
    p->compute0 = computed(s);
    if (s->rank == 0)
        session_say(s, "speed_batches = %s: each rank's share of the step's %d mini-batches of %d follows its speed, "
            "measured every %d steps", s->cfg.speed_batches == SELSYNC_SPEED_ON ? "on" : "auto", per * s->world, mini,
            s->cfg.speed_every);
    return SELSYNC_OK;
}

void session_speed_requested(selsync_session *s, int *images)
{
    speed_state *p = &s->speed;
    if (!p->shares) return;
    *images = p->shares[s->rank] * p->mini;
    p->loaded[p->requests++ % 3] = *images;
}

/* The ranks' speeds measured and agreed; the shares follow them when that
 * makes the step shorter (auto: at least 5 % shorter). */
static selsync_status follow(selsync_session *s, uint64_t steps)
{
    speed_state *p = &s->speed;
    int n = s->world, *next = p->shares + n, total = n * (s->batch / p->mini);
    double now = computed(s), first = p->mean_seconds == 0 ? 1.0 : SPEED_WEIGHT;
    p->mean_samples += first * ((double)p->samples - p->mean_samples);
    p->mean_seconds += first * (now - p->compute0 - p->mean_seconds);
    memset(p->speeds, 0, (size_t)n * sizeof *p->speeds);
    p->speeds[s->rank] = p->mean_seconds > 0 ? p->mean_samples / p->mean_seconds : 0;
    p->compute0 = now;
    p->samples = 0;
    selsync_status st = s->comm.ops->sum_f64(s->comm.ctx, p->speeds, (size_t)n);
    if (st) return session_comm_failed(s, st, "measuring the ranks' speeds");
    selsync_speed_shares(p->speeds, n, total, next);
    double was = selsync_speed_step_time(p->speeds, p->shares, n), will = selsync_speed_step_time(p->speeds, next, n);
    if (!(will < (s->cfg.speed_batches == SELSYNC_SPEED_AUTO ? 0.95 : 1.0) * was)) return SELSYNC_OK;
    memcpy(p->shares, next, (size_t)n * sizeof *next);
    p->changes++;
    char line[4096];
    size_t len = (size_t)snprintf(line, sizeof line, "step %llu: mini-batches per rank by speed:",
                                  (unsigned long long)steps);
    for (int r = 0; r < n && len < sizeof line; ++r)
        len += (size_t)snprintf(line + len, sizeof line - len, " %d", p->shares[r]);
    if (len < sizeof line)
        snprintf(line + len, sizeof line - len, " (the step %.0f %% of its time with the shares before)",
                 100 * will / was);
    if (s->rank == 0) session_say(s, "%s", line);
    if ((st = selsync_engine_log_note(s->engine, line))) return session_engine_failed(s, st);
    return SELSYNC_OK;
}

selsync_status session_speed_step(selsync_session *s, uint64_t steps)
{
    speed_state *p = &s->speed;
    if (!p->shares) return SELSYNC_OK;
    int samples = p->requests > p->trained ? p->loaded[p->trained % 3] : s->batch;
    p->trained++;
    p->samples += (uint64_t)samples;
    p->samples_total += samples;
    return steps % (uint64_t)s->cfg.speed_every == 0 ? follow(s, steps) : SELSYNC_OK;
}

void session_speed_summary(const selsync_session *s, FILE *out)
{
    const speed_state *p = &s->speed;
    if (!p->shares) return;
    fprintf(out, "selsync: summary: batches that follow speed: the shares changed %llu time%s; this rank trained "
            "%.1f samples per step on average (every rank's mean: %d)\n", (unsigned long long)p->changes,
            p->changes == 1 ? "" : "s", p->trained ? p->samples_total / (double)p->trained : 0.0, s->batch);
}
