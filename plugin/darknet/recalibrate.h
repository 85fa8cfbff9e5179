/* BatchNorm recalibration of the final model: every rank runs the network
 * in inference mode over a fixed set of its own training images and the
 * ranks combine, layer by layer, the statistics of every normalised
 * layer's input to the normalisation (selsync_session_bn_combine), so the
 * model's rolling means and variances become those of all ranks' images
 * taken together, in every rank's copy alike. */
#ifndef SELSYNC_DARKNET_RECALIBRATE_H
#define SELSYNC_DARKNET_RECALIBRATE_H

#include "darknet.h"
#include "selsync/session.h"

/* Sets rolling_mean and rolling_variance of every convolutional and fully
 * connected layer with batch_normalize, from the first layer to the last:
 * layer k's statistics are measured on inputs computed with the new
 * statistics of the layers before it. The images of paths (n of them; 0:
 * this rank only takes part in the sums) are prepared as the evaluation
 * prepares them (letterbox: a detector's; else a classifier's centre crop)
 * and run in batches of net->batch. Collective (one sum per normalised
 * layer). -1 on failure (out of memory, or the combine's failure, whose
 * message the session holds). */
int darknet_recalibrate_bn(network *net, char **paths, int n, int letterbox, selsync_session *s);

#endif
