#!/bin/sh
# Usage: test_cluster_hostfile.sh SOURCE_DIR BUILD_DIR WORK_DIR
# docs/cluster.md's launch on two emulated hosts (scripts/emulated-cluster.sh:
# a network namespace per host; mpirun's rsh agent enters a host's namespace
# where a real cluster logs in with SSH): darknet installed with
# `cmake --install`, found on PATH, an Open MPI hostfile naming the two
# hosts, TCP kept to the cluster's network with btl_tcp_if_include and
# oob_tcp_if_include, fixed port ranges, the thread count passed with -x.
#  - the job exits 0; rank 0 runs in host 0's namespace and rank 1 in
#    host 1's, neither in this one;
#  - both ranks log every step, in the folder the job started in; rank 0
#    prints the summary and writes the weights.
# Exits 77 (skipped) only where network namespaces are not permitted.
set -u
src=$1 build=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
needs_namespaces "the hostfile launch is not tested"
tmp=$(mktemp -d /tmp/selsync-cluster.XXXXXX) || exit 1
name=
trap '[ -z "$name" ] || $cluster down "$name"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

prefix=$tmp/prefix
"${CMAKE:-cmake}" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
python3 "$prefix/share/selsync-darknet/scripts/data/prepare-fashion-mnist.py" --out "$tmp/data" \
    --train-limit 256 --valid-limit 64 >"$work/prepare.log" 2>&1 || { cat "$work/prepare.log"; exit 1; }
mkdir "$tmp/run"
{ sed 's/^max_batches=.*/max_batches=20/' "$prefix/share/selsync-darknet/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\nmethod=selsync\nwindow=5\nlog=m.%%r.tsv\n'; } >"$tmp/run/tiny.cfg"

cluster_up ch 2 0
check "two hosts" '[ "$(ip netns list | grep -c "^$name-h[01]\( \|$\)")" -eq 2 ]'
printf '%s-h0 slots=1\n%s-h1 slots=1\n' "$name" "$name" >"$tmp/hosts"

# Open MPI's session files in a folder per host, as on separate machines
# (the agent takes host N's from EMULATED_CLUSTER_JOB/hN). As in
# emulated-cluster.sh: the agent, no path but TCP between the hosts, and no
# binding (every host's daemon sees all of this machine's cores).
mkdir "$tmp/job" "$tmp/job/h0" "$tmp/job/h1"
# each rank notes its network namespace (rank.R), then becomes darknet
cd "$tmp/run" || exit 1
ip netns exec "$name-h0" env EMULATED_CLUSTER_JOB="$tmp/job" TMPDIR="$tmp/job/h0" PATH="$prefix/bin:$PATH" \
    timeout 120 "${MPIEXEC:-mpirun}" --hostfile "$tmp/hosts" -np 2 \
    --mca plm_rsh_agent "sh $src/scripts/emulated-cluster.sh agent" \
    --mca pml ob1 --mca btl tcp,self --mca osc ^ucx --bind-to none \
    --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24 \
    --mca oob_tcp_dynamic_ipv4_ports 46000-46099 \
    --mca btl_tcp_port_min_v4 46100 --mca btl_tcp_port_range_v4 100 \
    -x OPENBLAS_NUM_THREADS=1 \
    sh -c 'stat -L -c %i /proc/self/ns/net >"rank.$OMPI_COMM_WORLD_RANK" && exec darknet "$@"' sh \
    classifier train "$tmp/data/fmnist.data" tiny.cfg >"$work/train.out" 2>&1
rc=$?
cd "$work" || exit 1
check "the hostfile launch exits 0" '[ $rc -eq 0 ]' || tail -n 30 "$work/train.out"

here=$(stat -L -c %i /proc/self/ns/net)
h0=$(ip netns exec "$name-h0" stat -L -c %i /proc/self/ns/net)
h1=$(ip netns exec "$name-h1" stat -L -c %i /proc/self/ns/net)
echo "namespaces: this one $here, host 0 $h0, host 1 $h1; rank 0 in $(cat "$tmp/run/rank.0" 2>&1), rank 1 in $(cat "$tmp/run/rank.1" 2>&1)"
check "the hosts are namespaces of their own" '[ "$h0" != "$h1" ] && [ "$h0" != "$here" ] && [ "$h1" != "$here" ]'
check "rank 0 ran on host 0" '[ "$(cat "$tmp/run/rank.0")" = "$h0" ]'
check "rank 1 ran on host 1" '[ "$(cat "$tmp/run/rank.1")" = "$h1" ]'
check_trained "$work/train.out" "$tmp/run" "$tmp/data/backup/tiny.weights"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
