/* Checkpoint files: a host's model file (e.g. Darknet weights) followed by
 * the plugin's state and a trailer, written atomically.
 *
 * Layout: MODEL BYTES | STATE | u64 model length | u64 state length |
 * u64 FNV-1a of MODEL BYTES and STATE | "SSCKPT02". Readers of the model
 * format stop before the state (Darknet's load_weights reads exactly its
 * layers), so a checkpoint is also a plain model file; a plain model file
 * has no trailer and no state. The checksum covers the whole file, so a cut
 * or damaged model is detected as surely as a damaged state; the host marks
 * its checkpoints in the model's own header (so that a file cut before its
 * trailer is still known as one) and asks for the trailer when it sees the
 * mark.
 *
 * Atomicity: the host writes the model to a temporary file beside the
 * target; selsync_checkpoint_seal appends the state, flushes it to disk,
 * renames it over the target and syncs the directory. A crash at any moment
 * leaves the previous checkpoint or the new one, never a mix. */
#ifndef SELSYNC_CHECKPOINT_H
#define SELSYNC_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

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
 * *state = NULL, *len = 0, SELSYNC_OK, unless required (the host knows the
 * file as a checkpoint): then it is damaged. A damaged file (no trailer when
 * required, a size that does not match the trailer, content that does not
 * match the checksum, a model part of another size than model_bytes when
 * that is not 0) is SELSYNC_EMISMATCH; an unreadable file SELSYNC_EIO.
 * Messages name the file. */
selsync_status selsync_checkpoint_read(const char *path, int required, uint64_t model_bytes, void **state,
                                       size_t *len, char *err, size_t errlen);

#endif
