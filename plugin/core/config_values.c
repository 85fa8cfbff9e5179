/* The value syntax of the [selsync] section (config_internal.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"


/* The one syntax for numbers: an optional sign, decimal digits with an
 * optional fraction (at least one digit in all), and an optional decimal
 * exponent; no hexadecimal, no inf or nan, no spaces.  *integral tells
 * whether the number has neither fraction nor exponent. */
static int is_decimal(const char *v, int *integral)
{
    int digits = 0;
    *integral = 1;
    if (*v == '+' || *v == '-') v++;
    for (; *v >= '0' && *v <= '9'; v++) digits++;
    if (*v == '.') {
        *integral = 0;
        for (v++; *v >= '0' && *v <= '9'; v++) digits++;
    }
    if (digits == 0) return 0;
    if (*v == 'e' || *v == 'E') {
        *integral = 0;
        v++;
        if (*v == '+' || *v == '-') v++;
        if (!(*v >= '0' && *v <= '9')) return 0;
        while (*v >= '0' && *v <= '9') v++;
    }
    return *v == '\0';
}

/* The problem with a value that is_decimal refuses. */
static const char *not_decimal(const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || isspace((unsigned char)*v)) return "malformed value";
    return isfinite(x) ? "not a decimal number" : "not a finite number"; /* hexadecimal, inf, nan */
}

const char *config_parse_real(const char *v, double lo, int lo_open, double hi, double *out)
{
    int integral;
    double x;
    if (!is_decimal(v, &integral)) return not_decimal(v);
    errno = 0;
    x = strtod(v, NULL);
    if (errno == ERANGE) return "out of range"; /* overflow, or underflow to a denormal */
    if (x < lo || (lo_open && x == lo) || x > hi) return "out of range";
    *out = x;
    return NULL;
}

const char *config_parse_int(const char *v, long long lo, long long hi, int *out)
{
    int integral;
    long long x;
    if (!is_decimal(v, &integral)) return not_decimal(v);
    if (!integral) return "not an integer";
    errno = 0;
    x = strtoll(v, NULL, 10);
    if (errno == ERANGE || x < lo || x > hi) return "out of range";
    *out = (int)x;
    return NULL;
}

const char *config_parse_u64(const char *v, uint64_t *out)
{
    int integral;
    unsigned long long x;
    if (!is_decimal(v, &integral)) return not_decimal(v);
    if (!integral) return "not an integer";
    errno = 0;
    x = strtoull(v, NULL, 10);
    if (v[0] == '-' || errno == ERANGE) return "out of range";
#if ULLONG_MAX > UINT64_MAX
    if (x > UINT64_MAX) return "out of range";
#endif
    *out = (uint64_t)x;
    return NULL;
}

const char *config_parse_word(const char *v, const char *const *words, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, words[i]) == 0) { *out = i; return NULL; }
    return "not an allowed value";
}

