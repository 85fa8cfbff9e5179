#!/bin/sh
# The regret workloads (scripts/frontier.py, virtual time at 1 Gbit/s, seeds 1-3, paired), then the table.
# Resumable: run it again and it goes on where it stopped. From the repository root:
#   nohup sh docs/regret/command.sh results/regret >regret.log 2>&1 &
set -eu
out=${1:?usage: command.sh RESULTS_DIR}
methods=bsp,fedavg-2,fedavg-4,fedavg-8,fedavg-16,fedavg-32,selsync
{ lscpu | grep 'Model name'; nproc; git rev-parse HEAD; env | grep '^OPENBLAS_' | sort; } >"$out.machine.txt" 2>/dev/null || true
scripts/frontier.py --suite iid --ranks 2 --steps 1000 --batch 64 --methods $methods --results "$out/iid-2ranks"
scripts/frontier.py --suite label --ranks 4 --steps 1000 --batch 64 --methods $methods --results "$out/label2-4ranks"
scripts/regret.py --out "$out" small-iid-2=$out/iid-2ranks small-label2-4=$out/label2-4ranks
