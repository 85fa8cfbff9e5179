#!/bin/sh
# Usage: test_stall.sh TEST_COMM_MPI WORK_DIR
# A stalled rank under a real mpirun (test_comm_mpi --stall-rank: the rank
# writes its pid file at step 3, just before the named op, and is stopped
# there with SIGSTOP):
#  - 2 ranks, stopped before `any`, SELSYNC_STALL_WARN=2
#    SELSYNC_STALL_TIMEOUT=6: rank 0 warns "waiting N s in any (step 3) for
#    rank(s) 1" (N >= 2), then ends the job with exit status 1 and the
#    timeout message (N >= 6); the stopped rank does not survive the job;
#  - 3 ranks, rank 1 stopped before sum_f32; rank 0 alone with warnings
#    off (0) and a timeout of 6 s, the others warning after 60 s and without
#    a timeout: no warning; rank 0 times out naming rank 1 alone, not its
#    ring neighbour rank 2, which waits in the collective too;
#  - 2 ranks, rank 1 stopped before sum_f32v_start: rank 0's background
#    thread warns and times out (the abort comes from that thread, while
#    rank 0's own thread waits in wait_sums);
#  - 2 ranks, the root of a broadcast (rank 0) stopped before it: rank 1
#    warns and times out naming bcast and rank 0;
#  - a stall that ends (SIGCONT after the first warning) leaves the job to
#    finish with exit status 0 and every step's results right;
#  - invalid settings are refused at start with the variable's name, and
#    the settings of the ring's retired TCP links (SELSYNC_RING_LINKS,
#    SELSYNC_RING_IFNAME) on every rank, naming what replaces them.
# Each job runs under `timeout 60`: 124 means it hung.
set -u
prog=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$(dirname "$0")/../common/checks.sh"
job="" pid=""

# Whatever happens, no rank stays stopped and no job stays behind.
cleanup() {
    [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    [ -n "$job" ] && kill -TERM "$job" 2>/dev/null
    return 0
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# start NAME NP RANK OP ENV [ENV0]: a job in the background, rank RANK
# stalling before OP; ENV: "VAR=VALUE ..." of every rank, ENV0: of rank 0
# alone. Waits until the rank's pid file appears (or the job ends) and
# stops the rank.
start() {
    name=$1 np=$2 all_env=$5 rank0_env=${6:-} log=$work/$1.log pidfile=$work/$1.pid pid=""
    set -- "$prog" --stall-rank "$3" --stall-in "$4" --pid-file "$pidfile"
    if [ -n "$rank0_env" ]; then # an MPMD job: rank 0 with ENV0, the others without
        env $all_env timeout 60 ${MPIEXEC:-mpirun} --oversubscribe -np 1 env $rank0_env "$@" : \
            -np $((np - 1)) "$@" >"$log" 2>&1 &
    else
        env $all_env timeout 60 ${MPIEXEC:-mpirun} --oversubscribe -np "$np" "$@" >"$log" 2>&1 &
    fi
    job=$!
    while [ ! -s "$pidfile" ] && kill -0 "$job" 2>/dev/null; do sleep 0.1; done
    if [ -s "$pidfile" ]; then
        pid=$(cat "$pidfile")
        kill -STOP "$pid"
    else
        bad "$name: the stalling rank never reached its stall point"
    fi
}
# finish: waits for the job; rc = its exit status
finish() {
    wait "$job"; rc=$?; job=""
    echo "--- $name (exit status $rc)"; cat "$log"
}
# gone: the stopped rank has ended (or is a zombie awaiting its parent),
# waiting up to 10 s for the launcher to reap it
gone() {
    i=0
    while [ $i -lt 100 ]; do
        st=$(ps -o stat= -p "$pid" 2>/dev/null) || return 0
        case $st in Z*) return 0 ;; esac
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
# seconds FILE PATTERN: the N of the first line "... PATTERN" with N s
seconds() { sed -n "s/^selsync: rank [0-9]*: $2 \([0-9]*\) s .*/\1/p" "$1" | head -n 1; }

# --- 2 ranks, stopped before the agreement `any`: warned, then timed out -------
start any2 2 1 any "SELSYNC_STALL_WARN=2 SELSYNC_STALL_TIMEOUT=6"
finish
[ "$rc" -eq 1 ] && ok || bad "any2: exit status $rc, want 1 (124: the job hung)"
warn='selsync: rank 0: waiting [0-9]* s in any (step 3) for rank(s) 1$'
grep -q "$warn" "$log" && ok || bad "any2: no warning naming any, step 3 and rank 1"
n=$(seconds "$log" waiting)
[ -n "$n" ] && [ "$n" -ge 2 ] && ok || bad "any2: first warning after '$n' s, want >= 2"
stop='selsync: rank 0: waited [0-9]* s in any (step 3) for rank(s) 1: SELSYNC_STALL_TIMEOUT=6 reached; aborting the job$'
grep -q "$stop" "$log" && ok || bad "any2: no timeout message naming any, step 3 and rank 1"
n=$(seconds "$log" waited)
[ -n "$n" ] && [ "$n" -ge 6 ] && ok || bad "any2: timed out after '$n' s, want >= 6"
first_warn=$(grep -n "$warn" "$log" | head -n 1 | cut -d: -f1)
first_stop=$(grep -n "$stop" "$log" | head -n 1 | cut -d: -f1)
[ -n "$first_warn" ] && [ -n "$first_stop" ] && [ "$first_warn" -lt "$first_stop" ] && ok \
    || bad "any2: the warning does not come before the timeout"
! grep -q 'steps done' "$log" && ok || bad "any2: a rank finished its steps"
gone && ok || bad "any2: the stopped rank $pid is still there"

# --- 3 ranks, stopped in the ring: the missing rank, not the neighbour --------
start ring3 3 1 sum_f32 "SELSYNC_STALL_WARN=60 SELSYNC_STALL_TIMEOUT=0" \
    "SELSYNC_STALL_WARN=0 SELSYNC_STALL_TIMEOUT=6"
finish
[ "$rc" -eq 1 ] && ok || bad "ring3: exit status $rc, want 1"
! grep -q '^selsync: rank [0-9]*: waiting' "$log" && ok || bad "ring3: a warning within the default 60 s or off"
grep -q '^selsync: rank 0: waited [0-9]* s in sum_f32 (step 3) for rank(s) 1: SELSYNC_STALL_TIMEOUT=6 reached' \
    "$log" && ok || bad "ring3: rank 0 did not time out naming sum_f32, step 3 and rank 1 alone"
gone && ok || bad "ring3: the stopped rank $pid is still there"

# warned_then_timed_out NAME WAITER OP MISSING: the job ended with status 1
# after rank WAITER warned that it waits in OP (step 3) for rank MISSING and
# then timed out naming them; the stopped rank is gone
warned_then_timed_out() {
    [ "$rc" -eq 1 ] && ok || bad "$1: exit status $rc, want 1 (124: the job hung)"
    grep -q "selsync: rank $2: waiting [0-9]* s in $3 (step 3) for rank(s) $4\$" "$log" && ok \
        || bad "$1: no warning from rank $2 naming $3, step 3 and rank $4"
    grep -q "selsync: rank $2: waited [0-9]* s in $3 (step 3) for rank(s) $4: SELSYNC_STALL_TIMEOUT=6 reached; aborting the job\$" \
        "$log" && ok || bad "$1: no timeout message from rank $2 naming $3, step 3 and rank $4"
    gone && ok || bad "$1: the stopped rank $pid is still there"
}

# --- 2 ranks, stopped before a background sum: the background thread warns
# and ends the job while rank 0's own thread waits for it in wait_sums -------
start bg2 2 1 sum_f32v_start "SELSYNC_STALL_WARN=2 SELSYNC_STALL_TIMEOUT=6"
finish
warned_then_timed_out bg2 0 sum_f32v 1

# --- 2 ranks, the root of a broadcast stopped: rank 1 waits for it ------------
start bcast2 2 0 bcast "SELSYNC_STALL_WARN=2 SELSYNC_STALL_TIMEOUT=6"
finish
warned_then_timed_out bcast2 1 bcast 0

# --- a stall that ends: the warning, then the results as without it ------------
start resume2 2 1 sum_f32 "SELSYNC_STALL_WARN=1 SELSYNC_STALL_TIMEOUT=0"
while ! grep -q 'waiting [0-9]* s in sum_f32' "$log" && kill -0 "$job" 2>/dev/null; do sleep 0.1; done
[ -n "$pid" ] && kill -CONT "$pid"
finish
[ "$rc" -eq 0 ] && ok || bad "resume2: exit status $rc, want 0"
grep -q '^selsync: rank 0: waiting [0-9]* s in sum_f32 (step 3) for rank(s) 1$' "$log" && ok \
    || bad "resume2: no warning naming sum_f32, step 3 and rank 1"
[ "$(grep -c 'steps done, results right' "$log")" -eq 2 ] && ok || bad "resume2: not both ranks right"

# --- invalid settings: refused at start, naming the variable -------------------
for setting in SELSYNC_STALL_WARN=abc SELSYNC_STALL_TIMEOUT=-1 SELSYNC_STALL_WARN=1.5; do
    var=${setting%%=*} val=${setting#*=}
    log=$work/invalid.log
    env "$setting" timeout 60 ${MPIEXEC:-mpirun} --oversubscribe -np 2 "$prog" --stall-rank 1 --stall-in any \
        --pid-file "$work/invalid.pid" >"$log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$var=$val: expected whole seconds" "$log" && ok \
        || { cat "$log"; bad "$setting: exit status $rc, or no message naming it"; }
done

for setting in SELSYNC_RING_LINKS=tcp SELSYNC_RING_IFNAME=eth0; do
    var=${setting%%=*}
    log=$work/retired.log
    env "$setting" timeout 60 ${MPIEXEC:-mpirun} --oversubscribe -np 2 -x "$var" "$prog" --stall-rank 1 \
        --stall-in any --pid-file "$work/retired.pid" >"$log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] &&
        [ "$(grep -c "$setting: the ring's own TCP links are retired; .* UCX .*: unset $var" "$log")" -eq 2 ] && ok \
        || { cat "$log"; bad "$setting: exit status $rc, or not refused on both ranks naming UCX"; }
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
