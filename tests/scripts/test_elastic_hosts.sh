#!/bin/sh
# Usage: test_elastic_hosts.sh SOURCE_DIR BUILD_DIR WORK_DIR [PML]
# selsync-elastic, installed beside darknet, on 4 emulated hosts, over Open
# MPI's UCX (PML ucx, the default; every rank of both starts selects it) or
# ob1 with its TCP btl (PML ob1)
# (scripts/emulated-cluster.sh): one host is made unreachable in the middle
# of a run (its link down, then its processes killed, as when a machine
# loses power) after the second checkpoint. Open MPI's daemons notice the
# lost host through TCP keepalive (shortened as docs/cluster.md says); the
# launcher's probe (a TCP connection from host 0, the way Open MPI's
# daemons reach a host) finds it gone and restarts on the 3 others from the checkpoint.
#  - the launcher exits 0 and logs the failure, the host it dropped, and the
#    second start of 3 ranks from the checkpoint;
#  - the resumed job says it resumed from a checkpoint of 4 ranks on 3, the
#    metrics file of rank 0 marks the restart, the summary is of 3 ranks and
#    every step, and the final weights are written;
#  - rank 0's metrics file has a row for every step (the rows up to the
#    checkpoint were flushed with it); at most checkpoint_every steps were
#    trained twice;
#  - the seconds from the host's loss to the second start and to the
#    first resumed step are printed (the goal: under 30 s plus mpirun's
#    start).
# Exits 77 (skipped) only where network namespaces are not permitted, or
# with PML ucx where Open MPI has no UCX pml.
set -u
src=$1 build=$2 work=$3 pml=${4:-ucx}
case $pml in
    ucx) ompi_info | grep -q "MCA pml: ucx " || { echo "Open MPI has no UCX pml: not tested over UCX"; exit 77; }
         transport="--mca pml ucx --mca pml_ucx_tls any --mca pml_base_verbose 10 -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=eth0" ;;
    ob1) transport="--mca pml ob1 --mca btl tcp,self --mca osc ^ucx --mca pml_base_verbose 10" ;;
    *) echo "test_elastic_hosts.sh: PML is ucx or ob1, not '$pml'" >&2; exit 2 ;;
esac
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
needs_namespaces "the launcher's restart without a lost host is not tested"
tmp=$(mktemp -d /tmp/selsync-elastic.XXXXXX) || exit 1
name= launcher=
trap '[ -z "$launcher" ] || kill "$launcher" 2>/dev/null; [ -z "$name" ] || $cluster down "$name"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

prefix=$tmp/prefix
"${CMAKE:-cmake}" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
check "selsync-elastic is installed beside darknet" '[ -x "$prefix/bin/selsync-elastic" ] && [ -x "$prefix/bin/darknet" ]'
python3 "$prefix/share/selsync-darknet/scripts/data/prepare-fashion-mnist.py" --out "$tmp/data" \
    --train-limit 512 --valid-limit 64 >"$work/prepare.log" 2>&1 || { cat "$work/prepare.log"; exit 1; }
mkdir "$tmp/run"
every=50 steps=400
{ sed "s/^max_batches=.*/max_batches=$steps/" "$prefix/share/selsync-darknet/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\nmethod=selsync\nwindow=5\nlog=m.%%r.tsv\ncheckpoint_every=%d\nchart_every=0\n' "$every"; } \
    >"$tmp/run/tiny.cfg"
checkpoint=$tmp/data/backup/tiny_checkpoint.weights

cluster_up el 4 0
[ -n "$name" ] || { echo "no emulated cluster"; exit 1; }
i=0
while [ $i -lt 4 ]; do echo "$name-h$i slots=1"; i=$((i + 1)); done >"$tmp/hosts"
mkdir "$tmp/job" "$tmp/job/h0" "$tmp/job/h1" "$tmp/job/h2" "$tmp/job/h3"
# mpirun starts in host 0, as a login on its first host would
cat >"$tmp/mpirun" <<EOF
#!/bin/sh
exec ip netns exec "$name-h0" env EMULATED_CLUSTER_JOB="$tmp/job" TMPDIR="$tmp/job/h0" PATH="$prefix/bin:\$PATH" \\
    ${MPIEXEC:-mpirun} "\$@"
EOF
# a host answers when host 0 reaches its address (10.231.0.N+1 for NAME-hN)
# over TCP: a closed port's refusal is an answer, silence is not
cat >"$tmp/probe" <<EOF
#!/bin/sh
exec ip netns exec "$name-h0" python3 -c '
import errno, socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(0 if s.connect_ex((sys.argv[1], 9)) in (0, errno.ECONNREFUSED) else 1)' "10.231.0.\$((\${1##*-h} + 1))"
EOF
chmod +x "$tmp/mpirun" "$tmp/probe"

cd "$tmp/run" || exit 1
# shellcheck disable=SC2086 # transport: words without spaces
"$prefix/bin/selsync-elastic" --hostfile "$tmp/hosts" --checkpoint "$checkpoint" --probe "$tmp/probe" \
    --mpirun "$tmp/mpirun" --max-restarts 2 --log "$work/launcher.log" \
    --mca plm_rsh_agent "sh $src/scripts/emulated-cluster.sh agent" \
    $transport --bind-to none \
    --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24 \
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 \
    -x OPENBLAS_NUM_THREADS=1 -x SELSYNC_STALL_TIMEOUT=10 \
    -- darknet classifier train "$tmp/data/fmnist.data" tiny.cfg >"$work/train.out" 2>&1 &
launcher=$!

# the host goes after the second checkpoint
rows() { grep -v '^#' "$tmp/run/m.0.tsv" 2>/dev/null | wc -l; }
t=0
while [ "$(rows)" -lt $((2 * every + 5)) ] && [ $t -lt 1200 ] && kill -0 $launcher 2>/dev/null; do sleep 0.1; t=$((t + 1)); done
check "the first run reached step $((2 * every + 4))" '[ "$(rows)" -ge $((2 * every + 5)) ]' || tail -n 20 "$work/train.out"
lost_at=$(date +%s.%N)
ip -n "$name-h2" link set eth0 down
pids=$(ip netns pids "$name-h2")
[ -z "$pids" ] || kill -KILL $pids
t=0
while kill -0 $launcher 2>/dev/null && [ $t -lt 2400 ]; do sleep 0.1; t=$((t + 1)); done
kill -0 $launcher 2>/dev/null && { kill $launcher; bad "the launcher did not finish within 240 s of the loss"; }
wait $launcher
rc=$?
launcher=
cd "$work" || exit 1
cp "$tmp/run/m.0.tsv" "$work/" 2>/dev/null # kept for a look after the test
check "the launcher exits 0" '[ $rc -eq 0 ]' || { tail -n 30 "$work/train.out"; cat "$work/launcher.log"; }
check "it logs the failure and the host it dropped" \
    'grep -q "run 1 failed (exit status [0-9]*); not answering: $name-h2; restart 1 of 2" "$work/launcher.log"'
check "it starts 3 ranks without the lost host, from the checkpoint" \
    'grep -q "start 2: 3 ranks on 3 hosts ($name-h0 $name-h1 $name-h3), without $name-h2 (not answering), from the checkpoint $checkpoint" "$work/launcher.log"'
check "the resumed job says it resumed on 3 ranks from a checkpoint of 4" \
    'grep -q "resumed at step [0-9]* from a checkpoint of 4 ranks on 3" "$work/train.out"'
check "rank 0's metrics file marks the restart" 'grep -q "^# resumed at step [0-9]* from .*, a checkpoint of 4 ranks, on 3" "$tmp/run/m.0.tsv"'
check "the summary is of 3 ranks and $steps steps" 'grep -q "^selsync: summary: method=selsync, 3 ranks, $steps steps" "$work/train.out"'
check "every rank of both starts ran over $pml (7)" '[ "$(grep -c "select: component $pml selected" "$work/train.out")" -eq 7 ]'
check "the final weights are written" '[ -s "$tmp/data/backup/tiny_final.weights" ] || [ -s "$tmp/data/backup/tiny.weights" ]'
steps_logged() { grep -v '^#' "$tmp/run/m.0.tsv" | tail -n +2 | cut -f1; }
check "rank 0's metrics file has a row for every step (those up to the checkpoint flushed with it)" \
    '[ "$(steps_logged | sort -n -u | wc -l)" -eq $steps ] && [ "$(steps_logged | sort -n -u | tail -n 1)" -eq $((steps - 1)) ]'
twice=$(steps_logged | sort | uniq -d | wc -l)
check "at most $every steps trained twice ($twice)" '[ "$twice" -le "$every" ]'
# the seconds from the loss to the second start and to its first step row
started=$(grep "start 2:" "$work/launcher.log" | sed 's/^selsync-elastic: \([0-9-]* [0-9:]*\):.*/\1/')
echo "the host lost at $(date -d @"${lost_at%.*}" '+%H:%M:%S'); the second start at ${started#* }:" \
    "$(( $(date -d "$started" +%s) - ${lost_at%.*} )) s later"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
