#!/bin/sh
# Usage: test_two_hosts.sh DARKNET SOURCE_DIR WORK_DIR TEST_COMM_MPI
# A short SelSync training launched across two emulated hosts
# (scripts/emulated-cluster.sh: a network namespace per host, veth links to
# a bridge, shaped to 1 Gbit/s): mpirun starts in host 0 and launches its
# daemon on host 1 through the rsh agent, the ranks talk over TCP.
#  - the two ranks run in two different network namespaces, not this one;
#  - training exits 0, both ranks log every step and agree on every decision;
#  - host 1's link carried at least the bytes its rank reports as sent;
#  - the start-up line says the sums run over MPI between 2 hosts;
#  - the transport's checks (test_comm_mpi: every sum's bits) pass over
#    UCX, the emulated cluster's default transport where Open MPI has it,
#    and over ob1 when the caller chooses it;
#  - EMULATED_CLUSTER_CPU limits a host's CPU (where a cgroup cpu controller
#    is writable), and host 0 is refused;
#  - removing the cluster ends what still runs in it and leaves nothing behind.
# Exits 77 (skipped) only where network namespaces are not permitted.
set -u
darknet=$1 src=$2 work=$3 comm_test=$4
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
needs_namespaces "the emulated two-host launch is not tested"
name=
trap '[ -z "$name" ] || $cluster down "$name"' EXIT
trap 'exit 1' INT TERM HUP
cluster_up tt 2 1gbit
check "two hosts and a switch" '[ "$(ip netns list | grep -c "^$name-")" -eq 3 ]'

# where the ranks run: the inode of each rank's network namespace
timeout 60 $cluster mpirun "$name" -np 2 sh -c 'echo "$OMPI_COMM_WORLD_RANK $(stat -L -c %i /proc/self/ns/net)"' \
    >"$work/ns.out" 2>&1
here=$(stat -L -c %i /proc/self/ns/net)
# (only the ranks' lines: Open MPI may warn there too, e.g. when its launcher
# lost the race to set a daemon's process group)
grep -E '^[01] [0-9]+$' "$work/ns.out" >"$work/ns.ranks"
check "one rank per host" '[ "$(cut -d " " -f 1 "$work/ns.ranks" | sort -u | wc -l)" -eq 2 ] &&
    [ "$(cut -d " " -f 2 "$work/ns.ranks" | sort -u | grep -vc "^$here$")" -eq 2 ]'

# EMULATED_CLUSTER_CPU=1:25: host 1's rank gets at most a quarter of a CPU
# (a busy loop of 1.5 s uses under 40 % of it in CPU time), its cgroup is
# gone after the job, and host 0 cannot be limited
if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null || [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
    EMULATED_CLUSTER_CPU=1:25 timeout 60 $cluster mpirun "$name" -np 2 python3 -c '
import os, time
t = time.time()
while time.time() - t < 1.5:
    pass
c = os.times()
print("cpu", os.environ["OMPI_COMM_WORLD_RANK"], (c[0] + c[1]) / (time.time() - t))' >"$work/cpu.out" 2>&1
    # mpirun forwards the ranks' output in pieces, so one rank's line may
    # land inside the other's: read each "cpu RANK SHARE" wherever it is
    check "a host limited to 25 % of a CPU" 'grep -o "cpu [01] [0-9.e-]*" "$work/cpu.out" |
        awk '"'"'$2 == 1 { found = 1; ok = $3 < 0.4 } END { exit !(found && ok) }'"'"''
    check "the limited host's cgroup removed" '! ls /sys/fs/cgroup /sys/fs/cgroup/cpu 2>/dev/null | grep -q "emulated-cluster.emulated-cluster.$name"'
    EMULATED_CLUSTER_CPU=0:50 timeout 60 $cluster mpirun "$name" -np 2 true >"$work/cpu0.out" 2>&1
    rc=$?
    check "host 0 is not limited" '[ $rc -ne 0 ] && grep -q "host 0: allowed 1..1 (host 0 runs mpirun)" "$work/cpu0.out"'
else
    echo "no cgroup cpu controller: the CPU limit is not tested"
fi

fmnist_data
{ sed 's/^max_batches=.*/max_batches=30/' "$src/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\nmethod=selsync\ndelta=0.3\nwindow=5\nlog=%s/m.%%r.tsv\n' "$work"; } >"$work/two.cfg"
before=$($cluster stats "$name" | awk '$1 ~ /-h1$/ { print $2 }')
OPENBLAS_NUM_THREADS=1 timeout 300 $cluster mpirun "$name" -np 2 \
    "$darknet" classifier train "$work/fmnist.data" "$work/two.cfg" >"$work/train.out" 2>&1
check "training across the hosts exits 0" '[ $? -eq 0 ]'
after=$($cluster stats "$name" | awk '$1 ~ /-h1$/ { print $2 }')
check "weights written" '[ -s "$work/backup/two.weights" ]'
rows() { grep -v '^#' "$1" | tail -n +2; }
check "every step logged by both ranks" '[ "$(rows "$work/m.0.tsv" | wc -l)" -eq 30 ] && [ "$(rows "$work/m.1.tsv" | wc -l)" -eq 30 ]'
check "the ranks agree on every decision" \
    '[ "$(rows "$work/m.0.tsv" | cut -f 1,8)" = "$(rows "$work/m.1.tsv" | cut -f 1,8)" ]'
check "the warm-up steps synchronised" '[ "$(rows "$work/m.0.tsv" | cut -f 8 | grep -c "^sync$")" -ge 5 ]'
sent=$(rows "$work/m.1.tsv" | awk -F'\t' '{ s += $10 } END { printf "%d", s }')
echo "rank 1 reports $sent bytes sent; its link carried $((after - before)) bytes"
check "the link carried what rank 1 sent" '[ "$sent" -gt 0 ] && [ $((after - before)) -ge "$sent" ]'
check "the start-up line: the sums over MPI between 2 hosts" 'grep -q "; sums over MPI (2 hosts)$" "$work/train.out"'

# the transport's own checks on both of Open MPI's transports: UCX (the
# cluster's default where Open MPI has it) and ob1 (the caller's choice
# wins); every sum gives the same bits on every rank over both
for pml in default ob1; do
    opts=; [ $pml = ob1 ] && opts="--mca pml ob1 --mca btl tcp,self"
    # shellcheck disable=SC2086 # opts: words without spaces
    timeout 240 $cluster mpirun "$name" -np 2 $opts --mca pml_base_verbose 10 "$comm_test" >"$work/comm-$pml.out" 2>&1
    rc=$?
    want=$pml; [ $pml = default ] && { want=ucx; ompi_info | grep -q "MCA pml: ucx " || want=ob1; }
    check "the transport's checks pass ($pml: $want)" \
        '[ $rc -eq 0 ] && grep -q "^[0-9]* passed, 0 failed" "$work/comm-$pml.out" &&
         grep -q "^# 2 ranks; 2 hosts$" "$work/comm-$pml.out" &&
         [ "$(grep -c "select: component $want selected" "$work/comm-$pml.out")" -eq 2 ]'
done

# removing the cluster ends a process still running in a host
ip netns exec "$name-h1" sleep 300 &
sleeper=$!
i=0 # until the sleeper runs in the host (ip netns exec enters it, then becomes sleep)
until ip netns pids "$name-h1" | grep -qx "$sleeper" || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
$cluster down "$name"
check "down exits 0" '[ $? -eq 0 ]'
wait "$sleeper" 2>/dev/null
check "what ran in a host has ended" '! kill -0 "$sleeper" 2>/dev/null'
check "no namespace left" '[ "$(ip netns list | grep -c "^$name-")" -eq 0 ]'
check "a second down does nothing" '$cluster down "$name"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
