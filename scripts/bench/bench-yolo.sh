#!/bin/sh
# Speed of the YOLOv4 / YOLOv7 family's layers, measured side by side:
#  1. training throughput of yolov4-tiny beside Darknet's yolov3-tiny, both
#     at 416x416, on one and two threads: ms per image, GFLOP per image and
#     the share of the CPU's sgemm peak (bench_train --peak, one thread,
#     times the thread count);
#  2. where a yolov4-tiny step goes (bench_train --layers, one thread): the
#     route layers' copies and the yolo heads with CIoU, and the heads again
#     with iou_loss=mse;
#  3. mish: yolov4 at 256x256 with its 72 mish layers and with leaky in
#     their place, the step time of each;
#  4. mosaic: 30 steps of darknet detector train on the detection set
#     (cfg/yolov4-tiny-selsync.cfg without [selsync]) with mosaic=0 and 1:
#     the seconds a step waits for the loader, and the step's time.
# Usage: scripts/bench/bench-yolo.sh [BUILD_DIR] [STEPS]
# Environment: BENCH_BATCH (default 8); BENCH_PAIRS, the mish/leaky pairs of
# part 3, alternating which runs first (default 5); BENCH_PARTS, the parts
# to run (default "1 2 3 4"). Prints the machine, the OpenBLAS
# kernel, the environment and the commit first.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
steps=${2:-3}
batch=${BENCH_BATCH:-8}
pairs=${BENCH_PAIRS:-5}
parts=${BENCH_PARTS:-1 2 3 4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$build/tests/bench_train" ] || cmake --build "$build" --target bench_train

python3 "$root/scripts/compare/provenance.py" - -- "$0" "$@" | sed 's/^/== /' # the machine, its BLAS, the commit, the command

# cfg NAME SRC SIZE BATCH [SED...]: SRC at SIZE x SIZE, batch BATCH in one
# subdivision, no [selsync], with extra sed expressions; prints its path
cfg() {
    name=$1 src=$2 size=$3 b=$4; shift 4
    sed -e "s/^batch=.*/batch=$b/" -e 's/^subdivisions=.*/subdivisions=1/' \
        -e "s/^width=.*/width=$size/" -e "s/^height=.*/height=$size/" -e '/^\[selsync\]/,$d' "$@" "$src" >"$tmp/$name.cfg"
    echo "$tmp/$name.cfg"
}
v3=$(cfg yolov3-tiny "$build/darknet-src/cfg/yolov3-tiny.cfg" 416 "$batch")
v4t=$(cfg yolov4-tiny "$root/cfg/yolov4-tiny.cfg" 416 "$batch")
v4t_mse=$(cfg yolov4-tiny-mse "$root/cfg/yolov4-tiny.cfg" 416 "$batch" -e 's/^iou_loss=.*/iou_loss=mse/')

peak=$(OPENBLAS_NUM_THREADS=1 "$build/tests/bench_train" --peak 2 | sed -n 's/^\([0-9.]*\) GFLOP.*/\1/p')
kernel=$(OPENBLAS_NUM_THREADS=1 "$build/darknet" ops "$root/cfg/yolov4-tiny-selsync.cfg" 2>&1 |
    grep -o 'OpenBLAS [A-Za-z0-9]* ([^)]*)' | head -1 || true)
echo "== sgemm peak, one thread: $peak GFLOP/s; ${kernel:-OpenBLAS kernel not reported}"

part1() {
    echo
    echo "1. training throughput at 416x416, batch $batch ($steps timed steps after 1 warm-up)"
    printf '%-12s %4s %10s %10s %10s %8s\n' cfg thr "img/s" "ms/img" "GFLOP/img" "%peak"
    for thr in 1 2; do
        for c in "$v3" "$v4t"; do
            out=$(OPENBLAS_NUM_THREADS=$thr "$build/tests/bench_train" "$c" "$steps" 1 2>/dev/null)
            rate=$(echo "$out" | sed -n 's/^\([0-9.]*\) images\/s.*/\1/p')
            gflop=$(echo "$out" | sed -n 's/^\([0-9.]*\) GFLOP per image.*/\1/p')
            echo "$(basename "$c" .cfg) $thr $rate $gflop $peak" | awk '{ printf "%-12s %4d %10.2f %10.1f %10.3f %7.1f%%\n",
                $1, $2, $3, 1000 / $3, $4, 100 * $3 * $4 / ($5 * $2) }'
        done
    done
}

part2() {
    echo
    echo "2. where a yolov4-tiny step goes (one thread, CPU time, the least of $steps steps)"
    layers() { OPENBLAS_NUM_THREADS=1 "$build/tests/bench_train" --layers "$1" "$steps" 2>/dev/null; }
    layers "$v4t" >"$tmp/ciou.txt"
    layers "$v4t_mse" >"$tmp/mse.txt"
    share() { awk -v t="$2" '$2 == t { s += $NF + 0; ms += $(NF-3) + $(NF-2) + $(NF-1) } END { printf "%6.2f %% of the step (%.2f ms)", s, ms }' "$1"; }
    echo "  route layers (11, three CSP splits):  $(share "$tmp/ciou.txt" route)"
    echo "  yolo heads, iou_loss=ciou:            $(share "$tmp/ciou.txt" yolo)"
    echo "  yolo heads, iou_loss=mse:             $(share "$tmp/mse.txt" yolo)"
    grep 'images a step' "$tmp/ciou.txt" | sed 's/^/  (/; s/$/)/'
}

part3() {
    echo
    echo "3. mish: yolov4 at 256x256, batch 2, one thread ($steps timed steps)"
    m=$(cfg yolov4-mish "$root/cfg/yolov4.cfg" 256 2 -e '/^mosaic=/d')
    l=$(cfg yolov4-leaky "$root/cfg/yolov4.cfg" 256 2 -e '/^mosaic=/d' -e 's/^activation=mish/activation=leaky/')
    step() { OPENBLAS_NUM_THREADS=1 "$build/tests/bench_train" "$1" "$steps" 1 2>/dev/null | sed -n 's/.* in \([0-9.]*\) s.*/\1/p'; }
    i=0 # BENCH_PAIRS pairs, alternating which goes first, so that a drift of the machine's speed falls on both
    while [ $i -lt "$pairs" ]; do
        if [ $((i % 2)) -eq 0 ]; then tm=$(step "$m"); tl=$(step "$l"); else tl=$(step "$l"); tm=$(step "$m"); fi
        echo "$tm $tl $steps" | awk '{ printf "  pair %d: mish %.3f s a step, leaky %.3f s: mish costs %.1f %% of a mish step\n",
            '"$((i + 1))"', $1 / $3, $2 / $3, 100 * ($1 - $2) / $1 }' | tee -a "$tmp/pairs.txt"
        i=$((i + 1))
    done
    awk 'match($0, /costs -?[0-9.]+/) { x = substr($0, RSTART + 6, RLENGTH - 6) + 0; s += x; q += x * x; n++ }
        END { m = s / n; printf "  over %d pairs: mish costs %.1f %% ± %.1f %% (mean ± sd)\n", n, m, (n > 1 ? sqrt((q - n * m * m) / (n - 1)) : 0) }' \
        "$tmp/pairs.txt"
}

part4() {
    echo
    echo "4. mosaic: darknet detector train, the detection set, 30 steps of batch 16, one thread"
    data=$root/data/fmnist-det/fmnist-det.data
    [ -f "$data" ] || python3 "$root/scripts/data/make-detection-set.py" >/dev/null
    for mosaic in 0 1; do
        c=$(cfg "det-mosaic$mosaic" "$root/cfg/yolov4-tiny-selsync.cfg" 96 16 -e "s/^\[net\]/[net]\nmosaic=$mosaic/" \
            -e 's/^max_batches=.*/max_batches=30/' -e 's/^burn_in=.*/burn_in=5/')
        (cd "$tmp" && mkdir -p backup && OPENBLAS_NUM_THREADS=1 "$build/darknet" detector train "$data" "$c" >"$tmp/m$mosaic.out" 2>&1) || {
            echo "  mosaic=$mosaic: training failed"; tail -3 "$tmp/m$mosaic.out"; exit 1; }
        awk -v m="$mosaic" '/^Loaded: / { if (++n > 5) { w += $2; nw++ } }
            /^ *[0-9]+: .* seconds/ { if (++k > 5) { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^seconds/) s += $i; ns++ } }
            END { printf "  mosaic=%d: waits %.4f s a step for the loader, trains %.4f s a step (steps 6-30)\n", m, w / nw, s / ns }' "$tmp/m$mosaic.out"
    done
}

for part in $parts; do
    case $part in 1 | 2 | 3 | 4) "part$part" ;; *) echo "bench-yolo: no part $part (1-4)" >&2; exit 2 ;; esac
done
