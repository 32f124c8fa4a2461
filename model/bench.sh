#!/bin/bash
# bench.sh - guest instructions per second on one sparc64 workload, three ways:
#   plain     qemu-sparc64, no plugin
#   contrib   QEMU's contrib cache plugin (contrib/plugins/cache.c of the same
#             QEMU source), L1I + L1D + L2 as below
#   model     trapline's model (model/plugin/trapline-model.c): the same
#             L1I + L1D + L2, plus ITLB, DTLB and everything else it models
#
#   model/bench.sh [reps=200] [runs=5]
#
# The workload is model/tests/workload.c (a streaming update with gathers,
# and a tight arithmetic loop), built static with sparc64-linux-gnu-gcc -O1.
# Each configuration runs `runs` times, interleaved; the best (shortest) wall
# time counts, since the machine is shared. The guest instruction count
# comes from the model's own output (it matches a one-callback-per-
# instruction count: tests/test_80_model_plugin.py). Figures: docs/performance.md.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
CACHE=${TRAPLINE_CACHE:-$HOME/.cache/trapline}
reps=200
runs=5
for a in "$@"; do
    case "$a" in
    reps=*) reps=${a#reps=} ;;
    runs=*) runs=${a#runs=} ;;
    *) echo "usage: model/bench.sh [reps=N] [runs=N]" >&2; exit 2 ;;
    esac
done

MODEL=${BENCH_MODEL_SO:-$("$HERE/build.sh")} # BENCH_MODEL_SO: another build of the plugin (a before/after comparison)
CONTRIB=$("$HERE/build.sh" cache)
work=$(mktemp -d "${TMPDIR:-/tmp}/trapline-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
sparc64-linux-gnu-gcc -O1 -static -mcpu=ultrasparc -o "$work/workload" "$HERE/tests/workload.c"

# One machine for both plugins: 32 KiB 8-way L1I and L1D with 64-byte lines,
# a 1 MiB 16-way L2 with 64-byte lines, LRU.
CONTRIB_ARGS="icachesize=32768,iassoc=8,iblksize=64,dcachesize=32768,dassoc=8,dblksize=64"
CONTRIB_ARGS+=",l2=on,l2cachesize=1048576,l2assoc=16,l2blksize=64,evict=lru"
MODEL_ARGS="l1i_size=32768,l1i_assoc=8,l1i_line=64,l1d_size=32768,l1d_assoc=8,l1d_line=64,l1d_write=wb"
MODEL_ARGS+=",l2_size=1048576,l2_assoc=16,l2_line=64,itlb_entries=64,itlb_assoc=0,dtlb_entries=64,dtlb_assoc=0"
MODEL_ARGS+=",page=8192,nwindows=8"

declare -A CMD
CMD[plain]="qemu-sparc64 $work/workload reps=$reps"
CMD[contrib]="qemu-sparc64 -plugin $CONTRIB,$CONTRIB_ARGS $work/workload reps=$reps"
CMD[model]="qemu-sparc64 -plugin $MODEL,$MODEL_ARGS,out=$work/stats.json $work/workload reps=$reps"

declare -A BEST
for ((i = 0; i < runs; i++)); do
    for c in plain contrib model; do
        t0=$(date +%s%N)
        ${CMD[$c]} >"$work/$c.out" 2>"$work/$c.err" || { cat "$work/$c.err" >&2; exit 1; }
        t1=$(date +%s%N)
        ns=$((t1 - t0))
        if [ -z "${BEST[$c]:-}" ] || [ "$ns" -lt "${BEST[$c]}" ]; then BEST[$c]=$ns; fi
    done
done
cmp -s "$work/plain.out" "$work/model.out" || { echo "bench: the workload's output differs under the model" >&2; exit 1; }
insns=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['total']['instructions'])" "$work/stats.json")

echo "workload: model/tests/workload.c reps=$reps on qemu-sparc64 $(qemu-sparc64 --version | head -1 | awk '{print $3}'), $insns guest instructions"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg); best of $runs runs"
awk -v insns="$insns" -v p="${BEST[plain]}" -v c="${BEST[contrib]}" -v m="${BEST[model]}" 'BEGIN {
    printf "%-34s %10s %14s %12s\n", "configuration", "seconds", "guest MIPS", "vs plain"
    printf "%-34s %10.3f %14.1f %11.1fx\n", "plain qemu-sparc64", p / 1e9, insns / (p / 1e3), 1
    printf "%-34s %10.3f %14.1f %11.1fx\n", "contrib cache plugin (L1I+L1D+L2)", c / 1e9, insns / (c / 1e3), c / p
    printf "%-34s %10.3f %14.1f %11.1fx\n", "trapline model (L1I+L1D+L2+TLB)", m / 1e9, insns / (m / 1e3), m / p
    printf "trapline model vs contrib cache plugin: %.1fx faster (target: at least 5x)\n", c / m
}'
