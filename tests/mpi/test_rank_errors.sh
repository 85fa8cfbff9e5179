#!/bin/sh
# Usage: test_rank_errors.sh DARKNET SOURCE_DIR WORK_DIR
# Errors that every rank meets are reported by every rank (3 ranks under a
# real mpirun), each line naming its rank, and end the job (never a hang):
#  - a cfg that needs more ranks (fedavg_fraction=0.3 leaves no rank of 3
#    taking part): FILE:LINE, key and value;
#  - a detection label file that is missing, and one that is malformed
#    (FILE:LINE), found while every rank computes the data partition;
#  - ranks that do not run the same thing (an MPMD job): cfgs that differ
#    only in delta, training lists that differ in one path; the message
#    names the ranks, their host and cfg file and what each holds. Two cfg
#    files that differ only in comments and blanks are the same cfg.
# An image that cannot be read is met only by the rank that loads it: the
# job ends, Darknet's message names the image and the rank is named: by the
# plugin's exit handler, or, when two of Darknet's loader threads call exit()
# at once (glibc may then skip the exit handlers), by mpirun's report of the
# process that exited first ("Process name: [[JOB,1],RANK]").
set -u
darknet=$1 src=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
np=3
# job NAME ARGS...: darknet ARGS on np ranks, output in NAME.out; sets rc
job() {
    name=$1; shift
    timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np $np "$darknet" "$@" >"$work/$name.out" 2>&1
    rc=$?
}
# every_rank NAME PATTERN: "selsync: rank R: " PATTERN from every rank. Not
# anchored at a line's start: mpirun forwards each rank's output as it comes,
# so a rank's message may follow another rank's unfinished line (Darknet
# prints a layer's number, then the layer).
every_rank() {
    r=0
    while [ $r -lt $np ]; do
        grep -q "selsync: rank $r: $2" "$work/$1.out" || { echo "  no line from rank $r in $1.out"; return 1; }
        r=$((r + 1))
    done
}
failed() { [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; }

# a classifier data set of uniform images (one per class)
for c in 0 1 2 3 4 5 6 7 8 9; do echo "_c${c}_"; done >"$work/labels.txt"
for c in 0 1 2 3 4 5; do
    python3 "$src/tests/common/uniform_png.py" "$work/u${c}_c${c}_.png" 28 28 $((c * 40 + 10))
    echo "$work/u${c}_c${c}_.png"
done >"$work/train.list"
printf 'classes=10\ntrain=%s/train.list\nlabels=%s/labels.txt\nbackup=%s/backup\n' "$work" "$work" "$work" >"$work/cls.data"
cls_cfg() { sed 's/^max_batches=.*/max_batches=5/' "$src/cfg/fmnist-tiny.cfg"; printf '\n[selsync]\n%s\n' "$1"; }

# --- a cfg that needs more ranks ---------------------------------------------------
cls_cfg "method=fedavg
fedavg_fraction=0.3" >"$work/fed.cfg"
job fed classifier train "$work/cls.data" "$work/fed.cfg"
check "needs more ranks: the job fails (status $rc)" 'failed'
line=$(grep -n '^fedavg_fraction=' "$work/fed.cfg" | cut -d: -f1)
check "needs more ranks: every rank names file, line, key and value" \
    'every_rank fed "$work/fed.cfg:$line: \[selsync\] fedavg_fraction = .0\.3.: no rank would take part on 3 ranks"'

# --- detection label files ------------------------------------------------------------
python3 "$here/make_tiny_detection.py" "$work/det" 8 >/dev/null
{ cat "$work/det/tiny.cfg"; printf '\n[selsync]\nmethod=bsp\n'; } >"$work/det.cfg"
lab=$(sed -n 1p "$work/det/train.list" | sed -e 's#/images/#/labels/#' -e 's#\.png$#.txt#')
mv "$lab" "$lab.kept"
job missing detector train "$work/det/tiny.data" "$work/det.cfg"
check "missing label file: the job fails (status $rc)" 'failed'
check "missing label file: every rank names it" 'every_rank missing "$lab: cannot open"'
printf '0 0.5 0.5 0.2\n' >"$lab"
job malformed detector train "$work/det/tiny.data" "$work/det.cfg"
check "malformed label file: the job fails (status $rc)" 'failed'
check "malformed label file: every rank names file and line" 'every_rank malformed "$lab:1: "'
mv "$lab.kept" "$lab"

# --- ranks that do not run the same thing -------------------------------------------------
# mpmd NAME CFG_OF_RANK_0 CFG_OF_RANKS_1_2 [DATA_OF_RANKS_1_2]
mpmd() {
    name=$1
    timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np 1 "$darknet" classifier train "$work/cls.data" "$2" : \
        -np 2 "$darknet" classifier train "${4:-$work/cls.data}" "$3" >"$work/$name.out" 2>&1
    rc=$?
}
host=$(hostname)
cls_cfg "method=selsync
delta=0.3" >"$work/d3.cfg"
cls_cfg "method=selsync
delta=0.25" >"$work/d25.cfg"
mpmd delta "$work/d3.cfg" "$work/d25.cfg"
check "cfgs differing in delta: the job fails (status $rc)" 'failed'
check "cfgs differing in delta: every rank names the ranks, hosts and cfg files" \
    'every_rank delta "$work/d[0-9]*\.cfg: the ranks do not run the same thing: the cfg (its parsed sections) differs: rank 0 ($host; $work/d3\.cfg): hash [0-9a-f]\{16\}; ranks 1, 2 (first on $host; $work/d25\.cfg): hash [0-9a-f]\{16\};"'
check "cfgs differing in delta: the build and the network agree" \
    '! grep -q "the build differs\|the network built from it differs" "$work/delta.out"'
{ echo "# the same cfg, other comments and blanks"; sed 's/^\(.*\)=\(.*\)$/  \1 = \2  /' "$work/d3.cfg"; } >"$work/d3-spaced.cfg"
mpmd spaced "$work/d3.cfg" "$work/d3-spaced.cfg"
check "cfgs differing only in comments and blanks train together (status $rc)" '[ "$rc" -eq 0 ]'
sed '$s#u5_c5_#u4_c4_#' "$work/train.list" >"$work/other.list"
sed "s#$work/train.list#$work/other.list#" "$work/cls.data" >"$work/other.data"
mpmd lists "$work/d3.cfg" "$work/d3.cfg" "$work/other.data"
check "lists differing in a path: the job fails (status $rc)" 'failed'
check "lists differing in a path: every rank names both lists" \
    'every_rank lists "$work/d3\.cfg: the ranks do not run the same thing: the training list differs: rank 0 ($host; $work/cls\.data): 6 files, hash [0-9a-f]\{16\}; ranks 1, 2 (first on $host; $work/other\.data): 6 files, hash [0-9a-f]\{16\};"'

# --- an image that cannot be read --------------------------------------------------------
echo "not an image" >"$work/bad_c7_.png"
echo "$work/bad_c7_.png" >>"$work/train.list"
cls_cfg "method=bsp" >"$work/img.cfg"
job image classifier train "$work/cls.data" "$work/img.cfg"
check "unreadable image: the job fails (status $rc)" 'failed'
check "unreadable image: the message names it" 'grep -q "Cannot load image \"$work/bad_c7_.png\"" "$work/image.out"'
# the rank whose shard holds the image (class 7), from rank 0's partition lines
holder=$(sed -n 's/.*partition iid rank \([0-9]*\): .* 7:1.*/\1/p' "$work/image.out")
check "unreadable image: the rank that met it ($holder, which holds class 7) is named" \
    '[ -n "$holder" ] && { grep -q "selsync: rank $holder: exited without finishing" "$work/image.out" ||
                           grep -q "Process name: \[\[[0-9]*,1\],$holder\]" "$work/image.out"; }'

[ "$fail" -gt 0 ] && for f in fed missing malformed delta spaced lists image; do echo "--- $f"; grep "selsync\|Cannot" "$work/$f.out" | head -8; done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
