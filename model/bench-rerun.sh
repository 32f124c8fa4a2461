#!/bin/bash
# bench-rerun.sh - how long "tweak one machine field and rerun one experiment"
# takes: every experiment with a model lane, in quick mode, with one --set a
# user would make, timed as the whole ./run.sh command (wall clock). Each case
# runs once untimed first, so the kernels, the plugin and the guest images are
# built and cached (what "with images already built" means), then `runs` times;
# the best counts (the machine is shared). Results go to a temporary directory.
#
#   model/bench-rerun.sh [runs=3]
#
# Figures: docs/performance.md.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
runs=3
for a in "$@"; do
    case "$a" in
    runs=*) runs=${a#runs=} ;;
    *) echo "usage: model/bench-rerun.sh [runs=N]" >&2; exit 2 ;;
    esac
done
export TRAPLINE_RESULTS
TRAPLINE_RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/trapline-bench-rerun.XXXXXX")
trap 'rm -rf "$TRAPLINE_RESULTS"' EXIT

# experiment | the one field changed (a tweak of the experiment's own machine)
CASES=(
    "x86-split-lock caches.l1d.line=32B"
    "sparc-misalign-trap caches.l1d.size=32kB"
    "sparc-strong-prefetch prefetch.trap_cost=5000ns"
    "sparc-spill-fill windows.count=16"
    "loop-order tlb.dtlb.entries=1024"
    "armv6-unaligned caches.l1d.size=32kB"
    "numa-first-touch numa.latency_ns[0][1]=240ns"
    "plt-itlb tlb.itlb.entries=32"
)

now() { date +%s.%N; }
printf '| experiment | --set | guest | best of %d (s) |\n|---|---|---|---|\n' "$runs"
for c in "${CASES[@]}"; do
    read -r id set <<<"$c"
    cmd=("$ROOT/run.sh" run "$id" --platform model --quick --fresh --set "$set")
    "${cmd[@]}" >/dev/null 2>&1 || { echo "bench-rerun.sh: $id --set $set failed:" >&2; "${cmd[@]}" >&2; exit 1; }
    best=
    for _ in $(seq "$runs"); do
        t0=$(now)
        "${cmd[@]}" >/dev/null 2>&1
        t=$(echo "$(now) - $t0" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
    done
    guest=no
    grep -A3 '^  model:' "${TRAPLINE_KERNELS:-$ROOT/kernels}/$id/experiment.yaml" | grep -q 'guest: true' && guest=yes
    printf '| %s | `%s` | %s | %.1f |\n' "$id" "$set" "$guest" "$best"
done
