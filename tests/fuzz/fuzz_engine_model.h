/* The engines the checkpoint harness restores into and its seed writer
 * takes snapshots of: one small model (layer 0: weights, biases and a
 * batch-norm statistic; layer 1: nothing; layer 2: weights) on the
 * one-process communicator, in FUZZ_SHAPES settings that change the
 * snapshot's layout (granularity model or layer, a grad residual or not;
 * window = 3). The last shape writes a metrics file to /dev/null. */
#ifndef FUZZ_ENGINE_MODEL_H
#define FUZZ_ENGINE_MODEL_H

#include <stddef.h>

#include "selsync/engine.h"

enum { FUZZ_SHAPES = 4, FUZZ_PARAMS = 14 };

typedef struct fuzz_engine_model {
    float param[FUZZ_PARAMS], grad[FUZZ_PARAMS];
    selsync_tensor t[4];
    selsync_model model;
    selsync_config cfg;
    selsync_comm comm;
    selsync_engine *e;
    char err[1024];
} fuzz_engine_model;

/* Fills m for shape (0 .. FUZZ_SHAPES-1) and creates its engine (m->e);
 * aborts on failure, which the fixed settings never cause. */
void fuzz_engine_model_create(fuzz_engine_model *m, int shape);

/* Runs one step of the host: gradients from k, then selsync_engine_before_update,
 * the host's update, selsync_engine_after_update. Returns the first failure. */
selsync_status fuzz_engine_model_step(fuzz_engine_model *m, int k);

#endif
