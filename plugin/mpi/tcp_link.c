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

int tcp_connect(const struct sockaddr_in *addr, int rank, int *fd, char *err, size_t len)
{
    uint32_t id = htonl((uint32_t)rank);
    char where[64];
    snprintf(where, sizeof where, "connect to %s:%d", inet_ntoa(addr->sin_addr), ntohs(addr->sin_port));
    if ((*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) return fail(err, len, "socket");
    /* within CONNECT_S (a firewall that drops the packets would otherwise hold it for minutes) */
    int rc = connect(*fd, (const struct sockaddr *)addr, sizeof *addr), e = 0;
    socklen_t elen = sizeof e;
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {*fd, POLLOUT, 0};
        rc = poll(&p, 1, CONNECT_S * 1000);
        if (rc == 0) errno = ETIMEDOUT;
        rc = rc == 1 && getsockopt(*fd, SOL_SOCKET, SO_ERROR, &e, &elen) == 0 && e == 0 ? 0 : -1;
        if (e) errno = e;
    }
    if (rc == 0) fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
    if (rc != 0 || whole(*fd, &id, sizeof id, 1) != 0) {
        fail(err, len, where);
        close(*fd);
        *fd = -1;
        return -1;
    }
    tune(*fd);
    return 0;
}

int tcp_accept(int lfd, int expect, double timeout_s, int *fd, char *err, size_t len)
{
    struct pollfd p = {lfd, POLLIN, 0};
    uint32_t id = 0;
    *fd = -1;
    int r = poll(&p, 1, (int)(timeout_s * 1000));
    if (r == 0) {
        snprintf(err, len, "no connection from rank %d within %.0f s", expect, timeout_s);
        return -1;
    }
    if (r < 0 || (*fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) return fail(err, len, "accept");
    if (whole(*fd, &id, sizeof id, 0) != 0 || (int)ntohl(id) != expect) {
        if (id) snprintf(err, len, "the connection came from rank %d, not rank %d", (int)ntohl(id), expect);
        else fail(err, len, "reading the connecting rank");
        close(*fd);
        *fd = -1;
        return -1;
    }
    tune(*fd);
    return 0;
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
