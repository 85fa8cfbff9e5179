#!/bin/sh
# Usage: test_link_bandwidth.sh SOURCE_DIR WORK_DIR
# The emulated links of scripts/emulated-cluster.sh carry the rate they are
# shaped to: for 40 and 160 Mbit/s, 2 hosts, TCP transfers (link_rate.py)
# from host 0 to host 1 and back, each of 2 s worth of data at the
# configured rate, measure a payload rate of 0.5 to 1.1 times that rate
# (below it: TCP/IP headers count on the link; above it: the shaper's
# burst). A message of 80 ms worth of data after an idle moment measures
# at most 1.1 times the rate; a burst of 256 KB (the shaper's former
# setting) carried it at 2.8 times the rate. (Only the upper bound: such a
# short transfer on a loaded machine measured 0.25 times the rate.) An unshaped link (rate 0) is faster than 1.1 x 160 Mbit/s, so
# the bound can fail. Exits 77 (skipped) only where network namespaces are
# not permitted.
set -u
src=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
cluster="sh $src/scripts/emulated-cluster.sh"
rm -rf "$work"; mkdir -p "$work"
if ! why=$($cluster check 2>&1); then
    echo "SKIPPED: network namespaces are not permitted here ($why); the link shaping is not tested"
    exit 77
fi
. "$src/tests/common/checks.sh"
name=bw$(($$ % 100000))
trap '$cluster down $name' EXIT
trap 'exit 1' INT TERM HUP

# transfer FROM TO BYTES: the rate (bit/s) from host FROM to host TO
transfer() {
    ip netns exec "$name-h$2" python3 "$here/link_rate.py" serve 10.231.0.$(($2 + 1)) 5201 "$3" &
    server=$!
    ip netns exec "$name-h$1" timeout 120 python3 "$here/link_rate.py" send 10.231.0.$(($2 + 1)) 5201 "$3"
    wait $server
}
# within RATE MEASURED LOW HIGH: LOW <= MEASURED / RATE <= HIGH
within() { awk -v r="$1" -v m="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(m != "" && m / r >= lo && m / r <= hi) }'; }

for mbit in 40 160; do
    $cluster up "$name" 2 "${mbit}mbit"
    bytes=$((mbit * 1000000 / 8 * 2))
    there=$(transfer 0 1 $bytes)
    back=$(transfer 1 0 $bytes)
    echo "shaped to $mbit Mbit/s: host 0 -> 1 $(awk -v m="$there" 'BEGIN { printf "%.1f", m / 1e6 }') Mbit/s, 1 -> 0 $(awk -v m="$back" 'BEGIN { printf "%.1f", m / 1e6 }') Mbit/s"
    check "$mbit Mbit/s: host 0 -> 1 within 0.5x-1.1x" 'within $((mbit * 1000000)) "$there" 0.5 1.1'
    check "$mbit Mbit/s: host 1 -> 0 within 0.5x-1.1x" 'within $((mbit * 1000000)) "$back" 0.5 1.1'
    short=$(transfer 0 1 $((mbit * 1000000 / 8 * 8 / 100)))
    echo "shaped to $mbit Mbit/s: 80 ms worth after an idle moment, $(awk -v m="$short" 'BEGIN { printf "%.1f", m / 1e6 }') Mbit/s"
    check "$mbit Mbit/s: 80 ms worth after an idle moment at most 1.1x" 'within $((mbit * 1000000)) "$short" 0 1.1'
    $cluster down "$name"
done
$cluster up "$name" 2 0
free=$(transfer 0 1 $((160 * 1000000 / 8 * 2)))
echo "unshaped: host 0 -> 1 $(awk -v m="$free" 'BEGIN { printf "%.1f", m / 1e6 }') Mbit/s"
check "unshaped link faster than 1.1 x 160 Mbit/s (the bound above can fail)" '! within $((160 * 1000000)) "$free" 0 1.1'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
