"""scripts/experiments/compare-methods.py in modules: cli (options and main), runs (the
run list and the training jobs), cluster (the emulated hosts), data (data
files and cfgs), metrics, report (tables) and plots."""
