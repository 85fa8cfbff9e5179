#include "selsync/status.h"

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
