/* Status codes returned by every fallible SelSync function. */
#ifndef SELSYNC_STATUS_H
#define SELSYNC_STATUS_H

#include <stdarg.h>

#define SELSYNC_STATUS_TABLE(X)                                              \
    X(SELSYNC_OK,         "ok")                                              \
    X(SELSYNC_EINVAL,     "invalid argument")                                \
    X(SELSYNC_ENOMEM,     "out of memory")                                   \
    X(SELSYNC_EIO,        "input/output error")                              \
    X(SELSYNC_ECONFIG,    "configuration error")                             \
    X(SELSYNC_ESTATE,     "call not valid in the current state")             \
    X(SELSYNC_EMISMATCH,  "ranks disagree")                                  \
    X(SELSYNC_ENONFINITE, "non-finite value")                                \
    X(SELSYNC_ECOMM,      "communication error")

typedef enum selsync_status {
#define SELSYNC_STATUS_ENUM(name, text) name,
    SELSYNC_STATUS_TABLE(SELSYNC_STATUS_ENUM)
#undef SELSYNC_STATUS_ENUM
    SELSYNC_STATUS_COUNT
} selsync_status;

/* Returns a short, static, human-readable description of s (never NULL). */
const char *selsync_status_str(selsync_status s);

/* Prints "selsync: rank R: " (with world > 1; else "selsync: ") and the
 * formatted text as one line to stderr, in one write, so that lines of
 * different ranks do not interleave. */
void selsync_vsay(int rank, int world, const char *fmt, va_list ap);

#endif
