/* See fuzz_common.h. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "selsync/config.h"

static int memfd = -1;
static char memname[64];

const char *memfile_path(void)
{
    if (memfd < 0) {
        memfd = memfd_create("fuzz-input", 0);
        if (memfd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(memname, sizeof memname, "/proc/self/fd/%d", memfd);
    }
    return memname;
}

static void write_all(const void *buf, size_t n, off_t at)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = pwrite(memfd, p, n, at);
        if (k <= 0) {
            perror("pwrite");
            abort();
        }
        p += k, n -= (size_t)k, at += k;
    }
}

void memfile_set(const char *prefix, const uint8_t *data, size_t size)
{
    size_t np = prefix ? strlen(prefix) : 0;
    memfile_path();
    if (ftruncate(memfd, 0) != 0) {
        perror("ftruncate");
        abort();
    }
    write_all(prefix, np, 0);
    write_all(data, size, (off_t)np);
}

static int seen_section;

void fuzz_selsync_reset(void)
{
    seen_section = 0;
}

/* A refusal's message: not empty, one line, naming the section. */
static void check_message(const char *err)
{
    CHECK(err[0] != '\0');
    CHECK(strstr(err, "[selsync]") != NULL);
    for (const char *p = err; *p; p++) CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
}

/* What selsync_config_finish accepted lies in the documented ranges. */
static void check_ranges(const selsync_config *c)
{
    CHECK((unsigned)c->method <= SELSYNC_METHOD_LOCAL);
    CHECK(c->delta >= 0 && !isnan(c->delta));
    CHECK(c->window >= 1);
    CHECK(c->smoothing >= 0 && c->smoothing <= 1);
    CHECK(c->warmup >= 0);
    CHECK(c->granularity == SELSYNC_GRANULARITY_MODEL || c->granularity == SELSYNC_GRANULARITY_LAYER);
    CHECK(c->aggregate == SELSYNC_AGGREGATE_PARAMS || c->aggregate == SELSYNC_AGGREGATE_GRADS);
    CHECK(c->sync_bn_stats == 0 || c->sync_bn_stats == 1);
    CHECK(c->fedavg_interval >= 1);
    CHECK(c->fedavg_fraction > 0 && c->fedavg_fraction <= 1);
    CHECK(c->ssp_staleness >= 0);
    CHECK((unsigned)c->partition <= SELSYNC_PARTITION_DIRICHLET);
    CHECK(c->partition != SELSYNC_PARTITION_LABEL || c->partition_k >= 1);
    CHECK(c->partition != SELSYNC_PARTITION_DIRICHLET || c->partition_alpha > 0);
    CHECK(c->inject_alpha >= 0 && c->inject_alpha <= 1);
    CHECK(c->inject_beta >= 0 && c->inject_beta <= 1);
    CHECK((c->inject_alpha > 0) == (c->inject_beta > 0));
    CHECK(memchr(c->log, '\0', sizeof c->log) != NULL);
    CHECK(c->eval_every >= 0 && c->checkpoint_every >= 0 && c->chart_every >= 0);
    CHECK(c->on_nonfinite == SELSYNC_NONFINITE_STOP || c->on_nonfinite == SELSYNC_NONFINITE_SKIP);
}

int fuzz_selsync_section(network *net, const char *cfgfile, int line, const cfg_option *options, int n,
                         void *user)
{
    static const int worlds[] = {1, 2, 3, 4, 8, 64, 1000};
    selsync_config cfg;
    char err[1024];
    selsync_status st = SELSYNC_OK;
    (void)net, (void)user;
    if (seen_section++) return -1; /* the adapter allows one section per cfg */
    selsync_config_default(&cfg, cfgfile, line);
    for (int i = 0; i < n && st == SELSYNC_OK; ++i) {
        if (!options[i].val) return -1; /* not a key = value line */
        st = selsync_config_set(&cfg, options[i].key, options[i].val, options[i].line, err, sizeof err);
    }
    if (st == SELSYNC_OK) st = selsync_config_finish(&cfg, err, sizeof err);
    if (st != SELSYNC_OK) {
        CHECK(st == SELSYNC_ECONFIG);
        check_message(err);
        return -1;
    }
    check_ranges(&cfg);
    int accepted = 0;
    for (size_t w = 0; w < sizeof worlds / sizeof *worlds; w++) {
        st = selsync_config_check_world(&cfg, worlds[w], err, sizeof err);
        if (st != SELSYNC_OK) {
            CHECK(st == SELSYNC_ECONFIG);
            check_message(err);
            continue;
        }
        double s = selsync_config_smoothing(&cfg, worlds[w]);
        CHECK(s > 0 && s <= 1);
        accepted++;
    }
    CHECK(strcmp(selsync_method_name(cfg.method), "?") != 0);
    return accepted ? 0 : -1;
}
