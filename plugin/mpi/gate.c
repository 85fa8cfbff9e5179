/* The gate of the MPI transport: every op passes gate_check first, so MPI
 * sees one thread at a time (MPI_THREAD_SERIALIZED) whether the call comes
 * from the caller's thread or the background thread that runs the started
 * sums; the context's errors, byte counts and buffers; ending the job. */
#include "mpi_ctx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Adds n bytes to bytes_sent. A started sum's bytes (the background
 * thread's, or deferred ones run by another op's wait) are held apart until
 * wait_sums, so that another op's bytes_sent difference (injection's
 * broadcasts) never holds them and the engine finds them where it waits. */
void ctx_count_bytes(mpi_ctx *c, uint64_t n)
{
    if (gate_on_background(c) || c->draining) c->bytes_bg += n;
    else c->bytes += n;
}

void ctx_error(mpi_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->last_error, sizeof c->last_error, fmt, ap);
    va_end(ap);
}

selsync_status ctx_mpi_failed(mpi_ctx *c, const char *call, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
        snprintf(text, sizeof text, "MPI error code %d", rc);
    } else {
        text[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    }
    ctx_error(c, "%s failed on rank %d: %s", call, c->rank, text);
    return SELSYNC_ECOMM;
}

/* Grows *p to hold n elements of esize bytes. */
selsync_status ctx_reserve(mpi_ctx *c, void **p, size_t *cap, size_t n, size_t esize)
{
    if (n <= *cap) return SELSYNC_OK;
    void *q = realloc(*p, n * esize);
    if (!q) {
        ctx_error(c, "sum: cannot allocate %zu bytes on rank %d", n * esize, c->rank);
        return SELSYNC_ENOMEM;
    }
    *p = q;
    *cap = n;
    return SELSYNC_OK;
}

/* Whether the caller runs on the background thread (which only runs the
 * started sums; the thread's id is set before it takes the queue's lock). */
int gate_on_background(const mpi_ctx *c)
{
    return c->bg.started && pthread_equal(pthread_self(), c->bg.thread);
}

/* Every op starts here: checks the communicator and buffer, and on the
 * caller's thread waits for the background sums (their failure, if any,
 * is the op's). */
selsync_status gate_check(mpi_ctx *c, const void *buf, size_t n, const char *op)
{
    selsync_status s = gate_on_background(c) || c->draining ? SELSYNC_OK : gate_wait_started(c);
    if (s != SELSYNC_OK) return s;
    if (!c->active) {
        ctx_error(c, "%s: MPI communicator used while not active (after selsync_mpi_finalize?)", op);
        return SELSYNC_ESTATE;
    }
    if (!buf && n) {
        ctx_error(c, "%s: NULL buffer with %zu elements", op, n);
        return SELSYNC_EINVAL;
    }
    return SELSYNC_OK;
}

/* Checks the segments (op: the name in messages). */
selsync_status gate_check_segments(mpi_ctx *c, const selsync_segment *segs, size_t nseg, const char *op)
{
    selsync_status s = gate_check(c, segs, nseg, op);
    for (size_t k = 0; k < nseg && s == SELSYNC_OK; k++) s = gate_check(c, segs[k].data, segs[k].count, op);
    return s;
}

/* Ends the job with code (MPI_Abort; without MPI running, _Exit). */
_Noreturn void gate_end_job(int code)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code);
    /* Not reached with MPI running; without it there is nobody to tell. */
    _Exit(code);
}

/* On the background thread, inside MPI: ends the job if the caller's
 * thread has asked for an abort (comm_abort). */
void gate_abort_pending(mpi_ctx *c)
{
    int code = gate_on_background(c) ? __atomic_load_n(&c->bg_abort_code, __ATOMIC_ACQUIRE) : 0;
    if (code) gate_end_job(code);
}

/* Before MPI_Abort: an error that every rank meets (a bad cfg value, a
 * missing file) is then reported by every rank, not only by the first. */
static void gate_grace(mpi_ctx *c)
{
    struct timespec t = {1, 0};
    if (c->size > 1) nanosleep(&t, NULL);
}

/* Ends the job with code after the message, from any thread. On the
 * caller's thread with the background thread started, the queue is held
 * (the thread takes no further sum) and a sum in progress ends in the
 * thread's own MPI_Abort; once the thread is idle, this thread calls it. */
_Noreturn void gate_abort(mpi_ctx *c, int code, const char *message)
{
    code = code ? code : 1;
    c->aborting = 1;
    fprintf(stderr, "selsync: rank %d: %s\n", c->rank, message);
    fflush(stderr);
    gate_grace(c);
    if (c->bg.started && !gate_on_background(c)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += BG_ABORT_WAIT_S;
        pthread_mutex_lock(&c->bg.mu); /* kept: the thread stays out of MPI */
        __atomic_store_n(&c->bg_abort_code, code, __ATOMIC_RELEASE);
        while (c->bg.busy && pthread_cond_timedwait(&c->bg.cv, &c->bg.mu, &until) == 0) {
        }
    }
    gate_end_job(code);
}

static void *gate_background_main(void *arg)
{
    mpi_ctx *c = arg;
    pthread_mutex_lock(&c->bg.mu);
    for (;;) {
        while ((c->bg.count == 0 || c->bg_abort_code) && !c->bg.stop) pthread_cond_wait(&c->bg.cv, &c->bg.mu);
        if (c->bg.count == 0 || c->bg_abort_code) break;
        bg_sum job = c->bg.q[c->bg.head++];
        selsync_status st = c->bg.failed;
        c->bg.count--;
        c->bg.busy = 1;
        pthread_mutex_unlock(&c->bg.mu);
        if (st == SELSYNC_OK) st = job.run(c, job.segs, job.nseg, job.scale);
        pthread_mutex_lock(&c->bg.mu);
        if (c->bg.failed == SELSYNC_OK) c->bg.failed = st;
        c->bg.busy = 0;
        pthread_cond_broadcast(&c->bg.cv);
    }
    pthread_mutex_unlock(&c->bg.mu);
    return NULL;
}

/* Waits until the background thread has nothing to do (without the
 * thread: runs the deferred sums here, in order); their failure. */
selsync_status gate_wait_started(mpi_ctx *c)
{
    selsync_status st;
    if (!c->bg.started) {
        c->draining = 1;
        for (; c->bg.count; c->bg.count--) {
            bg_sum job = c->bg.q[c->bg.head++];
            if (c->bg.failed == SELSYNC_OK) c->bg.failed = job.run(c, job.segs, job.nseg, job.scale);
        }
        c->draining = 0;
        return c->bg.failed;
    }
    pthread_mutex_lock(&c->bg.mu);
    while (c->bg.count || c->bg.busy) pthread_cond_wait(&c->bg.cv, &c->bg.mu);
    st = c->bg.failed;
    pthread_mutex_unlock(&c->bg.mu);
    return st;
}

/* Stops the background thread (after its queue). */
void gate_stop_background(mpi_ctx *c)
{
    if (c->bg.started) {
        pthread_mutex_lock(&c->bg.mu);
        c->bg.stop = 1;
        pthread_cond_broadcast(&c->bg.cv);
        pthread_mutex_unlock(&c->bg.mu);
        pthread_join(c->bg.thread, NULL);
    }
    free(c->bg.q);
    c->bg.q = NULL;
    c->bg.cap = c->bg.head = c->bg.count = 0;
    c->bg.started = c->bg.stop = 0;
    c->bg.failed = SELSYNC_OK;
}

/* Queues the sum (the segments checked here, on the caller's thread) for
 * the background thread; or, where MPI allows one thread only, there is
 * one rank, or every rank shares one host, defers it to the next wait (or
 * op) on this thread: on one host a sum is the CPU's work (copies and adds
 * in shared memory), which a second thread, or sums between the layers of
 * the backward pass, would only take from the computation. */
selsync_status gate_start_sum(mpi_ctx *c, bg_sum_fn run, const selsync_segment *segs, size_t nseg, float scale)
{
    selsync_status s;
    int ok = c->active && (segs || nseg == 0);
    int deferred = !c->threads_ok || c->size == 1 || !c->background || (c->background < 0 && c->one_host);
    for (size_t k = 0; ok && k < nseg; k++) ok = segs[k].data || segs[k].count == 0;
    if (!ok) return gate_check_segments(c, segs, nseg, "sum_f32v"); /* after the queue: the message */
    pthread_mutex_lock(&c->bg.mu);
    s = c->bg.failed;
    if (s == SELSYNC_OK && c->bg.count == 0) c->bg.head = 0;
    if (s == SELSYNC_OK && c->bg.head + c->bg.count == c->bg.cap) {
        size_t cap = c->bg.cap ? 2 * c->bg.cap : 16;
        bg_sum *q = realloc(c->bg.q, cap * sizeof *q);
        if (!q) {
            ctx_error(c, "sum_f32v_start: out of memory");
            s = SELSYNC_ENOMEM;
        } else {
            c->bg.q = q;
            c->bg.cap = cap;
        }
    }
    if (s == SELSYNC_OK && !c->bg.started && !deferred) {
        int e = pthread_create(&c->bg.thread, NULL, gate_background_main, c);
        if (e != 0) {
            ctx_error(c, "sum_f32v_start: pthread_create failed: %s", strerror(e));
            s = SELSYNC_ECOMM;
        } else {
            c->bg.started = 1;
        }
    }
    if (s == SELSYNC_OK) {
        c->bg.q[c->bg.head + c->bg.count++] = (bg_sum){run, segs, nseg, scale};
        pthread_cond_broadcast(&c->bg.cv);
    }
    pthread_mutex_unlock(&c->bg.mu);
    return s;
}

selsync_status comm_mpi_wait_sums(void *ctx)
{
    mpi_ctx *c = ctx;
    selsync_status st = gate_wait_started(c);
    c->bytes += c->bytes_bg; /* the thread is idle: nobody else writes it now */
    c->bytes_bg = 0;
    return st;
}
