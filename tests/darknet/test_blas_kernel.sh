#!/bin/sh
# Usage: test_blas_kernel.sh DARKNET FAKE_CORENAME_LIBRARY SOURCE_DIR WORK_DIR
# darknet's choice of the OpenBLAS kernel (patch 0023), read from
# `darknet selsync version` and from OpenBLAS itself (OPENBLAS_VERBOSE=2
# prints "Core: NAME" each time it is loaded):
#  - a user's OPENBLAS_CORETYPE is kept, and named;
#  - without one, a kernel OpenBLAS detected is kept when no better one
#    runs on this CPU, and replaced when OpenBLAS fell back to an older
#    one (a CPU it does not know, e.g. CPUID family 6 model 207);
#  - when OpenBLAS reports an old kernel (Prescott, as on a CPU it does not
#    know: FAKE_CORENAME_LIBRARY stands in for its report), darknet runs
#    again with the best kernel this CPU's flags allow, which OpenBLAS then
#    loads, and says so; also under mpirun, where rank 0 names it and
#    every rank's metrics file has it in its head;
#  - a kernel name darknet does not know is never replaced.
set -u
darknet=$1 fake=$2 src=$3 work=$4
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
unset OPENBLAS_CORETYPE
export OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1
# the sanitizer build: AddressSanitizer accepts a library preloaded before it
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# the best kernel for /proc/cpuinfo's flags (as the patch decides), or none
flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1) "
has() { for f; do case $flags in *" $f "*) ;; *) return 1 ;; esac; done; }
best=
if has avx512f avx512dq avx512cd avx512bw avx512vl; then
    best=SkylakeX # (OpenBLAS 0.3.21 loads no Cooperlake by name)
elif has avx2 fma; then
    if grep -q '^vendor_id.*AuthenticAMD' /proc/cpuinfo; then best=Zen; else best=Haswell; fi
elif has avx; then
    best=Sandybridge
fi
echo "best kernel for this CPU: ${best:-none above SSE}"
# version NAME [VAR=VALUE...]: darknet selsync version, output in NAME.out
version() { name=$1; shift; env "$@" "$darknet" selsync version >"$work/$name.out" 2>&1; }
cores() { sed -n 's/^Core: //p' "$work/$1.out" | tr '\n' ' '; }

version user OPENBLAS_CORETYPE=Nehalem
check "a user's OPENBLAS_CORETYPE is kept and named" \
    'grep -q "; OpenBLAS Nehalem (OPENBLAS_CORETYPE=Nehalem)$" "$work/user.out" && [ "$(cores user)" = "Nehalem " ]'

version detected
detected=$(cores detected)
first=${detected%% *}
if [ "$(echo $detected | wc -w)" -eq 2 ] && [ -n "$best" ]; then
    # OpenBLAS itself fell back to an older kernel (a CPU it does not know)
    check "without OPENBLAS_CORETYPE OpenBLAS detects $first and darknet runs again with $best" \
        '[ "$detected" = "$first $best " ] &&
         grep -q "; OpenBLAS $best (chosen from the CPU.s features; OpenBLAS detected $first)$" "$work/detected.out"'
else
    check "without OPENBLAS_CORETYPE OpenBLAS loads once and its kernel is named" \
        '[ "$(echo $detected | wc -w)" -eq 1 ] && grep -q "; OpenBLAS $first (detected)$" "$work/detected.out"'
fi

# (the first "Core:" line is OpenBLAS's own detection, which the stand-in
# does not change)
version prescott LD_PRELOAD="$fake" FAKE_OPENBLAS_DETECTED=Prescott
if [ -n "$best" ]; then
    check "OpenBLAS reports Prescott: darknet runs again with $best, which OpenBLAS loads" \
        '[ "$(cores prescott)" = "$first $best " ] &&
         grep -q "; OpenBLAS $best (chosen from the CPU.s features; OpenBLAS detected Prescott)$" "$work/prescott.out"'
else
    check "OpenBLAS reports Prescott on a CPU with SSE only: kept" 'grep -q "; OpenBLAS Prescott (detected)$" "$work/prescott.out"'
fi

version unknown LD_PRELOAD="$fake" FAKE_OPENBLAS_DETECTED=NextLake
check "a kernel name darknet does not know is kept" \
    '[ "$(echo $(cores unknown) | wc -w)" -eq 1 ] && grep -q "; OpenBLAS NextLake (detected)$" "$work/unknown.out"'

# under mpirun: both ranks run again, train, and rank 0 names the kernel
# (lines matched anywhere: mpirun may put one rank's line after another
# rank's unfinished one, e.g. Darknet's layer number)
fmnist_data
{ sed 's/^max_batches=.*/max_batches=5/' "$src/cfg/fmnist-tiny.cfg"; printf '\n[selsync]\nmethod=bsp\nlog=%s/m.%%r.tsv\n' "$work"; } >"$work/tiny.cfg"
timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np 2 -x LD_PRELOAD="$fake" -x FAKE_OPENBLAS_DETECTED=Prescott \
    -x OPENBLAS_VERBOSE "$darknet" classifier train "$work/fmnist.data" "$work/tiny.cfg" >"$work/mpi.out" 2>&1
check "under mpirun: training exits 0" '[ $? -eq 0 ]'
if [ -n "$best" ]; then
    check "under mpirun: each rank loads OpenBLAS twice, the second time with $best" \
        '[ "$(grep -c "Core: " "$work/mpi.out")" -eq 4 ] && [ "$(grep -c "Core: $best$" "$work/mpi.out")" -ge 2 ]'
    check "under mpirun: rank 0 names the kernel once" \
        '[ "$(grep -c "selsync: .*; OpenBLAS $best (chosen from the CPU.s features; OpenBLAS detected Prescott); sums over MPI (ranks share a host)$" "$work/mpi.out")" -eq 1 ]'
    check "under mpirun: every rank's metrics file names it in its head" \
        'grep -q "^# OpenBLAS $best (chosen" "$work/m.0.tsv" && grep -q "^# OpenBLAS $best (chosen" "$work/m.1.tsv"'
fi
[ "$fail" -gt 0 ] && tail -n 5 "$work"/*.out
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
