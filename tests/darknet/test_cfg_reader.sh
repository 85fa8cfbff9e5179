#!/bin/sh
# Usage: test_cfg_reader.sh DARKNET SOURCE_DIR WORK_DIR
# The darknet executable against hostile cfg, .data and list files: a NUL
# byte, a section before [net], a file without sections, numbers that are
# not decimal and 100 kB names each stop it with exit status 1 and a message
# naming the file and line; nothing is echoed longer than a short line; CRLF
# files read exactly like their LF twins. A tree file (tree=) whose entry
# is malformed is refused with its file and line, one larger than the
# layer with the cfg's.
set -u
darknet=$1 src=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"

net='[net]
batch=2
height=8
width=8
channels=1

[convolutional]
filters=2
size=3
stride=1
pad=1
activation=leaky'
tail='[connected]
output=2
activation=linear

[softmax]'
long=$(head -c 100000 /dev/zero | tr '\0' k)

# expect NAME STATUS PATTERN...: the last run's exit status is STATUS and
# each PATTERN (@ stands for $work/NAME.cfg) is in its stderr, where no line
# is longer than 640 bytes with that path written as @.
expect() {
    name=$1 want=$2; shift 2
    check "$name: exit status $rc, expected $want" '[ "$rc" -eq "$want" ]'
    for pattern in "$@"; do
        pattern=$(printf '%s' "$pattern" | sed "s#@#$work/$name.cfg#g")
        check "$name: '$pattern' in stderr" 'grep -qF -- "$pattern" "$work/$name.err"'
    done
    # the cfg's path is the user's own and is echoed whole: it counts as @
    longest=$(awk -v path="$work/$name.cfg" '{ while ((i = index($0, path)) > 0) $0 = substr($0, 1, i - 1) "@" substr($0, i + length(path))
        if (length($0) > m) m = length($0) } END { print m + 0 }' \
        "$work/$name.err")
    check "$name: a line of $longest bytes in stderr" '[ "$longest" -le 640 ]'
}

# ops NAME: runs `darknet ops` on $work/NAME.cfg
ops() {
    "$darknet" ops "$work/$1.cfg" >"$work/$1.out" 2>"$work/$1.err"
    rc=$?
}

# crlf FILE: writes FILE's lines ended by "\r\n" to stdout
crlf() { awk '{ printf "%s\r\n", $0 }' "$1"; }

# --- NUL bytes: refused with the file and line, never merged with the next line
printf '%s\n\000\nheight=x\n\n%s\n' "$net" "$tail" >"$work/nul_line_start.cfg"
ops nul_line_start
expect nul_line_start 1 "@:13: NUL byte in column 1"

printf '%s\n\n%s\n\n[selsync]\nwindow=7\000junk\n' "$net" "$tail" >"$work/nul_in_value.cfg"
ops nul_in_value
expect nul_in_value 1 "@:21: NUL byte in column 9"

printf '# a comment\000\n%s\n\n%s\n' "$net" "$tail" >"$work/nul_in_comment.cfg"
ops nul_in_comment
expect nul_in_comment 1 "@:1: NUL byte in column 12"

# --- the first section, and files without one
printf '%s\n\n%s\n' "$net" "$tail" | sed '1,6d' >"$work/layer_first.cfg"
ops layer_first
expect layer_first 1 "@:1: first section is [convolutional]; it must be [net] or [network]"

printf '# selsync first\n[selsync]\nmethod=bsp\n\n%s\n\n%s\n' "$net" "$tail" >"$work/selsync_first.cfg"
ops selsync_first
expect selsync_first 1 "@:2: first section is [selsync]; it must be [net] or [network]"

printf '# only comments\n\n; and blank lines\n' >"$work/no_sections.cfg"
ops no_sections
expect no_sections 1 "@: no sections; the first must be [net] or [network]"

# --- 100 kB names are shown cut, ending in "..."
printf '%s\n\n[%s]\nx=1\n\n%s\n' "$net" "$long" "$tail" >"$work/long_section.cfg"
ops long_section
expect long_section 1 "@:14: unknown section [kkkkkkkkkk" "kkk..."

printf '%s\n\n%s\n\n[selsync]\n%s=1\n' "$net" "$tail" "$long" >"$work/long_selsync_key.cfg"
ops long_selsync_key
expect long_selsync_key 1 "@:21: [selsync] unknown key 'kkkkkkkkkk" "kkk...'; known keys: method,"

printf '%s=1\n%s\n\n%s\n' "$long" "$net" "$tail" >"$work/long_orphan.cfg"
ops long_orphan
expect long_orphan 1 "@:1: option outside of any section: kkkkkkkkkk" "kkk..."

printf '%s\n%s=1\n\n%s\n' "$net" "$long" "$tail" >"$work/long_net_key.cfg"
ops long_net_key
expect long_net_key 1 "@:13: [convolutional] kkkkkkkkkk" "kkk...: unknown key" "this section reads: filters, size,"

# --- numbers in [selsync]: decimal only, overflow shows the allowed range
selsync_value() { printf '%s\n\n%s\n\n[selsync]\n%s\n' "$net" "$tail" "$2" >"$work/$1.cfg"; ops "$1"; }
selsync_value hex_delta delta=0x10
expect hex_delta 1 "@:21: [selsync] delta = '0x10': not a decimal number; allowed: a real number >= 0"
selsync_value hex_window window=0x10
expect hex_window 1 "@:21: [selsync] window = '0x10': not a decimal number; allowed: an integer from 1 to 1000000"
selsync_value hex_dirichlet partition=dirichlet:0x1p-1
expect hex_dirichlet 1 "@:21: [selsync] partition = 'dirichlet:0x1p-1': not a decimal number"
selsync_value inf_delta delta=inf
expect inf_delta 1 "@:21: [selsync] delta = 'inf': not a finite number; allowed: a real number >= 0"
selsync_value overflow_delta delta=1e400
expect overflow_delta 1 "@:21: [selsync] delta = '1e400': out of range; allowed: a real number >= 0"
selsync_value overflow_seed seed=18446744073709551616
expect overflow_seed 1 "@:21: [selsync] seed = '18446744073709551616': out of range; allowed: an integer from 0 to 18446744073709551615"

# --- CRLF: a cfg with comments and [selsync] reads exactly like its LF twin
printf '# a network\n%s\n\n; the plugin\n[selsync]\nmethod=selsync\ndelta=.25\nwindow=+10\npartition=dirichlet:0.5\nseed=7\n\n%s\n' \
    "$net" "$tail" >"$work/lf_twin.cfg"
crlf "$work/lf_twin.cfg" >"$work/crlf_twin.cfg"
ops lf_twin
expect lf_twin 0 "selsync: @:16: method=selsync delta=0.25 window=10"
ops crlf_twin
expect crlf_twin 0 "selsync: @:16: method=selsync delta=0.25 window=10"
sed "s#$work/lf_twin.cfg#CFG#g" "$work/lf_twin.err" >"$work/lf_twin.seen"
sed "s#$work/crlf_twin.cfg#CFG#g" "$work/crlf_twin.err" >"$work/crlf_twin.seen"
check "crlf_twin: stderr as for the LF twin" 'cmp -s "$work/lf_twin.seen" "$work/crlf_twin.seen"'
# the same, its last line ending in "\r" without "\n"
awk '{ if (NR > 1) printf "\r\n"; printf "%s", $0 } END { printf "\r" }' "$work/lf_twin.cfg" >"$work/crlf_unended.cfg"
ops crlf_unended
expect crlf_unended 0
sed "s#$work/crlf_unended.cfg#CFG#g" "$work/crlf_unended.err" >"$work/crlf_unended.seen"
check "crlf_unended: stderr as for the LF twin" 'cmp -s "$work/lf_twin.seen" "$work/crlf_unended.seen"'

# a CRLF error names the same line as in LF
sed 's/^window=+10$/window=0/' "$work/lf_twin.cfg" | awk '{ printf "%s\r\n", $0 }' >"$work/crlf_bad_value.cfg"
ops crlf_bad_value
expect crlf_bad_value 1 "@:19: [selsync] window = '0': out of range; allowed: an integer from 1 to 1000000"

# --- .data and list files: CRLF trains, a NUL is refused with file and line
mkdir -p "$work/train/backup"
for name in cat dog; do
    printf 'P5\n8 8\n255\n%s' "$(head -c 64 /dev/zero | tr '\0' "$(printf '%s' $name | cut -c1)")" \
        >"$work/train/$name.pgm"
done
printf '[net]\nbatch=1\nheight=8\nwidth=8\nchannels=3\nmax_batches=2\n\n[connected]\noutput=2\nactivation=linear\n\n[softmax]\n' \
    >"$work/train/tiny.cfg"
printf 'cat\ndog\n' | awk '{ printf "%s\r\n", $0 }' >"$work/train/labels.txt"
printf '%s/train/cat.pgm\n%s/train/dog.pgm\n' "$work" "$work" | awk '{ printf "%s\r\n", $0 }' >"$work/train/list.txt"
printf 'classes=2\nlabels=%s/train/labels.txt\ntrain=%s/train/list.txt\nbackup=%s/train/backup\n' \
    "$work" "$work" "$work" | awk '{ printf "%s\r\n", $0 }' >"$work/train/crlf.data"
"$darknet" classifier train "$work/train/crlf.data" "$work/train/tiny.cfg" \
    >"$work/crlf_train.out" 2>"$work/crlf_train.err"
rc=$?
expect crlf_train 0
check "crlf_train: every image has exactly one label" '! grep -q "Too many or too few labels" "$work/crlf_train.out"'
check "crlf_train: weights written" '[ -s "$work/train/backup/tiny.weights" ]'

printf 'classes=2\nlabels=%s/train/labels.txt\ntrain=%s/train/nul.list\nback\000up=x\n' "$work" "$work" \
    >"$work/nul_data.cfg"
"$darknet" classifier train "$work/nul_data.cfg" "$work/train/tiny.cfg" >"$work/nul_data.out" 2>"$work/nul_data.err"
rc=$?
expect nul_data 1 "@:4: NUL byte in column 5"

printf '%s/train/cat.pgm\n%s/train/d\000og.pgm\n' "$work" "$work" >"$work/nul_list.cfg"
printf 'classes=2\nlabels=%s/train/labels.txt\ntrain=%s/nul_list.cfg\nbackup=%s/train/backup\n' \
    "$work" "$work" "$work" >"$work/train/nul_list.data"
"$darknet" classifier train "$work/train/nul_list.data" "$work/train/tiny.cfg" \
    >"$work/nul_list.out" 2>"$work/nul_list.err"
rc=$?
expect nul_list 1 "@:2: NUL byte in column $(($(printf '%s/train/d' "$work" | wc -c) + 1))"

# --- tree files (tree= of [softmax] and [region]): a bad entry is FILE:LINE
# tree_cfg NAME ENTRIES...: $work/NAME.tree of the entries, and NAME.cfg whose
# softmax (2 inputs) reads it
tree_cfg() {
    name=$1; shift
    printf '%s\n' "$@" >"$work/$name.tree"
    printf '%s\n\n[softmax]\ntree=%s\n' "${net%%\[convolutional\]*}[connected]
output=2
activation=linear" "$work/$name.tree" >"$work/$name.cfg"
    ops "$name"
}
tree_cfg tree_ok "a -1" "b -1"
expect tree_ok 0
tree_cfg tree_parent_ahead "a -1" "b 1"
expect tree_parent_ahead 1 "$work/tree_parent_ahead.tree:2: a tree entry is \"NAME PARENT\", NAME at most 255 bytes, PARENT -1 or the index of an earlier entry (0 to 0)"
tree_cfg tree_parent_negative "a -2"
expect tree_parent_negative 1 "$work/tree_parent_negative.tree:1: a tree entry is"
tree_cfg tree_long_name "$(head -c 300 /dev/zero | tr '\0' n) -1"
expect tree_long_name 1 "$work/tree_long_name.tree:1: a tree entry is"
tree_cfg tree_too_big "a -1" "b -1" "c -1"
expect tree_too_big 1 "@:12: [softmax] tree=$work/tree_too_big.tree: 3 entries, more than the 2 inputs"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
