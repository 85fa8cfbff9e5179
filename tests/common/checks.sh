# Sourced by the shell tests (after setting src, the source tree, and work,
# their work directory).
#   check NAME EXPR   evaluates EXPR; counts a pass, or prints "FAIL NAME"
#   ok                counts a pass
#   bad TEXT...       prints "FAIL TEXT..." and counts a failure
#   fmnist_data       prepares Fashion-MNIST under $src/data (idempotent)
#                     and writes $work/fmnist.data saving to $work/backup;
#                     on failure prints the log and ends the test
#   needs_namespaces WHAT   exits 77 (skipped), saying WHAT is not tested,
#                     where scripts/emulated-cluster.sh cannot make hosts
#   cluster_up PREFIX HOSTS RATE   an emulated cluster under a name no other
#                     has (PREFIX and digits), in $name, set also when `up`
#                     failed half-way (the caller's EXIT trap removes it)
#   check_trained OUT LOGS WEIGHTS   a 2-rank, 20-step selsync run: rank
#                     0's summary in OUT, 20 step rows in LOGS/m.0.tsv and
#                     LOGS/m.1.tsv, the weights file WEIGHTS written
# A test ends with: echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
check() { if eval "$2"; then ok; else bad "$1"; fi; }

check_trained() {
    trained_out=$1 trained_logs=$2 trained_weights=$3
    check "rank 0 prints the summary of 2 ranks, 20 steps" \
        'grep -q "^selsync: summary: method=selsync, 2 ranks, 20 steps" "$trained_out"'
    check "both ranks log every step" \
        '[ "$(step_rows "$trained_logs/m.0.tsv" | wc -l)" -eq 20 ] && [ "$(step_rows "$trained_logs/m.1.tsv" | wc -l)" -eq 20 ]'
    check "the weights are written" '[ -s "$trained_weights" ]'
}
# step_rows METRICS: the step rows of a metrics file
step_rows() { grep -v '^#' "$1" | tail -n +2; }

cluster="sh ${src:-.}/scripts/emulated-cluster.sh"
needs_namespaces() {
    if ! why=$($cluster check 2>&1); then
        echo "SKIPPED: network namespaces are not permitted here ($why); $1"
        exit 77
    fi
}
cluster_up() {
    for i in 1 2 3 4 5 6 7 8 9 10; do
        try=$1$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
        $cluster up "$try" "$2" "$3"
        [ $? -eq 3 ] && continue # a cluster a killed run left
        name=$try
        return
    done
}

fmnist_data() {
    data="$src/data/fashion-mnist"
    python3 "$src/scripts/data/prepare-fashion-mnist.py" --out "$data" >"$work/prepare.log" 2>&1 \
        || { cat "$work/prepare.log"; echo "0 passed, 1 failed"; exit 1; }
    sed "s#^backup=.*#backup=$work/backup#" "$data/fmnist.data" >"$work/fmnist.data"
}
