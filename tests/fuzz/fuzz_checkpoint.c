/* Checkpoint files and engine snapshots: the input is read as a checkpoint
 * file (selsync_checkpoint_read on an in-memory file) and its state, if
 * any, restored into every engine of fuzz_engine_model.h; the input itself
 * is also restored as a snapshot (a checkpoint's checksum would keep most
 * mutated states from reaching selsync_engine_restore). A restored engine runs two
 * steps and the final average, so that hostile restored values are used. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_check.h"
#include "fuzz_common.h"
#include "fuzz_engine_model.h"
#include "selsync/checkpoint.h"

static void restore_into_all(const void *state, size_t len)
{
    static fuzz_engine_model m;
    for (int shape = 0; shape < FUZZ_SHAPES; shape++) {
        fuzz_engine_model_create(&m, shape);
        selsync_status st = selsync_engine_restore(m.e, state, len);
        if (st == SELSYNC_OK) {
            CHECK(selsync_engine_snapshot_size(m.e) == len);
            for (int k = 0; k < 2 && st == SELSYNC_OK; k++) st = fuzz_engine_model_step(&m, k);
            if (st == SELSYNC_OK) selsync_engine_finish(m.e);
        } else {
            CHECK(selsync_engine_error(m.e)[0] != '\0');
        }
        selsync_engine_destroy(m.e);
    }
}

/* Reads the in-memory file as a checkpoint (required: the host knows it as
 * one; with a model of size % 64 bytes when odd, else of any size) and
 * restores its state, if any. */
static void read_checkpoint(int required, size_t size)
{
    void *state = NULL;
    size_t len = 0;
    char err[1024];
    uint64_t model_bytes = size % 2 ? size % 64 : 0;
    selsync_status st =
        selsync_checkpoint_read(memfile_path(), required, model_bytes, &state, &len, err, sizeof err);
    if (st == SELSYNC_OK) {
        CHECK(len <= size);
        CHECK(state != NULL || (len == 0 && !required));
        if (state) restore_into_all(state, len);
    } else {
        CHECK(st == SELSYNC_EMISMATCH && state == NULL && err[0] != '\0');
    }
    free(state);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memfile_set(NULL, data, size);
    read_checkpoint(0, size);
    read_checkpoint(1, size);
    restore_into_all(data, size);
    return 0;
}
