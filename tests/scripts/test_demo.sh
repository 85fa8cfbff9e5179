#!/bin/sh
# Usage: test_demo.sh SOURCE_DIR BUILD_DIR WORK_DIR
# scripts/demo.sh end to end on a short cfg (cfg/fmnist-selsync.cfg with
# max_batches=40, named selsync-demo-test so that no file of a real demo is
# touched), from fixed initial weights (Darknet draws them from the clock,
# and 40 steps from an unlucky draw stay near chance), with BUILD_DIR as its
# build (SELSYNC_BUILD_DIR):
#  - it exits 0, prints its sections and asks cmake to configure the source
#    and build the darknet target in BUILD_DIR (cmake is a stub here that
#    records its arguments: the suite has built everything, and a Release
#    reconfiguration would change the build under test); apt-get is a stub
#    that fails, so the demo installs nothing;
#  - its result lines: the summary for 2 ranks and 40 steps (at least the
#    25 warm-up steps synchronised, the percentage matching), the bytes
#    against bsp, the times, and the held-out top-1 of the 10000 test
#    images, which is what `darknet classifier valid` gives on the weights
#    the demo wrote, and twice chance (0.1) at least (> 0.2: the same
#    initial weights gave 0.28 to 0.61 in six runs, as Darknet's loader
#    threads draw the images from one shared rand()); the path of the
#    training chart it drew.
set -u
src=$1 build=$2 work=$3
rm -rf "$work"; mkdir -p "$work/bin"
. "$src/tests/common/checks.sh"
name=selsync-demo-test
weights=$src/data/fashion-mnist/backup/$name.weights
trap 'rm -f "$src/backup/$name.train.log" "$src/data/fashion-mnist/backup/$name".* \
    "$src/data/fashion-mnist/backup/chart_$name.png"' EXIT
printf '#!/bin/sh\necho "$*" >>"%s/cmake.log"\n' "$work" >"$work/bin/cmake"
printf '#!/bin/sh\necho "apt-get $*: the test installs nothing" >&2\nexit 1\n' >"$work/bin/apt-get"
chmod +x "$work/bin/cmake" "$work/bin/apt-get"
{ sed 's/^max_batches=.*/max_batches=40/' "$src/cfg/fmnist-selsync.cfg" | grep -v '^log='
  printf 'log=%s/demo-rank%%r.tsv\n' "$work"; } >"$work/$name.cfg"

# `darknet partial` with no weights: the initial weights of rand()'s default seed
"$build/darknet" partial "$work/$name.cfg" "" "$work/init.weights" 100 >"$work/partial.log" 2>&1 \
    || { cat "$work/partial.log"; echo "0 passed, 1 failed"; exit 1; }
PATH="$work/bin:$PATH" SELSYNC_BUILD_DIR="$build" timeout 600 sh "$src/scripts/demo.sh" 2 "$work/$name.cfg" \
    "$work/init.weights" >"$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
check "exits 0" '[ $rc -eq 0 ]'
check "sections" '[ "$(grep "^== " "$work/out.txt" | cut -d " " -f 2 | tr "\n" " ")" = "build data train: evaluate result " ]'
check "trains on 2 ranks" 'grep -q "^== train: 2 ranks, $name.cfg$" "$work/out.txt"'
check "configures the source into the build folder" 'grep -q -- "-S $src -B $build" "$work/cmake.log"'
check "builds darknet" 'grep -q -- "--build $build .*--target darknet" "$work/cmake.log"'
result() { sed -n '/^== result$/,$p' "$work/out.txt"; }
check "result: method, ranks, steps, synchronised steps and their share" 'result | awk "
    /^  method=selsync, 2 ranks, 40 steps, [0-9]+ synchronised \\([0-9.]+%\\)\$/ {
        n = \$6; p = \$8; gsub(/[(%)]/, \"\", p); ok = n >= 25 && n <= 40 && p - n * 100 / 40 < 0.06 && n * 100 / 40 - p < 0.06 }
    END { exit !ok }"'
check "result: bytes against bsp" 'result | grep -q "^  model synchronisation sent [0-9.]* MB per rank; bsp would have sent [0-9.]* MB ([0-9.]*x as much)$"'
check "result: times" 'result | grep -q "^  time per rank: compute [0-9.]* s, measure [0-9.]* s, agree [0-9.]* s, transfer [0-9.]* s (communication [0-9.]*%)$"'
top1=$(result | sed -n 's/^  held-out top-1: \([0-9.]*\) (10000 Fashion-MNIST test images)$/\1/p')
OPENBLAS_NUM_THREADS=1 "$build/darknet" classifier valid "$src/data/fashion-mnist/fmnist.data" "$work/$name.cfg" "$weights" \
    >"$work/valid.out" 2>&1
want=$(sed -n 's/.*top 1: \([0-9.]*\),.*/\1/p' "$work/valid.out" | tail -n 1)
echo "demo's held-out top-1: $top1; classifier valid on $weights: $want"
check "result: held-out top-1 is that of the written weights" '[ -n "$top1" ] && [ "$top1" = "$want" ]'
check "result: held-out top-1 well above chance" 'awk -v t="$top1" "BEGIN { exit !(t > 0.2 && t <= 1) }"'
check "the training log" 'grep -q "^selsync: summary" "$src/backup/$name.train.log"'
check "result: the training chart, a PNG" \
    'result | grep -qx "  training chart: $src/data/fashion-mnist/backup/chart_$name.png" &&
     [ "$(head -c 4 "$src/data/fashion-mnist/backup/chart_$name.png" | od -An -tx1 | tr -d " \n")" = 89504e47 ]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
