#include "selsync/status.h"

#include <stdio.h>
#include <string.h>

const char *selsync_status_str(selsync_status s)
{
    static const char *const text[] = {
#define SELSYNC_STATUS_TEXT(name, str) str,
        SELSYNC_STATUS_TABLE(SELSYNC_STATUS_TEXT)
#undef SELSYNC_STATUS_TEXT
    };
    if ((unsigned)s >= SELSYNC_STATUS_COUNT) return "unknown status";
    return text[s];
}

void selsync_vsay(int rank, int world, const char *fmt, va_list ap)
{
    char line[2048];
    int n = world > 1 ? snprintf(line, sizeof line, "selsync: rank %d: ", rank) : snprintf(line, sizeof line, "selsync: ");
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    strcat(line, "\n");
    fputs(line, stderr);
}
