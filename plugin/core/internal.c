#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

double selsync_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

selsync_status selsync_fail(char *err, size_t len, selsync_status st, const char *fmt, ...)
{
    va_list ap;
    if (!err || len == 0) return st;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return st;
}

size_t selsync_config_where(const selsync_config *cfg, selsync_config_key key, char *err, size_t len)
{
    if (!err || len == 0) return 0;
    snprintf(err, len, "%s:%d: [selsync] ", cfg->file[0] ? cfg->file : "<cfg>",
             cfg->line[key] > 0 ? cfg->line[key] : cfg->section_line);
    return strlen(err);
}
