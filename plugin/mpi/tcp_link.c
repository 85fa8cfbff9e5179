/* TCP sockets for the ring's bulk data: see tcp_link.h. */
#define _GNU_SOURCE /* accept4 */
#include "tcp_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 100
#define CONNECT_S 10
#define GREETING_S 3 /* a connection's greeting must arrive within this */

/* A greeting: the rank (network order), then the job's token. */
typedef struct greeting {
    uint32_t rank;
    unsigned char token[TCP_TOKEN_BYTES];
} greeting;

static int fail(char *err, size_t len, const char *what)
{
    snprintf(err, len, "%s: %s", what, strerror(errno));
    return -1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Non-blocking, no Nagle delay (a ring step's last bytes go at once). */
static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int tcp_listen(const char *ifname, int *fd, struct sockaddr_in *addr, char *name, char *err, size_t len)
{
    struct ifaddrs *all, *lo = NULL, *pick = NULL;
    socklen_t alen = sizeof *addr;
    *fd = -1;
    if (getifaddrs(&all) != 0) return fail(err, len, "getifaddrs");
    for (struct ifaddrs *i = all; i && !pick; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
        if (ifname && *ifname) {
            if (strcmp(i->ifa_name, ifname) == 0) pick = i;
        } else if (i->ifa_flags & IFF_LOOPBACK) {
            if (!lo) lo = i;
        } else {
            pick = i;
        }
    }
    if (!pick) pick = ifname && *ifname ? NULL : lo;
    if (!pick) {
        freeifaddrs(all);
        snprintf(err, len, "no interface %s%s%s with an IPv4 address is up", ifname && *ifname ? "'" : "",
                 ifname && *ifname ? ifname : "", ifname && *ifname ? "'" : "");
        return -1;
    }
    memcpy(addr, pick->ifa_addr, sizeof *addr);
    snprintf(name, 16, "%s", pick->ifa_name);
    freeifaddrs(all);
    addr->sin_port = 0;
    if ((*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) return fail(err, len, "socket");
    if (bind(*fd, (struct sockaddr *)addr, sizeof *addr) != 0 || listen(*fd, 8) != 0 ||
        getsockname(*fd, (struct sockaddr *)addr, &alen) != 0) {
        fail(err, len, "bind/listen");
        close(*fd);
        *fd = -1;
        return -1;
    }
    return 0;
}

/* Writes or reads all n bytes of a small message on a blocking socket. */
static int whole(int fd, void *buf, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = out ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL) : recv(fd, (char *)buf + done, n - done, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            if (k == 0) errno = ECONNRESET;
            return -1;
        }
        done += (size_t)k;
    }
    return 0;
}

/* Reads all n bytes of a small message from a blocking socket within s
 * seconds; -1 on a timeout, an error or the end of the stream. */
static int read_within(int fd, void *buf, size_t n, double s)
{
    double end = now_s() + s;
    for (size_t done = 0; done < n;) {
        struct pollfd p = {fd, POLLIN, 0};
        double left = end - now_s();
        int r = left > 0 ? poll(&p, 1, (int)(left * 1000) + 1) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t k = recv(fd, (char *)buf + done, n - done, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        done += (size_t)k;
    }
    return 0;
}

int tcp_connect(const tcp_peer *me, const struct sockaddr_in *addr, int *fd, char *err, size_t len)
{
    greeting hello = {htonl((uint32_t)me->rank), {0}};
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_addr = me->addr};
    char where[64], to[INET_ADDRSTRLEN] = "?";
    memcpy(hello.token, me->token, sizeof hello.token);
    inet_ntop(AF_INET, &addr->sin_addr, to, sizeof to);
    snprintf(where, sizeof where, "connect to %s:%d", to, ntohs(addr->sin_port));
    if ((*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) return fail(err, len, "socket");
    /* from the address the listener expects; within CONNECT_S (a firewall
     * that drops the packets would otherwise hold it for minutes) */
    int rc = bind(*fd, (const struct sockaddr *)&from, sizeof from), e = 0;
    if (rc == 0) rc = connect(*fd, (const struct sockaddr *)addr, sizeof *addr);
    socklen_t elen = sizeof e;
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {*fd, POLLOUT, 0};
        rc = poll(&p, 1, CONNECT_S * 1000);
        if (rc == 0) errno = ETIMEDOUT;
        rc = rc == 1 && getsockopt(*fd, SOL_SOCKET, SO_ERROR, &e, &elen) == 0 && e == 0 ? 0 : -1;
        if (e) errno = e;
    }
    if (rc == 0) fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
    if (rc != 0 || whole(*fd, &hello, sizeof hello, 1) != 0) {
        fail(err, len, where);
        close(*fd);
        *fd = -1;
        return -1;
    }
    tune(*fd);
    return 0;
}

int tcp_accept(int lfd, const tcp_peer *expect, double timeout_s, void (*ignored)(void *user, const char *why),
               void *user, int *fd, char *err, size_t len)
{
    double end = now_s() + timeout_s;
    char want[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &expect->addr, want, sizeof want);
    *fd = -1;
    for (;;) {
        struct pollfd p = {lfd, POLLIN, 0};
        double left = end - now_s();
        int r = left > 0 ? poll(&p, 1, (int)(left * 1000) + 1) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            snprintf(err, len, "no connection from rank %d (%s) within %.0f s", expect->rank, want, timeout_s);
            return -1;
        }
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        int c = r < 0 ? -1 : accept4(lfd, (struct sockaddr *)&from, &flen, SOCK_CLOEXEC);
        if (c < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
        if (c < 0) return fail(err, len, "accept");
        greeting hello;
        char who[INET_ADDRSTRLEN + 8] = "?", why[160];
        inet_ntop(AF_INET, &from.sin_addr, who, INET_ADDRSTRLEN);
        snprintf(who + strlen(who), 8, ":%d", ntohs(from.sin_port));
        left = end - now_s();
        if (from.sin_addr.s_addr != expect->addr.s_addr)
            snprintf(why, sizeof why, "from %s: not rank %d's address %s", who, expect->rank, want);
        else if (read_within(c, &hello, sizeof hello, left < GREETING_S ? left : GREETING_S) != 0)
            snprintf(why, sizeof why, "from %s: no greeting within %d s", who, GREETING_S);
        else if ((int)ntohl(hello.rank) != expect->rank)
            snprintf(why, sizeof why, "from %s: it says rank %u, not rank %d", who, ntohl(hello.rank), expect->rank);
        else if (memcmp(hello.token, expect->token, sizeof hello.token) != 0)
            snprintf(why, sizeof why, "from %s: without this job's token", who);
        else {
            tune(c);
            *fd = c;
            return 0;
        }
        close(c);
        if (ignored) ignored(user, why);
    }
}

/* Moves up to what the socket takes of pieces v[*at ..] (*off into the
 * first), advancing them and telling hooks->arrived of each received one;
 * 0, 1 when the socket is full (or empty), -1 on error or a closed
 * connection, -2 when arrived said stop. */
static int move(int fd, const struct iovec *v, int n, int *at, size_t *off, int out, const tcp_hooks *h)
{
    while (*at < n) {
        size_t left = v[*at].iov_len - *off;
        char *p = (char *)v[*at].iov_base + *off;
        ssize_t k = left == 0 ? 0 : out ? send(fd, p, left, MSG_NOSIGNAL) : recv(fd, p, left, 0);
        if (left && k <= 0) {
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
            if (k < 0 && errno == EINTR) continue;
            if (k == 0) errno = ECONNRESET;
            return -1;
        }
        *off += (size_t)k;
        if (*off == v[*at].iov_len) {
            if (!out && h && h->arrived && h->arrived(h->user, *at)) return -2;
            ++*at;
            *off = 0;
        }
    }
    return 0;
}

int tcp_transfer(int out, const struct iovec *send_v, int n_out, int in, const struct iovec *recv_v, int n_in,
                 const tcp_hooks *hooks, char *err, size_t len)
{
    int so = 0, ri = 0;
    size_t soff = 0, roff = 0;
    double t0 = 0, next = 0;
    for (;;) {
        int ws = move(out, send_v, n_out, &so, &soff, 1, hooks);
        int wr = ws < 0 ? 0 : move(in, recv_v, n_in, &ri, &roff, 0, hooks);
        if (ws < 0) return fail(err, len, "sending to the right neighbour");
        if (wr == -2) {
            snprintf(err, len, "stopped where a received piece was used");
            return -1;
        }
        if (wr < 0) return fail(err, len, "receiving from the left neighbour");
        if (ws == 0 && wr == 0) return 0;
        struct pollfd p[2] = {{out, ws ? POLLOUT : 0, 0}, {in, wr ? POLLIN : 0, 0}};
        int r = poll(p, 2, TICK_MS);
        if (r < 0 && errno != EINTR) return fail(err, len, "poll");
        if (r == 0 && hooks && hooks->tick) {
            double t = now_s();
            if (t0 == 0) t0 = next = t - TICK_MS / 1000.0;
            if (t >= next) {
                next = t + TICK_MS / 1000.0;
                if (hooks->tick(hooks->user, t - t0, wr != 0)) {
                    snprintf(err, len, "stopped by the stall watch");
                    return -1;
                }
            }
        }
    }
}
