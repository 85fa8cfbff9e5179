#!/bin/sh
# Usage: test_checkpoint_kill.sh CHECKPOINT_WRITER WORK_DIR
# Kills a process that writes checkpoints in a loop with SIGKILL at 25
# pseudo-random moments (the first once a checkpoint exists); after every
# kill the checkpoint on disk must be whole (the previous or the new one,
# never torn).
set -u
writer=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
path=$work/model.weights
fail=0 last=-1
i=0
while [ $i -lt 25 ]; do
    "$writer" write "$path" &
    pid=$!
    if [ $i -eq 0 ]; then
        # the first round waits for a whole checkpoint, however slow the disk
        t=0
        while [ ! -e "$path" ] && [ $t -lt 6000 ]; do sleep 0.01; t=$((t + 1)); done
    fi
    # 20..240 ms, varied by the round so kills land at different points
    sleep "0.$(printf '%03d' $((20 + (i * 37) % 220)))"
    kill -9 $pid
    wait $pid 2>/dev/null
    out=$("$writer" check "$path") || { echo "FAIL round $i: torn checkpoint"; fail=1; }
    n=$(echo "$out" | sed -n 's/^checkpoint \([0-9]*\) whole$/\1/p')
    [ -n "$n" ] && last=$n
    i=$((i + 1))
done
[ "$last" -ge 0 ] || { echo "FAIL: no checkpoint was ever completed"; fail=1; }
[ -e "$path.tmp" ] && echo "(a temporary file of the killed write remains, as expected; the checkpoint is intact)"
echo "25 kills, last whole checkpoint $last"
[ $fail -eq 0 ]
