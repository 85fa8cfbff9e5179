/* The ranks' agreement on what they run: every rank holds a record of the
 * values it compares (its build, cfg, network, training list) and where
 * it runs; a difference fails every rank with one message that names the
 * groups of ranks and their values. */
#ifndef SELSYNC_AGREE_H
#define SELSYNC_AGREE_H

#include <stddef.h>

#include "selsync/comm.h"
#include "selsync/status.h"

#define AGREE_ITEMS 4
#define AGREE_VALUE 80
#define AGREE_HOST 64
#define AGREE_FILE 160

/* What one rank holds of the things compared: its values, and where it
 * runs (for the message). */
typedef struct agree_record {
    char host[AGREE_HOST], file[AGREE_FILE];
    char value[AGREE_ITEMS][AGREE_VALUE];
} agree_record;

/* src cut to len - 1 bytes, the rest of dst zeroed (the whole record is
 * compared and sent). */
void agree_copy_text(char *dst, size_t len, const char *src);

/* The host and the file named beside this rank's values. */
void agree_where(agree_record *rec, const char *host, const char *file);

/* Checks that every rank holds the same values of the n items named what[]
 * (n <= AGREE_ITEMS); each rank's mine->value[i] is its own. On a
 * difference every rank fails (SELSYNC_EMISMATCH) with one message in err
 * naming cfg_file and, for each item that differs, the groups of ranks
 * with their host, file and value, then advice. Collective: rank 0's
 * record, any(differs); on a difference, one bcast from each other rank. */
selsync_status selsync_agree(const selsync_comm *comm, const char *cfg_file, const char *const *what, int n,
                             const agree_record *mine, const char *advice, char *err, size_t errlen);

#endif
