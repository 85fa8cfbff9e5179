/* Darknet's network as the core's tensors: every updatable layer's trained
 * arrays (weights, biases, batch-norm scales, with their update buffers)
 * and its batch-norm running statistics, layer by layer; recurrent layers
 * through their sublayers. */
#ifndef SELSYNC_DARKNET_TENSORS_H
#define SELSYNC_DARKNET_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "darknet.h"
#include "selsync/model.h"

/* The tensors of net into *out (malloc'd; the caller frees it, also on
 * failure) and *n; -1 on out of memory. */
int darknet_map_network(network *net, selsync_tensor **out, size_t *n);

/* Whether net's update is plain SGD over exactly the tensors
 * darknet_map_network lists: every layer with an update is convolutional
 * or connected (weights, biases, and BatchNorm scales where it has them),
 * and the network does not use Adam. Then the engine may apply it
 * (selsync_host_update's rates, darknet_sgd_rates). */
int darknet_update_is_sgd(const network *net);

/* Each of the n tensors' rate this step (selsync_host_update), as the
 * layers' updates compute it: (learning_rate x the layer's
 * learning_rate_scale) / batch, in float. */
void darknet_sgd_rates(const network *net, const selsync_tensor *t, size_t n, const update_args *u, float *rates);

/* The size of the weights file Darknet's save_weights writes for net:
 * its header (version 0.2: three ints and the images seen as a size_t),
 * then every layer's arrays. */
size_t darknet_weights_bytes(const network *net);

/* FNV-1a over the layout: layer types and every tensor's size and kind. */
uint64_t darknet_layout_hash(const network *net, const selsync_tensor *t, size_t n);

#endif
