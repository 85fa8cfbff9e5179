#!/bin/sh
# Usage: test_stock_equal.sh DARKNET SOURCE_DIR DOWNLOAD_DIR WORK_DIR [OPENMP]
# A cfg without [selsync] behaves like stock Darknet in one process. Four
# programs run the same `partial` and `classifier train`:
#   stock    the unpatched Debian tarball (scripts/build/fetch-darknet.sh), built
#            with its own Makefile;
#   ref      the tarball with patches/series, the same Makefile, REFERENCE=1
#            (Darknet's own loops and gemm);
#   cblas    the same with CBLAS=1 (OpenBLAS gemm, the series' loops) and
#            OPENMP as DARKNET was built (1, the default, or 0), which is
#            what DARKNET computes with, without the plugin (-Ofast lets the
#            compiler round a loop inside an OpenMP region unlike the same
#            loop outside one);
#   DARKNET  the project's executable, the plugin linked in.
# The training is deterministic: its list holds one image whose rows are
# uniform (Darknet's random flips and whole-image crops leave it unchanged),
# so every batch is that image 32 times.
#  - ref = stock and DARKNET = cblas bitwise: the same stdout (timings
#    aside), stderr and files, every weights file identical;
#  - DARKNET against stock: the same network table, lines, counters and
#    files, no plugin text; losses agree to 1e-3 and the final weights to
#    1e-4 (relative), as OpenBLAS and the series' loops round differently;
#  - the series' one addition to the iteration line (patch 0016): the
#    elapsed time on every line, the time left on all but the last.
set -u
darknet=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") src=$2 cache=$3 work=$4 openmp=${5:-1}
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
export OPENBLAS_NUM_THREADS=1
give_up() { cat "$1"; echo "0 passed, 1 failed"; exit 1; }

sh "$src/scripts/build/fetch-darknet.sh" "$work/stock-src" "$cache" >"$work/fetch.log" 2>&1 || give_up "$work/fetch.log"
cp -a "$work/stock-src" "$work/ref-src"
sh "$src/scripts/build/apply-patches.sh" "$work/ref-src" "$src/patches" >"$work/apply.log" 2>&1 || give_up "$work/apply.log"
cp -a "$work/ref-src" "$work/cblas-src"
make -C "$work/stock-src" -j2 >"$work/make-stock.log" 2>&1 || give_up "$work/make-stock.log"
make -C "$work/ref-src" -j2 REFERENCE=1 >"$work/make-ref.log" 2>&1 || give_up "$work/make-ref.log"
make -C "$work/cblas-src" -j2 CBLAS=1 OPENMP="$openmp" >"$work/make-cblas.log" 2>&1 || give_up "$work/make-cblas.log"

for c in 0 1 2 3 4 5 6 7 8 9; do echo "_c${c}_"; done >"$work/labels.txt"
python3 "$src/tests/common/uniform_png.py" "$work/rows_c3_.png" 28 28 20 230 || give_up /dev/null
echo "$work/rows_c3_.png" >"$work/train.list"
sed -e 's/^max_batches=.*/max_batches=10/' -e 's/^learning_rate=.*/learning_rate=0.001/' \
    "$src/cfg/fmnist-tiny.cfg" >"$work/tiny.cfg"
printf 'classes=10\ntrain=%s/train.list\nlabels=%s/labels.txt\nbackup=backup\n' "$work" "$work" >"$work/t.data"

# train NAME PROGRAM: in WORK/NAME (stdout in out, stderr in err, weights in backup/)
train() {
    mkdir -p "$work/$1/backup"
    (cd "$work/$1" && "$2" partial ../tiny.cfg "" init.weights 100 >partial.out 2>&1 &&
     "$2" classifier train ../t.data ../tiny.cfg init.weights >out 2>err)
}
# stdout without the timings (the series' elapsed and left ones too)
untimed() {
    grep -v '^Loaded: ' "$1" | sed -e 's/, elapsed [0-9]*:[0-9][0-9]:[0-9][0-9]\(, left [0-9]*:[0-9][0-9]:[0-9][0-9]\)\{0,1\}$//' \
        -e 's/ [0-9.]* seconds, / T seconds, /'
}
# ... and without the losses (compared numerically)
masked() { untimed "$1" | sed 's/^\([0-9]*, [0-9.]*\): [-0-9.nai]*, [-0-9.nai]* avg, /\1: L, L avg, /'; }
# same_run A B: identical stdout (timings aside), stderr and weights files
same_run() {
    masked "$work/$1/out" >"$work/$1/masked"
    masked "$work/$2/out" >"$work/$2/masked"
    untimed "$work/$1/out" >"$work/$1/untimed"
    untimed "$work/$2/out" >"$work/$2/untimed"
    diff "$work/$1/untimed" "$work/$2/untimed" && diff "$work/$1/err" "$work/$2/err" &&
        [ "$(cd "$work/$1/backup" && ls)" = "$(cd "$work/$2/backup" && ls)" ] &&
        for f in "$work/$1/init.weights" "$work/$1"/backup/*; do
            cmp "$f" "$work/$2/${f#"$work/$1/"}" || return 1
        done
}

for v in stock ref cblas; do
    train $v "$work/$v-src/darknet"
    check "$v: training exits 0" '[ $? -eq 0 ]'
done
train patched "$darknet"
check "patched: training exits 0" '[ $? -eq 0 ]'
check "ten iteration lines from stock and patched" \
    '[ "$(grep -c "^[0-9]*, .* avg, .* images$" "$work/stock/out")" -eq 10 ] &&
     [ "$(grep -c "^[0-9]*, .* avg, .* images, elapsed [0-9]*:[0-5][0-9]:[0-5][0-9]" "$work/patched/out")" -eq 10 ]'
check "patched: the time left on the first nine iteration lines, not on the last" \
    '[ "$(grep -c "^[0-9]*, .* images, elapsed [0-9:]*, left [0-9]*:[0-5][0-9]:[0-5][0-9]$" "$work/patched/out")" -eq 9 ] &&
     grep "^10, .* images, elapsed [0-9:]*$" "$work/patched/out" >/dev/null'

check "the series with Darknet's loops (ref) equals stock, bitwise" 'same_run stock ref'
check "the executable with the plugin equals the series' build without it (cblas), bitwise" 'same_run cblas patched'

check "patched vs stock: the same random initial weights, bitwise" 'cmp "$work/stock/init.weights" "$work/patched/init.weights"'
check "patched vs stock: the same network table and messages (stderr)" 'diff "$work/stock/err" "$work/patched/err"'
check "patched vs stock: the same lines, counters, rates and images (stdout)" 'diff "$work/stock/masked" "$work/patched/masked"'
check "patched: no plugin output" '! grep -qi "selsync\|synced" "$work/patched/out" "$work/patched/err"'
losses() { sed -n 's/^\([0-9]*\), [0-9.]*: \([-0-9.nai]*\), \([-0-9.nai]*\) avg, .*/\1 \2 \3/p' "$1"; }
losses "$work/stock/out" >"$work/stock/losses"
losses "$work/patched/out" >"$work/patched/losses"
echo "  step, stock loss and avg | patched loss and avg:"
paste -d '|' "$work/stock/losses" "$work/patched/losses" | sed 's/^/    /'
check "patched vs stock: losses agree to 1e-3" 'paste "$work/stock/losses" "$work/patched/losses" | awk "
    function off(a, b) { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; return d > 1e-3 * m + 1e-6 }
    { n++; if (\$1 != \$4 || off(\$2, \$5) || off(\$3, \$6)) bad++ } END { exit !(n == 10 && !bad) }"'
check "patched vs stock: the same files written" '[ "$(cd "$work/stock/backup" && ls)" = "$(cd "$work/patched/backup" && ls)" ]'
check "patched vs stock: final weights agree to 1e-4" \
    'python3 "$src/tests/mpi/compare_weights.py" "$work/stock/backup/tiny.weights" "$work/patched/backup/tiny.weights" 1e-4'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
