#!/bin/sh
# Transfer benchmark: the MPI transport's sum_f32, and the engine's whole
# synchronisation (one sum_f32v in place over its tensors, scaled by 1/N),
# against a bare MPI_Allreduce of the same bytes, on the same ranks (see
# tests/bench/bench_transfer.c). Builds nothing.
# Usage: scripts/bench/bench-transfer.sh [BENCH_BINARY] [REPS] [MIB...]
#   BENCH_BINARY  default build/tests/bench_transfer
#   REPS          timed repetitions per payload (default 20)
#   MIB...        payload sizes in MiB (default 1 8 32)
# Environment: BENCH_RANKS (default "2 4"; runs above the core count are
# oversubscribed), BENCH_WARMUP (default 3), MPIRUN (default mpirun),
# OPENBLAS_NUM_THREADS (default 1).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$root/scripts/compare/provenance.py" - -- "$0" "$@" | sed 's/^/== /' # the machine, its BLAS, the commit, the command
bin=${1:-$root/build/tests/bench_transfer}
reps=${2:-20}
[ $# -gt 2 ] && shift 2 || set --
ranks=${BENCH_RANKS:-"2 4"}
warmup=${BENCH_WARMUP:-3}
mpirun=${MPIRUN:-mpirun}

if [ ! -x "$bin" ]; then
    echo "bench-transfer: $bin not found or not executable (build target bench_transfer first)" >&2
    exit 2
fi

export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# Open MPI refuses to run as root without these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for np in $ranks; do
    "$mpirun" --oversubscribe -np "$np" "$bin" "$reps" "$warmup" "$@"
done
