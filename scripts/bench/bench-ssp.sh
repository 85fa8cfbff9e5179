#!/bin/sh
# Stale-synchronous parallel against bsp and selsync on Fashion-MNIST with
# the same number of training ranks and the same step budget: bsp, ssp with
# staleness bounds 100 and 200, and selsync (delta 0.3); prints time per
# step, the time ssp's workers were blocked by the bound, bytes and held-out
# accuracy (the table of bench-methods.sh). Each ssp run has WORKERS workers
# plus its parameter server (WORKERS+1 processes).
# Usage: scripts/bench/bench-ssp.sh [WORKERS] [STEPS]
set -eu
export BENCH_METHODS="bsp ssp,ssp_staleness=100 ssp,ssp_staleness=200 selsync,delta=0.3"
exec sh "$(dirname "$0")/bench-methods.sh" "${1:-2}" "${2:-500}"
