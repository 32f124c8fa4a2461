#!/usr/bin/env bash
# A cold and a warm full `./run.sh reproduce-all` on this machine, and the table of
# what each entry cost (docs/performance.md, "reproduce-all: cold and warm").
#
#   model/bench-reproduce-all.sh [WORKDIR]     default: a new directory under /tmp
#   model/bench-reproduce-all.sh --table COLD_RUN WARM_RUN   only the table, of two run directories
#
# Cold: an empty TRAPLINE_CACHE in WORKDIR (guest Linux, benchmark kernels, the model's
# plugin, snapshots: everything trapline builds), with the Python environment linked
# from your cache (installing the pinned packages is pip's time, not trapline's: run.sh
# does it once per machine), and an empty results directory. Warm: the same command
# again on the cache the cold run filled. Each run's wall time is printed; the table
# has every entry's own seconds (what the entry records), its status in both runs and
# the fewest samples any of its groups rests on.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

table() {
	"$HERE/run.sh" python - "$1" "$2" <<'EOF'
import json, sys
from pathlib import Path
runs = [Path(a) for a in sys.argv[1:3]]
rows, total = {}, [0.0, 0.0]
for i, run in enumerate(runs):
    for f in sorted((run / "entries").glob("*.json")):
        e = json.loads(f.read_text())
        r = rows.setdefault(f"{e['id']}.{e['platform']}", [None, None, None, None, None])
        r[i], r[2 + i] = e.get("seconds", 0.0), e["status"]
        ns = [g.get("n") for g in e.get("groups", []) if g.get("n")]
        r[4] = min(ns) if ns else None
        total[i] += e.get("seconds", 0.0)
print("| entry | cold s | warm s | status (cold / warm) | samples per group (fewest) |")
print("|---|---:|---:|---|---:|")
for k, (c, w, sc, sw, n) in sorted(rows.items(), key=lambda kv: -(kv[1][0] or 0)):
    if sc == sw == "not-applicable" and (c or 0) < 0.5:
        continue
    st = sc if sc == sw else f"{sc} / {sw}"
    print(f"| {k} | {c or 0:.0f} | {w or 0:.0f} | {st} | {n if n else '-'} |")
na = sum(1 for r in rows.values() if r[2] == r[3] == "not-applicable" and (r[0] or 0) < 0.5)
print(f"| {na} not-applicable entries (no platform, or a contrast) | 0 | 0 | not-applicable | - |")
print(f"| **sum of the entries** | **{total[0]:.0f}** | **{total[1]:.0f}** | | |")
EOF
}

if [[ ${1:-} == --table ]]; then
	table "$2" "$3"
	exit 0
fi

W=${1:-$(mktemp -d /tmp/trapline-bench-XXXXXX)}
mkdir -p "$W/cache"
W=$(cd "$W" && pwd)
OWN=${TRAPLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trapline}
VENV=$(cd "$HERE" && "$HERE/run.sh" python -c 'import sys; print(sys.prefix)')
[[ -e $W/cache/$(basename "$VENV") ]] || ln -s "$VENV" "$W/cache/$(basename "$VENV")"
cp -p "$OWN/.apt-ok" "$W/cache/" 2>/dev/null || true
export TRAPLINE_CACHE=$W/cache
for pass in cold warm; do
	export TRAPLINE_RESULTS=$W/results-$pass
	t0=$(date +%s.%N)
	"$HERE/run.sh" reproduce-all 2>&1 | tee "$W/$pass.log" | grep -E '^\[ *[0-9.]+s\] (expected|\[[0-9]+/[0-9]+\]|done)' || true
	echo "$pass: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s wall"
done
table "$W/results-cold/latest" "$W/results-warm/latest"
