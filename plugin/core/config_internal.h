/* Shared by the [selsync] parser's files: config.c (the key table, one
 * parser per key, defaults, set, describe), config_values.c (the value
 * syntax) and config_rules.c (the rules between keys and ranks). Internal
 * to the core. */
#ifndef SELSYNC_CONFIG_INTERNAL_H
#define SELSYNC_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/config.h"

#include "internal.h"

#define NMETHODS 5
#define BIT(m) (1u << (unsigned)(m))
#define VALUE_SHOWN 120 /* longest value quoted in a message */

/* A message being written: bounded appends, always NUL-terminated, one line. */
typedef struct msg {
    char *buf;
    size_t cap, len;
} msg;

msg msg_start(char *err, size_t errlen);
void msg_put(msg *m, const char *fmt, ...) SELSYNC_PRINTF(2, 3);
/* "FILE:LINE: [selsync] " */
void msg_head(msg *m, const selsync_config *cfg, int line);
/* The names of the methods in mask, comma-separated. */
void msg_methods(msg *m, unsigned mask);
/* The line key k was set on, or the section's. */
int key_line(const selsync_config *cfg, selsync_config_key k);

/* BIT(method) for each method key k applies to. */
unsigned config_key_methods(selsync_config_key k);
const char *config_speed_batches_name(int v);

/* The value parsers: NULL on success, else the problem; *out is written
 * only on success. Numbers are decimal only (no hexadecimal, inf or nan). */
const char *config_parse_real(const char *v, double lo, int lo_open, double hi, double *out);
const char *config_parse_int(const char *v, long long lo, long long hi, int *out);
const char *config_parse_u64(const char *v, uint64_t *out);
const char *config_parse_word(const char *v, const char *const *words, int n, int *out);

#endif
