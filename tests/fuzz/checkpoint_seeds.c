/* Usage: checkpoint_seeds DIR
 * Writes the checkpoint harness's seeds into DIR: for every engine of
 * fuzz_engine_model.h, after three steps, its raw snapshot (snapshot-N) and
 * a checkpoint file holding it after a small model part (checkpoint-N), as
 * selsync_checkpoint_seal writes it; and a plain model file (plain). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_engine_model.h"
#include "selsync/checkpoint.h"

static void write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(EXIT_FAILURE);
    }
}

int main(int argc, char **argv)
{
    static fuzz_engine_model m;
    char path[4096], tmp[4096], err[1024];
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return EXIT_FAILURE;
    }
    for (int shape = 0; shape < FUZZ_SHAPES; shape++) {
        fuzz_engine_model_create(&m, shape);
        for (int k = 0; k < 3; k++)
            if (fuzz_engine_model_step(&m, k) != SELSYNC_OK) {
                fprintf(stderr, "step %d: %s\n", k, selsync_engine_error(m.e));
                return EXIT_FAILURE;
            }
        size_t len = selsync_engine_snapshot_size(m.e);
        void *state = malloc(len);
        if (!state || selsync_engine_snapshot(m.e, state, len) != SELSYNC_OK) {
            fprintf(stderr, "snapshot: %s\n", selsync_engine_error(m.e));
            return EXIT_FAILURE;
        }
        snprintf(path, sizeof path, "%s/snapshot-%d", argv[1], shape);
        write_file(path, state, len);
        snprintf(path, sizeof path, "%s/checkpoint-%d", argv[1], shape);
        if (selsync_checkpoint_temp(path, tmp, sizeof tmp) != 0) return EXIT_FAILURE;
        write_file(tmp, m.param, sizeof m.param); /* the host's model part */
        if (selsync_checkpoint_seal(tmp, path, state, len, err, sizeof err) != SELSYNC_OK) {
            fprintf(stderr, "%s\n", err);
            return EXIT_FAILURE;
        }
        free(state);
        selsync_engine_destroy(m.e);
    }
    snprintf(path, sizeof path, "%s/plain", argv[1]);
    write_file(path, m.param, sizeof m.param);
    return EXIT_SUCCESS;
}
