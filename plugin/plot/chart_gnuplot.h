/* The training chart's drawer that runs gnuplot: a PNG of three stacked
 * panels against training seconds (the same x axis for all):
 *  1. the loss: each bin's mean (faint points, with its min..max range) and
 *     a smoothed line;
 *  2. the held-out score of the evaluations (top-1 or mAP@0.5), 0..1;
 *  3. the share of steps synchronised per bin, and the cumulative MB sent
 *     (second y axis).
 * Files beside png (for png = DIR/NAME): DIR/.NAME.gp (the program),
 * DIR/.NAME.tmp (the picture being drawn), DIR/.NAME.log (gnuplot's
 * output, kept after a failed drawing). A drawing that succeeds is renamed
 * over png, so png is absent or a complete picture. gnuplot runs in the
 * background (posix_spawnp: no shell, no fork), one drawing at a time, and
 * is found on PATH when the chart is created: without one, creating the
 * chart fails with SELSYNC_ECONFIG and "gnuplot not found on PATH: no
 * training chart". A failed drawing (gnuplot exited non-zero or by a
 * signal, or left no picture) is SELSYNC_EIO with a message naming png,
 * gnuplot's exit status, the last line of its output and the file that
 * holds that output. */
#ifndef SELSYNC_CHART_GNUPLOT_H
#define SELSYNC_CHART_GNUPLOT_H

#include "selsync/chart.h"

const selsync_chart_drawer *selsync_chart_gnuplot(void);

#endif
