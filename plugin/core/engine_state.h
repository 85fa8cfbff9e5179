/* The engine's state, shared by its files (engine.c: measuring and
 * averaging; engine_policy.c: which steps synchronise; engine_metrics.c:
 * the metrics file; engine_snapshot.c: checkpoints' state). Internal to
 * the core. */
#ifndef SELSYNC_ENGINE_STATE_H
#define SELSYNC_ENGINE_STATE_H

#include <stdint.h>
#include <stdio.h>

#include "selsync/engine.h"
#include "selsync/ssp.h"

#include "internal.h"

struct selsync_engine {
    selsync_config cfg;
    selsync_comm comm;
    selsync_tensor *t;           /* copy of the host's tensor views */
    size_t nt, n_layers, n_groups, n_track; /* n_track: groups (+1 whole model) */
    int rank, world;
    double keep;                 /* 1 - smoothing */
    double *ring;                /* n_track x window raw squared norms */
    double *sq, *prev;           /* per tracker: this step's norm, previous s */
    uint8_t *active;             /* per group: has a trained tensor */
    uint8_t *flags;              /* per group: significant (agreed after any) */
    double *change;              /* per group: this step's Delta (0 when inactive or not finite) */
    uint8_t *chosen;             /* per layer: synchronise this step */
    uint8_t *payload;            /* per layer: has something to transfer */
    int *perm;                   /* fedavg draw, world entries */
    selsync_segment *seg;        /* nt entries: the tensors of a transfer */
    int measures_change;         /* the method reads the change (selsync); else finiteness alone */
    float *snap;                 /* residual snapshot, or NULL (no residual, or no change measured) */
    selsync_host_update host_update; /* this step's update (selsync_engine_note_host_update) ... */
    int host_update_known;       /* ... when noted; 0 after each step */
    int residual_taken;          /* this step's measure wrote the residual the update leaves into snap */
    int update_applied;          /* ... and applied that update (host_update.rates) */
    float *stats;                /* on_nonfinite = skip: the STAT tensors after the last step */
    size_t sync_n;               /* elements of a full synchronisation */
    double delta;                /* the threshold in force (target_sync adapts it) */
    uint64_t local_run;          /* consecutive local steps since the last synchronisation */
    double ratio;                /* comm bytes per payload byte ... */
    size_t ratio_n;              /* ... measured on a transfer of this many floats */
    uint64_t step, bytes0, inject_next; /* inject_next: injection bytes of the coming step */
    int in_step, broken, member, header_done;
    int n_members;               /* k: the ranks in this step's average */
    float scale;                 /* 1/k for this step */
    double t_mark;               /* end of the previous after_update */
    double t_start;              /* engine start (shifted on restore) */
    size_t n_params, n_trained;  /* elements of all params; of the trained ones */
    /* This step's gradient buckets and overlap (engine_aggregate.c). */
    double *tsq;                 /* per tensor: squared norm of this step's own gradient */
    double *tmoved;              /* per tensor, drift rule: ||param - anchor||^2, taken with tsq */
    uint8_t *tbad;               /* per tensor: a param not finite */
    uint8_t *measured;           /* per tensor: tsq and tbad taken this step */
    size_t *snap_off;            /* per tensor: where its residual is in snap */
    uint8_t *ready;              /* per layer: reported by selsync_engine_layer_ready this step */
    int step_open;               /* the step has begun (layer_ready or before_update) */
    int overlapping;             /* this step's buckets are started during the backward pass */
    size_t bucket_pos;           /* tensors [0, bucket_pos) are not in a summed bucket yet */
    size_t seg_used;             /* entries of seg taken by this step's buckets */
    size_t bucket_n;             /* elements in this step's buckets */
    uint64_t bucket_b0;          /* bytes_sent before this step's first bucket */
    double t_hooks;              /* seconds spent in layer_ready this step */
    double t_host_update;        /* when before_update returned: the host's update runs until after_update */
    /* A parameter average overlapped with the next step (engine_aggregate.c). */
    float *late;                 /* the averaged params, packed; sync_n floats, allocated on first use */
    float *late_base;            /* the STAT tensors' values when it started (n_stat floats) */
    uint8_t *late_layers;        /* per layer: in the average */
    selsync_segment late_seg;    /* the one segment summed */
    int late_pending;            /* started, not yet applied */
    uint64_t late_carry;         /* its bytes, when applied between two steps */
    float *mean;                 /* selsync_engine_consensus: n_params, allocated on first use */
    int resumed;                 /* restored: the metrics file is appended to */
    selsync_step cur, last;
    int has_last;
    double prev_lr;              /* the learning rate of the last step (0 before any): qsr_alpha's bound */
    int sync_done;               /* sync_until: the switch to selective steps has happened */
    float *anchor;               /* drift, outer step: the trained params after the last average applied
                                    (snap_off's layout) */
    double *anchor_sq;           /* drift: each tensor's ||anchor||^2 (policy_anchor_norms), by tensor */
    float *outer_u;              /* outer step: its momentum, the same layout */
    double *agree64;             /* drift or agree = mean: the agreement's sum, n_groups + 2 entries */
    /* lag > 0 (engine_policy.c): slot step % lag holds the agreement of
     * that step, n_groups + 2 doubles as in agree64, until step + lag
     * reads it; lag_state per slot: LAG_EMPTY, LAG_STARTED (summing in the
     * transport), LAG_KNOWN (summed). */
    double *lag_sums;
    uint8_t *lag_state;
    selsync_totals tot;
    selsync_ssp_worker *ssp;     /* method ssp on a worker */
    int ssp_server, served;      /* method ssp on rank 0; selsync_engine_serve ran */
    FILE *log;
    char log_path[SELSYNC_PATH_MAX * 6];
    char err[512];
};

#define EFAIL(e, st, ...) selsync_fail((e)->err, sizeof (e)->err, (st), __VA_ARGS__)

/* Steps and counters a run can reach, and a restored state may hold:
 * below 2^53, so that every figure derived from them stays exact and in
 * range. A run stops with an error at the last one (selsync_engine_after_update),
 * so every state it writes can be restored. */
#define MAX_RESTORED_COUNT (1ULL << 53)

/* engine_state.c */
/* Marks the engine broken: a collective failed (what, over n elements). */
selsync_status engine_comm_failed(selsync_engine *e, selsync_status st, const char *what, size_t n);
/* Copies the STAT tensors into e->stats (save) or back (on_nonfinite = skip). */
void engine_keep_stats(selsync_engine *e, int save);
/* The engine may run an operation now (in_step: inside a step); else why not. */
selsync_status engine_check(selsync_engine *e, int in_step);

/* engine_measure.c */
/* Tensor i's squared norm of this step's own gradient, and whether its
 * params are finite, once per step. */
void engine_measure_tensor(selsync_engine *e, size_t i);
/* The sum of (x - y)^2 over [0, n) (y NULL: of x^2): float lanes over
 * blocks, which the compiler vectorises, the blocks added in double
 * (about 1e-7 of relative error; a block that overflows float is summed
 * in double). */
double engine_sq_diff(const float *x, const float *y, size_t n);
/* Norms, smoothing, change and local flags of this step; 1 when its
 * gradient is not finite, 2 when its parameters are not. */
int engine_measure(selsync_engine *e);

/* engine_aggregate.c */
/* overlap = 1 with a communicator that can sum in the background. */
int engine_overlaps(const selsync_engine *e);
/* The chosen layers' params summed times scale over the k ranks of
 * e->perm (member: this rank is one) or all; the time added to *t. */
selsync_status engine_transfer(selsync_engine *e, int member, int k, float scale, int momentum, double *t);
/* Sums (overlapping: starts) the gradient buckets not summed yet this
 * step; ready_only: only those whose layers are all ready. */
selsync_status engine_sum_buckets(selsync_engine *e, int ready_only);
/* The chosen layers' gradients averaged: the remaining buckets, then the
 * wait for those started; the time added to *t. */
selsync_status engine_average_grads(selsync_engine *e, double *t);
/* aggregate = params with overlap = 1: averages run in the background. */
int engine_averages_late(const selsync_engine *e);
/* Starts the background average of the chosen layers' params. */
selsync_status engine_start_late(selsync_engine *e);
/* Applies a pending background parameter average (between: outside a step). */
selsync_status engine_apply_late(selsync_engine *e, int between, double *t);

/* engine_policy.c */
/* Whether tensor t travels in an average: trained ones always, STAT ones
 * with sync_bn_stats. */
int policy_syncs(const selsync_engine *e, const selsync_tensor *t);
/* This step synchronises every layer whatever its gradients say, known
 * before its backward pass: bsp, and selsync in its warm-up or after
 * max_local local steps in a row. */
int policy_forced(const selsync_engine *e);
/* max_local's bound this step (with qsr_alpha, grown as the rate decays). */
uint64_t policy_local_bound(const selsync_engine *e);
/* After a step at learning rate lr: sync_until's switch, and the rate the
 * next step's rules read (prev_lr). */
void policy_note_rate(selsync_engine *e, double lr);
/* An average of the parameters has been applied to the layers marked in
 * layers (NULL: the start, every layer), at learning rate lr: with the
 * outer step, their trained params become the anchor's moved by it; the
 * anchor becomes their params (drift, outer step). */
void policy_averaged(selsync_engine *e, const uint8_t *layers, double lr);
/* The anchor's squared norms once it has been read from a checkpoint. */
void policy_anchor_norms(selsync_engine *e);
enum { LAG_EMPTY = 0, LAG_STARTED, LAG_KNOWN };
/* The lag in force: cfg.lag where the engine keeps slots (selsync), else 0. */
static inline uint64_t policy_lag(const selsync_engine *e) { return e->lag_state ? (uint64_t)e->cfg.lag : 0; }
/* lag: completes the agreements still summing, oldest first. */
selsync_status policy_lag_drain(selsync_engine *e);
/* Fills e->chosen, e->member, e->n_members and e->scale for this step
 * (bad: this rank's loss or gradient is not finite). */
selsync_status policy_decide(selsync_engine *e, int bad);

/* engine_metrics.c */
/* Opens cfg->log (every "%r" the rank) to fail early. */
selsync_status metrics_open(selsync_engine *e, char *err, size_t len);
/* The header line, once; the step's line; -1 on a write error. */
int metrics_header(selsync_engine *e);
int metrics_line(const selsync_engine *e);
/* The message of a failed write, as the engine's error. */
selsync_status metrics_failed(selsync_engine *e);

#endif
