/* The network event hook of the patch series: update_network reports
 * BEFORE_UPDATE with the batch's gradients accumulated and the parameters
 * not yet changed, then AFTER_UPDATE with the parameters updated, once per
 * effective batch (every `subdivisions` calls of train_network_datum);
 * load_network reports NETWORK_LOADED; BEFORE_SAVE can veto a save. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "darknet.h"

static const char *tiny_cfg =
    "[net]\nbatch=4\nsubdivisions=2\nheight=6\nwidth=6\nchannels=1\n"
    "learning_rate=0.1\nmomentum=0.9\ndecay=0.0005\n\n"
    "[convolutional]\nfilters=3\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n"
    "[connected]\noutput=2\nactivation=linear\n\n[softmax]\n";

typedef struct record {
    int before, after;     /* calls so far */
    int order_ok;          /* after never ran without a preceding before */
    int seen_at_before;    /* net->seen at the last before_update */
    double update_norm;    /* sum |weight_updates| of layer 0 at before */
    float w0_before;       /* a weight of layer 0 at before and after */
    float w0_after;
} record;

static void before(network *net, record *r)
{
    r->order_ok &= (r->before == r->after);
    r->before++;
    r->seen_at_before = (int)*net->seen;
    layer l = net->layers[0];
    r->update_norm = 0;
    for (int i = 0; i < l.nweights; ++i) r->update_norm += fabs(l.weight_updates[i]);
    r->w0_before = l.weights[0];
}

static void after(network *net, record *r)
{
    r->after++;
    r->order_ok &= (r->before == r->after);
    r->w0_after = net->layers[0].weights[0];
}

static int hook(network *net, network_event event, void *arg, void *user)
{
    record *r = user;
    if (event == BEFORE_UPDATE) {
        assert_non_null(arg);
        assert_int_equal(((update_args *)arg)->batch, net->batch * net->subdivisions);
        before(net, r);
    } else if (event == AFTER_UPDATE) {
        after(net, r);
    }
    return 0;
}

static network *tiny_network(void)
{
    char path[] = "/tmp/selsync-hooks-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, tiny_cfg, strlen(tiny_cfg)), (ssize_t)strlen(tiny_cfg));
    close(fd);
    network *net = parse_network_cfg(path);
    unlink(path);
    return net;
}

static void fill_batch(network *net, int step)
{
    for (int i = 0; i < net->inputs * net->batch; ++i)
        net->input[i] = (float)((i * 7 + step * 3) % 11) / 11.0f;
    memset(net->truth, 0, (size_t)net->truths * net->batch * sizeof(float));
    for (int b = 0; b < net->batch; ++b) net->truth[b * net->truths + (b + step) % 2] = 1;
}

static void test_hooks_run_once_per_effective_batch(void **state)
{
    (void)state;
    network *net = tiny_network();
    record r = {.order_ok = 1};
    net->hook = hook;
    net->hook_user = &r;
    net->train = 1;
    for (int step = 0; step < 6; ++step) {
        fill_batch(net, step);
        train_network_datum(net);
        /* subdivisions=2: an update on every second call */
        assert_int_equal(r.before, (step + 1) / 2);
        assert_int_equal(r.after, (step + 1) / 2);
    }
    assert_true(r.order_ok);
    assert_int_equal(r.seen_at_before, 6 * net->batch);
    assert_true(r.update_norm > 0);            /* gradients were there */
    assert_true(r.w0_before != r.w0_after);    /* and were applied in between */
    free_network(net);
}

static void test_no_hooks_is_stock_behaviour(void **state)
{
    (void)state;
    network *a = tiny_network(), *b = tiny_network();
    record r = {.order_ok = 1};
    /* same weights in both, then one trains with hooks that do nothing */
    for (int i = 0; i < a->layers[0].nweights; ++i) b->layers[0].weights[i] = a->layers[0].weights[i];
    for (int i = 0; i < a->layers[1].nweights; ++i) b->layers[1].weights[i] = a->layers[1].weights[i];
    b->hook = hook;
    b->hook_user = &r;
    a->train = b->train = 1;
    for (int step = 0; step < 4; ++step) {
        fill_batch(a, step);
        fill_batch(b, step);
        train_network_datum(a);
        train_network_datum(b);
    }
    assert_int_equal(r.after, 2);
    assert_memory_equal(a->layers[1].weights, b->layers[1].weights,
                        a->layers[1].nweights * sizeof(float));
    free_network(a);
    free_network(b);
}

static int veto_saves(network *net, network_event event, void *arg, void *user)
{
    (void)net;
    if (event == BEFORE_SAVE) {
        ++*(int *)user;
        return strstr((const char *)arg, "veto") != NULL;
    }
    return 0;
}

static void test_before_save_can_skip_a_save(void **state)
{
    (void)state;
    network *net = tiny_network();
    int calls = 0;
    net->hook = veto_saves;
    net->hook_user = &calls;
    char kept[] = "/tmp/selsync-hooks-kept.weights", vetoed[] = "/tmp/selsync-hooks-veto.weights";
    unlink(kept);
    unlink(vetoed);
    save_weights(net, kept);
    save_weights(net, vetoed);
    assert_int_equal(calls, 2);
    assert_int_equal(access(kept, F_OK), 0);
    assert_int_not_equal(access(vetoed, F_OK), 0);
    unlink(kept);
    free_network(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hooks_run_once_per_effective_batch),
        cmocka_unit_test(test_no_hooks_is_stock_behaviour),
        cmocka_unit_test(test_before_save_can_skip_a_save),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
