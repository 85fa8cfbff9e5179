# Sourced by the shell tests (after setting src, the source tree, and work,
# their work directory).
#   check NAME EXPR   evaluates EXPR; counts a pass, or prints "FAIL NAME"
#   ok                counts a pass
#   bad TEXT...       prints "FAIL TEXT..." and counts a failure
#   fmnist_data       prepares Fashion-MNIST under $src/data (idempotent)
#                     and writes $work/fmnist.data saving to $work/backup;
#                     on failure prints the log and ends the test
# A test ends with: echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
check() { if eval "$2"; then ok; else bad "$1"; fi; }

fmnist_data() {
    data="$src/data/fashion-mnist"
    python3 "$src/scripts/prepare-fashion-mnist.py" --out "$data" >"$work/prepare.log" 2>&1 \
        || { cat "$work/prepare.log"; echo "0 passed, 1 failed"; exit 1; }
    sed "s#^backup=.*#backup=$work/backup#" "$data/fmnist.data" >"$work/fmnist.data"
}
