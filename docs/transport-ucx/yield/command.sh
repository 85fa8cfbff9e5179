#!/bin/sh
# 4 emulated hosts on 2 cores: the ring over MPI (UCX) and MPI_Allreduce, with and without mpi_yield_when_idle
# Ran at commit fb054b1 with -x SELSYNC_RING_LINKS=mpi (the ring over MPI,
# its only path since the ring's own TCP sockets are retired).
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
out=${1:?usage: command.sh OUT}; mkdir -p "$out"
python3 scripts/compare/provenance.py $out -- sh "$0" "$out"
sh scripts/emulated-cluster.sh up ty4 4 1gbit || exit 1
for round in 1 2; do
  for y in 0 1; do
    f=$out/4-hosts-ucx-yield$y-round$round.txt
    echo "== 4 hosts, pml ucx, ring over MPI, mpi_yield_when_idle $y, round $round" > $f
    timeout 600 sh scripts/emulated-cluster.sh mpirun ty4 -np 4 --mca mpi_yield_when_idle $y -x OPENBLAS_NUM_THREADS \
        build/tests/bench_transfer 10 2 1 8 32 64 >> $f 2>&1
    echo "rc=$?" >> $f
  done
done
sh scripts/emulated-cluster.sh down ty4
