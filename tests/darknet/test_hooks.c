/* The network event hooks of the patch series: update_network reports
 * BEFORE_UPDATE with the batch's gradients accumulated and the parameters
 * not yet changed, then AFTER_UPDATE with the parameters updated, once per
 * effective batch (every `subdivisions` calls of train_network_datum);
 * BEFORE_SAVE can veto a save. Hooks added with add_network_hook run in the
 * order they were added, each for the events of its mask only, and a veto
 * from any of them skips the save. A hook's negative return ends the
 * program with EXIT_FAILURE before the hooks after it run. The update
 * leaves in each gradient buffer the residual the plugin describes to its
 * engine (selsync_host_update): momentum * (grad - decay * batch * weight)
 * for weights, momentum * grad for biases and scales, bit for bit. A hook
 * that returns 1 at BEFORE_UPDATE has updated the layers itself: the
 * engine, given the rates (selsync_host_update), applies Darknet's update
 * in the pass that measures the gradient, and the network it trains ends
 * with the same bits as Darknet's own update gives. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "darknet.h"
#include "selsync/comm.h"
#include "selsync/config.h"
#include "selsync/engine.h"
#include "tensors.h"

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

#define UPDATES (NETWORK_EVENT_BIT(BEFORE_UPDATE) | NETWORK_EVENT_BIT(AFTER_UPDATE))

static network *network_of(const char *cfg)
{
    char path[] = "/tmp/selsync-hooks-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, cfg, strlen(cfg)), (ssize_t)strlen(cfg));
    close(fd);
    network *net = parse_network_cfg(path);
    unlink(path);
    return net;
}

static network *tiny_network(void)
{
    return network_of(tiny_cfg);
}

static void fill_batch(network *net, int step)
{
    for (int i = 0; i < net->inputs * net->batch; ++i)
        net->input[i] = (float)((i * 7 + step * 3) % 11) / 11.0f;
    memset(net->truth, 0, (size_t)net->truths * net->batch * sizeof(float));
    for (int b = 0; b < net->batch; ++b) net->truth[b * net->truths + (b + step) % 2] = 1;
}

/* steps calls of train_network_datum on a and b, each with the same batch. */
static void train_side_by_side(network *a, network *b, int steps)
{
    a->train = b->train = 1;
    for (int step = 0; step < steps; ++step) {
        fill_batch(a, step);
        fill_batch(b, step);
        train_network_datum(a);
        train_network_datum(b);
    }
}

static void test_hooks_run_once_per_effective_batch(void **state)
{
    (void)state;
    network *net = tiny_network();
    record r = {.order_ok = 1};
    assert_int_equal(add_network_hook(net, hook, &r, UPDATES), 0);
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
    assert_int_equal(add_network_hook(b, hook, &r, UPDATES), 0);
    train_side_by_side(a, b, 4);
    assert_int_equal(r.after, 2);
    assert_memory_equal(a->layers[1].weights, b->layers[1].weights,
                        a->layers[1].nweights * sizeof(float));
    free_network(a);
    free_network(b);
}

/* A layer's gradient buffers and their parameters: weights (decayed),
 * biases, scales. */
enum { RESIDUAL_ARRAYS = 3, RESIDUAL_MAX = 4096 };
typedef struct residual_check {
    float want[2][RESIDUAL_ARRAYS][RESIDUAL_MAX]; /* per layer and array */
    int checked;                                  /* values compared at AFTER_UPDATE */
} residual_check;

static void layer_arrays(layer *l, float **grad, float **param, int *n)
{
    grad[0] = l->weight_updates, param[0] = l->weights, n[0] = l->nweights ? l->nweights : l->inputs * l->outputs;
    grad[1] = l->bias_updates, param[1] = l->biases, n[1] = l->type == CONVOLUTIONAL ? l->n : l->outputs;
    grad[2] = l->scale_updates, param[2] = l->scales, n[2] = l->batch_normalize ? n[1] : 0;
}

static int residual_hook(network *net, network_event event, void *arg, void *user)
{
    residual_check *c = user;
    for (int i = 0; i < 2; ++i) {
        float *grad[RESIDUAL_ARRAYS], *param[RESIDUAL_ARRAYS];
        int n[RESIDUAL_ARRAYS];
        layer_arrays(&net->layers[i], grad, param, n);
        for (int k = 0; k < RESIDUAL_ARRAYS; ++k) {
            assert_true(n[k] <= RESIDUAL_MAX);
            if (event == BEFORE_UPDATE) { /* the plugin's description, from the update's arguments */
                update_args *u = arg;
                float momentum = u->momentum, decay = k == 0 ? -u->decay * u->batch : 0;
                for (int j = 0; j < n[k]; ++j) c->want[i][k][j] = (grad[k][j] + decay * param[k][j]) * momentum;
            } else {
                assert_memory_equal(c->want[i][k], grad[k], (size_t)n[k] * sizeof(float));
                c->checked += n[k];
            }
        }
    }
    return 0;
}

static void test_update_leaves_the_described_residual(void **state)
{
    (void)state;
    network *net = network_of("[net]\nbatch=4\nsubdivisions=1\nheight=6\nwidth=6\nchannels=1\n"
                              "learning_rate=0.1\nmomentum=0.9\ndecay=0.0005\n\n"
                              "[convolutional]\nbatch_normalize=1\nfilters=3\nsize=3\nstride=1\npad=1\n"
                              "activation=leaky\n\n[connected]\noutput=2\nactivation=linear\n\n[softmax]\n");
    static residual_check c;
    c.checked = 0;
    assert_int_equal(add_network_hook(net, residual_hook, &c, UPDATES), 0);
    net->train = 1;
    for (int step = 0; step < 4; ++step) {
        fill_batch(net, step);
        train_network_datum(net);
    }
    /* 4 updates of 27 + 3 + 3 (convolution, BatchNorm) and 216 + 2 (connected) values */
    assert_int_equal(c.checked, 4 * (27 + 3 + 3 + 216 + 2));
    free_network(net);
}

/* The engine as the plugin drives it, with the update's rates. */
typedef struct engine_hook {
    selsync_engine *e;
    selsync_tensor *t;
    size_t n;
    float rates[16];
    int applied;        /* steps whose update the engine applied */
} engine_hook;

static int engine_hook_fn(network *net, network_event event, void *arg, void *user)
{
    engine_hook *h = user;
    if (event == AFTER_UPDATE) return selsync_engine_after_update(h->e) == SELSYNC_OK ? 0 : -1;
    update_args *u = arg;
    darknet_sgd_rates(net, h->t, h->n, u, h->rates);
    selsync_host_update sgd = {u->momentum, -u->decay * u->batch, h->rates};
    selsync_engine_note_host_update(h->e, &sgd);
    if (selsync_engine_before_update(h->e, *net->cost, u->learning_rate) != SELSYNC_OK) return -1;
    h->applied += selsync_engine_update_applied(h->e);
    return selsync_engine_update_applied(h->e);
}

/* One method's run of 6 steps: the engine applies every update, and both
 * networks end with the same params and residuals, bit for bit. */
static void engine_applies_darknets_update(const char *method)
{
    const char *cfg_text = "[net]\nbatch=4\nsubdivisions=1\nheight=6\nwidth=6\nchannels=1\n"
                           "learning_rate=0.1\nmomentum=0.9\ndecay=0.0005\n\n"
                           "[convolutional]\nbatch_normalize=1\nfilters=3\nsize=3\nstride=1\npad=1\n"
                           "activation=leaky\n\n[connected]\noutput=2\nactivation=linear\n\n[softmax]\n";
    network *a = network_of(cfg_text), *b = network_of(cfg_text);
    engine_hook h = {0};
    assert_true(darknet_update_is_sgd(b));
    assert_int_equal(darknet_map_network(b, &h.t, &h.n), 0);
    assert_true(h.n <= 16);
    selsync_tensor *ta = NULL;
    size_t na = 0;
    assert_int_equal(darknet_map_network(a, &ta, &na), 0);
    assert_int_equal(na, h.n);
    for (size_t i = 0; i < h.n; ++i) memcpy(h.t[i].param, ta[i].param, h.t[i].count * sizeof(float));
    selsync_config cfg;
    char err[512];
    selsync_config_default(&cfg, "test.cfg", 1);
    assert_int_equal(selsync_config_set(&cfg, "method", method, 2, err, sizeof err), SELSYNC_OK);
    if (!strcmp(method, "selsync")) /* local steps after the warm-up */
        assert_int_equal(selsync_config_set(&cfg, "delta", "1e30", 3, err, sizeof err), SELSYNC_OK);
    assert_int_equal(selsync_config_finish(&cfg, err, sizeof err), SELSYNC_OK);
    selsync_comm comm = selsync_comm_single();
    selsync_model model = {h.t, h.n, (size_t)b->n, 1, 0};
    assert_int_equal(selsync_engine_create(&cfg, &comm, &model, &h.e, err, sizeof err), SELSYNC_OK);
    assert_int_equal(add_network_hook(b, engine_hook_fn, &h, UPDATES), 0);
    train_side_by_side(a, b, 6);
    assert_int_equal(h.applied, 6);
    for (size_t i = 0; i < h.n; ++i) { /* params, and the residual each grad buffer holds */
        assert_memory_equal(h.t[i].param, ta[i].param, h.t[i].count * sizeof(float));
        if (ta[i].grad) assert_memory_equal(h.t[i].grad, ta[i].grad, h.t[i].count * sizeof(float));
    }
    selsync_engine_destroy(h.e);
    free(h.t);
    free(ta);
    free_network(a);
    free_network(b);
}

/* In the pass that measures the change (selsync), and in the finiteness
 * check of the methods that measure none (local). */
static void test_engine_applies_darknets_update(void **state)
{
    (void)state;
    engine_applies_darknets_update("selsync");
    engine_applies_darknets_update("local");
}

/* The calls hooks received, in order: "name:event". */
typedef struct call_log {
    char text[512];
} call_log;

typedef struct named_hook {
    const char *name;
    call_log *log;
    const char *veto;  /* BEFORE_SAVE: vetoes file names containing this */
} named_hook;

static int log_call(network *net, network_event event, void *arg, void *user)
{
    named_hook *h = user;
    (void)net;
    char entry[32];
    snprintf(entry, sizeof entry, "%s:%d ", h->name, (int)event);
    strcat(h->log->text, entry);
    return event == BEFORE_SAVE && h->veto && strstr((const char *)arg, h->veto) != NULL;
}

static void test_hooks_run_in_order_for_their_events(void **state)
{
    (void)state;
    network *net = tiny_network();
    call_log log = {""};
    named_hook a = {"a", &log, NULL}, b = {"b", &log, NULL};
    assert_int_equal(add_network_hook(net, log_call, &a, UPDATES), 0);
    assert_int_equal(add_network_hook(net, log_call, &b, NETWORK_EVENT_BIT(AFTER_UPDATE) |
                                                         NETWORK_EVENT_BIT(TRAIN_END)), 0);
    net->train = 1;
    for (int step = 0; step < 2; ++step) { /* subdivisions=2: one update */
        fill_batch(net, step);
        train_network_datum(net);
    }
    train_plan plan = {0};
    assert_int_equal(report_network_event(net, TRAIN_BEGIN, &plan), 0); /* in no mask */
    assert_int_equal(report_network_event(net, TRAIN_END, NULL), 0);
    char expected[128];
    snprintf(expected, sizeof expected, "a:%d a:%d b:%d b:%d ", BEFORE_UPDATE, AFTER_UPDATE, AFTER_UPDATE,
             TRAIN_END);
    assert_string_equal(log.text, expected);
    free_network(net);
}

static void test_a_hook_set_directly_stays_first(void **state)
{
    (void)state;
    network *net = tiny_network();
    call_log log = {""};
    named_hook first = {"first", &log, NULL}, added = {"added", &log, NULL};
    net->hook = log_call;
    net->hook_user = &first;
    assert_int_equal(add_network_hook(net, log_call, &added, NETWORK_EVENT_BIT(TRAIN_END)), 0);
    report_network_event(net, TRAIN_BEGIN, NULL);
    report_network_event(net, TRAIN_END, NULL);
    char expected[128];
    snprintf(expected, sizeof expected, "first:%d first:%d added:%d ", TRAIN_BEGIN, TRAIN_END, TRAIN_END);
    assert_string_equal(log.text, expected);
    free_network(net);
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static void test_a_veto_from_any_hook_skips_the_save(void **state)
{
    (void)state;
    network *net = tiny_network();
    call_log log = {""};
    named_hook a = {"a", &log, "-by-a"}, b = {"b", &log, "-by-b"};
    named_hook deaf = {"deaf", &log, "selsync-hooks"}; /* would veto every save, but does not listen */
    assert_int_equal(add_network_hook(net, log_call, &a, NETWORK_EVENT_BIT(BEFORE_SAVE)), 0);
    assert_int_equal(add_network_hook(net, log_call, &deaf, UPDATES), 0);
    assert_int_equal(add_network_hook(net, log_call, &b, NETWORK_EVENT_BIT(BEFORE_SAVE)), 0);
    char kept[] = "/tmp/selsync-hooks-kept.weights";
    char by_a[] = "/tmp/selsync-hooks-by-a.weights", by_b[] = "/tmp/selsync-hooks-by-b.weights";
    unlink(kept);
    unlink(by_a);
    unlink(by_b);
    save_weights(net, kept);
    save_weights(net, by_a);
    save_weights(net, by_b);
    assert_true(exists(kept));
    assert_false(exists(by_a));
    assert_false(exists(by_b));
    char expected[128]; /* both hooks see every save, the vetoed ones too */
    snprintf(expected, sizeof expected, "a:%d b:%d a:%d b:%d a:%d b:%d ", BEFORE_SAVE, BEFORE_SAVE, BEFORE_SAVE,
             BEFORE_SAVE, BEFORE_SAVE, BEFORE_SAVE);
    assert_string_equal(log.text, expected);
    unlink(kept);
    free_network(net);
}

static int failing_hook(network *net, network_event event, void *arg, void *user)
{
    (void)net, (void)event, (void)arg, (void)user;
    return -1;
}

/* In a child: a hook that fails ends the program with EXIT_FAILURE at once;
 * the hook added after it does not run (it would exit 0). */
static int exit_zero_hook(network *net, network_event event, void *arg, void *user)
{
    (void)net, (void)event, (void)arg, (void)user;
    _exit(0);
}

static void test_a_failing_hook_ends_the_program(void **state)
{
    (void)state;
    network *net = tiny_network();
    assert_int_equal(add_network_hook(net, failing_hook, NULL, NETWORK_EVENT_BIT(TRAIN_END)), 0);
    assert_int_equal(add_network_hook(net, exit_zero_hook, NULL, NETWORK_EVENT_BIT(TRAIN_END)), 0);
    assert_int_equal(report_network_event(net, TRAIN_BEGIN, NULL), 0); /* in no mask: nothing happens */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        report_network_event(net, TRAIN_END, NULL);
        _exit(77); /* not reached */
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), EXIT_FAILURE);
    free_network(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hooks_run_once_per_effective_batch),
        cmocka_unit_test(test_no_hooks_is_stock_behaviour),
        cmocka_unit_test(test_update_leaves_the_described_residual),
        cmocka_unit_test(test_engine_applies_darknets_update),
        cmocka_unit_test(test_hooks_run_in_order_for_their_events),
        cmocka_unit_test(test_a_hook_set_directly_stays_first),
        cmocka_unit_test(test_a_veto_from_any_hook_skips_the_save),
        cmocka_unit_test(test_a_failing_hook_ends_the_program),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
