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

/* Connects to addr (within 10 s) and sends this rank's number (the
 * listener checks it). */
int tcp_connect(const struct sockaddr_in *addr, int rank, int *fd, char *err, size_t len);

/* Accepts on lfd, within timeout_s, the connection of rank `expect`. */
int tcp_accept(int lfd, int expect, double timeout_s, int *fd, char *err, size_t len);

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
