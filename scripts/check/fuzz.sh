#!/bin/sh
# Usage: fuzz.sh [--no-build] [-t SECONDS | -n RUNS] [-o DIR] [-s SEED] [HARNESS...]
#        fuzz.sh --build-only
# Builds the libFuzzer harnesses of tests/fuzz with clang (ASan, UBSan; see
# tests/fuzz/clang/CMakeLists.txt) into BUILD/fuzz, from the patched Darknet
# tree of the configured build BUILD ($SELSYNC_BUILD_DIR, default build/),
# then runs each HARNESS in turn (default: all of selsync_section
# darknet_cfg darknet_lists checkpoint labels), niced: its corpus is
# DIR/corpus/HARNESS (default DIR: BUILD/fuzz/run), seeded from
# tests/fuzz/corpus/HARNESS and kept between runs; it replays the corpus,
# then fuzzes for SECONDS (default 60) or RUNS inputs with libFuzzer's
# random seed SEED (default 1). A crash, leak, undefined behaviour or input
# slower than 10 s leaves its reproducer in DIR/artefacts/HARNESS/ and makes
# the script exit 1 after that harness; libFuzzer's log is DIR/HARNESS.log,
# whose final statistics (executions, executions per second, coverage) are
# printed. --build-only stops after the build, --no-build skips it.
# Environment: CMAKE, FUZZ_CC (default clang), FUZZ_JOBS (build jobs, 2).
# Reproduce one input with: BUILD/fuzz/fuzz_HARNESS FILE
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=${SELSYNC_BUILD_DIR:-$root/build}
cmake=${CMAKE:-cmake}
limit="-max_total_time=60" out="" seed=1 build=1 run=1
while [ $# -gt 0 ]; do
    case $1 in
        -t) limit="-max_total_time=$2"; shift 2 ;;
        -n) limit="-runs=$2"; shift 2 ;;
        -o) out=$2; shift 2 ;;
        -s) seed=$2; shift 2 ;;
        --build-only) run=0; shift ;;
        --no-build) build=0; shift ;;
        -*) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
        *) break ;;
    esac
done
harnesses=${*:-selsync_section darknet_cfg darknet_lists checkpoint labels}
out=${out:-$build_dir/fuzz/run}

if [ "$build" -eq 1 ]; then
    [ -f "$build_dir/darknet-src/src/parser.c" ] || {
        echo "fuzz.sh: no patched Darknet in $build_dir; configure first: cmake -S . -B $build_dir" >&2; exit 1; }
    nice "$cmake" -S "$root/tests/fuzz/clang" -B "$build_dir/fuzz" -DCMAKE_C_COMPILER="${FUZZ_CC:-clang}" \
        -DDARKNET_DIR="$build_dir/darknet-src" >"$build_dir/fuzz-configure.log" 2>&1 \
        || { cat "$build_dir/fuzz-configure.log" >&2; exit 1; }
    nice "$cmake" --build "$build_dir/fuzz" -j"${FUZZ_JOBS:-2}" >"$build_dir/fuzz-build.log" 2>&1 \
        || { tail -40 "$build_dir/fuzz-build.log" >&2; exit 1; }
fi
[ "$run" -eq 1 ] || exit 0

status=0
for h in $harnesses; do
    corpus=$out/corpus/$h artefacts=$out/artefacts/$h log=$out/$h.log
    [ -d "$root/tests/fuzz/corpus/$h" ] || { echo "fuzz.sh: unknown harness $h" >&2; exit 2; }
    mkdir -p "$corpus" "$artefacts"
    cp -R "$root/tests/fuzz/corpus/$h/." "$corpus/"
    # checkpoints in the current file format, whatever the committed seeds hold
    [ "$h" = checkpoint ] && "$build_dir/fuzz/checkpoint_seeds" "$corpus"
    dict=$root/tests/fuzz/$h.dict
    [ -f "$dict" ] && dict="-dict=$dict" || dict=""
    echo "fuzz.sh: $h ($limit, corpus $corpus)"
    # shellcheck disable=SC2086
    if nice "$build_dir/fuzz/fuzz_$h" -seed="$seed" $limit -timeout=10 -close_fd_mask=3 \
            -print_final_stats=1 -artifact_prefix="$artefacts/" $dict "$corpus" >"$log" 2>&1; then
        grep -E "^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$log"
    else
        echo "fuzz.sh: $h FAILED (log $log, reproducers in $artefacts):"
        grep -v "^#[0-9]" "$log" | tail -60
        status=1
    fi
done
exit $status
