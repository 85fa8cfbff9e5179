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
    /* Non-zero for a TRAINED tensor whose host update adds weight decay to
     * its grad (selsync_host_update; Darknet: weights, not biases or scales). */
    int decays;
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

/* The host's coming optimizer update, when it is SGD that leaves a residual
 * in the grad buffers (grad_keeps_residual above): with u = grad + decay *
 * param when the tensor `decays`, u = grad otherwise, the update adds
 * rate * u to each param and leaves momentum * u in its grad, in float
 * arithmetic in that order (Darknet's update, decay being -decay * batch
 * and rate learning_rate * the layer's scale / batch). */
typedef struct selsync_host_update {
    float momentum, decay;
    /* Per trained tensor, in tensor order (an entry for every tensor; NULL:
     * not given): its rate this step. Given, the engine may apply the
     * update itself in the pass that measures the gradient
     * (selsync_engine_update_applied), the same bits as the host's. */
    const float *rates;
} selsync_host_update;

/* Whether tensor t travels with the model's parameters: trained ones
 * always, statistics with with_stats (cfg sync_bn_stats). */
int selsync_tensor_travels(const selsync_tensor *t, int with_stats);

/* The params of the n tensors at t back to back in tensor order (the
 * trained ones, and the statistics with with_stats) copied into buf, or
 * from buf back into the tensors; both return the floats copied. */
size_t selsync_model_pack(const selsync_tensor *t, size_t n, int with_stats, float *buf);
size_t selsync_model_unpack(const selsync_tensor *t, size_t n, int with_stats, const float *buf);

#endif
