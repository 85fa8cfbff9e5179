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
    a->t[a->n++] = (selsync_tensor){param, grad, count, layer, kind};
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
    rc |= add_tensor(a, l->biases, l->bias_updates, nb, index, SELSYNC_TENSOR_TRAINED);
    if (l->scale_updates)
        rc |= add_tensor(a, l->scales, l->scale_updates, nb, index, SELSYNC_TENSOR_TRAINED);
    rc |= add_tensor(a, l->rolling_mean, NULL, nb, index, SELSYNC_TENSOR_STAT);
    rc |= add_tensor(a, l->rolling_variance, NULL, nb, index, SELSYNC_TENSOR_STAT);
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
