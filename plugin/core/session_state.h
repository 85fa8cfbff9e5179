/* The session's state, shared by its files (session.c: loading, the
 * data, the steps, evaluations and the end; session_checkpoint.c:
 * checkpoints, written and resumed; session_speed.c: batches that follow
 * speed; session_report.c: messages and failures, which the others call:
 * session.c calls the parts and none calls back). Internal to the core. */
#ifndef SELSYNC_SESSION_STATE_H
#define SELSYNC_SESSION_STATE_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "selsync/chart.h"
#include "selsync/engine.h"
#include "selsync/inject.h"
#include "selsync/session.h"
#include "selsync/ssp.h"

#include "internal.h"

/* speed_batches: each rank's share of a step's mini-batches. */
typedef struct speed_state {
    int *shares;                 /* mini-batches per rank of the loads requested now (NULL: off); then
                                    the shares a measurement proposes */
    double *speeds;              /* the ranks' samples per second of computation, last measured */
    int mini;                    /* samples of one mini-batch */
    int loaded[3];               /* samples of the last loads requested (the trainer loads one ahead) */
    uint64_t requests, trained;  /* loads requested, steps trained, since begin */
    double compute0;             /* this rank's computation at the last measurement ... */
    uint64_t samples;            /* ... and the samples it trained since */
    double mean_samples, mean_seconds; /* both per measurement, averaged (EWMA): the speed's estimate */
    uint64_t changes;            /* the shares changed this often */
    double samples_total;        /* samples this rank trained since begin */
} speed_state;

struct selsync_session {
    selsync_config cfg;
    selsync_comm comm;
    selsync_host host;
    int rank, world;
    int ssp;                     /* method ssp: rank 0 serves, the others work */
    selsync_model model;
    selsync_engine *engine;      /* from begin (or the first step) on */
    size_t *order, count;        /* this rank's samples */
    size_t samples;              /* the training list's (0: the host feeds its own data) */
    size_t next_sample;          /* sequential plan: position of the walk (loader threads) */
    size_t trained_sample;       /* next_sample after the batches loaded so far */
    selsync_inject_sizes inject; /* inject.senders == 0: no injection */
    int *senders;                /* injection: this step's senders */
    uint64_t batches;            /* injection: batches trained so far (index of the next one) */
    uint64_t requested;          /* injection: loads requested so far (index of the next one) */
    uint64_t images_loaded;      /* injection: own images loaded ... */
    uint64_t loads;              /* ... in this many batches */
    void *resume;                /* a checkpoint's state, until the engine takes it */
    size_t resume_len;
    char resume_from[4096];      /* the checkpoint file it came from (messages) */
    int resumed_world;           /* a checkpoint resumed: the ranks of the job that wrote it (else 0) ... */
    int resumed_batch;           /* ... and the samples each trained per step (0: not recorded) */
    int batch;                   /* samples this rank trains per step (from begin on) */
    char checkpoint[4096];       /* the checkpoint file rank 0 writes */
    pid_t writer;                /* rank 0: the process writing the last checkpoint (0: none) */
    uint64_t writer_step;        /* its step */
    uint64_t checkpoints;        /* checkpoints taken ... */
    double checkpoint_wait;      /* ... and the seconds training stood still for them */
    const char *metric;          /* evaluation: "top1" or "map50"; NULL: off */
    size_t heldout;              /* evaluation: held-out samples */
    uint64_t evaluated;          /* steps done at the last evaluation */
    selsync_ssp_stats served;    /* ssp, rank 0: the server's figures */
    selsync_chart *chart;        /* the console rank, with chart_every: the training chart */
    char host_name[64];          /* this rank's host, for messages */
    double *bn_buf;              /* sync_batchnorm: a layer's sums */
    size_t bn_cap;               /* ... doubles allocated */
    uint64_t bn_sums;            /* sync_batchnorm: sums so far ... */
    double bn_seconds;           /* ... and the seconds in them */
    speed_state speed;           /* speed_batches */
    char err[2048];
};

#define FAIL(s, st, ...) selsync_fail((s)->err, sizeof (s)->err, (st), __VA_ARGS__)

/* session_report.c (the parts report through these, never through session.c) */
/* One line to stderr, "selsync: rank R: " first where there are ranks. */
void session_say(const selsync_session *s, const char *fmt, ...) SELSYNC_PRINTF(2, 3);
/* A failed collective: the transport's message, naming what was done. */
selsync_status session_comm_failed(selsync_session *s, selsync_status st, const char *what);
/* The engine failed with st: its message and status become the session's. */
selsync_status session_engine_failed(selsync_session *s, selsync_status st);
/* After an evaluation or a checkpoint (which held the virtual clock from
 * its start): neither training time nor the virtual clock counts it. */
void session_training_resumes(selsync_session *s);

/* session_checkpoint.c */
/* In load (every rank): rank 0 reads the checkpoint at weights (required:
 * the host knows it as one) and every rank receives its state, or the
 * reason it was refused. */
selsync_status session_checkpoint_share(selsync_session *s, const char *weights, int required);
/* With the engine created: takes this rank's part of the shared state. */
selsync_status session_resume(selsync_session *s);
/* Every checkpoint_every steps (all ranks). */
selsync_status session_checkpoint(selsync_session *s, uint64_t steps);
/* Rank 0: waits for the process writing the last checkpoint, if any. */
selsync_status session_writer_done(selsync_session *s);

/* session_speed.c */
/* In begin, with s->batch known: shares start equal (off with one
 * mini-batch per rank, which cannot be split). */
selsync_status session_speed_begin(selsync_session *s, const selsync_data *d);
/* A load requested: *images becomes this rank's share. */
void session_speed_requested(selsync_session *s, int *images);
/* After each step (all ranks): counts its samples; every speed_every
 * steps the ranks' speeds are measured and agreed, and the shares follow. */
selsync_status session_speed_step(selsync_session *s, uint64_t steps);
/* The summary's line, if batches followed speed. */
void session_speed_summary(const selsync_session *s, FILE *out);

#endif
