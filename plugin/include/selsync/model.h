/* A host's model as the core sees it: views of its float arrays. */
#ifndef SELSYNC_MODEL_H
#define SELSYNC_MODEL_H

#include <stddef.h>

typedef enum selsync_tensor_kind {
    SELSYNC_TENSOR_TRAINED = 0, /* param with its gradient buffer grad */
    SELSYNC_TENSOR_STAT         /* running statistic (e.g. BN mean/variance), no grad */
} selsync_tensor_kind;

/* A view of one host array; the engine never owns or frees it. */
typedef struct selsync_tensor {
    float *param;
    float *grad;                /* NULL for SELSYNC_TENSOR_STAT */
    size_t count;
    size_t layer;               /* index of the layer it belongs to, < n_layers */
    selsync_tensor_kind kind;
    /* Non-zero for a STAT tensor holding the variances of the STAT tensor
     * just before it (same layer and count): a mean of several ranks'
     * statistics then adds the spread of their means (a mixture's variance). */
    int variance;
} selsync_tensor;

typedef struct selsync_model {
    const selsync_tensor *tensors;
    size_t n_tensors;
    size_t n_layers;
    /* Non-zero when a grad buffer keeps a residual of the previous step
     * (e.g. Darknet scales it by the momentum after each update instead of
     * clearing it): the engine then measures grad minus the residual it saw
     * right after the previous update. */
    int grad_keeps_residual;
    /* The bytes of the framework's own model file for this network (the
     * part of a checkpoint before its state); 0: unknown, not checked. */
    size_t file_bytes;
} selsync_model;

/* Whether tensor t travels with the model's parameters: trained ones
 * always, statistics with with_stats (cfg sync_bn_stats). */
int selsync_tensor_travels(const selsync_tensor *t, int with_stats);

/* The params of the n tensors at t back to back in tensor order (the
 * trained ones, and the statistics with with_stats) copied into buf, or
 * from buf back into the tensors; both return the floats copied. */
size_t selsync_model_pack(const selsync_tensor *t, size_t n, int with_stats, float *buf);
size_t selsync_model_unpack(const selsync_tensor *t, size_t n, int with_stats, const float *buf);

#endif
