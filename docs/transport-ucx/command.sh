#!/bin/sh
# The ring (the transport's sum_f32, "ours") and MPI_Allreduce ("bare") between
# emulated hosts whose links are shaped to 1 Gbit/s (scripts/emulated-cluster.sh),
# over Open MPI's UCX (the cluster's default) and over ob1, with the ring's
# links over MPI and over its own TCP sockets: tests/bench/bench_transfer,
# 10 timed calls of each after 2 warm-ups, 1, 8, 32 and 64 MiB. From the
# repository root, after a build:
#   sh docs/transport-ucx/command.sh OUT HOSTS...     (e.g. OUT 2 4)
# This folder's tables ran at commit ca4bafc, when the ring still had TCP
# sockets of its own (SELSYNC_RING_LINKS=tcp); those are retired, and a build
# since refuses the variable: the ring runs over MPI alone.
set -u
out=${1:?usage: command.sh OUT HOSTS...}
shift
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
python3 scripts/compare/provenance.py "$out" -- sh "$0" "$out" "$@"
for hosts in "$@"; do
    name=tx$hosts
    sh scripts/emulated-cluster.sh up "$name" "$hosts" 1gbit || exit 1
    for pml in ucx ob1; do
        opts=; [ $pml = ob1 ] && opts="--mca pml ob1 --mca btl tcp,self"
        for links in mpi tcp; do
            f="$out/$hosts-hosts-$pml-ring-$links.txt"
            echo "== $hosts hosts, pml $pml, the ring's links: $links" >"$f"
            # shellcheck disable=SC2086 # opts: words without spaces
            timeout 900 sh scripts/emulated-cluster.sh mpirun "$name" -np "$hosts" $opts -x OPENBLAS_NUM_THREADS \
                -x SELSYNC_RING_LINKS=$links build/tests/bench_transfer 10 2 1 8 32 64 >>"$f" 2>&1
            echo "rc=$?" >>"$f"
        done
    done
    sh scripts/emulated-cluster.sh down "$name"
done
