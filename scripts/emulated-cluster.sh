#!/bin/sh
# An emulated cluster on one machine: every "host" is a network namespace
# with one veth link (eth0, 10.231.0.(i+1)/24) to a bridge in a switch
# namespace, each link shaped with tbf to RATE in both directions. MPI jobs
# start in host 0 and Open MPI launches its daemons on every host through its
# rsh launcher, with an agent that enters the host's namespace instead of
# logging in: remote daemons, TCP between the hosts (UCX's or ob1's, see
# Transport below), no shared memory.
#
# Usage (as root):
#   emulated-cluster.sh check                   exit 0 when namespaces can be made here
#   emulated-cluster.sh up NAME HOSTS RATE      create NAME-h0 .. NAME-h<HOSTS-1> and NAME-sw;
#                                               RATE is a tc rate (1gbit, 100mbit) or 0 for unshaped
#   emulated-cluster.sh mpirun NAME ARGS...     mpirun ARGS in NAME-h0, one slot per host
#   emulated-cluster.sh stats NAME              bytes each host sent and received on its link
#   emulated-cluster.sh down NAME               end what runs in NAME's hosts and remove them
#   emulated-cluster.sh agent HOST COMMAND...   (the rsh agent mpirun calls)
# With EMULATED_CLUSTER_CPU=H:PCT[+H:PCT...] in its environment, `mpirun`
# limits host H (1 or more; host 0 runs mpirun itself) to PCT % of one CPU,
# as a slower or shared machine: every 0.1 s the processes of the host's
# namespace (its daemon and ranks) are put in a cgroup of the job's with
# that CPU quota per 10 ms (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us),
# removed when the job ends. (The agent cannot do it: inside a namespace's
# `ip netns exec` the cgroup file system is not mounted.)
# NAME: 1-8 letters or digits. `up` exits 3 when a cluster of that name
# exists (a caller may pick another name). Callers remove the cluster with
# `down`, also when they fail or are interrupted; `down` of a missing
# cluster does nothing.
#
# Temporary files: every `mpirun` gets a folder of its own,
# $TMPDIR/emulated-cluster.NAME.XXXXXX, with a TMPDIR per host in it (hN,
# where Open MPI keeps its session files, as on separate machines; jobs
# never share them: a job that ends removes its session folders while
# another may be creating its own). The folder goes when the job ends,
# also on SIGINT, SIGTERM or SIGHUP; `up` and `down` remove what a killed
# job of a cluster of that name left.
#
# Transport: `mpirun` uses Open MPI's UCX over TCP between the hosts
# (--mca pml ucx --mca pml_ucx_tls any -x UCX_TLS=tcp,self
# -x UCX_NET_DEVICES=eth0), or ob1 with its TCP btl where Open MPI has no
# UCX pml, said in one line. UCX_TLS=tcp,self keeps UCX off shared memory,
# which the namespaces of one machine share: every byte crosses the shaped
# links. pml_ucx_tls=any is what makes Open MPI 4.1 select UCX at all here:
# by default its pml takes UCX only when UCX offers an RDMA transport
# (rc_verbs, ud_verbs, the mlx5 ones...), and disqualifies itself on hosts
# that have only TCP; pml_ucx_devices (default mlx*) is not consulted once
# the transports are "any". A pml or btl chosen in ARGS (--mca pml ob1
# --mca btl tcp,self, for one) or in OMPI_MCA_pml / OMPI_MCA_btl wins, and
# then this script adds neither. With more hosts than cores it also adds
# --mca mpi_yield_when_idle 1 (unless ARGS or OMPI_MCA_mpi_yield_when_idle
# set it): a rank waiting for a message then yields the core it shares
# with another host's rank instead of polling on it.
#
# Binding: `mpirun` passes --bind-to none ahead of ARGS. Every host's daemon
# sees the whole machine, so Open MPI's default binding (to a core, the first
# one free on that host) put the rank of every host on the same core, CPU 0:
# unbound, the kernel spreads the ranks of all hosts over the machine's cores.
# (Dividing the cores between the hosts instead, e.g. with taskset on each
# daemon, does not hold: Open MPI binds within the whole machine regardless.)
# A binding given in ARGS wins, as Open MPI takes the last --bind-to given
# (--bind-to core binds each host's rank to CPU 0 again); --cpu-set and a
# rankfile (-rf) bind as given, and --map-by ...:PE=N needs --bind-to core
# with it.
set -eu
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
subnet=10.231.0
tmp_base=${TMPDIR:-/tmp}
die() { echo "emulated-cluster: $*" >&2; exit 1; }

check_name() {
    case $1 in *[!a-zA-Z0-9]* | "") die "bad cluster name '$1' (letters and digits only)" ;; esac
    [ ${#1} -le 8 ] || die "cluster name '$1' longer than 8 characters"
}

# the host namespaces of cluster $1, in host order
hosts_of() {
    ip netns list 2>/dev/null | awk -v p="$1-h" '
        index($1, p) == 1 && substr($1, length(p) + 1) ~ /^[0-9]+$/ { print substr($1, length(p) + 1), $1 }' \
        | sort -n | cut -d ' ' -f 2
}

has_ns() { ip netns list 2>/dev/null | grep -q "^$1\( \|$\)"; }

# the temporary folders of NAME's jobs (none when the glob matches nothing)
remove_job_folders() { rm -rf "$tmp_base/emulated-cluster.$1".*; }

# ends every process in namespace $1: SIGTERM, and SIGKILL to what is left
# 5 s later
end_processes() {
    for sig in TERM KILL; do
        pids=$(ip netns pids "$1" 2>/dev/null || true)
        [ -n "$pids" ] || return 0
        kill -s "$sig" $pids 2>/dev/null || true
        i=0
        while [ -n "$(ip netns pids "$1" 2>/dev/null || true)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    done
}

# burst_bytes RATE: what the link carries in 2 ms, at least 16 KiB. The
# shaper lets that much pass at once after an idle moment, which a real link
# does not: a larger burst (256 KB) carried a whole synchronisation of a
# small model at an unshaped speed, a smaller one lost sustained rate
# (16-32 KiB: 1 Gbit/s links carried 524 Mbit/s). 2 ms keeps the error of a
# message after an idle moment under 2 ms at every rate.
burst_bytes() {
    awk -v r="$1" 'BEGIN {
        n = r + 0; u = tolower(substr(r, length(n "") + 1))
        m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9; m["tbit"] = 1e12
        m["bps"] = 8; m["kbps"] = 8e3; m["mbps"] = 8e6; m["gbps"] = 8e9; m["tbps"] = 8e12
        if (n <= 0 || !(u in m)) exit 1
        b = n * m[u] / 8 * 0.002
        printf "%d\n", b < 16384 ? 16384 : b
    }'
}

# shape DEV in namespace NS to the rate (both links of a host are shaped:
# its eth0 limits what it sends, its bridge port what it receives)
shape() {
    [ "$3" = 0 ] && return 0
    burst=$(burst_bytes "$3") || die "cannot read the rate '$3' (a number and bit, kbit, mbit, gbit or kbps, mbps, ...)"
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst "$burst" latency 10ms
}

up() {
    name=$1 n=$2 rate=$3
    check_name "$name"
    case $n in '' | *[!0-9]*) die "HOSTS must be a number, got '$n'" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "HOSTS must be 1..200, got $n"
    sw=$name-sw
    exists() { echo "emulated-cluster: a cluster named $name exists already (remove it: $0 down $name)" >&2; exit 3; }
    [ -z "$(hosts_of "$name")" ] || exists
    if ! ip netns add "$sw" 2>/dev/null; then
        ! has_ns "$sw" || exists
        die "cannot create network namespaces here (root and CAP_SYS_ADMIN needed)"
    fi
    remove_job_folders "$name" # of a killed job of an earlier cluster of this name
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    i=0
    while [ "$i" -lt "$n" ]; do
        h=$name-h$i
        ip netns add "$h"
        ip -n "$h" link set lo up
        ip link add eth0 netns "$h" type veth peer name "p$i" netns "$sw"
        ip -n "$sw" link set "p$i" master br0
        ip -n "$sw" link set "p$i" up
        ip -n "$h" addr add "$subnet.$((i + 1))/24" dev eth0
        ip -n "$h" link set eth0 up
        shape "$h" eth0 "$rate"
        shape "$sw" "p$i" "$rate"
        i=$((i + 1))
    done
}

down() {
    check_name "$1"
    for ns in $(hosts_of "$1") "$1-sw"; do
        has_ns "$ns" || continue
        end_processes "$ns" # a daemon of an interrupted job
        ip netns del "$ns"
    done
    remove_job_folders "$1"
}

# the cgroup folder of the cpu controller (v2, or v1's cpu hierarchy)
cpu_cgroups() {
    if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
        echo /sys/fs/cgroup
    elif [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
        echo /sys/fs/cgroup/cpu
    else
        return 1
    fi
}

# limit_cpu JOB SPEC HOSTS: for each H:PCT of SPEC a cgroup for host H,
# its folder written to JOB/hH.cgroup
limit_cpu() {
    root=$(cpu_cgroups) || die "EMULATED_CLUSTER_CPU: no cgroup cpu controller to limit a host with here"
    for item in $(echo "$2" | tr '+' ' '); do
        h=${item%%:*} pct=${item#*:}
        case $h:$pct in *[!0-9:]* | :* | *: | *:*:*) die "EMULATED_CLUSTER_CPU: '$item' is not HOST:PERCENT" ;; esac
        [ "$h" -ge 1 ] && [ "$h" -lt "$3" ] || die "EMULATED_CLUSTER_CPU: host $h: allowed 1..$(($3 - 1)) (host 0 runs mpirun)"
        [ "$pct" -ge 1 ] && [ "$pct" -le 100 ] || die "EMULATED_CLUSTER_CPU: $pct %: allowed 1..100"
        cg=$root/emulated-cluster.${1##*/}.h$h
        mkdir "$cg" || die "EMULATED_CLUSTER_CPU: cannot create the cgroup $cg"
        # periods of 10 ms: the host computes at a steady fraction of its
        # speed, where the default 100 ms let it run at full speed and then
        # stand still for up to 40 ms at a time (a straggler's pauses, not
        # a slower machine)
        if [ -e "$cg/cpu.max" ]; then
            echo "$((pct * 100)) 10000" >"$cg/cpu.max"
        else
            echo 10000 >"$cg/cpu.cfs_period_us" && echo $((pct * 100)) >"$cg/cpu.cfs_quota_us"
        fi || die "EMULATED_CLUSTER_CPU: cannot set the quota of $cg"
        echo "$cg" >"$1/h$h.cgroup"
    done
}

# keep_limited NAME JOB: until JOB/done exists, puts every process of each
# limited host's namespace in its cgroup
keep_limited() {
    until [ -e "$2/done" ]; do
        for f in "$2"/h*.cgroup; do
            [ -f "$f" ] || continue
            h=${f##*/}
            for pid in $(ip netns pids "$1-${h%.cgroup}" 2>/dev/null); do
                echo "$pid" >"$(cat "$f")/cgroup.procs" 2>/dev/null || true
            done
        done
        sleep 0.1
    done
}

# removes the job's cgroups once their processes have ended (up to 5 s)
unlimit_cpu() {
    for f in "$1"/h*.cgroup; do
        [ -f "$f" ] || continue
        i=0
        until rmdir "$(cat "$f")" 2>/dev/null || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
    done
}

run_mpirun() {
    name=$1; shift
    check_name "$name"
    hosts=$(hosts_of "$name")
    [ -n "$hosts" ] || die "no cluster named $name (create it: $0 up $name HOSTS RATE)"
    job=$(mktemp -d "$tmp_base/emulated-cluster.$name.XXXXXX") || die "cannot create a folder in $tmp_base"
    trap 'touch "$job/done"; wait; unlimit_cpu "$job"; rm -rf "$job"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    list=""
    for h in $hosts; do
        list="${list:+$list,}$h:1"
        mkdir "$job/${h##*-}"
    done
    if [ -n "${EMULATED_CLUSTER_CPU:-}" ]; then
        limit_cpu "$job" "$EMULATED_CLUSTER_CPU" "$(echo $hosts | wc -w)"
        keep_limited "$name" "$job" &
    fi
    # the transport (see the header; TCP alone, so that no shared-memory
    # path bypasses the links); the agent finds the job's folder in the
    # environment mpirun passes on; --bind-to none before ARGS, which may
    # override it (see the header)
    transport="$(transport_args "$@") $(yield_args "$(echo $hosts | wc -w)" "$@")"
    set +e
    # shellcheck disable=SC2086 # transport_args prints words without spaces
    ip netns exec "$name-h0" env EMULATED_CLUSTER_JOB="$job" TMPDIR="$job/h0" \
        mpirun -H "$list" --bind-to none \
        --mca plm_rsh_agent "$self agent" --mca plm_rsh_no_tree_spawn 1 $transport --mca osc ^ucx \
        --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" "$@"
    exit $?
}

# The transport's mpirun options for ARGS ($@): none when ARGS or the
# environment (OMPI_MCA_pml, OMPI_MCA_btl) choose a pml or btl, as the
# caller's choice wins; else UCX over TCP where Open MPI has its pml, else
# ob1 over TCP, said in one line on stderr.
transport_args() {
    prev=
    for a in "$@"; do
        case $prev in --mca | -mca | --gmca | -gmca) case $a in pml | btl) return 0 ;; esac ;; esac
        prev=$a
    done
    [ -z "${OMPI_MCA_pml:-}${OMPI_MCA_btl:-}" ] || return 0
    if ompi_info 2>/dev/null | grep -q "MCA pml: ucx "; then
        echo "--mca pml ucx --mca pml_ucx_tls any -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=eth0"
    else
        echo "emulated-cluster: Open MPI has no UCX pml here: ob1 with its TCP transport" >&2
        echo "--mca pml ob1 --mca btl tcp,self"
    fi
}

# mpirun's "--mca mpi_yield_when_idle 1" when the job's HOSTS ($1) outnumber
# this machine's cores, unless ARGS (the rest) or the environment set it:
# Open MPI cannot tell that the emulated hosts share the cores, and a rank
# polling for its messages then takes the core its peer needs (4 hosts on
# 2 cores: the ring's 1 MiB sums 8x faster with it, docs/transport-ucx).
yield_args() {
    n=$1
    shift
    for a in "$@"; do case $a in mpi_yield_when_idle) return 0 ;; esac; done
    [ -z "${OMPI_MCA_mpi_yield_when_idle:-}" ] || return 0
    [ "$n" -gt "$(nproc)" ] && echo "--mca mpi_yield_when_idle 1"
    return 0
}

stats() {
    check_name "$1"
    for h in $(hosts_of "$1"); do
        printf '%s\t' "$h"
        ip netns exec "$h" cat /sys/class/net/eth0/statistics/tx_bytes /sys/class/net/eth0/statistics/rx_bytes \
            | paste -s -d '\t'
    done
}

check() {
    [ "$(id -u)" -eq 0 ] || { echo "network namespaces need root" >&2; return 1; }
    command -v ip >/dev/null || { echo "the ip command (iproute2) is missing" >&2; return 1; }
    probe=sscheck$$
    ip netns del "$probe" 2>/dev/null || true # left by a killed check that had this process id
    trap 'ip netns del "$probe" 2>/dev/null; exit 1' INT TERM HUP
    ip netns add "$probe" 2>/dev/null || { echo "network namespaces are not permitted here" >&2; return 1; }
    ok=0
    ip -n "$probe" link add br0 type bridge 2>/dev/null \
        && ip -n "$probe" link add v0 type veth peer name v1 2>/dev/null \
        && ip netns exec "$probe" tc qdisc add dev v0 root tbf rate 1gbit burst 256kb latency 10ms 2>/dev/null \
        || { echo "veth, bridge or tbf is not available in network namespaces here" >&2; ok=1; }
    ip netns del "$probe"
    return $ok
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
    check) check ;;
    up) [ $# -eq 3 ] || die "usage: $0 up NAME HOSTS RATE"; up "$@" ;;
    down) [ $# -eq 1 ] || die "usage: $0 down NAME"; down "$1" ;;
    mpirun) [ $# -ge 2 ] || die "usage: $0 mpirun NAME ARGS..."; run_mpirun "$@" ;;
    stats) [ $# -eq 1 ] || die "usage: $0 stats NAME"; stats "$1" ;;
    agent) [ $# -ge 2 ] || die "usage: $0 agent HOST COMMAND..."
           h=$1; shift
           [ -n "${EMULATED_CLUSTER_JOB:-}" ] || die "agent: no EMULATED_CLUSTER_JOB (the agent runs under '$0 mpirun')"
           exec ip netns exec "$h" env TMPDIR="$EMULATED_CLUSTER_JOB/${h##*-}" sh -c "$*" ;;
    *) die "usage: $0 check | up NAME HOSTS RATE | mpirun NAME ARGS... | stats NAME | down NAME" ;;
esac
