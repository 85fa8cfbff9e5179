# Shared by the run and benchmark scripts (sourced, not run).
# Sets root and build, the environment for one BLAS thread per rank and
# Open MPI as root, and offers fmnist_workdir.
root=${common_root:-$(cd "$(dirname "$0")/.." && pwd)} # (common_root: set by a script in a folder below)
build=${SELSYNC_BUILD_DIR:-$root/build}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# fmnist_workdir: prepares Fashion-MNIST (idempotent), makes a temporary
# $work (removed on exit) holding $work/fmnist.data, whose weights go to $work.
fmnist_workdir() {
    [ -x "$build/darknet" ] || { echo "build first: cmake -S . -B build && cmake --build build" >&2; exit 1; }
    python3 "$root/scripts/data/prepare-fashion-mnist.py" >/dev/null
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    sed "s#^backup=.*#backup=$work#" "$root/data/fashion-mnist/fmnist.data" >"$work/fmnist.data"
}
