#!/bin/sh
# The main job on the built-in default: installs what is missing (as root),
# builds, prepares Fashion-MNIST, trains cfg/fmnist-selsync.cfg with SelSync
# on RANKS MPI ranks (default 2), then evaluates the consensus model on the
# 10000 held-out images and prints accuracy, sync fraction and bytes saved.
# Usage: scripts/demo.sh [RANKS] [CFG] [WEIGHTS]
# (WEIGHTS: start from these weights instead of Darknet's random ones)
set -eu
. "$(dirname "$0")/common.sh"
ranks=${1:-2}
cfg=${2:-$root/cfg/fmnist-selsync.cfg}
start=${3:-}
name=$(basename "$cfg" .cfg)

sh "$root/scripts/install-deps.sh"
echo "== build"
mkdir -p "$build"
{ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release &&
  cmake --build "$build" -j "$(nproc)" --target darknet; } >"$build/demo-build.log" 2>&1 \
    || { tail -n 30 "$build/demo-build.log"; echo "build failed; see $build/demo-build.log" >&2; exit 1; }
echo "== data"
python3 "$root/scripts/data/prepare-fashion-mnist.py"
data="$root/data/fashion-mnist/fmnist.data"

cd "$root"
mkdir -p backup
echo "== train: $ranks ranks, $(basename "$cfg")"
log="backup/$name.train.log"
mpirun -np "$ranks" --oversubscribe "$build/darknet" classifier train "$data" "$cfg" ${start:+"$start"} 2>&1 \
    | tee "$log" | awk '/ avg, / { n++; if (n % 50 == 0) print; next } /^selsync: /'
grep -q '^selsync: summary' "$log" || { echo "training failed; see $log" >&2; exit 1; }
weights="$root/data/fashion-mnist/backup/$name.weights"
echo "== evaluate $weights"
top1=$("$build/darknet" classifier valid "$data" "$cfg" "$weights" 2>/dev/null \
    | sed -n 's/.*top 1: \([0-9.]*\),.*/\1/p' | tail -n 1)
echo "== result"
grep '^selsync: summary' "$log" | sed 's/^selsync: summary: /  /'
echo "  held-out top-1: $top1 (10000 Fashion-MNIST test images)"
chart="$root/data/fashion-mnist/backup/chart_$name.png"
if [ -f "$chart" ]; then echo "  training chart: $chart"; fi
