#!/bin/bash
# bench-sweep.sh - a 16-point user-mode model sweep in --quick (./run.sh sweep, Dask,
# an embedded LocalCluster of `workers` processes) against the same 16 points run one
# after another as 16 `./run.sh run` commands (what a user did before sweeps), each
# timed as whole commands (wall clock), interleaved `runs` times; then the engine's
# overhead per point, from the sweep's manifest and table:
#
#   start     the LocalCluster up (worker processes started and connected)
#   idle      (compute wall x workers - the workers' busy time) / points: what a point
#             costs a worker slot beyond running it (scheduling, transfer, waiting)
#   worker    run_point's own time beyond the platform's run (a run context, the
#             experiment files loaded and checked), per point
#
# Every sweep and every sequence starts from an empty results directory (so the sweep
# finds no point in its store). One untimed round first builds or finds the kernels
# and the plugin.
#
#   model/bench-sweep.sh [runs=3] [workers=2]
#
# Figures: docs/performance.md.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
runs=3
workers=2
for a in "$@"; do
    case "$a" in
    runs=*) runs=${a#runs=} ;;
    workers=*) workers=${a#workers=} ;;
    *) echo "usage: model/bench-sweep.sh [runs=N] [workers=N]" >&2; exit 2 ;;
    esac
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/trapline-bench-sweep.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

ID=loop-order
ROWS=(128 256 384 512)
DTLB=(16 64 256 1024)
SWEEP=("$ROOT/run.sh" sweep "$ID" --quick --set "rows=$(IFS=,; echo "${ROWS[*]}")"
       --set "tlb.dtlb.entries=$(IFS=,; echo "${DTLB[*]}")" --workers "$workers")

now() { date +%s.%N; }
sequential() {  # the 16 points as 16 commands, one after another
    local r e
    for r in "${ROWS[@]}"; do for e in "${DTLB[@]}"; do
        TRAPLINE_RESULTS=$1 "$ROOT/run.sh" run "$ID" --platform model --quick \
            --set "rows=$r" --set "tlb.dtlb.entries=$e" >/dev/null 2>&1
    done; done
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "grid: $ID --quick rows=${ROWS[*]} x tlb.dtlb.entries=${DTLB[*]} (16 points), sweep on $workers workers"
TRAPLINE_RESULTS=$TMP/warm "${SWEEP[@]}" >/dev/null 2>"$TMP/warm.err" ||  # kernels, plugin, venv: built or found
    { cat "$TMP/warm.err" >&2; exit 1; }
seq_t=() sw_t=() last=
for i in $(seq "$runs"); do
    t0=$(now); sequential "$TMP/seq$i"; seq_t+=("$(echo "$(now) - $t0" | bc -l)")
    t0=$(now); TRAPLINE_RESULTS=$TMP/sweep$i "${SWEEP[@]}" >/dev/null 2>"$TMP/sweep$i.err" ||
        { cat "$TMP/sweep$i.err" >&2; exit 1; }
    sw_t+=("$(echo "$(now) - $t0" | bc -l)")
    last=$TMP/sweep$i
    printf 'round %d: 16 runs one after another %.1f s, sweep %.1f s (ratio %.2f); load %s\n' "$i" \
        "${seq_t[-1]}" "${sw_t[-1]}" "$(echo "${sw_t[-1]} / ${seq_t[-1]}" | bc -l)" "$(cut -d' ' -f1-3 /proc/loadavg)"
done
python3 - "$last" "${seq_t[@]}" -- "${sw_t[@]}" <<'EOF'
import json, statistics, sys
from pathlib import Path
args = sys.argv[2:]
cut = args.index("--")
seq, sw = [float(x) for x in args[:cut]], [float(x) for x in args[cut + 1:]]
ms, mw = statistics.median(seq), statistics.median(sw)
print(f"median of {len(seq)}: 16 runs one after another {ms:.1f} s, sweep {mw:.1f} s: sweep/sequential {mw / ms:.2f}"
      f" (target <= 0.6); best {min(sw) / min(seq):.2f}")
d = sorted((Path(sys.argv[1]) / "sweeps").glob("2*"))[-1]
m = json.loads((d / "manifest.json").read_text())
rows = json.loads((d / "table.json").read_text())["rows"]
pts = [json.loads(p.read_text()) for p in (d / "points").glob("*.json")]
eng = m["engine"]
n, w = len(rows), eng["workers"]
busy = sum(p["seconds"] for p in pts)
run_s = sum(p["entry"]["seconds"] for p in pts)
idle = (eng["compute_seconds"] * w - busy) / n
print(f"engine (last sweep): cluster start {eng['start_seconds']:.2f} s; compute {eng['compute_seconds']:.2f} s on "
      f"{w} workers for {n} points ({busy:.2f} s busy, of which the platform ran {run_s:.2f} s)")
print(f"per point: idle {idle * 1000:.0f} ms (engine: scheduling, transfer, waiting), worker-side "
      f"{(busy - run_s) / n * 1000:.0f} ms (run context, experiment files), platform run {run_s / n * 1000:.0f} ms")
EOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
