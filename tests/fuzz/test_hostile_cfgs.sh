#!/bin/sh
# Usage: test_hostile_cfgs.sh DARKNET CORPUS_DIR WORK_DIR
# Every CORPUS_DIR/hostile-*.cfg names on its first line ("# expect: TEXT")
# the refusal Darknet must print: `darknet ops CFG` exits with status 1 (no
# signal) and its stderr holds TEXT, after the cfg's path when TEXT starts
# with ':' (the line number).
set -u
darknet=$1 corpus=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
for cfg in "$corpus"/hostile-*.cfg; do
    name=$(basename "$cfg" .cfg)
    expect=$(sed -n '1s/^# expect: //p' "$cfg")
    case $expect in :*) expect=$cfg$expect ;; esac
    "$darknet" ops "$cfg" >"$work/$name.out" 2>"$work/$name.err"
    rc=$?
    if [ -z "$expect" ]; then
        echo "FAIL $name: no '# expect:' line"; fail=$((fail + 1))
    elif [ "$rc" -ne 1 ]; then
        echo "FAIL $name: exit status $rc"; tail -2 "$work/$name.err"; fail=$((fail + 1))
    elif ! grep -qF -- "$expect" "$work/$name.err"; then
        echo "FAIL $name: no '$expect' in stderr"; tail -2 "$work/$name.err"; fail=$((fail + 1))
    else
        pass=$((pass + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
