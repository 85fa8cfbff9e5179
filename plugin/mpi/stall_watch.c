/* The stall watch: every wait on MPI requests goes through stall_wait,
 * which warns (SELSYNC_STALL_WARN) and ends the job (SELSYNC_STALL_TIMEOUT)
 * when it lasts, naming the ranks it waits for; the ranks tell each other
 * how far they have got with notices on their own communicator. */
#include "mpi_ctx.h"

#include <stdio.h>
#include <time.h>

/* Every op starts here: names it for stall messages and counts the
 * collectives (every rank calls them in the same order, so the counts
 * agree: seq numbers a collective across the ranks). */
void stall_enter(mpi_ctx *c, const char *op, int collective)
{
    c->op = op;
    c->collective = collective;
    if (collective) ++c->seq;
}

double stall_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Sends this rank's seq to rank `to` with tag, unless the previous notice
 * to it is still in flight. Notices are diagnostics: errors are ignored. */
static void stall_note(mpi_ctx *c, int to, int tag)
{
    int idle = 1;
    if (c->note_req[to] != MPI_REQUEST_NULL) MPI_Test(&c->note_req[to], &idle, MPI_STATUS_IGNORE);
    if (!idle) return;
    c->note_buf[to] = c->seq;
    if (MPI_Isend(&c->note_buf[to], 1, MPI_UINT64_T, to, tag, c->watch, &c->note_req[to]) != MPI_SUCCESS)
        c->note_req[to] = MPI_REQUEST_NULL;
}

/* Receives the notices that have arrived, records how far their senders
 * have got, and answers NOTE_WAITING with this rank's seq (answer: no). */
void stall_poll(mpi_ctx *c, int answer)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        uint64_t seq = 0;
        if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->watch, &flag, &st) != MPI_SUCCESS || !flag) return;
        if (MPI_Recv(&seq, 1, MPI_UINT64_T, st.MPI_SOURCE, st.MPI_TAG, c->watch, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        if (seq > c->reached[st.MPI_SOURCE]) c->reached[st.MPI_SOURCE] = seq;
        if (answer && st.MPI_TAG == NOTE_WAITING) stall_note(c, st.MPI_SOURCE, NOTE_REACHED);
    }
}

/* Appends rank r to the list at out (len: its length so far). */
static void stall_list_rank(char *out, size_t cap, size_t *len, int *count, int r)
{
    if (*len < cap)
        *len += (size_t)snprintf(out + *len, cap - *len, "%s%d", *count ? "," : "for rank(s) ", r);
    ++*count;
}

/* Who a stalled wait waits for ("for rank(s) 1,3"): in a collective, the
 * ranks not known to have entered it; else (or when every rank has) the
 * peers of the requests not complete. */
static void stall_missing(mpi_ctx *c, char *out, size_t cap, int n, MPI_Request *req, const int *peer)
{
    size_t len = 0;
    int count = 0, any_source = 0, last = -1;
    out[0] = '\0';
    for (int r = 0; c->collective && r < c->size; ++r)
        if (r != c->rank && c->reached[r] < c->seq) stall_list_rank(out, cap, &len, &count, r);
    if (count) return;
    for (int i = 0; i < n; ++i) {
        int flag = 1;
        MPI_Request_get_status(req[i], &flag, MPI_STATUS_IGNORE);
        if (flag) continue;
        if (peer[i] == MPI_ANY_SOURCE) any_source = 1;
        if (peer[i] < 0 || peer[i] == last) continue; /* a ring of 2: one peer twice */
        stall_list_rank(out, cap, &len, &count, last = peer[i]);
    }
    if (count == 0)
        snprintf(out, cap, "%s", any_source ? "for any rank" : "for rank(s) unknown (every rank has entered it)");
}

/* Prints the warning that this rank has waited `waited` seconds in the
 * current op for `missing` ("for rank(s) 1,3"), or with timed_out ends the
 * job (does not return). */
static void stall_say(mpi_ctx *c, const char *missing, double waited, int timed_out)
{
    char step[48] = "", msg[512];
    int64_t at = __atomic_load_n(&c->step, __ATOMIC_RELAXED);
    if (at >= 0) snprintf(step, sizeof step, " (step %lld)", (long long)at);
    if (!timed_out) {
        fprintf(stderr, "selsync: rank %d: waiting %lld s in %s%s %s\n", c->rank,
                (long long)waited, c->op, step, missing);
        fflush(stderr);
        return;
    }
    snprintf(msg, sizeof msg,
             "waited %lld s in %s%s %s: SELSYNC_STALL_TIMEOUT=%lld reached; aborting the job",
             (long long)waited, c->op, step, missing, (long long)c->stall_timeout);
    gate_abort(c, STALL_EXIT_CODE, msg);
}

/* stall_say for a wait on n requests: names the ranks it waits for. */
static void stall_report(mpi_ctx *c, int n, MPI_Request *req, const int *peer, double waited, int timed_out)
{
    char missing[256];
    stall_missing(c, missing, sizeof missing, n, req, peer);
    stall_say(c, missing, waited, timed_out);
}

/* MPI_Waitall when the watch is off; else polls: busy for up to
 * STALL_SPIN_S, then with naps, answering notices. Half-way to the first
 * warning or timeout, a collective tells every other rank it is waiting
 * (they answer how far they have got, which names the missing ranks). */
static int stall_waitall(mpi_ctx *c, int n, MPI_Request *req, const int *peer, MPI_Status *st)
{
    double warn = c->stall_warn, limit = c->stall_timeout;
    int watch = warn > 0 || limit > 0;
    if (!watch && !gate_on_background(c)) return MPI_Waitall(n, req, st);
    double first = warn <= 0 ? limit : (limit <= 0 || warn < limit) ? warn : limit;
    double spin = gate_on_background(c) ? 0 : first / 4 < STALL_SPIN_S ? first / 4 : STALL_SPIN_S;
    double t0 = stall_now(), next_warn = warn;
    long nap_ns = gate_on_background(c) ? BG_NAP_MIN_NS : STALL_NAP_NS;
    int told = !c->collective || !watch, done = 0, rc = MPI_SUCCESS;
    while (!done && rc == MPI_SUCCESS) {
        double t = stall_now() - t0;
        if (t >= spin) {
            struct timespec nap = {0, nap_ns};
            if (watch) stall_poll(c, 1);
            nanosleep(&nap, NULL);
            if (gate_on_background(c) && nap_ns < BG_NAP_MAX_NS) nap_ns *= 2;
        }
        if (!told && t >= first / 2) {
            for (int r = 0; r < c->size; ++r)
                if (r != c->rank) stall_note(c, r, NOTE_WAITING);
            told = 1;
        }
        gate_abort_pending(c);
        if (limit > 0 && t >= limit) stall_report(c, n, req, peer, t, 1);
        if (warn > 0 && t >= next_warn) {
            stall_report(c, n, req, peer, t, 0);
            while (next_warn <= t) next_warn += warn;
        }
        rc = MPI_Testall(n, req, &done, st);
    }
    return rc;
}

/* Completes n requests; peer[i]: the rank request i talks to, or
 * MPI_ANY_SOURCE, or MPI_PROC_NULL in a library collective. */
selsync_status stall_wait(mpi_ctx *c, int n, MPI_Request *req, const int *peer, MPI_Status *st, const char *call)
{
    int done = 0;
    int rc = MPI_Testall(n, req, &done, st);
    if (rc == MPI_SUCCESS && !done) rc = stall_waitall(c, n, req, peer, st);
    return rc == MPI_SUCCESS ? SELSYNC_OK : ctx_mpi_failed(c, call, rc);
}

/* A library collective started as *req: waited for. */
selsync_status stall_wait_collective(mpi_ctx *c, int rc, MPI_Request *req, const char *call)
{
    static const int nobody = MPI_PROC_NULL;
    return rc == MPI_SUCCESS ? stall_wait(c, 1, req, &nobody, MPI_STATUSES_IGNORE, call) : ctx_mpi_failed(c, call, rc);
}

/* Before a blocking collective: with the watch on, the ranks first meet in
 * a watched MPI_Ibarrier (a stall before the collective is reported; one
 * inside it is not). Used where the non-blocking collective would sum in
 * another order than the blocking one (MPI_Reduce_scatter_block). */
selsync_status stall_arrive(mpi_ctx *c)
{
    MPI_Request rq;
    if (c->stall_warn <= 0 && c->stall_timeout <= 0) return SELSYNC_OK;
    return stall_wait_collective(c, MPI_Ibarrier(c->comm, &rq), &rq, "MPI_Ibarrier");
}
