/* The Darknet adapter: the only plugin code that includes darknet.h.
 *
 * It implements Darknet's plugin entry points (darknet_plugin_init/_fini),
 * registers the handler for [selsync] cfg sections, and keeps the parsed
 * configuration of every network that has one. Errors are reported on
 * stderr and returned to Darknet, which ends the process non-zero. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "darknet.h"
#include "selsync/config.h"

#define SECTION "[selsync]"

/* A network that has a [selsync] section, with its configuration. */
typedef struct attachment {
    network *net;
    selsync_config cfg;
    struct attachment *next;
} attachment;

typedef struct adapter {
    int world;              /* number of processes in the job */
    attachment *attached;
} adapter;

static adapter *the_adapter; /* set by darknet_plugin_init, for _fini */

static attachment *find_attachment(adapter *ad, const network *net)
{
    for (attachment *a = ad->attached; a; a = a->next)
        if (a->net == net) return a;
    return NULL;
}

static void report(const char *message)
{
    fprintf(stderr, "selsync: %s\n", message);
}

static void print_config(const selsync_config *c, int world)
{
    fprintf(stderr, "selsync: %s:%d: method=%s", c->file, c->section_line,
            selsync_method_name(c->method));
    if (c->method == SELSYNC_METHOD_SELSYNC)
        fprintf(stderr, " delta=%g window=%d smoothing=%g warmup=%d granularity=%s",
                c->delta, c->window, selsync_config_smoothing(c, world), c->warmup,
                c->granularity == SELSYNC_GRANULARITY_LAYER ? "layer" : "model");
    fprintf(stderr, " aggregate=%s seed=%llu; %d process%s\n",
            c->aggregate == SELSYNC_AGGREGATE_GRADS ? "grads" : "params",
            (unsigned long long)c->seed, world, world == 1 ? "" : "es");
}

/* Parses one [selsync] section strictly into a new attachment. */
static int on_selsync_section(network *net, const char *cfgfile, int line,
                              const cfg_option *options, int n, void *user)
{
    adapter *ad = user;
    char err[1024];
    attachment *first = find_attachment(ad, net);
    if (first) {
        snprintf(err, sizeof err,
                 "%s:%d: [selsync] second [selsync] section (the first is on line %d); "
                 "allowed: one per cfg", cfgfile, line, first->cfg.section_line);
        report(err);
        return -1;
    }
    attachment *a = calloc(1, sizeof *a);
    if (!a) {
        report("out of memory");
        return -1;
    }
    selsync_config_default(&a->cfg, cfgfile, line);
    selsync_status st = SELSYNC_OK;
    for (int i = 0; i < n && st == SELSYNC_OK; ++i) {
        if (!options[i].val) {
            snprintf(err, sizeof err, "%s:%d: [selsync] '%s' is not a key = value line",
                     cfgfile, options[i].line, options[i].key);
            st = SELSYNC_ECONFIG;
        } else {
            st = selsync_config_set(&a->cfg, options[i].key, options[i].val,
                                    options[i].line, err, sizeof err);
        }
    }
    if (st == SELSYNC_OK) st = selsync_config_finish(&a->cfg, err, sizeof err);
    if (st == SELSYNC_OK) st = selsync_config_check_world(&a->cfg, ad->world, err, sizeof err);
    if (st != SELSYNC_OK) {
        report(err);
        free(a);
        return -1;
    }
    a->net = net;
    a->next = ad->attached;
    ad->attached = a;
    print_config(&a->cfg, ad->world);
    return 0;
}

int darknet_plugin_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    adapter *ad = calloc(1, sizeof *ad);
    if (!ad) {
        report("out of memory");
        return EXIT_FAILURE;
    }
    ad->world = 1;
    if (set_cfg_section_handler(SECTION, on_selsync_section, ad) != 0) {
        report("could not register the " SECTION " section handler");
        free(ad);
        return EXIT_FAILURE;
    }
    the_adapter = ad;
    return 0;
}

int darknet_plugin_fini(int status)
{
    adapter *ad = the_adapter;
    if (!ad) return status;
    set_cfg_section_handler(SECTION, NULL, NULL);
    while (ad->attached) {
        attachment *next = ad->attached->next;
        free(ad->attached);
        ad->attached = next;
    }
    free(ad);
    the_adapter = NULL;
    return status;
}
