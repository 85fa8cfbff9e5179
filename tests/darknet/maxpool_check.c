/* Usage: maxpool_check
 * Runs Darknet's max pool forward pass over a set of shapes (window sizes
 * 1-3, strides 1-3, every padding up to the window, even and odd maps,
 * batch 2, 3 channels):
 * - on finite inputs with many ties, -FLT_MAX and FLT_MAX, it writes every
 *   output's bits and index to standard output, one line each. Built with
 *   the optimised Darknet and with the reference loops, so that the two
 *   outputs can be compared byte for byte;
 * - on the same inputs with NaNs and infinities among them (whose order
 *   Darknet's -Ofast leaves to the compiler), it checks that every index
 *   names an element of its own window inside the image (the backward pass
 *   adds there), or is -1 for a window wholly outside; exit status 1 if not. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maxpool_layer.h"

/* Input value k of a case: small integers (many ties) with -FLT_MAX and
 * FLT_MAX among them, and with nonfinite a NaN and an infinity of each
 * sign. */
static float value(unsigned k, int nonfinite)
{
    unsigned r = (k * 2654435761u) >> 20;
    switch (r % 23) {
    case 0: return nonfinite ? NAN : FLT_MAX;
    case 1: return nonfinite ? INFINITY : 0.5f;
    case 2: return nonfinite ? -INFINITY : -0.5f;
    case 3: return -FLT_MAX;
    default: return (float)(r % 7) - 3.0f;
    }
}

/* Whether index at of output k names an element of k's window inside the
 * image, or is -1 for a window wholly outside it. */
static int in_window(const maxpool_layer *l, int k, int at)
{
    int j = k % l->out_w, i = k / l->out_w % l->out_h, p = k / (l->out_w * l->out_h);
    int y0 = -l->pad / 2 + i * l->stride, x0 = -l->pad / 2 + j * l->stride, inside = 0;
    for (int n = 0; n < l->size; n++)
        for (int m = 0; m < l->size; m++) {
            int y = y0 + n, x = x0 + m;
            if (y < 0 || y >= l->h || x < 0 || x >= l->w) continue;
            inside = 1;
            if (at == (p * l->h + y) * l->w + x) return 1;
        }
    return !inside && at == -1;
}

int main(void)
{
    static const int maps[][2] = {{8, 8}, {7, 7}, {5, 6}, {1, 1}, {2, 3}};
    unsigned cases = 0, bad = 0;
    for (size_t s = 0; s < sizeof maps / sizeof *maps; s++)
        for (int size = 1; size <= 3; size++)
            for (int stride = 1; stride <= 3; stride++)
                for (int pad = 0; pad <= size; pad++) {
                    int h = maps[s][0], w = maps[s][1], batch = 2, c = 3;
                    if ((w + pad - size) / stride + 1 < 1 || (h + pad - size) / stride + 1 < 1) continue;
                    maxpool_layer l = make_maxpool_layer(batch, h, w, c, size, stride, pad);
                    float *in = malloc((size_t)batch * c * h * w * sizeof(float));
                    network net;
                    memset(&net, 0, sizeof net);
                    net.input = in;
                    for (int nonfinite = 0; nonfinite <= 1; nonfinite++) {
                        for (int k = 0; k < batch * c * h * w; k++)
                            in[k] = value((unsigned)k + 977u * cases, nonfinite);
                        forward_maxpool_layer(l, net);
                        for (int k = 0; k < l.outputs * batch; k++) {
                            uint32_t bits;
                            memcpy(&bits, &l.output[k], sizeof bits);
                            if (!nonfinite)
                                printf("%dx%d size %d stride %d pad %d: %d %08x %d\n", h, w, size, stride, pad, k,
                                       bits, l.indexes[k]);
                            else if (!in_window(&l, k, l.indexes[k])) {
                                fprintf(stderr, "maxpool_check: %dx%d size %d stride %d pad %d: output %d has index "
                                        "%d, outside its window\n", h, w, size, stride, pad, k, l.indexes[k]);
                                bad++;
                            }
                        }
                    }
                    free(in);
                    free(l.indexes);
                    free(l.output);
                    free(l.delta);
                    cases++;
                }
    fprintf(stderr, "maxpool_check: %u cases, %u indexes outside their window\n", cases, bad);
    return bad != 0;
}
