#!/bin/sh
# Usage: test_cluster_cores.sh SOURCE_DIR WORK_DIR
# The ranks of different emulated hosts (scripts/emulated-cluster.sh) may run
# on different cores: 2 hosts, unshaped, one rank per host printing its rank,
# its network namespace and the CPUs it may run on (Cpus_allowed_list).
#  - the ranks run in two different namespaces, not this one;
#  - each rank may run on some CPU, and together they may run on at least
#    2 CPUs (not every host's rank on the same single core);
#  - a binding given to mpirun still takes effect: with --bind-to core each
#    rank may run on exactly one CPU.
# Exits 77 (skipped) where network namespaces are not permitted, or where
# this test may run on fewer than 2 CPUs (nothing to tell apart).
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
needs_namespaces "the ranks' cores are not tested"
# cpus LIST: the CPUs of a list such as 0-3,6 (Cpus_allowed_list), one a line
cpus() { echo "$1" | tr ',' '\n' | awk -F- '$1 != "" { hi = NF > 1 ? $2 : $1; for (c = $1; c <= hi; c++) print c }'; }
mine=$(grep '^Cpus_allowed_list:' /proc/self/status | cut -f 2)
if [ "$(cpus "$mine" | wc -l)" -lt 2 ]; then
    echo "SKIPPED: this test may run on CPUs $mine only; ranks on different cores cannot be told apart"
    exit 77
fi
name=
trap '[ -z "$name" ] || $cluster down "$name"' EXIT
trap 'exit 1' INT TERM HUP
cluster_up tc 2 0
check "two hosts and a switch" '[ "$(ip netns list | grep -c "^$name-")" -eq 3 ]'

# ranks OUT ARGS...: 2 ranks, one per host, each writing "RANK NAMESPACE
# CPULIST" to OUT.ranks (only the ranks' lines: Open MPI may warn there too)
ranks() {
    out=$1; shift
    timeout 60 $cluster mpirun "$name" -np 2 "$@" sh -c \
        'echo "$OMPI_COMM_WORLD_RANK $(readlink /proc/self/ns/net) $(grep "^Cpus_allowed_list:" /proc/self/status | cut -f 2)"' \
        >"$out" 2>&1
    grep -E '^[01] net:\[[0-9]+\] [0-9,-]*$' "$out" >"$out.ranks"
    cat "$out"
}
field() { cut -d ' ' -f "$1" "$2"; }
here=$(readlink /proc/self/ns/net)

ranks "$work/default.out"
check "one rank per host" '[ "$(field 1 "$work/default.out.ranks" | sort -u | wc -l)" -eq 2 ] &&
    [ "$(field 2 "$work/default.out.ranks" | sort -u | grep -Fvxc "$here")" -eq 2 ]'
check "each rank may run on some CPU" '[ "$(field 3 "$work/default.out.ranks" | grep -c "[0-9]")" -eq 2 ]'
union=$(for l in $(field 3 "$work/default.out.ranks"); do cpus "$l"; done | sort -un | wc -l)
echo "the ranks may run on $union CPUs together (this test: $mine)"
check "the ranks of the two hosts are not all on one CPU" '[ "$union" -ge 2 ]'

ranks "$work/core.out" --bind-to core
check "with --bind-to core: one rank per host" '[ "$(field 1 "$work/core.out.ranks" | sort -u | wc -l)" -eq 2 ]'
check "with --bind-to core: each rank on exactly one CPU" \
    '[ "$(field 3 "$work/core.out.ranks" | grep -cx "[0-9][0-9]*")" -eq 2 ]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
