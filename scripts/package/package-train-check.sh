#!/bin/sh
# Usage: package-train-check.sh DIR
# What scripts/package/check-package.sh and check-package-chroot.sh check of an
# installed selsync-darknet (on this machine, or inside a chroot): a small
# Fashion-MNIST set made in DIR/data by the installed
# prepare-fashion-mnist.py, then /usr/bin/darknet trains the installed
# fmnist-tiny.cfg on 2 MPI ranks for 20 steps in DIR/run: exit 0, the
# summary of 2 ranks and 20 steps, a metrics file per rank with every step,
# the weights. Logs in DIR (prepare.log, train.log); exit status 1 with a
# message naming the log on any failure.
set -eu
dir=${1:?usage: package-train-check.sh DIR}
share=/usr/share/selsync-darknet
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "package-train-check: FAILED: $*" >&2; exit 1; }
show() { echo "--- last lines of $1:" >&2; tail -n 30 "$1" >&2; }

echo "== prepare a small Fashion-MNIST set with the installed script"
python3 "$share/scripts/data/prepare-fashion-mnist.py" --out "$dir/data" --train-limit 512 --valid-limit 100 \
    >"$dir/prepare.log" 2>&1 || { show "$dir/prepare.log"; fail "prepare-fashion-mnist.py failed (log: $dir/prepare.log)"; }

echo "== train 2 ranks with /usr/bin/darknet"
mkdir -p "$dir/run"
{ sed 's/^max_batches=.*/max_batches=20/' "$share/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\nmethod=selsync\nwindow=5\nlog=m.%%r.tsv\n'; } >"$dir/run/tiny.cfg"
cd "$dir/run"
rc=0
timeout 300 mpirun --oversubscribe -np 2 /usr/bin/darknet classifier train "$dir/data/fmnist.data" tiny.cfg \
    >"$dir/train.log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { show "$dir/train.log"; fail "training exited with status $rc (log: $dir/train.log)"; }
grep -q '^selsync: summary: method=selsync, 2 ranks, 20 steps' "$dir/train.log" \
    || { show "$dir/train.log"; fail "no summary of 2 ranks and 20 steps in $dir/train.log"; }
for r in 0 1; do
    steps=$(grep -v '^#' "m.$r.tsv" 2>/dev/null | tail -n +2 | wc -l)
    [ "$steps" -eq 20 ] || fail "rank $r logged $steps steps, not 20 ($dir/run/m.$r.tsv)"
done
[ -s "$dir/data/backup/tiny.weights" ] || fail "no weights written ($dir/data/backup/tiny.weights)"
grep '^selsync: summary' "$dir/train.log" | sed 's/^/   /'
