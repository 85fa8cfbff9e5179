/* The MPI transport: see comm_mpi.h for the contract, the algorithms and
 * the bytes_sent estimates; mpi_ctx.h for its parts. This part sets the
 * transport up from the environment, tears it down and fills the ops
 * table. The context lives here, once per process (MPI_COMM_WORLD exists
 * once); the public calls below act on it, the ops on the ctx they get. */
#include "mpi_ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mpi_ctx world = {
    .bg = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER},
    .comm = MPI_COMM_NULL,
    .p2p = MPI_COMM_NULL,
    .watch = MPI_COMM_NULL,
    .small = MPI_COMM_NULL,
    .size = 1,
    .chunk_bytes = DEFAULT_CHUNK_BYTES,
    .sum_alg = SELSYNC_MPI_SUM_RING,
    .background = -1,
};

static void copy_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) snprintf(err, errlen, "%s", msg);
}

static int comm_mpi_rank(void *ctx)
{
    mpi_ctx *c = ctx;
    return c->rank;
}

static int comm_mpi_size(void *ctx)
{
    mpi_ctx *c = ctx;
    return c->size;
}

/* On the caller's thread only (the background thread's bytes are held
 * apart in bytes_bg until wait_sums), so it needs no wait. */
static uint64_t comm_mpi_bytes_sent(void *ctx)
{
    mpi_ctx *c = ctx;
    return c->bytes;
}

static void comm_mpi_abort(void *ctx, int code, const char *message)
{
    mpi_ctx *c = ctx;
    gate_abort(c, code, message ? message : "aborting");
}

/* The background thread's message is complete once it is idle. */
static const char *comm_mpi_last_error(void *ctx)
{
    mpi_ctx *c = ctx;
    if (c->bg.started && !gate_on_background(c)) (void)gate_wait_started(c);
    return c->last_error;
}

/* The step a stall warning names. */
static void comm_mpi_step_begins(void *ctx, uint64_t step)
{
    mpi_ctx *c = ctx;
    __atomic_store_n(&c->step, (int64_t)step, __ATOMIC_RELAXED); /* read by the background thread */
}

static const selsync_comm_ops mpi_ops = {
    .version = SELSYNC_COMM_OPS_VERSION,
    .name = "mpi",
    .rank = comm_mpi_rank,
    .size = comm_mpi_size,
    .any = comm_mpi_any,
    .sum_f32 = comm_mpi_sum_f32,
    .sum_f32v = comm_mpi_sum_f32v,
    .sum_f64 = comm_mpi_sum_f64,
    .bcast = comm_mpi_bcast,
    .bytes_sent = comm_mpi_bytes_sent,
    .abort = comm_mpi_abort,
    .send = comm_mpi_send,
    .recv = comm_mpi_recv,
    .last_error = comm_mpi_last_error,
    .step_begins = comm_mpi_step_begins,
    .sum_f32v_among = comm_mpi_sum_f32v_among,
    .sum_f32v_start = comm_mpi_sum_f32v_start,
    .wait_sums = comm_mpi_wait_sums,
    .sum_f64_start = comm_mpi_sum_f64_start,
    .wait_f64 = comm_mpi_wait_f64,
};

static void at_exit_handler(void)
{
    mpi_ctx *c = &world;
    if (!c->active || c->aborting) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    gate_abort(c, 1, "exited without finishing; aborting the job");
}

/* Frees the communicators (after the notices still in flight and those
 * that arrived), finalises MPI if this module initialised it, and frees
 * the watch's arrays. */
static void release(mpi_ctx *c)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && c->watch != MPI_COMM_NULL && c->reached && c->note_req) {
        stall_poll(c, 0);
        MPI_Waitall(c->size, c->note_req, MPI_STATUSES_IGNORE);
    }
    MPI_Comm *comms[] = {&c->small, &c->watch, &c->p2p, &c->comm};
    for (size_t i = 0; i < sizeof comms / sizeof comms[0] && !fin; ++i)
        if (*comms[i] != MPI_COMM_NULL) MPI_Comm_free(comms[i]);
    if (!fin && c->own_init) MPI_Finalize();
    c->comm = c->p2p = c->watch = c->small = MPI_COMM_NULL;
    c->own_init = 0;
    small_sums_free(c);
    free(c->reached);
    free(c->note_buf);
    free(c->note_req);
    c->reached = c->note_buf = NULL;
    c->note_req = NULL;
}

/* *out = the whole seconds >= 0 in environment variable name (def when
 * unset or empty); 0 with the message in last_error when it holds anything
 * else. */
static int env_seconds(mpi_ctx *c, const char *name, double def, double *out)
{
    const char *v = getenv(name);
    size_t digits = v ? strspn(v, "0123456789") : 0;
    *out = def;
    if (!v || !*v) return 1;
    if (digits == 0 || v[digits] != '\0' || digits > 9) {
        ctx_error(c, "%s=%s: expected whole seconds from 0 to 999999999 (0 turns it off)", name, v);
        return 0;
    }
    *out = (double)strtol(v, NULL, 10);
    return 1;
}

static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

/* The settings of the ring's own TCP links, which are gone: 0 (and the
 * error) when one is set, so that a job that relied on them stops at start
 * instead of running otherwise. */
static int retired_settings(mpi_ctx *c)
{
    static const char *const retired[] = {"SELSYNC_RING_LINKS", "SELSYNC_RING_IFNAME"};
    for (size_t k = 0; k < sizeof retired / sizeof *retired; k++) {
        const char *v = getenv(retired[k]);
        if (v && *v) {
            ctx_error(c,
                      "%s=%.60s: the ring's own TCP links are retired; the sums run over MPI, which "
                      "between hosts takes Open MPI's UCX at the link's rate (docs/cluster.md, \"The "
                      "transport: UCX\"): unset %s",
                      retired[k], v, retired[k]);
            return 0;
        }
    }
    return 1;
}

/* Where the ranks run: one_host, and hosts for the start-up line. Collective. */
static void find_hosts(mpi_ctx *c)
{
    MPI_Comm node;
    int local = 0, leader, hosts = 0;
    if (MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
    }
    leader = local == 0;
    MPI_Allreduce(&leader, &hosts, 1, MPI_INT, MPI_SUM, c->comm);
    c->one_host = hosts == 1;
    if (c->size == 1 || c->one_host) snprintf(c->hosts, sizeof c->hosts, "%s", "ranks share a host");
    else snprintf(c->hosts, sizeof c->hosts, "%d hosts", hosts);
}

selsync_status selsync_mpi_init(int *argc, char ***argv, selsync_comm *out, char *err,
                                size_t errlen)
{
    mpi_ctx *c = &world;
    copy_err(err, errlen, "");
    if (!out) {
        copy_err(err, errlen, "selsync_mpi_init: NULL out");
        return SELSYNC_EINVAL;
    }
    if (c->active) {
        out->ops = &mpi_ops;
        out->ctx = c;
        return SELSYNC_OK;
    }
    if (!launched_by_mpi()) {
        *out = selsync_comm_single();
        return SELSYNC_OK;
    }
    if (!retired_settings(c) || !env_seconds(c, "SELSYNC_STALL_WARN", 60, &c->stall_warn) ||
        !env_seconds(c, "SELSYNC_STALL_TIMEOUT", 0, &c->stall_timeout)) {
        copy_err(err, errlen, c->last_error);
        return SELSYNC_ECONFIG;
    }
    int init = 0, fin = 0, rc;
    MPI_Finalized(&fin);
    if (fin) {
        ctx_error(c, "selsync_mpi_init: MPI was already finalised");
        copy_err(err, errlen, c->last_error);
        return SELSYNC_ESTATE;
    }
    MPI_Initialized(&init);
    int provided = MPI_THREAD_SINGLE;
    if (!init) {
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            ctx_mpi_failed(c, "MPI_Init_thread", rc);
            copy_err(err, errlen, c->last_error);
            return SELSYNC_ECOMM;
        }
        c->own_init = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_FUNNELED) {
        ctx_error(c, "MPI provides thread level %d, less than MPI_THREAD_FUNNELED (%d)", provided,
                  MPI_THREAD_FUNNELED);
        copy_err(err, errlen, c->last_error);
        if (c->own_init) {
            MPI_Finalize();
            c->own_init = 0;
        }
        return SELSYNC_ECOMM;
    }
    c->threads_ok = provided >= MPI_THREAD_SERIALIZED;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(c->comm, &c->rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(c->comm, &c->size);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(c->comm, &c->p2p);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(c->p2p, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(c->comm, &c->watch);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(c->comm, &c->small);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(c->small, MPI_ERRORS_RETURN);
    selsync_status st = SELSYNC_OK;
    if (rc != MPI_SUCCESS) st = ctx_mpi_failed(c, "MPI communicator setup", rc);
    const char *alg = getenv("SELSYNC_MPI_SUM");
    if (st == SELSYNC_OK && alg && strcmp(alg, "reduce_scatter_block") == 0) c->sum_alg = SELSYNC_MPI_SUM_RSB;
    else if (st == SELSYNC_OK && alg && *alg && strcmp(alg, "ring") != 0) {
        ctx_error(c, "SELSYNC_MPI_SUM=%s: expected ring or reduce_scatter_block", alg);
        st = SELSYNC_ECONFIG;
    }
    if (st == SELSYNC_OK) {
        c->reached = calloc((size_t)c->size, sizeof *c->reached);
        c->note_buf = calloc((size_t)c->size, sizeof *c->note_buf);
        c->note_req = malloc((size_t)c->size * sizeof *c->note_req);
        if (!c->reached || !c->note_buf || !c->note_req) {
            ctx_error(c, "selsync_mpi_init: out of memory");
            st = SELSYNC_ENOMEM;
        }
        for (int r = 0; c->note_req && r < c->size; ++r) c->note_req[r] = MPI_REQUEST_NULL;
    }
    if (st != SELSYNC_OK) {
        copy_err(err, errlen, c->last_error);
        release(c);
        return st;
    }
    c->active = 1;
    c->aborting = 0;
    c->bytes = c->bytes_bg = 0;
    c->seq = 0;
    c->step = -1;
    find_hosts(c);
    /* Registered after MPI_Init_thread, so it runs before anything MPI
     * registered during initialisation. */
    if (!c->atexit_done && atexit(at_exit_handler) == 0) c->atexit_done = 1;
    out->ops = &mpi_ops;
    out->ctx = c;
    return SELSYNC_OK;
}

void selsync_mpi_finalize(void)
{
    mpi_ctx *c = &world;
    if (!c->active) return;
    gate_stop_background(c);
    c->active = 0;
    release(c);
    free(c->iov);
    c->iov = NULL;
    c->iov_cap = 0;
    free(c->scratch);
    free(c->pack);
    free(c->start);
    free(c->len);
    free(c->disp);
    free(c->out_req);
    free(c->out_peer);
    free(c->out_type);
    c->out_req = NULL;
    c->out_peer = NULL;
    c->out_type = NULL;
    c->out_cap = c->out_peer_cap = c->out_type_cap = 0;
    c->scratch = c->pack = NULL;
    c->start = NULL;
    c->len = NULL;
    c->disp = NULL;
    c->scratch_cap = c->pack_cap = c->start_cap = c->map_cap = 0;
}

int selsync_mpi_active(void)
{
    mpi_ctx *c = &world;
    return c->active;
}

void selsync_mpi_set_step(int64_t step)
{
    mpi_ctx *c = &world;
    __atomic_store_n(&c->step, step, __ATOMIC_RELAXED);
}

const char *selsync_mpi_hosts(void)
{
    mpi_ctx *c = &world;
    return c->active ? c->hosts : "";
}

const char *selsync_mpi_last_error(void)
{
    mpi_ctx *c = &world;
    return c->last_error;
}

int selsync_mpi_set_background_sums(int mode)
{
    mpi_ctx *c = &world;
    int prev = c->background;
    c->background = mode < 0 ? -1 : mode > 0;
    return prev;
}

size_t selsync_mpi_set_chunk_bytes(size_t bytes)
{
    mpi_ctx *c = &world;
    size_t prev = c->chunk_bytes;
    c->chunk_bytes = bytes ? bytes : DEFAULT_CHUNK_BYTES;
    return prev;
}

selsync_mpi_sum_algorithm selsync_mpi_set_sum_algorithm(selsync_mpi_sum_algorithm alg)
{
    mpi_ctx *c = &world;
    selsync_mpi_sum_algorithm prev = c->sum_alg;
    if (alg == SELSYNC_MPI_SUM_RING || alg == SELSYNC_MPI_SUM_RSB) c->sum_alg = alg;
    return prev;
}
