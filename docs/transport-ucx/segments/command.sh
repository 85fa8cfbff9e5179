#!/bin/sh
# The ring's segment size between hosts: tests/bench/bench_transfer built with
# RING_SEGMENT_BYTES_HOSTS at 1, 4 (the build's) and 8 MiB, between emulated
# hosts whose links are shaped to 1 Gbit/s (scripts/emulated-cluster.sh), over
# Open MPI's UCX (the cluster's default); the ring over MPI, and with 4 MiB
# also over its own TCP sockets. Two rounds in opposite order; 10 timed calls
# of each size after 2 warm-ups, 1, 8, 32 and 64 MiB. Then summary.md: each
# variant's time (both rounds) and its share of the link's time (2 (N-1)/N of
# the bytes at 956 Mbit/s of payload). From the repository root, after a
# build, with the Darknet tarball the build used (build/download/):
#   sh docs/transport-ucx/segments/command.sh OUT HOSTS...   (e.g. OUT 2 4)
set -u
out=${1:?usage: command.sh OUT HOSTS...}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
python3 scripts/compare/provenance.py "$out" -- sh "$0" "$out" "$@"
tarball=$(ls build/download/darknet_*.orig.tar.* 2>/dev/null | head -n 1)
for mib in 1 4 8; do # one build of the benchmark per segment size
    b="$out/build-seg$mib"
    [ -x "$b/tests/bench_transfer" ] && continue
    DARKNET_TARBALL=${DARKNET_TARBALL:-$tarball} cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS="-DRING_SEGMENT_BYTES_HOSTS=$((mib * 1048576))" >"$b.log" 2>&1 &&
        cmake --build "$b" --target bench_transfer -j2 >>"$b.log" 2>&1 || { echo "build $mib MiB failed: $b.log"; exit 1; }
done
for hosts in "$@"; do
    name=seg$hosts
    sh scripts/emulated-cluster.sh up "$name" "$hosts" 1gbit || exit 1
    for round in 1 2; do
        order="1-mpi 4-mpi 8-mpi 4-tcp"
        [ $round = 2 ] && order="4-tcp 8-mpi 4-mpi 1-mpi"
        for v in $order; do
            f="$out/$hosts-hosts-seg${v%-*}-ring-${v#*-}-round$round.txt"
            echo "== $hosts hosts, UCX, segments ${v%-*} MiB, the ring's links: ${v#*-}, round $round" >"$f"
            timeout 900 sh scripts/emulated-cluster.sh mpirun "$name" -np "$hosts" -x OPENBLAS_NUM_THREADS \
                -x SELSYNC_RING_LINKS=${v#*-} "$out/build-seg${v%-*}/tests/bench_transfer" 10 2 1 8 32 64 >>"$f" 2>&1
            echo "rc=$?" >>"$f"
        done
    done
    sh scripts/emulated-cluster.sh down "$name"
done
{
    echo "| hosts | MiB | segments 1 MiB | 4 MiB | 8 MiB | own TCP sockets (4 MiB) | MPI_Allreduce | the link's time |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
    for hosts in "$@"; do
        awk -v hosts="$hosts" '
            FNR == 1 { split(FILENAME, p, "-hosts-seg"); split(p[2], q, "-"); v = q[1] "-" q[3] }
            $1 ~ /^[0-9]+$/ && NF > 10 {
                b = $1; link = 2 * (hosts - 1) / hosts * b * 8 / 956e6 * 1e3
                t[b, v] = t[b, v] (t[b, v] == "" ? "" : ", ") sprintf("%.1f", $2)
                s[b, v] = s[b, v] (s[b, v] == "" ? "" : ", ") sprintf("%d", 100 * link / $2 + 0.5)
                if (v == "4-mpi") bare[b] = bare[b] (bare[b] == "" ? "" : ", ") sprintf("%.1f", $4)
                L[b] = link; sizes[b] = 1
            }
            END {
                n = 0; for (b in sizes) z[++n] = b + 0
                for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (z[j] < z[i]) { x = z[i]; z[i] = z[j]; z[j] = x }
                for (i = 1; i <= n; i++) {
                    b = z[i]; line = sprintf("| %d | %d", hosts, b / 1048576)
                    split("1-mpi 4-mpi 8-mpi 4-tcp", vs, " ")
                    for (k = 1; k <= 4; k++) line = line sprintf(" | %s ms (%s %%)", t[b, vs[k]], s[b, vs[k]])
                    print line sprintf(" | %s ms | %.1f ms |", bare[b], L[b])
                }
            }' "$out"/"$hosts"-hosts-seg*-round*.txt
    done
} >"$out/summary.md"
cat "$out/summary.md"
