/* See fuzz_engine_model.h. */
#include "fuzz_engine_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fuzz_engine_model_create(fuzz_engine_model *m, int shape)
{
    static const size_t count[4] = {6, 2, 2, 4}, layer[4] = {0, 0, 0, 2};
    static const selsync_tensor_kind kind[4] = {SELSYNC_TENSOR_TRAINED, SELSYNC_TENSOR_TRAINED, SELSYNC_TENSOR_STAT,
                                                SELSYNC_TENSOR_TRAINED};
    memset(m, 0, sizeof *m);
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        m->t[i] = (selsync_tensor){m->param + off, kind[i] == SELSYNC_TENSOR_TRAINED ? m->grad + off : NULL,
                                   count[i], layer[i], kind[i], 0, 0};
        off += count[i];
    }
    for (int i = 0; i < FUZZ_PARAMS; i++) m->param[i] = 0.25f * (float)i;
    m->model = (selsync_model){m->t, 4, 3, shape >= 2, 0};
    m->comm = selsync_comm_single();
    selsync_config_default(&m->cfg, "fuzz.cfg", 1);
    const char *keys[][2] = {{"window", "3"}, {"warmup", "1"},
                             {"granularity", shape % 2 ? "layer" : "model"},
                             {"log", shape == FUZZ_SHAPES - 1 ? "/dev/null" : ""}};
    int nkeys = shape == FUZZ_SHAPES - 1 ? 4 : 3;
    for (int i = 0; i < nkeys; i++)
        if (selsync_config_set(&m->cfg, keys[i][0], keys[i][1], i + 2, m->err, sizeof m->err) != SELSYNC_OK)
            goto failed;
    if (selsync_config_finish(&m->cfg, m->err, sizeof m->err) != SELSYNC_OK ||
        selsync_engine_create(&m->cfg, &m->comm, &m->model, &m->e, m->err, sizeof m->err) != SELSYNC_OK)
        goto failed;
    return;
failed:
    fprintf(stderr, "fuzz_engine_model_create(%d): %s\n", shape, m->err);
    abort();
}

selsync_status fuzz_engine_model_step(fuzz_engine_model *m, int k)
{
    for (int i = 0; i < FUZZ_PARAMS; i++) m->grad[i] = (float)((i * 7 + k * 3) % 5) - 2.0f;
    selsync_status st = selsync_engine_before_update(m->e, 1.0 / (k + 1), 0.1);
    if (st != SELSYNC_OK) return st;
    for (int i = 0; i < FUZZ_PARAMS; i++) {
        m->param[i] -= 0.1f * m->grad[i];
        if (m->model.grad_keeps_residual) m->grad[i] *= 0.9f;
    }
    return selsync_engine_after_update(m->e);
}
