/* SSP: stale-synchronous parallel training on a parameter server, over the
 * point-to-point ops of selsync_comm (send/recv).
 *
 * Rank 0 is the server and does not train; ranks 1..W (W = world - 1) are
 * the workers. The model is every SELSYNC_TENSOR_TRAINED tensor, and every
 * STAT tensor when cfg->sync_bn_stats, packed in tensor order (n floats).
 * A worker's clock is the number of updates it has pushed.
 *
 * Protocol: every message is a selsync_ssp_header with one of the tags
 * below; a model or an update follows as one SSP_TAG_DATA message of n
 * floats from the same sender.
 *   worker -> server  PULL  clock 0: sends me the initial model (once, first)
 *                     PUSH  clock c, then DATA: my c-th update, i.e. my
 *                           parameters minus those of my last pull; also a
 *                           pull request
 *                     DONE  clock c: I push no more
 *   server -> worker  REPLY wait, slowest; then DATA: the global model
 * The server first answers every worker's PULL (rank order) with the
 * initial model, then takes messages as they come. It applies each update at once, global += update / W (with s = 0
 * every worker starts each step from the same global model, so after a
 * round the global model is the mean of the workers' models). It answers
 * a pull from a worker at clock c only while c - slowest <= s, slowest =
 * the smallest clock of the workers not done, and queues it otherwise until
 * the slowest advances. It returns when every worker is done. Messages are
 * raw bytes: all ranks must share one float and integer layout. */
#ifndef SELSYNC_SSP_H
#define SELSYNC_SSP_H

#include <stdint.h>
#include <stdio.h>

#include "selsync/comm.h"
#include "selsync/config.h"
#include "selsync/model.h"
#include "selsync/status.h"

enum { SSP_TAG_PULL = 0x551, SSP_TAG_PUSH, SSP_TAG_DONE, SSP_TAG_REPLY, SSP_TAG_DATA };

typedef struct selsync_ssp_header {
    uint64_t clock;    /* PULL/PUSH/DONE: the sender's clock; REPLY: the worker's */
    uint64_t slowest;  /* REPLY: the slowest clock when answered */
    uint64_t count;    /* floats of the DATA message that follows (0: none) */
    double wait;       /* REPLY: seconds the pull was queued by the bound */
} selsync_ssp_header;

typedef struct selsync_ssp_stats {
    uint64_t pushes, pulls, queued; /* updates applied, pulls answered, of which queued */
    uint64_t max_lead;              /* largest clock - slowest of an answered pull */
    uint64_t bytes_sent, bytes_received;
    double t_wait;                  /* sum over queued pulls of their wait */
    double t_serve;                 /* seconds in selsync_ssp_serve */
} selsync_ssp_stats;

/* Runs the server until every worker is done; the model's arrays hold the
 * global model throughout. trace (may be NULL): "# rank clock slowest
 * queued wait_s", then one tab-separated line per answered pull. stats may
 * be NULL. A message that breaks the protocol is SELSYNC_EMISMATCH; a
 * failed transfer SELSYNC_ECOMM (message in err). */
selsync_status selsync_ssp_serve(const selsync_config *cfg, const selsync_comm *comm,
                                 const selsync_model *model, FILE *trace,
                                 selsync_ssp_stats *stats, char *err, size_t errlen);

typedef struct selsync_ssp_worker selsync_ssp_worker;

/* One pull or push + pull, as seen by the worker. */
typedef struct selsync_ssp_exchange {
    uint64_t bytes_out, bytes_in;   /* headers and payloads */
    double t_wait;                  /* the server's wait for the bound */
    double t_total;                 /* the whole exchange, wait included */
} selsync_ssp_exchange;

/* A worker (rank >= 1) of the model; nothing is sent yet. */
selsync_status selsync_ssp_worker_create(const selsync_config *cfg, const selsync_comm *comm,
                                         const selsync_model *model, selsync_ssp_worker **out,
                                         char *err, size_t errlen);
/* First call: pulls the initial model. Later calls: pushes the update since
 * the last pull with clock + 1, then installs the model pulled in reply. */
selsync_status selsync_ssp_sync(selsync_ssp_worker *w, selsync_ssp_exchange *x);
/* Tells the server this worker is done (after its last selsync_ssp_sync). */
selsync_status selsync_ssp_done(selsync_ssp_worker *w);
uint64_t selsync_ssp_clock(const selsync_ssp_worker *w);
const char *selsync_ssp_worker_error(const selsync_ssp_worker *w);
void selsync_ssp_worker_destroy(selsync_ssp_worker *w);

#endif
