/* BatchNorm recalibration of the final model (see recalibrate.h). */
#include "recalibrate.h"

#include <stdlib.h>
#include <string.h>

#include "evaluation.h"
#include "selsync/bnstats.h"

/* A layer whose statistics the recalibration sets: a convolutional or
 * fully connected layer with batch_normalize (its forward pass copies the
 * pre-normalisation output to l.x). */
static int normalised(const layer *l)
{
    return (l->type == CONVOLUTIONAL || l->type == CONNECTED) && l->batch_normalize && l->rolling_mean &&
           l->rolling_variance && l->x;
}

int darknet_recalibrate_bn(network *net, char **paths, int n, int letterbox, selsync_session *s)
{
    int batch = net->batch, rc = 0;
    float *in = calloc((size_t)batch * (size_t)net->inputs, sizeof *in);
    if (!in) return -1;
    for (int k = 0; k < net->n && !rc; ++k) {
        layer *target = &net->layers[k];
        if (!normalised(target)) continue;
        size_t channels = (size_t)target->out_c, spatial = (size_t)target->out_h * (size_t)target->out_w;
        double *acc = calloc(3 * channels, sizeof *acc);
        float *shift = malloc(channels * sizeof *shift);
        if (!acc || !shift) {
            free(acc);
            free(shift);
            rc = -1;
            break;
        }
        memcpy(shift, target->rolling_mean, channels * sizeof *shift);
        for (int start = 0; start < n; start += batch) {
            int rows = n - start < batch ? n - start : batch;
            memset(in, 0, (size_t)batch * (size_t)net->inputs * sizeof *in);
            for (int r = 0; r < rows; ++r)
                darknet_input_image(net, paths[start + r], letterbox, in + (size_t)r * (size_t)net->inputs);
            /* inference (the layers before k with their new statistics), up
             * to layer k, as forward_network runs it, on a copy of the
             * network's struct: *net keeps its input, train flag and batch */
            network w = *net;
            w.input = in;
            w.truth = 0;
            w.delta = 0;
            w.train = 0;
            for (int i = 0; i <= k; ++i) {
                w.index = i;
                layer l = w.layers[i];
                l.forward(l, w);
                w.input = l.output;
            }
            selsync_bn_accumulate(acc, channels, target->x, (size_t)rows, spatial, shift);
        }
        /* Darknet's batch variance divides by n - 1 (variance_cpu) */
        if (selsync_session_bn_combine(s, channels, shift, acc, 1, target->rolling_mean, target->rolling_variance))
            rc = -1;
        free(acc);
        free(shift);
    }
    free(in);
    return rc;
}
