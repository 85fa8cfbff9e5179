#!/bin/sh
# Usage: test_ssp.sh TRAIN_SYNTHETIC DARKNET WORK_DIR
# method = ssp under a real mpirun, on the synthetic data of
# train_synthetic.c (rank 0 serves, rank r trains part r - 1):
#  - s = 0 with 2 workers (3 processes) reaches the parameters of fedavg
#    with fedavg_interval = 1 on 2 ranks, within 1e-5 of the largest
#    parameter (the server adds update / 2 twice where fedavg sums and
#    halves: the same mean up to float rounding), also with the messages
#    cut into 4-byte pieces (every message a multiple: the empty-piece end);
#  - the server's trace ($SELSYNC_SSP_TRACE) never shows a pull answered
#    with clock - slowest > s, and a held pull is answered as soon as the
#    bound allows it (at a lead of exactly s): s = 0, where the first of the
#    2 workers to push each step is always held, and s = 2 with 3 workers of
#    which one sleeps every step (whether pulls are held there depends on
#    the schedule; what is asserted holds on any); every worker's t_agree of
#    a step is the wait the server reports for that pull;
#  - uneven speeds finish with exit status 0, a large s never holds a pull;
#  - a worker killed with SIGKILL ends the job with a non-zero status (not
#    the timeout's);
#  - ssp on one process is a clear error;
#  - one worker (2 processes), and bsp on one process: bsp would send
#    nothing, so the summary gives no ratio; no summary line of any run
#    shows inf or nan;
#  - `darknet detector train` with 2 workers on a tiny generated set: the
#    server skips Darknet's loop, serves at TRAIN_END and saves once; the
#    first worker alone shows the iterations; without max_batches a clear
#    error.
set -u
prog=$1 darknet=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
mpi() { np=$1; shift; timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np "$np" "$prog" "$@" >>"$work/log" 2>&1; }

# cfg SELSYNC_LINES: a small conv + BN + connected network
cfg() {
    printf '[net]\nbatch=4\nsubdivisions=1\nheight=6\nwidth=6\nchannels=2\n'
    printf 'learning_rate=0.05\nmomentum=0.9\ndecay=0.0005\npolicy=constant\nmax_batches=1000000\n\n'
    printf '[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n'
    printf '[connected]\noutput=3\nactivation=linear\n\n[softmax]\n'
    [ -n "$1" ] && printf '\n[selsync]\n%s\n' "$1"
    return 0
}
column() { awk -F'\t' -v c="$1" '/^#/ { next } !k { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } { print $k }' "$2"; }
# bound TRACE S: every answered pull within the bound, every held one at a
# lead of exactly S; prints "pulls held maxlead"
bound() {
    awk -v s="$2" '/^#/ { next } { n++; h += $4; l = $2 - $3; if (l > m) m = l
                                   if (l > s || l < 0 || ($4 && l != s)) bad++ }
        END { print n + 0, h + 0, m + 0; exit bad > 0 }' "$1"
}
# waits TRACE PREFIX WORKERS: every worker's t_agree of step t (PREFIX.R.tsv)
# is the server's wait for its pull at clock t + 1, to the trace's 6 decimals
waits() {
    r=1
    while [ $r -le "$3" ]; do
        column t_agree "$2.$r.tsv" | awk -v r=$r -v trace="$1" '
            BEGIN { while ((getline line < trace) > 0) { split(line, f, "\t")
                        if (f[1] == r && f[2] > 0) { w[f[2] - 1] = f[5]; n++ } } }
            { if (!((NR - 1) in w) || $1 - w[NR - 1] > 2e-6 || w[NR - 1] - $1 > 2e-6) bad++ }
            END { exit bad > 0 || NR != n }' || return 1
        r=$((r + 1))
    done
}

cfg "" >"$work/init.cfg"
"$prog" "$work/init.cfg" 0 "$work/init" --save "$work/init.weights" >>"$work/log" 2>&1

# --- s = 0 == fedavg every step ------------------------------------------------
cfg "method=fedavg
fedavg_interval=1
overlap=0" >"$work/fed.cfg"
mpi 2 "$work/fed.cfg" 20 "$work/fed" --init "$work/init.weights" --save "$work/fed.weights" || bad "fedavg run failed"
cfg "method=ssp
ssp_staleness=0
log=$work/s0.%r.tsv" >"$work/s0.cfg"
SELSYNC_SSP_TRACE=$work/s0.trace mpi 3 "$work/s0.cfg" 20 "$work/s0" --ssp --init "$work/init.weights" \
    --save "$work/s0.weights" || bad "ssp s=0 run failed"
python3 "$here/compare_weights.py" "$work/s0.weights" "$work/fed.weights" 1e-5 \
    && ok || bad "ssp s=0 on 2 workers differs from fedavg_interval=1 on 2 ranks"
r=$(bound "$work/s0.trace" 0) && ok || bad "s=0: a pull answered beyond the bound: $r"
[ "$r" = "42 20 0" ] && ok || bad "s=0: expected 42 pulls (2 x 21), 20 held, lead 0; got $r"
waits "$work/s0.trace" "$work/s0" 2 && ok || bad "s=0: a worker's t_agree is not the server's wait"
[ "$(cat "$work/s0.0.hashes")" = "$(grep final "$work/s0.0.hashes")" ] && ok || bad "the server trained"
[ "$(column decision "$work/s0.1.tsv" | grep -c sync)" -eq 20 ] && [ "$(column decision "$work/s0.2.tsv" | wc -l)" -eq 20 ] \
    && ok || bad "workers' metrics: not 20 synchronised steps each"
[ "$(column step "$work/s0.0.tsv" | wc -l)" -eq 0 ] && ok || bad "the server's metrics file has steps"
grep -q "^selsync: summary: method=ssp, 3 ranks (server + 2 workers), staleness 0, 20 steps per worker" "$work/log" \
    && ok || bad "no ssp summary"

SELSYNC_SSP_TRACE=$work/c0.trace mpi 3 "$work/s0.cfg" 20 "$work/c0" --ssp --init "$work/init.weights" \
    --save "$work/c0.weights" --chunk-bytes 4 || bad "ssp s=0 run in 4-byte pieces failed"
python3 "$here/compare_weights.py" "$work/c0.weights" "$work/fed.weights" 1e-5 \
    && ok || bad "ssp s=0 in 4-byte pieces differs from fedavg"

# --- s = 2, 3 workers, worker 3 sleeps 20 ms per step ---------------------------
cfg "method=ssp
ssp_staleness=2
log=$work/s2.%r.tsv" >"$work/s2.cfg"
SELSYNC_SSP_TRACE=$work/s2.trace mpi 4 "$work/s2.cfg" 30 "$work/s2" --ssp --slow-rank 3 --slow-ms 20 \
    && ok || bad "ssp s=2 with a slow worker failed"
r=$(bound "$work/s2.trace" 2) && ok || bad "s=2: a pull answered beyond the bound, or held and answered late: $r"
echo "s=2, one slow worker: pulls held maxlead = $r"
set -- $r
[ "$1" -eq 93 ] && ok || bad "s=2: expected 93 pulls (3 x 31); got $r"
waits "$work/s2.trace" "$work/s2" 3 && ok || bad "s=2: a worker's t_agree is not the server's wait"

# --- a large s: the fast workers never wait -------------------------------------
cfg "method=ssp
ssp_staleness=1000" >"$work/big.cfg"
SELSYNC_SSP_TRACE=$work/big.trace mpi 4 "$work/big.cfg" 30 "$work/big" --ssp --slow-rank 2 --slow-ms 20 \
    && ok || bad "ssp s=1000 with a slow worker failed"
r=$(bound "$work/big.trace" 1000) && ok || bad "s=1000: bound exceeded: $r"
set -- $r
[ "$1" -eq 93 ] && [ "$2" -eq 0 ] && ok || bad "s=1000: expected 93 pulls, none held; got $r"

# --- a worker killed mid-run ends the job ---------------------------------------
rm -f "$work/kill.rc"
( timeout 60 ${MPIEXEC:-mpirun} --oversubscribe -np 4 "$prog" "$work/s2.cfg" 100000 "$work/kill" --ssp \
      --slow-rank 3 --slow-ms 5 >"$work/kill.log" 2>&1; echo $? >"$work/kill.rc" ) &
# rank 2 opens its hashes file after the initial pull: it is training then
i=0
while [ ! -e "$work/kill.2.hashes" ] && [ ! -s "$work/kill.rc" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 "$(cat "$work/kill.2.pid")"
wait
rc=$(cat "$work/kill.rc")
echo "killed worker: job ended with status $rc"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && ok || bad "killed worker: status $rc (124: it did not end within 60 s)"
grep -q "rank 2 .*exited on signal 9" "$work/kill.log" && ok || bad "killed worker: no message naming it"

# --- Darknet's detector trainer ---------------------------------------------------
python3 "$here/make_tiny_detection.py" "$work/det" 8 >>"$work/log" 2>&1
{ cat "$work/det/tiny.cfg"
  printf '\n[selsync]\nmethod=ssp\nssp_staleness=1\nlog=%s/det.%%r.tsv\n' "$work"; } >"$work/det.cfg"
timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np 3 "$darknet" detector train "$work/det/tiny.data" "$work/det.cfg" \
    >"$work/det.out" 2>&1 && ok || bad "detector with ssp failed (see $work/det.out)"
[ "$(grep -c "Saving weights" "$work/det.out")" -eq 1 ] && [ -s "$work/det/backup/det_final.weights" ] \
    && ok || bad "detector: weights not saved exactly once"
grep -q "^selsync: summary: method=ssp, 3 ranks (server + 2 workers), staleness 1, 6 steps per worker" "$work/det.out" \
    && ok || bad "detector: no ssp summary"
[ "$(column step "$work/det.1.tsv" | wc -l)" -eq 6 ] && [ "$(column step "$work/det.0.tsv" | wc -l)" -eq 0 ] \
    && ok || bad "detector: expected 6 steps on a worker, none on the server"
[ "$(grep -c "| ssp, blocked" "$work/det.out")" -eq 6 ] \
    && ok || bad "detector: the first worker alone should show its 6 iterations"
sed 's/^max_batches=.*/max_batches=0/' "$work/det.cfg" >"$work/det0.cfg"
timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np 2 "$darknet" detector train "$work/det/tiny.data" "$work/det0.cfg" \
    >"$work/det0.out" 2>&1 && bad "ssp without max_batches succeeded" || ok
grep -q "det0.cfg: \[selsync\] method = ssp needs max_batches > 0 in \[net\]" "$work/det0.out" \
    && ok || bad "ssp without max_batches: no clear message"

# --- one process ------------------------------------------------------------------
mpi 1 "$work/s0.cfg" 5 "$work/one" --ssp && bad "ssp on 1 process succeeded" || ok
grep -q "method = 'ssp': needs at least 2 ranks" "$work/log" && ok || bad "ssp on 1 process: no clear message"

# --- one worker; bsp on one process: no ratio to 0 bytes -------------------------
timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np 2 "$prog" "$work/s2.cfg" 5 "$work/w1" --ssp \
    >"$work/w1.out" 2>&1 && ok || bad "ssp with one worker failed (see $work/w1.out)"
grep -q "^selsync: summary: method=ssp, 2 ranks (server + 1 worker), staleness 2, 5 steps per worker" "$work/w1.out" \
    && ok || bad "one worker: no ssp summary"
grep -q "^selsync: summary: pushed and pulled [0-9.]* MB per worker vs 0.00 MB sent for bsp$" "$work/w1.out" \
    && ok || bad "one worker: the summary gives a ratio to bsp's 0 bytes"
cfg "method=bsp" >"$work/b1.cfg"
"$prog" "$work/b1.cfg" 5 "$work/b1" >"$work/b1.out" 2>&1 && ok || bad "bsp on one process failed"
grep -q "^selsync: summary: model synchronisation sent 0.00 MB per rank; bsp would have sent 0.00 MB$" \
    "$work/b1.out" && ok || bad "bsp on one process: the summary gives a ratio of 0 bytes"
grep -h "^selsync: summary" "$work/log" "$work"/*.out >"$work/summaries"
[ "$(grep -cE "for bsp|bsp would" "$work/summaries")" -eq 8 ] && ! grep -iE "(^|[^a-z])(inf|nan)" "$work/summaries" \
    && ok || bad "a summary without its bsp line, or with inf or nan"

[ "$fail" -gt 0 ] && tail -20 "$work/log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
