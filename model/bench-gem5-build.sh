#!/bin/bash
# bench-gem5-build.sh - what building trapline's gem5 costs: a build with nothing to do,
# and the incremental rebuild after one line of each kind of change (an EXTRAS source,
# a patch to a .cc file, a patch to a header most of gem5 includes). The first build
# (about 90 minutes on 2 cores) is not repeated here: its time is in the build's
# build.json ("seconds", "fresh") and log. Figures: docs/performance.md.
#
#   model/bench-gem5-build.sh            # after ./run.sh gem5 build
#
# Each edit goes into a copy of gem5_configs/changes/ ($TRAPLINE_GEM5_CHANGES), so the
# clone's changes stay as they are; the shared tree then differs from them in the edited
# files, and the next ./run.sh gem5 build recompiles just those (timed last).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
CACHE=${TRAPLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trapline}
BEFORE=$(ls -d "$CACHE"/gem5/trapline-* 2>/dev/null || true)
cleanup() {  # the binaries of the edited changes go; the clone's build stays
    for d in "$CACHE"/gem5/trapline-*; do grep -qxF "$d" <<<"$BEFORE" || rm -rf "$d"; done
    rm -rf "$WORK"
}
trap cleanup EXIT
t() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
      t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }'; }
edit() {  # a copy of the changes with one comment line added to $1 (a file under changes/)
    rm -rf "$WORK/changes" && cp -r "$ROOT/gem5_configs/changes" "$WORK/changes"
    case "$1" in
        *.patch) python3 - "$WORK/changes/$1" "$2" <<'PY'
import re, sys
p, target = sys.argv[1], sys.argv[2]
text = open(p).read()
# one more added line at the end of the first hunk of `target` (a comment)
i = text.index(f"+++ b/{target}")
m = re.compile(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@", re.M).search(text, i)
head = f"@@ -{m[1]},{m[2]} +{m[3]},{int(m[4]) + 1} @@"
j = text.find("\n@@ ", m.end()); j = len(text) if j < 0 else j + 1
k = text.find("\ndiff --git", m.end()); j = min(j, k + 1) if k >= 0 else j
body = text[m.end():j].rstrip("\n") + "\n+// trapline bench-gem5-build: one more line\n"
open(p, "w").write(text[:m.start()] + head + body + text[j:])
PY
        ;;
        *) echo "// trapline bench-gem5-build: one more line" >>"$WORK/changes/$1" ;;
    esac
}
echo "| step | seconds |"
echo "|---|---|"
echo "| nothing to do (built already) | $(t "$ROOT/run.sh" gem5 build) |"
edit bus-lock/extras/bus_lock.cc
echo "| one line in an EXTRAS source (bus-lock/extras/bus_lock.cc) | $(TRAPLINE_GEM5_CHANGES=$WORK/changes t "$ROOT/run.sh" gem5 build) |"
edit sparc-glibc/sparc-glibc.patch src/arch/sparc/linux/syscalls.cc
echo "| one line in a patched .cc (sparc-glibc: syscalls.cc) | $(TRAPLINE_GEM5_CHANGES=$WORK/changes t "$ROOT/run.sh" gem5 build) |"
edit numa-first-touch/numa-first-touch.patch src/sim/process.hh
echo "| one line in a patched header most of gem5 includes (numa-first-touch: sim/process.hh) | $(TRAPLINE_GEM5_CHANGES=$WORK/changes t "$ROOT/run.sh" gem5 build) |"
echo "| back to the clone's changes | $(t "$ROOT/run.sh" gem5 build) |"
