#!/bin/sh
# The ring's segments between hosts: tests/bench/bench_transfer built with
# RING_SEGMENT_BYTES_HOSTS, the largest segment between hosts (a quarter of a
# ring step's block, at least 1 MiB, at most this), at 1 MiB (the segments of
# one host) and 8 MiB (the build's), between emulated hosts whose
# links are shaped to 1 Gbit/s (scripts/emulated-cluster.sh), over Open MPI's
# UCX (the cluster's default). Two rounds in opposite order;
# 10 timed calls of each size after 2 warm-ups, 1, 8, 32 and 64 MiB. Then
# summary.md: each variant's time (both rounds) and its share of the link's
# time (2 (N-1)/N of the bytes at 956 Mbit/s of payload), for "ours" (one
# array) and "fused" (the engine's sum over 4 tensors, as training sums). From
# the repository root, after a build, with the Darknet tarball the build used
# (build/download/):
#   sh docs/transport-ucx/segments/command.sh OUT HOSTS...   (e.g. OUT 2 4)
# SEGMENT_VARIANTS (default "1 8") lists the largest segments to build and time, in MiB.
set -u
out=${1:?usage: command.sh OUT HOSTS...}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
python3 scripts/compare/provenance.py "$out" -- sh "$0" "$out" "$@"
tarball=$(ls build/download/darknet_*.orig.tar.* 2>/dev/null | head -n 1)
for mib in ${SEGMENT_VARIANTS:-1 8}; do # one build of the benchmark per largest segment
    b="$out/build-seg$mib"
    [ -x "$b/tests/bench_transfer" ] && continue
    DARKNET_TARBALL=${DARKNET_TARBALL:-$tarball} cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS="-DRING_SEGMENT_BYTES_HOSTS=$((mib * 1048576))" >"$b.log" 2>&1 &&
        cmake --build "$b" --target bench_transfer -j2 >>"$b.log" 2>&1 || { echo "build $mib MiB failed: $b.log"; exit 1; }
done
variants=${SEGMENT_VARIANTS:-1 8}
for hosts in "$@"; do
    name=seg$hosts
    sh scripts/emulated-cluster.sh up "$name" "$hosts" 1gbit || exit 1
    for round in 1 2; do
        order=$variants
        [ $round = 2 ] && order=$(echo "$variants" | tr ' ' '\n' | sort -rn | tr '\n' ' ')
        for mib in $order; do
            f="$out/$hosts-hosts-seg$mib-round$round.txt"
            echo "== $hosts hosts, UCX, segments between hosts at most $mib MiB, round $round" >"$f"
            timeout 900 sh scripts/emulated-cluster.sh mpirun "$name" -np "$hosts" -x OPENBLAS_NUM_THREADS \
                "$out/build-seg$mib/tests/bench_transfer" 10 2 1 8 32 64 >>"$f" 2>&1
            echo "rc=$?" >>"$f"
        done
    done
    sh scripts/emulated-cluster.sh down "$name"
done
# summary.md: per hosts, size and variant, ours and fused in both rounds (ms,
# and the share of the link's time in %), and MPI_Allreduce of the build's
# variant
{
    echo "| hosts | MiB | segments at most | ours (ms, share of the link) | fused (ms, share) | MPI_Allreduce (ms) | the link's time (ms) |"
    echo "|---:|---:|---:|---|---|---|---:|"
    for hosts in "$@"; do
        for mib in $variants; do
            awk -v hosts="$hosts" -v seg="$mib" '
                $1 ~ /^[0-9]+$/ && NF > 10 {
                    b = $1; link = 2 * (hosts - 1) / hosts * b * 8 / 956e6 * 1e3; L[b] = link
                    o[b] = o[b] (o[b] == "" ? "" : ", ") sprintf("%.1f (%d %%)", $2, 100 * link / $2 + 0.5)
                    f[b] = f[b] (f[b] == "" ? "" : ", ") sprintf("%.1f (%d %%)", $3, 100 * link / $3 + 0.5)
                    m[b] = m[b] (m[b] == "" ? "" : ", ") sprintf("%.1f", $4)
                    if (!(b in seen)) { seen[b] = 1; z[++n] = b + 0 }
                }
                END {
                    for (i = 1; i <= n; i++)
                        printf "| %d | %d | %d MiB | %s | %s | %s | %.1f |\n", hosts, z[i] / 1048576, seg, o[z[i]], f[z[i]], m[z[i]], L[z[i]]
                }' "$out/$hosts-hosts-seg$mib-round1.txt" "$out/$hosts-hosts-seg$mib-round2.txt"
        done
    done
} >"$out/summary.md"
cat "$out/summary.md"
