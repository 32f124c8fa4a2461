#!/bin/bash
# bench-rerun.sh - how long "tweak one machine field and rerun one experiment"
# takes: every experiment with a model lane, in quick mode, with one --set a
# user would make, timed as the whole ./run.sh command (wall clock). Each case
# runs once untimed first, so the kernels, the plugin, the guest images and the
# guest snapshots are built and cached (what "with images already built"
# means), then `runs` times; the best counts (the machine is shared). A guest
# lane (model: guest: true) is timed both ways in each round, interleaved: from
# the image's snapshot (the default) and booted (TRAPLINE_SNAPSHOTS=0), and the
# table gives both and their ratio. Results go to a temporary directory.
#
#   model/bench-rerun.sh [runs=3] [only=guest|all] [ID ...]
#
# Figures: docs/performance.md.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
runs=3 only=all ids=()
for a in "$@"; do
    case "$a" in
    runs=*) runs=${a#runs=} ;;
    only=guest | only=all) only=${a#only=} ;;
    -*|*=*) echo "usage: model/bench-rerun.sh [runs=N] [only=guest|all] [ID ...]" >&2; exit 2 ;;
    *) ids+=("$a") ;;
    esac
done
export TRAPLINE_RESULTS
TRAPLINE_RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/trapline-bench-rerun.XXXXXX")
trap 'rm -rf "$TRAPLINE_RESULTS"' EXIT

# experiment | the one field changed (a tweak of the experiment's own machine; in a
# guest lane a field the guest lane uses: the sun4u guest's register windows are
# Linux's own, so windows.* would change nothing there)
CASES=(
    "x86-split-lock caches.l1d.line=32B"
    "sparc-misalign-trap caches.l1d.size=32kB"
    "sparc-strong-prefetch prefetch.trap_cost=5000ns"
    "sparc-spill-fill caches.l1d.size=16kB"
    "loop-order tlb.dtlb.entries=1024"
    "armv6-unaligned caches.l1d.size=32kB"
    "numa-first-touch numa.latency_ns[0][1]=240ns"
    "plt-itlb tlb.itlb.entries=32"
)

now() { date +%s.%N; }
is_guest() { grep -A3 '^  model:' "${TRAPLINE_KERNELS:-$ROOT/kernels}/$1/experiment.yaml" | grep -q 'guest: true'; }
timed() { # mode cmd...: seconds
    local mode=$1 t0
    shift
    t0=$(now)
    if [ "$mode" = boot ]; then TRAPLINE_SNAPSHOTS=0 "$@" >/dev/null 2>&1; else "$@" >/dev/null 2>&1; fi
    echo "$(now) - $t0" | bc -l
}
min() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
qemu_s() { # the last run's QEMU wall time (boot.sh start to QEMU's exit), from its entry
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["platform_facts"]["boot"]["host_wall_s"])' \
        "$TRAPLINE_RESULTS/latest/entries/$1.model.json" 2>/dev/null || echo 0
}

printf 'uptime before: %s\n\n' "$(uptime)"
printf '| experiment | --set | guest | best of %d (s) | booted, best of %d (s) | booted / snapshot | QEMU part, snapshot / booted (s, best) |\n' "$runs" "$runs"
printf '|---|---|---|---|---|---|---|\n'
for c in "${CASES[@]}"; do
    read -r id set <<<"$c"
    if [ ${#ids[@]} -gt 0 ] && ! printf '%s\n' "${ids[@]}" | grep -qx "$id"; then continue; fi
    guest=no
    is_guest "$id" && guest=yes
    [ "$only" = guest ] && [ "$guest" = no ] && continue
    cmd=("$ROOT/run.sh" run "$id" --platform model --quick --fresh --set "$set")
    "${cmd[@]}" >/dev/null 2>&1 || { echo "bench-rerun.sh: $id --set $set failed:" >&2; "${cmd[@]}" >&2; exit 1; }
    best= boot= qbest= qboot=
    for _ in $(seq "$runs"); do
        best=$(min "$best" "$(timed snapshot "${cmd[@]}")")
        [ "$guest" = yes ] || continue
        qbest=$(min "$qbest" "$(qemu_s "$id")")
        boot=$(min "$boot" "$(timed boot "${cmd[@]}")")
        qboot=$(min "$qboot" "$(qemu_s "$id")")
    done
    if [ "$guest" = yes ]; then
        printf '| %s | `%s` | yes | %.1f | %.1f | %.2f | %.1f / %.1f |\n' "$id" "$set" "$best" "$boot" \
            "$(echo "$boot / $best" | bc -l)" "$qbest" "$qboot"
    else
        printf '| %s | `%s` | no | %.1f | | | |\n' "$id" "$set" "$best"
    fi
done
printf '\nuptime after: %s\n' "$(uptime)"
