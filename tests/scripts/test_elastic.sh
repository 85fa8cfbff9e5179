#!/bin/sh
# Usage: test_elastic.sh SOURCE_DIR WORK_DIR
# scripts/selsync-elastic's decisions, with a stand-in for mpirun (it
# records its arguments and exits as a plan says, writing a new checkpoint
# first when the plan asks) and a probe that reads which hosts are down:
#  - a job that ends with 0 is run once, on every answering host, -np the
#    sum of their slots, the mpirun options passed through in order;
#  - a failure with a host gone restarts without it, with the checkpoint as
#    the command's WEIGHTS (replacing the one given, or put after CFG);
#    a host that answers again is back at the next start;
#  - a failure with every host of the run answering and no new checkpoint
#    is not restarted (a host already gone at its start is no new loss), and its exit status is the launcher's; with a new
#    checkpoint it is;
#  - it gives up (exit 1, said) after --max-restarts, and when fewer than
#    --min-hosts answer; every start and restart is logged with its reason;
#  - options that choose hosts or ranks, and commands without `train DATA
#    CFG`, are refused (exit 2) before anything runs.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
elastic="sh $src/scripts/selsync-elastic"
cd "$work" || exit 1

# the stand-in: run N appends its arguments to runs (one line each) and
# exits with line N of plan ("CODE" or "CODE checkpoint")
cat >fake-mpirun <<'EOF'
#!/bin/sh
n=$(($(wc -l <runs 2>/dev/null || echo 0) + 1))
echo "$*" >>runs
set -- $(sed -n "${n}p" plan)
[ "${2:-}" = checkpoint ] && { echo "state $n" >ckpt.tmp; mv ckpt.tmp ckpt.weights; }
exit "${1:-0}"
EOF
# a host answers unless it is listed in down
printf '#!/bin/sh\n! grep -qx "$1" down\n' >probe
chmod +x fake-mpirun probe
printf 'a slots=2\nb slots=1 # comment\n\n# c\nc\n' >hosts
common="--hostfile hosts --checkpoint ckpt.weights --probe ./probe --mpirun ./fake-mpirun --log launcher.log"
fresh() { rm -f runs ckpt.weights launcher.log; : >down; printf '%s\n' "$@" >plan; }

# --- a job that succeeds ------------------------------------------------------------
fresh 0
$elastic $common --mca btl tcp,self -x A=1 -- darknet classifier train d.data n.cfg >out 2>&1
rc=$?
check "success: exit 0" '[ $rc -eq 0 ]' || cat out
check "success: one run, -np 4 (slots 2 + 1 + 1), options in order, the command as given" \
    '[ "$(wc -l <runs)" -eq 1 ] && grep -q -- "-np 4 --mca btl tcp,self -x A=1 darknet classifier train d.data n.cfg$" runs'
check "success: the log says the start and the end" \
    'grep -q "start 1: 4 ranks on 3 hosts (a b c), from the command.s weights" launcher.log && grep -q "run 1 finished" launcher.log'

# --- a host lost: restart without it, from the checkpoint ------------------------------
fresh "1 checkpoint" 0
cat >fake-mpirun-drop <<'EOF'
#!/bin/sh
./fake-mpirun "$@"; rc=$?
[ "$(wc -l <runs)" -eq 1 ] && echo b >down
exit $rc
EOF
chmod +x fake-mpirun-drop
$elastic $common --mpirun ./fake-mpirun-drop -- darknet detector train d.data n.cfg old.weights -clear >out 2>&1
rc=$?
check "lost host: exit 0 after the restart" '[ $rc -eq 0 ]' || cat out
check "lost host: the second run has -np 3, the checkpoint in place of the weights, the flag kept" \
    '[ "$(wc -l <runs)" -eq 2 ] && sed -n 2p runs | grep -q -- "-np 3 darknet detector train d.data n.cfg ckpt.weights -clear$"'
check "lost host: the log names the host and the restart" \
    'grep -q "run 1 failed (exit status 1); not answering: b; restart 1 of 3" launcher.log &&
     grep -q "start 2: 3 ranks on 2 hosts (a c), without b (not answering), from the checkpoint ckpt.weights" launcher.log'

# the checkpoint put after CFG when the command has no weights; b back
fresh "1 checkpoint" 0
cat >fake-mpirun-back <<'EOF'
#!/bin/sh
./fake-mpirun "$@"; rc=$?
[ "$(wc -l <runs)" -eq 1 ] && : >down
exit $rc
EOF
chmod +x fake-mpirun-back
echo c >down
$elastic $common --mpirun ./fake-mpirun-back -- darknet classifier train d.data n.cfg -clear >out 2>&1
rc=$?
check "host back: exit 0" '[ $rc -eq 0 ]' || cat out
check "host back: the first run without c (-np 3), the second with it (-np 4) and the checkpoint after CFG" \
    'sed -n 1p runs | grep -q -- "-np 3 darknet classifier train d.data n.cfg -clear$" &&
     sed -n 2p runs | grep -q -- "-np 4 darknet classifier train d.data n.cfg ckpt.weights -clear$"'

# --- failures that are not a lost host ------------------------------------------------
fresh 7
$elastic $common -- darknet classifier train d.data bad.cfg >out 2>&1
rc=$?
check "no progress, every host answering: not restarted, the job's status 7" \
    '[ $rc -eq 7 ] && [ "$(wc -l <runs)" -eq 1 ] && grep -q "not a lost host, not restarting" launcher.log'
fresh 7
echo c >down
$elastic $common -- darknet classifier train d.data bad.cfg >out 2>&1
rc=$?
check "a host gone before the start, no progress: not a new loss, not restarted" \
    '[ $rc -eq 7 ] && [ "$(wc -l <runs)" -eq 1 ] && grep -q "not a lost host, not restarting" launcher.log'
fresh "9 checkpoint" 0
$elastic $common -- darknet classifier train d.data n.cfg >out 2>&1
rc=$?
check "a new checkpoint, every host answering: restarted from it" \
    '[ $rc -eq 0 ] && [ "$(wc -l <runs)" -eq 2 ] && sed -n 2p runs | grep -q "n.cfg ckpt.weights$"'

# --- giving up ------------------------------------------------------------------------
fresh "1 checkpoint" "1 checkpoint" "1 checkpoint" 0
$elastic $common --max-restarts 2 -- darknet classifier train d.data n.cfg >out 2>&1
rc=$?
check "max restarts: exit 1 after 3 runs" '[ $rc -eq 1 ] && [ "$(wc -l <runs)" -eq 3 ]'
check "max restarts: said" 'grep -q "giving up after 2 restarts (--max-restarts 2): run 3 failed with exit status 1" out'
fresh 0
printf 'a\nb\n' >down
$elastic $common --min-hosts 2 -- darknet classifier train d.data n.cfg >out 2>&1
rc=$?
check "min hosts: exit 1, nothing run, said" \
    '[ $rc -eq 1 ] && [ ! -f runs ] && grep -q "giving up: 1 of 3 hosts answer (not: a b), at least 2 needed" out'

# --- refusals ------------------------------------------------------------------------
for opt in "-np 4" "-H a,b" "--host a" "-machinefile h"; do
    fresh 0
    $elastic $common $opt -- darknet classifier train d.data n.cfg >out 2>&1
    rc=$?
    check "refused: $opt" '[ $rc -eq 2 ] && [ ! -f runs ] && grep -q "is the launcher.s to set" out'
done
fresh 0
$elastic $common -- darknet classifier valid d.data n.cfg >out 2>&1
check "refused: a command without train" '[ $? -eq 2 ] && grep -q "is not .darknet (classifier|detector) train DATA CFG" out'
$elastic --checkpoint c -- darknet classifier train d n >out 2>&1
check "refused: no hosts" '[ $? -eq 2 ] && grep -q "give the hosts: --hostfile FILE or --discover CMD" out'
$elastic --hostfile hosts -- darknet classifier train d n >out 2>&1
check "refused: no checkpoint" '[ $? -eq 2 ] && grep -q "checkpoint FILE is needed" out'

# --discover instead of a hostfile, read before every start; a probe that
# names the host as $1 (y does not answer)
fresh 0
$elastic --discover "printf 'x slots=3\ny\n'" --checkpoint ckpt.weights --probe 'test "$1" != y' \
    --mpirun ./fake-mpirun -- darknet classifier train d.data n.cfg >out 2>&1
rc=$?
check "discover: -np 3 on host x, y not answering" \
    '[ $rc -eq 0 ] && grep -q -- "-np 3 darknet" runs && grep -q "start 1: 3 ranks on 1 host (x), without y (not answering)" out'
# --- the transport, with the default --mpirun (stand-ins for mpirun and ompi_info on PATH) ---
mkdir -p bin
cp fake-mpirun bin/mpirun
transport() { # OMPI_INFO_LINE OPTIONS...: one successful run with the default mpirun
    line=$1; shift
    printf '#!/bin/sh\necho "%s"\n' "$line" >bin/ompi_info
    chmod +x bin/ompi_info
    fresh 0
    PATH="$work/bin:$PATH" $elastic --hostfile hosts --checkpoint ckpt.weights --probe ./probe "$@" \
        -- darknet classifier train d.data n.cfg >out 2>&1
}
transport "                 MCA pml: ucx (MCA v2.1.0, API v2.0.0, Component v4.1.4)"
check "UCX where Open MPI has it: its keys added, pml_ucx_tls=any among them" \
    'grep -q -- "-np 4 --mca pml ucx --mca pml_ucx_tls any darknet classifier train" runs && ! grep -q "no UCX" out'
transport "                 MCA pml: ucx (MCA v2.1.0, API v2.0.0, Component v4.1.4)" --mca pml ob1 --mca btl tcp,self
check "a pml of the user's wins: no UCX keys" 'grep -q -- "-np 4 --mca pml ob1 --mca btl tcp,self darknet" runs'
OMPI_MCA_pml=ob1 transport "                 MCA pml: ucx (MCA v2.1.0, API v2.0.0, Component v4.1.4)"
check "... also in OMPI_MCA_pml" 'grep -q -- "-np 4 darknet classifier train" runs'
transport "                 MCA pml: ob1 (MCA v2.1.0, API v2.0.0, Component v4.1.4)"
check "no UCX pml: ob1, said in one line" \
    'grep -q -- "-np 4 darknet classifier train" runs && [ "$(grep -c "Open MPI has no UCX pml here: ob1" out)" -eq 1 ]'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
