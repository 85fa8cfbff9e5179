/* The ring's TCP links (plugin/mpi/tcp_link.c) on the loopback interface,
 * without MPI: a listener, connections that name their rank, full-duplex
 * transfers of pieces with each received piece reported in order, and the
 * errors of a wrong rank, a missing interface and a peer that goes away. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

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

static void connect_pair(pair *p)
{
    int la, lb;
    struct sockaddr_in aa, ab;
    char name[16], err[200];
    assert_int_equal(tcp_listen("lo", &la, &aa, name, err, sizeof err), 0);
    assert_string_equal(name, "lo");
    assert_int_equal(tcp_listen("lo", &lb, &ab, name, err, sizeof err), 0);
    assert_int_equal(tcp_connect(&ab, 0, &p->a[0], err, sizeof err), 0); /* rank 0 -> rank 1 */
    assert_int_equal(tcp_connect(&aa, 1, &p->b[0], err, sizeof err), 0); /* rank 1 -> rank 0 */
    assert_int_equal(tcp_accept(la, 1, 5, &p->a[1], err, sizeof err), 0);
    assert_int_equal(tcp_accept(lb, 0, 5, &p->b[1], err, sizeof err), 0);
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

static void test_wrong_rank_refused(void **state)
{
    (void)state;
    int l, c, s;
    struct sockaddr_in addr;
    char name[16], err[200];
    assert_int_equal(tcp_listen("lo", &l, &addr, name, err, sizeof err), 0);
    assert_int_equal(tcp_connect(&addr, 3, &c, err, sizeof err), 0);
    assert_int_equal(tcp_accept(l, 2, 5, &s, err, sizeof err), -1);
    assert_string_equal(err, "the connection came from rank 3, not rank 2");
    assert_int_equal(tcp_accept(l, 2, 0.2, &s, err, sizeof err), -1); /* nobody else connects */
    assert_string_equal(err, "no connection from rank 2 within 0 s");
    close(c);
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
        cmocka_unit_test(test_wrong_rank_refused),
        cmocka_unit_test(test_missing_interface),
        cmocka_unit_test(test_peer_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
