#!/bin/sh
# Usage: test_inject.sh INJECT_CHECK RANKS WORK_DIR
# Data injection through the Darknet adapter under a real mpirun: for
# (alpha, beta) = (0.5, 0.5) and (0.75, 0.75), every rank's batch is full and
# holds exactly the rows the chosen senders loaded first, with their
# classes (checked in inject_check.c), all ranks saw the same senders, and
# the ranks' injected bytes of every step are those the README's sizes give.
set -u
prog=$1 np=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
. "$(dirname "$0")/../common/checks.sh"
for ab in 0.5 0.75; do
    printf '[net]\nbatch=16\nheight=1\nwidth=1\nchannels=3\n\n[connected]\noutput=4\nactivation=linear\n\n[softmax]\n\n[selsync]\npartition=label:1\ninject_alpha=%s\ninject_beta=%s\nlog=%s/a%s.%%r.tsv\n' \
        "$ab" "$ab" "$work" "$ab" >"$work/a$ab.cfg"
    if ! timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np "$np" "$prog" "$work/a$ab.cfg" 30 "$work/a$ab" \
            >"$work/a$ab.log" 2>&1; then
        bad "alpha=beta=$ab: a rank found a wrong batch"; tail -5 "$work/a$ab.log"
        grep -h BAD "$work"/a$ab.*.senders | head -3; continue
    fi
    ok
    if [ "$(for f in "$work"/a$ab.*.senders; do sed 's/ *ok$//' "$f" | md5sum; done | sort -u | wc -l)" -eq 1 ]; then
        ok
    else
        bad "alpha=beta=$ab: ranks saw different senders"
    fi
    if [ "$ab" = 0.5 ]; then # fewer senders than ranks: the choice changes
        [ "$(cut -d: -f2 "$work/a$ab.0.senders" | sort -u | wc -l)" -gt 1 ] && ok \
            || bad "alpha=beta=$ab: the same senders every step"
    fi
    # the README's sizes: k = round(alpha N) senders of s = floor((b - b') / k)
    # rows, b' = round(b / (1 + beta k)); a row is 3 inputs and 4 classes;
    # a broadcast counts N - 1 copies (comm_mpi.h: a binomial tree), so the
    # ranks' inject_bytes of every step add up to k (N - 1) s 7 4
    want=$(awk -v n="$np" -v a="$ab" 'BEGIN { k = int(a * n + 0.5); own = int(16 / (1 + a * k) + 0.5)
                                             print k * (n - 1) * int((16 - own) / k) * 7 * 4 }')
    got=$(cat "$work"/a$ab.*.tsv | awk -F'\t' '/^#/ || $1 == "step" { next } { s[$1] += $11 }
                                                END { for (t in s) print s[t] }' | sort -u | tr '\n' ' ')
    steps=$(cat "$work"/a$ab.*.tsv | awk -F'\t' '/^#/ || $1 == "step" { next } { print $1 }' | sort -u | wc -l)
    [ "$got" = "$want " ] && [ "$steps" -eq 30 ] && ok \
        || bad "alpha=beta=$ab: injected bytes per step '$got' over $steps steps, expected $want over 30"
    echo "alpha=beta=$ab on $np ranks: $want injected bytes per step (all ranks)"
    grep -q "^# partition label rank 0:" "$work/a$ab.0.tsv" && ok \
        || bad "alpha=beta=$ab: no partition note in the metrics"
done
head -3 "$work/a0.5.0.senders"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
