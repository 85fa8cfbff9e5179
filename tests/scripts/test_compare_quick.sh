#!/bin/sh
# Usage: test_compare_quick.sh SOURCE_DIR WORK_DIR
# scripts/experiments/compare-methods.py --quick end to end (emulated hosts where network
# namespaces are permitted, shared memory with modelled times elsewhere):
#  - it exits 0 and writes one results folder with the tables (which
#    record the machine, the commit, the OPENBLAS_* environment, the
#    OpenBLAS kernel and the threads per rank), a row per
#    method, the plots as PNG files, and per run the cfg, the data file,
#    Darknet's output and a metrics file per rank;
#  - the figures follow the methods: BSP never steps locally, local SGD
#    always and sends nothing, FedAvg every 2 of 4 steps averages half the
#    steps, injection moves bytes, each cfg asks for its method;
#  - with --emulated-clock every emulated rank also keeps a virtual clock
#    (computation in wall time, the network modelled: at least its bytes'
#    time at 1 Gbit/s), while the tables keep the measured times;
#  - nothing of a comparison is left afterwards, also after Ctrl-C mid-run:
#    no emulated host (network namespace), no process (each runs with
#    TMPDIR in a folder of this test's, so its environment names that
#    folder, also in a removed namespace), no file in that folder.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
compare="python3 $src/scripts/experiments/compare-methods.py"
# short (Open MPI's socket paths in it must fit) and of this run only
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cq.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

# the processes whose environment names folder $1
procs_of() { grep -lsF "$1" /proc/[0-9]*/environ | cut -d / -f 3 | tr '\n' ' '; }
# left FOLDER: empty when nothing of the comparison that ran with TMPDIR=FOLDER
# remains (processes get 30 s to finish exiting), else what remains
left() {
    i=0
    while [ -n "$(procs_of "$1")" ] && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done
    p=$(procs_of "$1")
    [ -z "$p" ] || { echo "processes $p:"; for q in $p; do tr '\0' ' ' <"/proc/$q/cmdline"; echo; done; }
    [ -z "$(ls -A "$1")" ] || { echo "files:"; find "$1" | head -20; }
}

mkdir "$tmp/whole"
TMPDIR=$tmp/whole timeout 600 $compare --quick --results "$work/results" >"$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
check "exits 0" '[ $rc -eq 0 ]'
set -- "$work"/results/*-2ranks-*-4steps-quick
out=$1 folders=$#
check "one results folder" '[ $folders -eq 1 ] && [ -d "$out" ]'
md=$out/comparison.md
check "the table records the machine: CPU, commit, environment, OpenBLAS kernel, threads" \
    'grep -q "Machine: .*, [0-9]* cores, .*; commit [0-9a-f]*.*; environment: .*OPENBLAS_NUM_THREADS=1.*; OpenBLAS [A-Za-z0-9]* (.*); threads per rank: 1\." "$md" &&
     grep -q "^blas=OpenBLAS " "$out/run-info.txt"'
emulated=0
if sh "$src/scripts/emulated-cluster.sh" check >/dev/null 2>&1; then emulated=1; fi
if [ $emulated -eq 1 ]; then
    net=emulated
    check "the table names the emulated network" 'grep -q "^## Fashion-MNIST, iid shards: emulated hosts, 1gbit links" "$md"'
    check "and shared memory" 'grep -q "^## Fashion-MNIST, iid shards: shared memory" "$md"'
    name=$(sed -n 's/.*network namespaces \(cmp[0-9]*\)-h0 .*/\1/p' "$md")
    check "the emulated hosts named" '[ -n "$name" ]'
    check "the emulated hosts removed" '[ -n "$name" ] && [ "$(ip netns list | grep -c "^$name-")" -eq 0 ]'
else
    net=modelled
    check "says the network is modelled" 'grep -q "not permitted here" "$md"'
fi
for s in "Fashion-MNIST, iid shards" "Fashion-MNIST, SelDP" "Fashion-MNIST, 2 classes per rank" \
         "Fashion-MNIST, 2 classes per rank, injection (0.5, 0.5)" "Fashion-MNIST detection set" \
         "Fashion-MNIST, wide network (cfg/fmnist-wide.cfg)"; do
    check "a table for $s" 'grep -q "^## $s: " "$md"'
done
for m in "BSP" "FedAvg, every 2" "FedAvg, every 1" "FedAvg C=0.5, every 2" "SSP s=100" "SSP s=200" "local SGD" \
         "SelSync δ=0.3" "SelSync δ=0.5" "SelSync δ=0.3, per layer" "SelSync δ=0.5, per layer"; do
    check "a row for $m" 'grep -q "^| $m | [0-9.]* | " "$md"'
done
check "BSP comm/compute per setting" '[ "$(grep -c "^| Fashion-MNIST.* | [0-9.]* s | [0-9.]* s | [0-9.]* |$" "$md")" -ge 6 ]'
tsv=$out/summary.tsv
field() { awk -F'\t' -v s="$1" -v n="$net" -v m="$2" -v f="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $1 == s && $2 == n && $3 == m { print $c[f] }' "$tsv"; }
check "BSP: no local steps" '[ "$(field iid bsp local_fraction)" = 0.0000 ]'
check "local SGD: only local steps" '[ "$(field iid local local_fraction)" = 1.0000 ]'
check "local SGD: sends only the agreement" 'awk -v b="$(field iid local bytes_per_rank)" "BEGIN { exit !(b < 100) }"'
check "FedAvg every 2 of 4 steps: half local" '[ "$(field iid fedavg-2 local_fraction)" = 0.5000 ]'
check "BSP sends more than FedAvg" 'awk -v a="$(field iid bsp bytes_per_rank)" -v b="$(field iid fedavg-2 bytes_per_rank)" "BEGIN { exit !(a > 1.5 * b) }"'
check "injection moves bytes" 'awk -v b="$(field label-inject bsp inject_bytes_per_rank)" "BEGIN { exit !(b > 0) }"'
check "no injection without it" '[ "$(field label bsp inject_bytes_per_rank)" = 0 ]'
for p in accuracy-iid-$net delta-iid-$net bytes-iid-$net accuracy-det-$net accuracy-wide-$net noniid-$net; do
    check "plot $p.png" '[ "$(head -c 4 "$out/plots/$p.png" | od -An -c | tr -d " ")" = "211PNG" ]'
done
r=$out/runs/label-inject/$net-selsync-0.3-layer
check "per run: cfg, data, output, metrics of both ranks" \
    '[ -s "$r/run.cfg" ] && [ -s "$r/run.data" ] && [ -s "$r/output.txt" ] && [ -s "$r/metrics.0.tsv" ] && [ -s "$r/metrics.1.tsv" ]'
check "the cfg asks for its method" 'grep -q "^granularity=layer$" "$r/run.cfg" && grep -q "^delta=0.3$" "$r/run.cfg" && grep -q "^inject_alpha=0.5$" "$r/run.cfg"'
check "the skewed data file evaluates on the held classes only" \
    '[ "$(sed "s/.*_c\([0-9]*\)_.*/\1/" "$out/data/fmnist-label.eval.list" | sort -u | tr "\n" " ")" = "0 1 2 3 " ]'
left=$(left "$tmp/whole")
check "nothing left of the comparison" '[ -z "$left" ] || { echo "$left"; false; }'

if [ $emulated -eq 1 ]; then
    timeout 600 $compare --quick --suites wide --methods bsp --shm-methods none \
        --emulated-clock bandwidth=1Gbit,latency=50us --results "$work/clock" >"$work/clock.txt" 2>&1
    rc=$?
    cat "$work/clock.txt"
    check "--emulated-clock exits 0" '[ $rc -eq 0 ]'
    r=$(ls -d "$work"/clock/*/runs/wide/emulated-bsp)
    check "--emulated-clock: the clock counts wall time" \
        'grep -q "virtual time: 1 Gbit/s, latency 50 us, computation in wall time" "$r/output.txt"'
    last() { grep -v "^#" "$1" | awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { b += $c["bytes_sent"]; t += $c["t_compute"] + $c["t_measure"] + $c["t_agree"] + $c["t_transfer"]
          v = $c["virtual_s"] } END { print b, t, v }'; }
    row0=$(last "$r/metrics.0.tsv")
    bytes=$(echo "$row0" | cut -d " " -f 1) measured=$(echo "$row0" | cut -d " " -f 2)
    clock=$(echo "$row0" | cut -d " " -f 3) clock1=$(last "$r/metrics.1.tsv" | cut -d " " -f 3)
    check "--emulated-clock: rank 0's clock $clock s counts its $bytes bytes at 1 Gbit/s" \
        'awk -v b="$bytes" -v v="$clock" "BEGIN { exit !(b > 1e7 && v >= b / 125e6) }"'
    check "--emulated-clock: rank 1 keeps a clock too ($clock1 s)" 'awk -v v="$clock1" "BEGIN { exit !(v > 0) }"'
    tsv=$(ls "$work"/clock/*/summary.tsv)
    t=$(awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { print $c["training_s"] }' "$tsv")
    check "--emulated-clock: the table's training time $t s is the measured one" \
        'awk -v t="$t" -v m="$measured" "BEGIN { exit !(t > 0 && (t - m) ^ 2 < 1e-4) }"'
fi

# Ctrl-C in the middle of a run: exit status 130, nothing left
mkdir "$tmp/int"
TMPDIR=$tmp/int $compare --quick --suites wide --results "$work/int" >"$work/int.txt" 2>&1 &
pid=$!
# a run has begun: with 4 of its runs at a time, some are still to come
until grep -qs "emulated hosts\|not permitted" "$work/int.txt" && ls "$work"/int/*/runs/wide/*/metrics.0.tsv >/dev/null 2>&1 \
      || ! kill -0 $pid 2>/dev/null; do sleep 0.1; done
kill -INT $pid
wait $pid
rc=$?
cat "$work/int.txt"
check "interrupted: exit status 130" '[ $rc -eq 130 ]'
name=$(sed -n 's/.*emulated hosts \(cmp[0-9]*\)-h0.*/\1/p' "$work/int.txt")
check "interrupted: the emulated hosts named" '[ $emulated -eq 0 ] || [ -n "$name" ]'
check "interrupted: no emulated host left" '[ -z "$name" ] || [ "$(ip netns list | grep -c "^$name-")" -eq 0 ]'
left=$(left "$tmp/int")
check "interrupted: no process or file left" '[ -z "$left" ] || { echo "$left"; false; }'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
