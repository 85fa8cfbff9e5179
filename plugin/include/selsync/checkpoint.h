/* Checkpoint files: a host's model file (e.g. Darknet weights) followed by
 * the plugin's state and a trailer, written atomically.
 *
 * Layout: MODEL BYTES | STATE | u64 state length | u64 FNV-1a of STATE |
 * "SSCKPT01". Readers of the model format stop before the state (Darknet's
 * load_weights reads exactly its layers), so a checkpoint is also a plain
 * model file; a plain model file has no trailer and no state.
 *
 * Atomicity: the host writes the model to a temporary file beside the
 * target; selsync_checkpoint_seal appends the state, flushes it to disk,
 * renames it over the target and syncs the directory. A crash at any moment
 * leaves the previous checkpoint or the new one, never a mix. */
#ifndef SELSYNC_CHECKPOINT_H
#define SELSYNC_CHECKPOINT_H

#include <stddef.h>

#include "selsync/status.h"

/* The temporary name for path ("<path>.tmp"), in out of size bytes; -1 when
 * it does not fit. */
int selsync_checkpoint_temp(const char *path, char *out, size_t size);

/* Appends state (len bytes) and the trailer to tmp, makes it durable and
 * renames it to path. On failure tmp is removed and path is unchanged. */
selsync_status selsync_checkpoint_seal(const char *tmp, const char *path, const void *state,
                                       size_t len, char *err, size_t errlen);

/* Reads the state of the checkpoint at path into *state (malloc'd, the
 * caller frees) and *len. A file without a trailer is a plain model file:
 * *state = NULL, *len = 0, SELSYNC_OK. A trailer that does not match its
 * state (a damaged file) is SELSYNC_EMISMATCH; an unreadable file
 * SELSYNC_EIO. */
selsync_status selsync_checkpoint_read(const char *path, void **state, size_t *len, char *err,
                                       size_t errlen);

#endif
