#!/bin/sh
# Skewed data: every rank holds only some classes of Fashion-MNIST
# (partition=label:K, default K = 10 / RANKS, each class on one rank), and
# bsp, fedavg, selsync without and with data injection train for the same
# number of steps; prints held-out accuracy, sync fraction and bytes moved.
# Usage: scripts/bench/bench-noniid.sh [RANKS] [STEPS] [K]
set -eu
ranks=${1:-2}
steps=${2:-500}
k=${3:-$((10 / ranks))}
[ "$k" -ge 1 ] || k=1
export BENCH_COMMON="partition=label:$k"
export BENCH_METHODS="bsp fedavg,fedavg_interval=50 selsync,delta=0.3
selsync,delta=0.3,inject_alpha=0.5,inject_beta=0.5
selsync,delta=0.3,inject_alpha=0.75,inject_beta=0.75"
exec sh "$(dirname "$0")/bench-methods.sh" "$ranks" "$steps"
