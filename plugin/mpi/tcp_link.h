/* TCP sockets beside MPI for the ring's bulk data (comm_mpi.c, sum
 * algorithm tcp): one connection to the right neighbour that this rank
 * writes, one from the left neighbour that it reads. Plain POSIX sockets;
 * the addresses are exchanged by the caller (over MPI). Functions return 0,
 * or -1 with a message in err. */
#ifndef SELSYNC_TCP_LINK_H
#define SELSYNC_TCP_LINK_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/uio.h>

/* A listening socket on the IPv4 address of interface ifname (NULL or "":
 * the first interface that is up, not loopback, with an IPv4 address,
 * else the loopback one), any free port: *fd and the address to connect
 * to in *addr; the interface's name in name (at least 16 bytes). */
int tcp_listen(const char *ifname, int *fd, struct sockaddr_in *addr, char *name, char *err, size_t len);

/* A rank as the ring's links know it: its number, the address it listens
 * on and connects from, and the job's random token (the same on every rank,
 * exchanged over MPI), which its greeting carries. */
#define TCP_TOKEN_BYTES 16
typedef struct tcp_peer {
    int rank;
    struct in_addr addr;
    unsigned char token[TCP_TOKEN_BYTES];
} tcp_peer;

/* Connects from me->addr (any port) to addr, within 10 s, and greets: me's
 * rank and token. */
int tcp_connect(const tcp_peer *me, const struct sockaddr_in *addr, int *fd, char *err, size_t len);

/* Accepts on lfd, within timeout_s, the connection of `expect`: from its
 * address, greeting with its rank and token within a few seconds. Any
 * other connection is closed and told to ignored(user, why) (may be NULL),
 * and the wait goes on for the expected one. */
int tcp_accept(int lfd, const tcp_peer *expect, double timeout_s, void (*ignored)(void *user, const char *why),
               void *user, int *fd, char *err, size_t len);

/* What a transfer calls (either may be NULL): tick about every 100 ms
 * while it waits, with the seconds waited so far and whether it still
 * waits for data from the left (else to send to the right); arrived once
 * receive piece k is complete (the sending goes on in the socket's buffer
 * meanwhile). A non-zero return ends the transfer with -1. */
typedef struct tcp_hooks {
    int (*tick)(void *user, double waited, int receiving);
    int (*arrived)(void *user, int k);
    void *user;
} tcp_hooks;

/* Sends the n_out pieces on `out` while receiving the n_in pieces from
 * `in`, both at once (non-blocking sockets, poll), until all are done. */
int tcp_transfer(int out, const struct iovec *send, int n_out, int in, const struct iovec *recv, int n_in,
                 const tcp_hooks *hooks, char *err, size_t len);

#endif
