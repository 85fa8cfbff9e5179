#include "synthetic_batch.h"

data synthetic_batch(network *net)
{
    int imgs = net->batch * net->subdivisions;
    const layer *last = &net->layers[net->n - 1];
    data d = {0};
    d.X = make_matrix(imgs, net->inputs);
    d.y = make_matrix(imgs, net->truths);
    unsigned s = 12345;
    for (int i = 0; i < imgs; ++i) {
        for (int j = 0; j < net->inputs; ++j) {
            s = s * 1664525u + 1013904223u;
            d.X.vals[i][j] = (s >> 8) / 16777216.0f;
        }
        float *y = d.y.vals[i];
        if (last->type == YOLO) { /* x y w h class */
            y[0] = 0.3f + 0.1f * (i % 4);
            y[1] = 0.6f - 0.1f * (i % 3);
            y[2] = 0.25f;
            y[3] = 0.35f;
            y[4] = (float)(i % last->classes);
        } else {
            y[i % net->truths] = 1;
        }
    }
    return d;
}
