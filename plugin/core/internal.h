/* Helpers shared by the core's sources (not part of the API). */
#ifndef SELSYNC_CORE_INTERNAL_H
#define SELSYNC_CORE_INTERNAL_H

#include <stddef.h>

#include "selsync/config.h"
#include "selsync/clock.h"
#include "selsync/status.h"

#if defined(__GNUC__)
#define SELSYNC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SELSYNC_PRINTF(f, a)
#endif


/* Writes the message to err (if err and len) and returns st. */
selsync_status selsync_fail(char *err, size_t len, selsync_status st, const char *fmt, ...)
    SELSYNC_PRINTF(4, 5);

/* Writes "FILE:LINE: [selsync] " to err, LINE being the line of key (the
 * section's when the key was not set); returns its length (0 without err). */
size_t selsync_config_where(const selsync_config *cfg, selsync_config_key key, char *err, size_t len);

#endif
