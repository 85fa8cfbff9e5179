/* A fixed batch of pseudo-random training data for a Darknet network, for
 * benchmarks and equality tests that must see identical inputs. */
#ifndef SYNTHETIC_BATCH_H
#define SYNTHETIC_BATCH_H

#include "darknet.h"

/* net->batch * net->subdivisions images of uniform pixels in [0,1) from a
 * fixed seed; truths are one-hot classes (image i has class i mod truths),
 * or for a network that ends in a [yolo] layer one box per image. */
data synthetic_batch(network *net);

#endif
