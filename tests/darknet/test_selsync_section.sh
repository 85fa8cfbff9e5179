#!/bin/sh
# Usage: test_selsync_section.sh DARKNET CFG_DIR WORK_DIR
# The darknet executable parses [selsync] strictly: a valid section is
# accepted and reported; each kind of bad input stops darknet with exit
# status 1 and one message naming the file, the line, the key and the value.
set -u
darknet=$1 work=$3
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0

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
activation=leaky
'
tail='
[connected]
output=2
activation=linear

[softmax]
'

# check NAME EXPECTED_STATUS CFG_TEXT PATTERN...: writes $work/NAME.cfg,
# runs `darknet ops` on it and checks the status and each pattern (@ stands
# for the cfg's path) in stderr.
check() {
    name=$1 want=$2 text=$3; shift 3
    cfg="$work/$name.cfg"
    printf '%s\n' "$text" >"$cfg"
    "$darknet" ops "$cfg" >"$work/$name.out" 2>"$work/$name.err"
    rc=$?
    ok=1
    [ "$rc" -eq "$want" ] || { echo "FAIL $name: exit status $rc, expected $want"; ok=0; }
    for pattern in "$@"; do
        pattern=$(printf '%s' "$pattern" | sed "s#@#$cfg#g")
        grep -qF -- "$pattern" "$work/$name.err" || { echo "FAIL $name: no '$pattern' in stderr"; ok=0; }
    done
    if [ "$want" -ne 0 ] && [ "$(grep -F -- "$cfg:" "$work/$name.err" | grep -vc ': method=')" -ne 1 ]; then
        echo "FAIL $name: not exactly one error message naming $cfg"; ok=0
    fi
    if [ $ok -eq 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); sed 's/^/  | /' "$work/$name.err" | tail -4; fi
}

check no_section 0 "$(printf '%s%s' "$net" "$tail")"
grep -q selsync "$work/no_section.err" && { echo "FAIL no_section: mentions selsync"; fail=$((fail + 1)); }

check valid_middle 0 "$(printf '%s\n[selsync]\nmethod=selsync\ndelta=0.5\nwindow=10\n%s' "$net" "$tail")" \
    "selsync: @:14: method=selsync delta=0.5 window=10"
check valid_end 0 "$(printf '%s%s\n[selsync]\nmethod=fedavg\nfedavg_interval=50\n' "$net" "$tail")" \
    "selsync: @:20: method=fedavg"
check unknown_key 1 "$(printf '%s\n[selsync]\ndetla=0.5\n%s' "$net" "$tail")" \
    "@:15: [selsync] unknown key 'detla'"
check malformed 1 "$(printf '%s\n[selsync]\ndelta=0.3x\n%s' "$net" "$tail")" \
    "@:15: [selsync] delta = '0.3x'"
check out_of_range 1 "$(printf '%s\n[selsync]\nwindow=0\n%s' "$net" "$tail")" \
    "@:15: [selsync] window = '0'" "allowed:"
check duplicate 1 "$(printf '%s\n[selsync]\ndelta=0.1\n\ndelta=0.2\n%s' "$net" "$tail")" \
    "@:17: [selsync] delta = '0.2': set twice (first on line 15 as '0.1'); allowed: each key once"
check empty_value 1 "$(printf '%s\n[selsync]\nseed=\n%s' "$net" "$tail")" \
    "@:15: [selsync] seed" "empty"
check no_equals 1 "$(printf '%s\n[selsync]\ngranularity\n%s' "$net" "$tail")" \
    "@:15: [selsync] 'granularity' is not a key = value line; allowed:"
check two_sections 1 "$(printf '%s\n[selsync]\nmethod=bsp\n%s\n[selsync]\nmethod=bsp\n' "$net" "$tail")" \
    "@:23: [selsync] second [selsync] section (the first is on line 14)"
check wrong_method 1 "$(printf '%s\n[selsync]\nfedavg_interval=10\nmethod=selsync\n%s' "$net" "$tail")" \
    "@:15: [selsync] fedavg_interval = '10': does not apply to method = selsync; allowed: this key only with method = fedavg"
# one process may parse an ssp cfg (e.g. to evaluate its weights); training
# it needs a server and a worker, which the ssp tests check
check ssp_one_process 0 "$(printf '%s\n[selsync]\nmethod=ssp\n%s' "$net" "$tail")" \
    "selsync: @:14: method=ssp"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
