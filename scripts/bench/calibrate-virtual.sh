#!/bin/sh
# Calibrates virtual time against emulated hosts: makes HOSTS emulated
# hosts (scripts/emulated-cluster.sh) with links shaped to RATE, times the
# transport's ring all-reduce there at 4 KiB, 64 KiB, 1, 4 and 16 MiB
# (tests/bench/bench_transfer, its "ours" column, the median of REPS
# calls), fits the model's ring cost 2(N-1)/N S/B + 2(N-1) L to the times
# (B from the two largest sizes, the link's sustained rate past the shaper's
# burst; L from the smallest), and prints the SELSYNC_VIRTUAL value with the
# measured and modelled times side by side.
# Removes the hosts when it ends, also on failure or Ctrl-C. Needs root.
# Usage: scripts/bench/calibrate-virtual.sh [RATE] [HOSTS] [REPS]   (default 1gbit 2 10)
# Environment: SELSYNC_BUILD_DIR (default build).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$root/scripts/compare/provenance.py" - -- "$0" "$@" | sed 's/^/== /' # the machine, its BLAS, the commit, the command
rate=${1:-1gbit} hosts=${2:-2} reps=${3:-10}
bench=${SELSYNC_BUILD_DIR:-$root/build}/tests/bench_transfer
cluster="sh $root/scripts/emulated-cluster.sh"
[ -x "$bench" ] || { echo "calibrate-virtual: $bench is missing (cmake --build build --target bench_transfer)" >&2; exit 2; }
$cluster check >/dev/null || { echo "calibrate-virtual: emulated hosts cannot be made here: $($cluster check 2>&1)" >&2; exit 2; }
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp "${TMPDIR:-/tmp}/calibrate-virtual.XXXXXX")
name=""
trap '[ -z "$name" ] || $cluster down "$name"; rm -f "$out"' EXIT
trap 'exit 130' INT TERM HUP
for i in 1 2 3 4 5 6 7 8 9 10; do
    try=cal$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
    if $cluster up "$try" "$hosts" "$rate" >/dev/null; then name=$try; break; fi
done
[ -n "$name" ] || { echo "calibrate-virtual: could not make the emulated hosts" >&2; exit 1; }
echo "calibrate-virtual: $hosts emulated hosts, links shaped to $rate; ring all-reduce of 4 KiB to 16 MiB, $reps calls each" >&2
$cluster mpirun "$name" -np "$hosts" "$bench" "$reps" 2 4k 64k 1 4 16 >"$out"
# bytes and the median ms of the transport's ring ("ours")
awk -v n="$hosts" '
    BEGIN { k = 0 }
    /^#/ || $1 == "bytes" { next }
    { s[k] = $1; t[k] = $2 / 1e3; k++ }
    END {
        # t = a x + 2(N-1) L with x = 2(N-1)/N S and a = 1/B: the bandwidth from the slope
        # between the two largest sizes (the sustained rate of the link, past the burst of tbf), the
        # latency from the smallest size
        x0 = 2 * (n - 1) / n * s[0]; x1 = 2 * (n - 1) / n * s[k - 2]; x2 = 2 * (n - 1) / n * s[k - 1]
        a = (t[k - 1] - t[k - 2]) / (x2 - x1)
        if (a <= 0) { print "calibrate-virtual: the times do not grow with the bytes; no fit" > "/dev/stderr"; exit 1 }
        lat = (t[0] - a * x0) / (2 * (n - 1)); if (lat < 0) lat = 0
        mbit = 8 / a / 1e6; us = lat * 1e6
        printf "%12s %12s %12s\n", "bytes", "measured ms", "modelled ms"
        for (i = 0; i < k; i++)
            printf "%12d %12.2f %12.2f\n", s[i], t[i] * 1e3, (2 * (n - 1) / n * s[i] * a + 2 * (n - 1) * lat) * 1e3
        printf "SELSYNC_VIRTUAL=bandwidth=%.0fMbit,latency=%.0fus\n", mbit, us
    }' "$out"
