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
# With vs=DIR (another checkout, e.g. `git archive COMMIT | tar -x -C DIR`),
# each round also times DIR's ./run.sh on the same command, interleaved, and a
# second table gives both with their CPU time (user + sys of the best run, the
# steadier figure on a shared machine) and the ratios.
#
#   model/bench-rerun.sh [runs=3] [only=guest|all] [vs=DIR] [ID ...]
#
# Figures: docs/performance.md.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
runs=3 only=all ids=() vs=
for a in "$@"; do
    case "$a" in
    runs=*) runs=${a#runs=} ;;
    only=guest | only=all) only=${a#only=} ;;
    vs=*) vs=$(cd "${a#vs=}" && pwd) ;;
    -*|*=*) echo "usage: model/bench-rerun.sh [runs=N] [only=guest|all] [vs=DIR] [ID ...]" >&2; exit 2 ;;
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
cpu_file=$TRAPLINE_RESULTS/.cpu
timed() { # mode cmd...: seconds (the command's CPU seconds, user + sys: cpu, after it)
    local mode=$1 t0
    shift
    t0=$(now)
    if [ "$mode" = boot ]; then
        TRAPLINE_SNAPSHOTS=0 /usr/bin/time -f "%U %S" -o "$cpu_file" "$@" >/dev/null 2>&1
    else
        /usr/bin/time -f "%U %S" -o "$cpu_file" "$@" >/dev/null 2>&1
    fi
    echo "$(now) - $t0" | bc -l
}
cpu() { awk '{ printf "%.2f", $1 + $2 }' "$cpu_file"; }
min() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
qemu_s() { # the last run's QEMU wall time (boot.sh start to QEMU's exit), from its entry
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["platform_facts"]["boot"]["host_wall_s"])' \
        "$TRAPLINE_RESULTS/latest/entries/$1.model.json" 2>/dev/null || echo 0
}

printf 'uptime before: %s\n\n' "$(uptime)"
printf '| experiment | --set | guest | best of %d (s) | booted, best of %d (s) | booted / snapshot | QEMU part, snapshot / booted (s, best) |\n' "$runs" "$runs"
printf '|---|---|---|---|---|---|---|\n'
VS_ROWS=()
for c in "${CASES[@]}"; do
    read -r id set <<<"$c"
    if [ ${#ids[@]} -gt 0 ] && ! printf '%s\n' "${ids[@]}" | grep -qx "$id"; then continue; fi
    guest=no
    is_guest "$id" && guest=yes
    [ "$only" = guest ] && [ "$guest" = no ] && continue
    cmd=("$ROOT/run.sh" run "$id" --platform model --quick --fresh --set "$set")
    "${cmd[@]}" >/dev/null 2>&1 || { echo "bench-rerun.sh: $id --set $set failed:" >&2; "${cmd[@]}" >&2; exit 1; }
    vcmd=()
    if [ -n "$vs" ]; then
        vcmd=("$vs/run.sh" "${cmd[@]:1}")
        "${vcmd[@]}" >/dev/null 2>&1 || { echo "bench-rerun.sh: $vs: $id --set $set failed:" >&2; "${vcmd[@]}" >&2; exit 1; }
    fi
    best= bcpu= boot= qbest= qboot= vbest= vcpu=
    for _ in $(seq "$runs"); do
        t=$(timed snapshot "${cmd[@]}")
        # the CPU time of the best wall-clock run
        if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t bcpu=$(cpu); fi
        [ "$guest" = no ] || qbest=$(min "$qbest" "$(qemu_s "$id")")
        if [ -n "$vs" ]; then
            t=$(timed snapshot "${vcmd[@]}")
            if [ -z "$vbest" ] || [ "$(echo "$t < $vbest" | bc -l)" = 1 ]; then vbest=$t vcpu=$(cpu); fi
        fi
        [ "$guest" = yes ] || continue
        boot=$(min "$boot" "$(timed boot "${cmd[@]}")")
        qboot=$(min "$qboot" "$(qemu_s "$id")")
    done
    if [ "$guest" = yes ]; then
        printf '| %s | `%s` | yes | %.1f | %.1f | %.2f | %.1f / %.1f |\n' "$id" "$set" "$best" "$boot" \
            "$(echo "$boot / $best" | bc -l)" "$qbest" "$qboot"
    else
        printf '| %s | `%s` | no | %.1f | | | |\n' "$id" "$set" "$best"
    fi
    if [ -n "$vs" ]; then
        VS_ROWS+=("$(printf '| %s | %.1f (%s) | %.1f (%s) | %.2f | %.2f |' "$id" "$vbest" "$vcpu" "$best" "$bcpu" \
            "$(echo "$vbest / $best" | bc -l)" "$(echo "$vcpu / $bcpu" | bc -l)")")
    fi
done
if [ -n "$vs" ]; then
    printf '\nbefore: %s; after: this checkout (%s); best of %d, interleaved\n\n' "$vs" "$ROOT" "$runs"
    printf '| experiment | before, s (CPU s) | after, s (CPU s) | before / after, wall | before / after, CPU |\n'
    printf '|---|---|---|---|---|\n'
    printf '%s\n' "${VS_ROWS[@]}"
fi
printf '\nuptime after: %s\n' "$(uptime)"
