/* The world ring's TCP links (SELSYNC_RING_LINKS): made when every rank
 * has a host of its own, kept when a trial sum is faster over them. */
#include "mpi_ctx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "tcp_link.h"

/* A world ring's sum of 4 MiB: the slowest rank's seconds (the median of
 * three after one untimed). */
static double links_trial(mpi_ctx *c, float *buf, size_t n)
{
    double t[3], slowest;
    selsync_segment one = {buf, n};
    ring_plan world = {NULL, (size_t)c->size, (size_t)c->rank, n, 0};
    for (int i = 0; i < 4; i++) {
        double t0 = stall_now();
        if (ring_set_array(c, &one, 1, &n) != SELSYNC_OK || ring_run(c, &world, 1.0f) != SELSYNC_OK) return 1e30;
        if (i) t[i - 1] = stall_now() - t0;
    }
    double mid = t[0] > t[1] ? (t[1] > t[2] ? t[1] : t[0] > t[2] ? t[2] : t[0])
                             : (t[0] > t[2] ? t[0] : t[1] > t[2] ? t[2] : t[1]);
    MPI_Allreduce(&mid, &slowest, 1, MPI_DOUBLE, MPI_MAX, c->comm);
    return slowest;
}

/* The world ring's links (SELSYNC_RING_LINKS, checked before MPI starts):
 * mpi; tcp (an error when they cannot be made); auto (the default): TCP
 * when every rank has a host of its own and a 4 MiB trial sum is faster
 * over TCP than over MPI, else MPI. Collective. */
enum { LINKS_MPI, LINKS_AUTO, LINKS_TCP };
/* The ring's listener closed a connection that was not its neighbour's. */
static void links_ignored_connection(void *user, const char *why)
{
    const mpi_ctx *c = user;
    fprintf(stderr, "selsync: rank %d: the ring's listener ignored a connection %s\n", c->rank, why);
    fflush(stderr);
}

/* Fills token with random bytes (rank 0's is the job's); 0 on failure. */
static int links_job_token(mpi_ctx *c, unsigned char token[TCP_TOKEN_BYTES])
{
    if (c->rank != 0) return 1;
    size_t got = 0;
    while (got < TCP_TOKEN_BYTES) {
        ssize_t k = getrandom(token + got, TCP_TOKEN_BYTES - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        got += (size_t)k;
    }
    return 1;
}

selsync_status links_setup(mpi_ctx *c, const char *mode)
{
    int want = !mode || !*mode || !strcmp(mode, "auto") ? LINKS_AUTO : !strcmp(mode, "tcp") ? LINKS_TCP : LINKS_MPI;
    int lfd = -1, ok, all;
    char why[200] = "", ifn[16] = "";
    struct sockaddr_in me;
    MPI_Comm node;
    int n = 0, alone;
    snprintf(c->links, sizeof c->links, "MPI");
    if (MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &n);
        MPI_Comm_free(&node);
    }
    c->one_host = n == c->size;
    if (want == LINKS_MPI || c->size == 1) return SELSYNC_OK;
    if (want == LINKS_AUTO) {
        alone = n == 1;
        MPI_Allreduce(&alone, &all, 1, MPI_INT, MPI_LAND, c->comm);
        if (!all) {
            snprintf(c->links, sizeof c->links, "MPI (ranks share a host)");
            return SELSYNC_OK;
        }
    }
    ok = tcp_listen(getenv("SELSYNC_RING_IFNAME"), &lfd, &me, ifn, why, sizeof why) == 0;
    uint32_t mine[3] = {me.sin_addr.s_addr, me.sin_port, (uint32_t)ok}, *peers = malloc((size_t)c->size * sizeof mine);
    if (!peers || MPI_Allgather(mine, 3, MPI_UINT32_T, peers, 3, MPI_UINT32_T, c->comm) != MPI_SUCCESS) ok = 0;
    int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    /* only the left neighbour may connect: from its address, with the job's token */
    tcp_peer self = {c->rank, me.sin_addr, {0}}, expect = {left, {0}, {0}};
    if (ok && !links_job_token(c, self.token)) {
        snprintf(why, sizeof why, "no random bytes for the job's token: %s", strerror(errno));
        ok = 0;
    }
    if (MPI_Bcast(self.token, TCP_TOKEN_BYTES, MPI_BYTE, 0, c->comm) != MPI_SUCCESS) ok = 0;
    memcpy(expect.token, self.token, TCP_TOKEN_BYTES);
    if (peers) expect.addr.s_addr = peers[3 * left];
    if (ok && peers[3 * right + 2]) {
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = (in_port_t)peers[3 * right + 1]};
        to.sin_addr.s_addr = peers[3 * right];
        ok = tcp_connect(&self, &to, &c->tcp_out, why, sizeof why) == 0;
    } else if (ok) {
        snprintf(why, sizeof why, "rank %d has no listening socket", right);
        ok = 0;
    }
    free(peers);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, c->comm); /* every connection is queued before any accept */
    if (all) ok = tcp_accept(lfd, &expect, 30, links_ignored_connection, c, &c->tcp_in, why, sizeof why) == 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, c->comm);
    if (lfd >= 0) close(lfd);
    if (all && want == LINKS_AUTO) { /* the faster of the two */
        size_t n = (size_t)1 << 20;
        float *buf = calloc(n, sizeof *buf);
        int out = c->tcp_out;
        double t_tcp = buf ? links_trial(c, buf, n) : 1e30, t_mpi;
        c->tcp_out = -1;
        t_mpi = buf ? links_trial(c, buf, n) : 0;
        free(buf);
        c->bytes = c->bytes_bg = 0;
        if (t_tcp < t_mpi) {
            c->tcp_out = out;
            snprintf(c->links, sizeof c->links, "TCP on %s (4 MiB sums: %.1f ms, over MPI %.1f ms)", ifn, 1e3 * t_tcp,
                     1e3 * t_mpi);
            return SELSYNC_OK;
        }
        close(out);
        close(c->tcp_in);
        c->tcp_in = -1;
        snprintf(c->links, sizeof c->links, "MPI (4 MiB sums: %.1f ms, over TCP on %s %.1f ms)", 1e3 * t_mpi, ifn,
                 1e3 * t_tcp);
        return SELSYNC_OK;
    }
    if (all) {
        snprintf(c->links, sizeof c->links, "TCP on %s", ifn);
        return SELSYNC_OK;
    }
    if (c->tcp_out >= 0) close(c->tcp_out);
    if (c->tcp_in >= 0) close(c->tcp_in);
    c->tcp_out = c->tcp_in = -1;
    if (want == LINKS_TCP) {
        ctx_error(c, "SELSYNC_RING_LINKS=tcp: rank %d: the ring's TCP links could not be made: %s", c->rank,
                  ok ? "a link of another rank failed" : why);
        return SELSYNC_ECOMM;
    }
    snprintf(c->links, sizeof c->links, "MPI (TCP links failed: %.150s)", ok ? "on another rank" : why);
    return SELSYNC_OK;
}
