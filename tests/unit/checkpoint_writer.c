/* Usage: checkpoint_writer write PATH   (writes checkpoints in a loop until killed)
 *        checkpoint_writer once PATH    (writes checkpoint 0 and exits 0)
 *        checkpoint_writer check PATH   (exit 0 when PATH is absent or whole)
 *
 * Checkpoint n holds a 1 MiB "model" of bytes n % 251 and the state
 * "n=<n>"; a whole file has a valid trailer and a model that matches its
 * state, so a torn write (a new model under an old state, or a cut file)
 * fails the check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "selsync/checkpoint.h"

#define MODEL_BYTES (1 << 20)

/* Writes checkpoints 0, 1, ... up to last (or forever when last < 0). */
static int write_loop(const char *path, long last)
{
    char tmp[4096], state[32], err[512];
    unsigned char *model = malloc(MODEL_BYTES);
    if (!model || selsync_checkpoint_temp(path, tmp, sizeof tmp)) return 2;
    for (unsigned long n = 0; last < 0 || n <= (unsigned long)last; n++) {
        memset(model, (int)(n % 251), MODEL_BYTES);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(model, 1, MODEL_BYTES, f) != MODEL_BYTES || fclose(f)) return 2;
        int len = snprintf(state, sizeof state, "n=%lu", n);
        if (selsync_checkpoint_seal(tmp, path, state, (size_t)len, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    free(model);
    return 0;
}

static int check(const char *path)
{
    char err[512];
    void *state;
    size_t len;
    unsigned long n;
    if (access(path, F_OK) != 0) return 0; /* killed before the first rename */
    if (selsync_checkpoint_read(path, 1, 0, &state, &len, err, sizeof err) != SELSYNC_OK || !state) {
        fprintf(stderr, "not a whole checkpoint: %s\n", state ? err : "no state");
        return 1;
    }
    char text[32] = {0};
    memcpy(text, state, len < sizeof text - 1 ? len : sizeof text - 1);
    free(state);
    if (sscanf(text, "n=%lu", &n) != 1) return 1;
    FILE *f = fopen(path, "rb");
    unsigned char *model = malloc(MODEL_BYTES);
    if (!f || !model || fread(model, 1, MODEL_BYTES, f) != MODEL_BYTES) return 1;
    fclose(f);
    for (size_t i = 0; i < MODEL_BYTES; i++)
        if (model[i] != n % 251) {
            fprintf(stderr, "model byte %zu is %d, state says checkpoint %lu\n", i, model[i], n);
            return 1;
        }
    printf("checkpoint %lu whole\n", n);
    free(model);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "write")) return write_loop(argv[2], -1);
    if (argc == 3 && !strcmp(argv[1], "once")) return write_loop(argv[2], 0);
    if (argc == 3 && !strcmp(argv[1], "check")) return check(argv[2]);
    fprintf(stderr, "usage: %s write|once|check PATH\n", argv[0]);
    return 2;
}
