/* The ring's TCP links (plugin/mpi/tcp_link.c) on the loopback interface,
 * without MPI: a listener, connections that name their rank, full-duplex
 * transfers of pieces with each received piece reported in order, and the
 * errors of a wrong rank, a missing interface and a peer that goes away. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tcp_link.h"

/* Two ranks' links on lo: a[0] writes to b[1], b[0] writes to a[1]
 * ([0]: to the right, [1]: from the left). */
typedef struct pair {
    int a[2], b[2];
} pair;

/* rank r of a job on the loopback interface, with the token 1, 2, ..., 16 */
static tcp_peer loopback_rank(int r)
{
    tcp_peer p = {r, {htonl(INADDR_LOOPBACK)}, {0}};
    for (int i = 0; i < TCP_TOKEN_BYTES; i++) p.token[i] = (unsigned char)(i + 1);
    return p;
}

static void connect_pair(pair *p)
{
    int la, lb;
    struct sockaddr_in aa, ab;
    char name[16], err[200];
    tcp_peer r0 = loopback_rank(0), r1 = loopback_rank(1);
    assert_int_equal(tcp_listen("lo", &la, &aa, name, err, sizeof err), 0);
    assert_string_equal(name, "lo");
    assert_int_equal(tcp_listen("lo", &lb, &ab, name, err, sizeof err), 0);
    assert_int_equal(tcp_connect(&r0, &ab, &p->a[0], err, sizeof err), 0); /* rank 0 -> rank 1 */
    assert_int_equal(tcp_connect(&r1, &aa, &p->b[0], err, sizeof err), 0); /* rank 1 -> rank 0 */
    assert_int_equal(tcp_accept(la, &r1, 5, NULL, NULL, &p->a[1], err, sizeof err), 0);
    assert_int_equal(tcp_accept(lb, &r0, 5, NULL, NULL, &p->b[1], err, sizeof err), 0);
    close(la);
    close(lb);
}

static void close_pair(pair *p)
{
    for (int i = 0; i < 2; i++) {
        if (p->a[i] >= 0) close(p->a[i]);
        if (p->b[i] >= 0) close(p->b[i]);
    }
}

enum { N = 3 << 20, PIECE = 1 << 20 }; /* 3 MiB each way: more than the sockets' buffers */

typedef struct side {
    int out, in, rc, arrived[8], n_arrived;
    unsigned char *send, *recv;
    char err[200];
} side;

static int note_arrival(void *user, int k)
{
    side *s = user;
    if (s->n_arrived < 8) s->arrived[s->n_arrived++] = k;
    return 0;
}

/* Sends `send` in two pieces while receiving into `recv` in 1 MiB pieces. */
static void *transfer(void *arg)
{
    side *s = arg;
    struct iovec out[2] = {{s->send, 1000}, {s->send + 1000, N - 1000}};
    struct iovec in[3] = {{s->recv, PIECE}, {s->recv + PIECE, PIECE}, {s->recv + 2 * PIECE, PIECE}};
    tcp_hooks hooks = {NULL, note_arrival, s};
    s->rc = tcp_transfer(s->out, out, 2, s->in, in, 3, &hooks, s->err, sizeof s->err);
    return NULL;
}

static void test_full_duplex_transfer(void **state)
{
    (void)state;
    static unsigned char sa[N], sb[N], ra[N], rb[N];
    pair p;
    pthread_t t;
    connect_pair(&p);
    for (size_t i = 0; i < N; i++) {
        sa[i] = (unsigned char)(i * 7 + 1);
        sb[i] = (unsigned char)(i * 13 + 5);
    }
    side a = {.out = p.a[0], .in = p.a[1], .send = sa, .recv = ra};
    side b = {.out = p.b[0], .in = p.b[1], .send = sb, .recv = rb};
    assert_int_equal(pthread_create(&t, NULL, transfer, &b), 0);
    transfer(&a);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, 0);
    assert_int_equal(b.rc, 0);
    assert_memory_equal(ra, sb, N);
    assert_memory_equal(rb, sa, N);
    assert_int_equal(a.n_arrived, 3); /* each piece once, in order */
    for (int k = 0; k < 3; k++) assert_int_equal(a.arrived[k], k);
    close_pair(&p);
}

/* What the listener ignored, in order. */
typedef struct ignored_log {
    char why[4][160];
    int n;
} ignored_log;

static void note_ignored(void *user, const char *why)
{
    ignored_log *log = user;
    if (log->n < 4) snprintf(log->why[log->n], sizeof log->why[0], "%s", why);
    log->n++;
}

/* Connects as `who` to addr and returns the socket. */
static int connect_as(tcp_peer who, const struct sockaddr_in *addr)
{
    int c;
    char err[200];
    assert_int_equal(tcp_connect(&who, addr, &c, err, sizeof err), 0);
    return c;
}

/* Stray connections that arrive before the expected rank 2 (another
 * address, another rank's number, another job's token, no greeting at all)
 * are ignored and named; the real one, arriving last, is accepted. */
static void test_only_the_expected_peer(void **state)
{
    (void)state;
    int l, s, stray[4];
    struct sockaddr_in addr;
    char name[16], err[200];
    ignored_log log = {.n = 0};
    tcp_peer other_host = loopback_rank(2), wrong_rank = loopback_rank(3), other_job = loopback_rank(2);
    other_host.addr.s_addr = htonl(INADDR_LOOPBACK + 1); /* 127.0.0.2: as another host */
    other_job.token[5] ^= 1;
    assert_int_equal(tcp_listen("lo", &l, &addr, name, err, sizeof err), 0);
    stray[0] = connect_as(other_host, &addr);
    stray[1] = connect_as(wrong_rank, &addr);
    stray[2] = connect_as(other_job, &addr);
    stray[3] = socket(AF_INET, SOCK_STREAM, 0); /* connects and says nothing */
    assert_int_equal(connect(stray[3], (struct sockaddr *)&addr, sizeof addr), 0);
    int real = connect_as(loopback_rank(2), &addr);
    tcp_peer expect = loopback_rank(2);
    assert_int_equal(tcp_accept(l, &expect, 10, note_ignored, &log, &s, err, sizeof err), 0);
    assert_int_equal(log.n, 4);
    assert_non_null(strstr(log.why[0], "from 127.0.0.2:"));
    assert_non_null(strstr(log.why[0], "not rank 2's address 127.0.0.1"));
    assert_non_null(strstr(log.why[1], "it says rank 3, not rank 2"));
    assert_non_null(strstr(log.why[2], "without this job's token"));
    assert_non_null(strstr(log.why[3], "no greeting within"));
    /* the accepted socket is the real peer's: a byte sent there arrives */
    char byte = 'x', got = 0;
    assert_int_equal(send(real, &byte, 1, 0), 1);
    struct pollfd p = {s, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(recv(s, &got, 1, 0), 1);
    assert_int_equal(got, 'x');
    /* nobody else connects: a timeout naming the rank and its address */
    int none;
    assert_int_equal(tcp_accept(l, &expect, 0.2, NULL, NULL, &none, err, sizeof err), -1);
    assert_string_equal(err, "no connection from rank 2 (127.0.0.1) within 0 s");
    for (int i = 0; i < 4; i++) close(stray[i]);
    close(real);
    close(s);
    close(l);
}

static void test_missing_interface(void **state)
{
    (void)state;
    int l;
    struct sockaddr_in addr;
    char name[16], err[200];
    assert_int_equal(tcp_listen("nosuch0", &l, &addr, name, err, sizeof err), -1);
    assert_string_equal(err, "no interface 'nosuch0' with an IPv4 address is up");
    assert_int_equal(l, -1);
}

static void test_peer_gone(void **state)
{
    (void)state;
    static unsigned char buf[N];
    pair p;
    char err[200];
    connect_pair(&p);
    close(p.b[0]); /* rank 1 stops writing to rank 0 */
    p.b[0] = -1;
    struct iovec out = {buf, 10}, in = {buf + 10, 10};
    assert_int_equal(tcp_transfer(p.a[0], &out, 1, p.a[1], &in, 1, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "receiving from the left neighbour: "));
    close_pair(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_duplex_transfer),
        cmocka_unit_test(test_only_the_expected_peer),
        cmocka_unit_test(test_missing_interface),
        cmocka_unit_test(test_peer_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
