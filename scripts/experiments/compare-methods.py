#!/usr/bin/env python3
"""Reproduce the paper's comparison: every method on every data setting, at one
rank count and one step budget, then a table in the shape of the paper's
Table I and plots.

Usage: scripts/experiments/compare-methods.py [--quick] [options]

Methods: bsp; fedavg every S/4 and every S/8 steps, and C = 0.5 every S/4;
ssp with staleness 100 and 200; local SGD; selsync with delta 0.3 and 0.5,
whole-model and per-layer. Settings (suites):
  iid           cfg/fmnist.cfg, disjoint iid shards
  seldp         cfg/fmnist.cfg, SelDP (every rank reads all chunks in turn)
  label         cfg/fmnist.cfg, K classes per rank (label:K)
  label-inject  the same with data injection (0.5, 0.5); all methods but ssp
  det           the Fashion-MNIST detection set with cfg/fmnist-det.cfg (mAP@0.5)
  wide          cfg/fmnist-wide.cfg (about 12 MB of parameters), iid shards
Every run starts from the same seed, trains for the same number of steps and
is evaluated every K steps on held-out images (top-1, or mAP@0.5 for the
detector) and once more after training on the final model.

Network: by default every rank runs on its own emulated host (network
namespaces joined by links shaped to --bandwidth, see
scripts/emulated-cluster.sh), and BSP and SelSync (delta 0.3) run once more
in plain shared memory. Where namespaces are not permitted the runs use
shared memory and the tables give the communication time modelled from the
measured bytes instead, saying so. The emulated hosts are removed on every
exit, also on failure or Ctrl-C.

Output: RESULTS/<date>-<ranks>ranks-<bandwidth>-<steps>steps[-quick]/ with
comparison.md (the tables), summary.tsv, plots/*.png, and per run the exact
cfg, Darknet's output and the per-rank metrics files (runs/SUITE/RUN/).

The code: scripts/compare/ (cli: options and the order of a comparison; runs:
the run list and the training jobs; cluster: the emulated hosts; data, metrics,
report: the tables; plots).
"""
import os
import sys

# the modules: scripts/compare/
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for compare/
from compare.cli import main  # noqa: E402
from compare.common import Failure  # noqa: E402


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        print("\ncompare-methods: error: %s" % e, file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("\ncompare-methods: interrupted; emulated hosts removed", file=sys.stderr)
        sys.exit(130)
