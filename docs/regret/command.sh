#!/bin/sh
# The regret workloads (scripts/experiments/frontier.py, seeds 1-3, paired), each into its
# folder, then the table over the workloads that have finished. Resumable: run
# it again and it goes on where it stopped. SelSync runs with its defaults
# (max_local=7 lag=1) and with the earlier ones (max_local=0 lag=0). The
# committed small and 4-rank folders ran under an earlier version of this
# command, whose `selsync` was the earlier defaults and whose second SelSync
# was `selsync+lag=1+drift=0.00004`; the current defaults' runs on the same
# seeds are in variants/ (its README). From the repository root:
#   nohup sh docs/regret/command.sh results/regret [WORKLOAD...] >regret.log 2>&1 &
# WORKLOAD (default: the two small-classifier workloads): small-iid-2,
# small-label2-4 (the small classifier, virtual time at 1 Gbit/s);
# wide-iid-4, wide-label2-4, wide-iid-16, wide-label2-16 (the wide network,
# virtual time at 1 Gbit/s; append -10g for 10 Gbit/s); det-2 (Darknet's
# yolov3-tiny layout, real MPI between 2 emulated hosts at 1 Gbit/s).
# On the 2-core machine a small workload takes about 30 minutes, a wide
# one at 16 ranks about 2 hours, det-2 about 2 hours.
# Variants of SelSync on the same seeds: METHODS=KEY,KEY... runs those
# methods instead of the grid, and GRID=DIR (a folder of this command's
# runs, e.g. docs/regret) pools each workload with DIR's folder of the same
# name in the table (regret.py NAME=DIR,DIR), where DEFAULTS=KEY names
# SelSync's defaults (default selsync).
set -eu
out=${1:?usage: command.sh RESULTS_DIR [WORKLOAD...]}
shift
[ $# -gt 0 ] || set -- small-iid-2 small-label2-4
methods=${METHODS:-bsp,fedavg-2,fedavg-4,fedavg-8,fedavg-16,fedavg-32,selsync,selsync+max_local=0+lag=0}
mkdir -p "$out"
front() { # NAME FRONTIER_OPTIONS...
    name=$1; shift
    scripts/experiments/frontier.py --methods $methods --results "$out/$name" "$@"
}
for w in "$@"; do
    rate=1gbit; base=$w
    case $w in *-10g) rate=10gbit base=${w%-10g} ;; esac
    case $base in
        small-iid-2) front iid-2ranks --suite iid --ranks 2 --steps 1000 --batch 64 ;;
        small-label2-4) front label2-4ranks --suite label --ranks 4 --steps 1000 --batch 64 ;;
        wide-iid-4 | wide-iid-16 | wide-label2-4 | wide-label2-16)
            suite=${base#wide-}; suite=${suite%-*}; [ "$suite" = label2 ] && suite=label
            front "$w" --suite "$suite" --settings-net wide --ranks "${base##*-}" --steps 200 --batch 32 \
                --bandwidth $rate ;;
        det-2) front det-2ranks --suite det --det-cfg cfg/fmnist-det-tiny-yolov3.cfg --ranks 2 --steps 500 \
                   --batch 16 --eval-images 500 --real ;;
        *) echo "command.sh: unknown workload '$w'" >&2; exit 2 ;;
    esac
done
set --
for d in "$out"/*/; do
    [ -f "$d/frontier.tsv" ] || continue
    f=$(basename "$d")
    case $f in iid-2ranks) w=small-iid-2 ;; label2-4ranks) w=small-label2-4 ;; det-2ranks) w=det-2 ;; *) w=$f ;; esac
    d=${d%/}
    [ -n "${GRID:-}" ] && d="${GRID%/}/$f,$d"
    set -- "$@" "$w=$d"
done
scripts/experiments/regret.py --out "$out" --defaults "${DEFAULTS:-selsync}" "$@"
