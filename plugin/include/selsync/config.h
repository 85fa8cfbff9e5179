/* The [selsync] section: plain configuration data, parsed strictly.
 *
 * Usage: selsync_config_default(), then selsync_config_set() once per
 * key = value line of the section, then selsync_config_finish() for the
 * checks that involve several keys.  selsync_config_check_world() adds the
 * checks that need the number of ranks.  Every error message names the
 * file, the line, the key, the bad value and what is allowed. */
#ifndef SELSYNC_CONFIG_H
#define SELSYNC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/status.h"

typedef enum selsync_method {
    SELSYNC_METHOD_SELSYNC = 0, /* synchronise when the gradient changes significantly */
    SELSYNC_METHOD_BSP,         /* synchronise every step */
    SELSYNC_METHOD_FEDAVG,      /* average parameters every fedavg_interval steps */
    SELSYNC_METHOD_SSP,         /* stale-synchronous parallel on a parameter server */
    SELSYNC_METHOD_LOCAL        /* no synchronisation until the end */
} selsync_method;

typedef enum selsync_granularity {
    SELSYNC_GRANULARITY_MODEL = 0, /* one significance test for the whole model */
    SELSYNC_GRANULARITY_LAYER      /* one per layer; only significant layers sync */
} selsync_granularity;

typedef enum selsync_aggregate {
    SELSYNC_AGGREGATE_DEFAULT = -1, /* unset: grads for bsp, params otherwise */
    SELSYNC_AGGREGATE_PARAMS = 0,   /* average parameters after the update */
    SELSYNC_AGGREGATE_GRADS         /* average gradients before the update */
} selsync_aggregate;

/* Post-local SGD: selsync synchronises every step until ... */
typedef enum selsync_sync_until {
    SELSYNC_SYNC_UNTIL_NONE = 0, /* (off) */
    SELSYNC_SYNC_UNTIL_DECAY,    /* the learning rate first falls below the previous step's */
    SELSYNC_SYNC_UNTIL_BURN_IN   /* the learning rate stops rising (Darknet's burn_in ends) */
} selsync_sync_until;

/* How the ranks' changes decide a group after the warm-up (selsync). */
typedef enum selsync_agree_rule {
    SELSYNC_AGREE_ANY = 0,       /* the paper: it synchronises when Delta >= delta on any rank */
    SELSYNC_AGREE_MEAN           /* when the ranks' mean Delta >= delta */
} selsync_agree_rule;

/* A checkpoint resumed by a job of another rank count: the batch each rank
 * trains per step. */
typedef enum selsync_resume_batch {
    SELSYNC_RESUME_BATCH_RANK = 0, /* the host's own (the global batch scales with the ranks) */
    SELSYNC_RESUME_BATCH_GLOBAL    /* the old job's global batch shared out (whole mini-batches) */
} selsync_resume_batch;

/* Batches that follow each rank's speed (selsync/speed.h). */
typedef enum selsync_speed_batches {
    SELSYNC_SPEED_OFF = 0, /* every rank trains the same batch */
    SELSYNC_SPEED_ON,      /* every speed_every steps the shares follow the measured speeds where
                              that makes the step shorter */
    SELSYNC_SPEED_AUTO     /* ... when that makes the step at least 5 % shorter */
} selsync_speed_batches;

typedef enum selsync_nonfinite {
    SELSYNC_NONFINITE_STOP = 0,  /* end the job, naming the step and rank */
    SELSYNC_NONFINITE_SKIP       /* no rank synchronises that step */
} selsync_nonfinite;

typedef enum selsync_partition {
    SELSYNC_PARTITION_IID = 0,   /* disjoint 1/N shards */
    SELSYNC_PARTITION_SELDP,     /* all chunks, circular from chunk = rank */
    SELSYNC_PARTITION_LABEL,     /* partition_k classes per rank */
    SELSYNC_PARTITION_DIRICHLET  /* class shares ~ Dirichlet(partition_alpha) */
} selsync_partition;

/* One entry per key; the index is the key's identity in selsync_config.line. */
#define SELSYNC_CONFIG_KEYS(X) \
    X(METHOD, "method")                   \
    X(DELTA, "delta")                     \
    X(WINDOW, "window")                   \
    X(SMOOTHING, "smoothing")             \
    X(WARMUP, "warmup")                   \
    X(GRANULARITY, "granularity")         \
    X(MAX_LOCAL, "max_local")             \
    X(TARGET_SYNC, "target_sync")         \
    X(QSR_ALPHA, "qsr_alpha")             \
    X(SYNC_UNTIL, "sync_until")           \
    X(AGREE, "agree")                     \
    X(DRIFT, "drift")                     \
    X(LAG, "lag")                         \
    X(OUTER_MOMENTUM, "outer_momentum")   \
    X(OUTER_LR, "outer_lr")               \
    X(SYNC_MOMENTUM, "sync_momentum")     \
    X(AGGREGATE, "aggregate")             \
    X(OVERLAP, "overlap")                 \
    X(BUCKET_MB, "bucket_mb")             \
    X(SYNC_BN_STATS, "sync_bn_stats")     \
    X(SYNC_BATCHNORM, "sync_batchnorm")   \
    X(FEDAVG_INTERVAL, "fedavg_interval") \
    X(FEDAVG_FRACTION, "fedavg_fraction") \
    X(SSP_STALENESS, "ssp_staleness")     \
    X(PARTITION, "partition")             \
    X(INJECT_ALPHA, "inject_alpha")       \
    X(INJECT_BETA, "inject_beta")         \
    X(SEED, "seed")                       \
    X(LOG, "log")                         \
    X(EVAL_EVERY, "eval_every")           \
    X(CHECKPOINT_EVERY, "checkpoint_every") \
    X(CHART_EVERY, "chart_every")         \
    X(ON_NONFINITE, "on_nonfinite")       \
    X(BN_RECALIBRATE, "bn_recalibrate")   \
    X(RESUME_BATCH, "resume_batch")       \
    X(SPEED_BATCHES, "speed_batches")     \
    X(SPEED_EVERY, "speed_every")

typedef enum selsync_config_key {
#define SELSYNC_CONFIG_KEY_ENUM(id, name) SELSYNC_KEY_##id,
    SELSYNC_CONFIG_KEYS(SELSYNC_CONFIG_KEY_ENUM)
#undef SELSYNC_CONFIG_KEY_ENUM
    SELSYNC_KEY_COUNT
} selsync_config_key;

#define SELSYNC_PATH_MAX 512
#define SELSYNC_BN_RECALIBRATE_DEFAULT 0 /* bn_recalibrate's default: samples per rank */
#define SELSYNC_TEXT_SHOWN 40 /* a value as kept for messages, with its NUL */

/* drift's default for selsync with aggregate = params: an average once the
 * ranks have moved, on the mean, sqrt(1e-4) = 1 % of the model's norm away
 * from the last one (docs/paper.md, "Defaults"). */
#define SELSYNC_DRIFT_DEFAULT 1e-4

/* lag's largest value: steps a rank may run ahead of the slowest. */
#define SELSYNC_LAG_MAX 1000

/* selsync's defaults beyond the paper's rule (docs/paper.md, "The
 * defaults"): at most 7 local steps in a row, and each step's agreement
 * completed one step later, so that no local step waits for a rank less
 * than a step behind. Together they kept the accuracy of the best FedAvg
 * period within the noise on the regret workloads where max_local = 0
 * fell 2.66 points behind it. */
#define SELSYNC_MAX_LOCAL_DEFAULT 7
#define SELSYNC_LAG_DEFAULT 1

/* agree's default (docs/paper.md, "Defaults"). */
#define SELSYNC_AGREE_DEFAULT SELSYNC_AGREE_MEAN

typedef struct selsync_config {
    selsync_method method;
    double delta;                  /* significance threshold, >= 0 */
    int window;                    /* EWMA window in steps, >= 1 */
    double smoothing;              /* EWMA factor in (0,1]; 0 means auto = N/100 */
    int warmup;                    /* steps always synchronised; -1 means = window */
    selsync_granularity granularity;
    int max_local;                 /* a step after this many local ones synchronises; 0 = no bound */
    double target_sync;            /* share of steps to synchronise, delta adapting; 0 = fixed delta */
    double qsr_alpha;              /* > 0: max_local grows to floor((qsr_alpha / lr)^2) as lr decays */
    selsync_sync_until sync_until; /* post-local SGD: every step synchronises until then */
    selsync_agree_rule agree;      /* any rank's Delta, or the ranks' mean */
    double drift;                  /* > 0: a step synchronises when the ranks' mean relative squared
                                      distance from the last average exceeds it; 0 = off; < 0 unset
                                      (selsync_config_finish: SELSYNC_DRIFT_DEFAULT where it applies) */
    int lag;                       /* > 0: a step's agreement completes this many steps later, where
                                      its decision applies; 0 = at once; < 0 unset (selsync_config_finish:
                                      SELSYNC_LAG_DEFAULT for selsync without on_nonfinite = skip) */
    double outer_momentum;         /* beta of the outer momentum on each average (SlowMo); 0 = off */
    double outer_lr;               /* alpha of the outer step on each average, 1 = the average itself */
    int sync_momentum;             /* 0/1: each parameter average also averages the host's momentum
                                      buffers (the trained tensors' grad after the update) */
    selsync_aggregate aggregate;
    int overlap;                   /* 0/1: sums overlap computation: gradient buckets the backward pass
                                      (aggregate = grads), a parameter average the next step (params) */
    double bucket_mb;              /* MB (10^6 bytes) of gradients per sum, > 0 */
    int sync_bn_stats;             /* 0/1: also average BN rolling statistics */
    int sync_batchnorm;            /* 0/1: every training batch normalised with the statistics of all
                                      ranks' batches together (synchronised BatchNorm) */
    int fedavg_interval;           /* steps between averages, >= 1 */
    double fedavg_fraction;        /* fraction C of ranks in an average, (0,1] */
    int ssp_staleness;             /* staleness bound s, >= 0 */
    selsync_partition partition;
    int partition_k;               /* classes per rank for label:K */
    double partition_alpha;        /* concentration for dirichlet:A */
    double inject_alpha;           /* fraction of ranks injecting, [0,1] */
    double inject_beta;            /* fraction of their batch shared, [0,1] */
    uint64_t seed;
    char log[SELSYNC_PATH_MAX];    /* per-rank metrics path, "%r" = rank; "" = none */
    int eval_every;                /* steps between evaluations; 0 = never */
    int checkpoint_every;          /* steps between checkpoints; 0 = never */
    int chart_every;               /* steps between redraws of the training chart; 0 = no chart */
    selsync_nonfinite on_nonfinite; /* a NaN/Inf loss or gradient norm */
    int bn_recalibrate;            /* samples per rank that re-estimate the BatchNorm statistics of the
                                      final model after the final average; 0 = off */
    selsync_resume_batch resume_batch; /* per-rank batch after a resume at another rank count */
    selsync_speed_batches speed_batches; /* each rank's share of the step's mini-batches by speed */
    int speed_every;               /* steps between two measurements of the ranks' speeds, >= 1 */

    /* Provenance, for messages: the cfg file, the section's line, and the
     * line (0 = not set) and value as written (shortened) of every key. */
    char file[SELSYNC_PATH_MAX];
    int section_line;
    int line[SELSYNC_KEY_COUNT];
    char text[SELSYNC_KEY_COUNT][SELSYNC_TEXT_SHOWN];
} selsync_config;

/* Fills cfg with the documented defaults; file and section_line are
 * recorded for messages (file may be NULL). */
void selsync_config_default(selsync_config *cfg, const char *file, int section_line);

/* Sets one key from its text value, as written on `line` of cfg->file.
 * Rejects an unknown key, an empty or malformed value, a value out of
 * range and a key set twice; on error writes one message to err. */
selsync_status selsync_config_set(selsync_config *cfg, const char *key,
                                  const char *value, int line,
                                  char *err, size_t errlen);

/* Checks that hold between keys (e.g. a key that does not apply to the
 * chosen method) and resolves dependent defaults (warmup, aggregate). */
selsync_status selsync_config_finish(selsync_config *cfg, char *err, size_t errlen);

/* Checks that need the number of ranks (world >= 1). */
selsync_status selsync_config_check_world(const selsync_config *cfg, int world,
                                          char *err, size_t errlen);

/* 1 when selsync's steps also follow the drift rule (drift > 0). */
int selsync_config_drift(const selsync_config *cfg);

/* 1 when each parameter average takes an outer step (outer_momentum > 0 or
 * outer_lr != 1, on selsync or fedavg). */
int selsync_config_outer(const selsync_config *cfg);

/* The EWMA factor in force for `world` ranks (resolves auto = N/100). */
double selsync_config_smoothing(const selsync_config *cfg, int world);

/* Names, for messages and logs (static strings). */
/* "FILE:LINE: method=M" and the settings that apply to M, then
 * "; N process(es)": the line a host prints when it accepts a section. */
void selsync_config_describe(const selsync_config *cfg, int world, char *buf, size_t len);

const char *selsync_method_name(selsync_method m);
/* "iid", "seldp", "label" or "dirichlet" (without K or A). */
const char *selsync_partition_name(selsync_partition p);
const char *selsync_config_key_name(selsync_config_key k);

#endif
