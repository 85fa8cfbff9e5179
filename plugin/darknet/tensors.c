/* Darknet's network as the core's tensors (see tensors.h). */
#include "tensors.h"

#include <stdlib.h>

/* A growing list of tensor views. */
typedef struct tensor_list {
    selsync_tensor *t;
    size_t n, cap;
} tensor_list;

static int add_tensor(tensor_list *a, float *param, float *grad,
                      size_t count, size_t layer, selsync_tensor_kind kind)
{
    if (!param || count == 0) return 0;
    if (a->n == a->cap) return -1;
    a->t[a->n++] = (selsync_tensor){param, grad, count, layer, kind, 0, 0};
    return 0;
}

/* The trained arrays of one updatable layer (or sublayer), and its BN
 * running statistics. */
static int add_layer_tensors(tensor_list *a, const layer *l, size_t index)
{
    if (!l) return 0;
    size_t nw = 0, nb = (size_t)l->outputs;
    switch (l->type) {
    case CONVOLUTIONAL:
    case DECONVOLUTIONAL:
        nw = (size_t)l->nweights;
        nb = (size_t)l->n;
        break;
    case CONNECTED:
        nw = (size_t)l->inputs * l->outputs;
        break;
    case LOCAL:
        nw = (size_t)l->size * l->size * l->c * l->n * l->out_w * l->out_h;
        break;
    case RNN:
    case CRNN: {
        const layer *sub[] = {l->input_layer, l->self_layer, l->output_layer};
        for (size_t i = 0; i < 3; ++i)
            if (add_layer_tensors(a, sub[i], index)) return -1;
        return 0;
    }
    case GRU: {
        const layer *sub[] = {l->uz, l->wz, l->ur, l->wr, l->uh, l->wh};
        for (size_t i = 0; i < 6; ++i)
            if (add_layer_tensors(a, sub[i], index)) return -1;
        return 0;
    }
    case LSTM: {
        const layer *sub[] = {l->wf, l->wi, l->wg, l->wo, l->uf, l->ui, l->ug, l->uo};
        for (size_t i = 0; i < 8; ++i)
            if (add_layer_tensors(a, sub[i], index)) return -1;
        return 0;
    }
    default:
        return 0;
    }
    int rc = add_tensor(a, l->weights, l->weight_updates, nw, index, SELSYNC_TENSOR_TRAINED);
    if (!rc && l->weights && nw) a->t[a->n - 1].decays = 1; /* the update decays weights only */
    rc |= add_tensor(a, l->biases, l->bias_updates, nb, index, SELSYNC_TENSOR_TRAINED);
    if (l->scale_updates)
        rc |= add_tensor(a, l->scales, l->scale_updates, nb, index, SELSYNC_TENSOR_TRAINED);
    rc |= add_tensor(a, l->rolling_mean, NULL, nb, index, SELSYNC_TENSOR_STAT);
    rc |= add_tensor(a, l->rolling_variance, NULL, nb, index, SELSYNC_TENSOR_STAT);
    if (!rc && l->rolling_mean && l->rolling_variance) a->t[a->n - 1].variance = 1; /* of the means before it */
    return rc;
}

int darknet_map_network(network *net, selsync_tensor **out, size_t *n)
{
    tensor_list l = {NULL, 0, 64 + 40 * (size_t)net->n};
    int rc = 0;
    if (!(l.t = calloc(l.cap, sizeof *l.t))) rc = -1;
    for (int i = 0; i < net->n && !rc; ++i)
        if (net->layers[i].update && add_layer_tensors(&l, &net->layers[i], (size_t)i)) rc = -1;
    *out = l.t;
    *n = l.n;
    return rc;
}

int darknet_update_is_sgd(const network *net)
{
    if (net->adam) return 0;
    for (int i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        if (!l->update) continue;
        if (l->type == CONVOLUTIONAL && (l->scales != NULL) == (l->scale_updates != NULL))
            continue; /* update_convolutional_layer updates scales where there are scales */
        if (l->type == CONNECTED && (l->batch_normalize != 0) == (l->scale_updates != NULL))
            continue; /* update_connected_layer: scales with batch_normalize */
        return 0;
    }
    return 1;
}

void darknet_sgd_rates(const network *net, const selsync_tensor *t, size_t n, const update_args *u, float *rates)
{
    for (size_t i = 0; i < n; ++i) {
        float learning_rate = u->learning_rate * net->layers[t[i].layer].learning_rate_scale;
        rates[i] = learning_rate / u->batch;
    }
}

/* One layer's arrays in Darknet's weights file (save_convolutional_weights,
 * save_connected_weights, save_batchnorm_weights and the local layer's),
 * in floats; recurrent layers through their sublayers, as save_weights_upto
 * writes them. */
static size_t layer_file_floats(const layer *l)
{
    const layer *sub[8] = {0};
    size_t n = 0, bn = l->batch_normalize ? 3 : 0;
    switch (l->type) {
    case CONVOLUTIONAL:
    case DECONVOLUTIONAL: return (size_t)l->n * (1 + bn) + (size_t)l->nweights;
    case CONNECTED: return (size_t)l->outputs * (1 + bn) + (size_t)l->outputs * (size_t)l->inputs;
    case BATCHNORM: return 3 * (size_t)l->c;
    case LOCAL:
        return (size_t)l->outputs + (size_t)l->size * l->size * l->c * l->n * l->out_w * l->out_h;
    case RNN:
    case CRNN: sub[0] = l->input_layer, sub[1] = l->self_layer, sub[2] = l->output_layer; break;
    case LSTM:
        sub[0] = l->wi, sub[1] = l->wf, sub[2] = l->wo, sub[3] = l->wg;
        sub[4] = l->ui, sub[5] = l->uf, sub[6] = l->uo, sub[7] = l->ug;
        break;
    case GRU: sub[0] = l->wz, sub[1] = l->wr, sub[2] = l->wh, sub[3] = l->uz, sub[4] = l->ur, sub[5] = l->uh; break;
    default: return 0;
    }
    for (int i = 0; i < 8; ++i)
        if (sub[i]) n += layer_file_floats(sub[i]);
    return n;
}

size_t darknet_weights_bytes(const network *net)
{
    size_t floats = 0;
    for (int i = 0; i < net->n; ++i)
        if (!net->layers[i].dontsave) floats += layer_file_floats(&net->layers[i]);
    return 3 * sizeof(int) + sizeof(size_t) + floats * sizeof(float);
}

uint64_t darknet_layout_hash(const network *net, const selsync_tensor *t, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ULL)
    MIX(net->n);
    for (int i = 0; i < net->n; ++i) MIX(net->layers[i].type);
    for (size_t i = 0; i < n; ++i) {
        MIX(t[i].count);
        MIX(t[i].layer);
        MIX(t[i].kind);
    }
#undef MIX
    return h;
}
