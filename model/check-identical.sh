#!/bin/bash
# check-identical.sh - a plugin speed change must leave every modelled figure
# identical to the last digit. This records, then compares:
#   - the deterministic user-mode model lanes (`./run.sh run ID --platform model
#     --quick --fresh` for loop-order, x86-split-lock, malloc-chunk-chase,
#     strlen-loop): each entry JSON (results/<run>/entries/*.json, without its
#     "seconds", the emulation's wall clock) and every model stats JSON in the
#     raw log (all counters and cycles of every region; not the whole run's
#     total, which counts the guest printing its own emulation wall times);
#   - the plugin's stats JSON on model/tests/workload.c (reps=2) for x86_64
#     (x86-2012-server's options, as model/bench-x86.sh), sparc64
#     (model/bench.sh's options) and armv6 (arm1176-rpi1's options).
#
#   model/check-identical.sh record DIR    write the reference into DIR
#   model/check-identical.sh compare DIR   rerun, diff against DIR; exit 1 on any difference
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
mode=${1:-}
ref=${2:-}
case "$mode" in
record | compare) [ -n "$ref" ] || { echo "usage: model/check-identical.sh record|compare DIR" >&2; exit 2; } ;;
*) echo "usage: model/check-identical.sh record|compare DIR" >&2; exit 2 ;;
esac
if [ "$mode" = record ]; then out=$ref; else out=$(mktemp -d "${TMPDIR:-/tmp}/trapline-identical.XXXXXX"); fi
mkdir -p "$out"

MODEL=${CHECK_MODEL_SO:-$("$HERE/build.sh")}
work=$(mktemp -d "${TMPDIR:-/tmp}/trapline-identical-w.XXXXXX")
trap 'rm -rf "$work"' EXIT

# the options of model/bench-x86.sh and model/bench.sh (read from them: one place)
X86_MODEL=$(ROOT=$ROOT bash -c "$(grep '^X86_MODEL=' "$HERE/bench-x86.sh"); echo \$X86_MODEL")
ARM_MODEL=$(ROOT=$ROOT bash -c "$(grep '^ARM_MODEL=' "$HERE/bench-x86.sh"); echo \$ARM_MODEL")
[ -n "$X86_MODEL" ] && [ -n "$ARM_MODEL" ] || { echo "check-identical: no machine options from bench-x86.sh" >&2; exit 1; }
SPARC_MODEL=$(bash -c "$(sed -n '/^MODEL_ARGS=/,/^MODEL_ARGS+=",page=8192/p' "$HERE/bench.sh"); echo \$MODEL_ARGS")
gcc -O1 -static -o "$work/w-x86_64" "$HERE/tests/workload.c"
arm-linux-gnueabi-gcc -O1 -static -march=armv6 -marm -o "$work/w-armv6" "$HERE/tests/workload.c"
sparc64-linux-gnu-gcc -O1 -static -mcpu=ultrasparc -o "$work/w-sparc64" "$HERE/tests/workload.c"
# the guest's environment and working directory are fixed: the C library's
# start-up walks them, so their lengths change the instruction counts
G="env -i PATH=/usr/bin:/bin"
(cd "$work" && $G qemu-x86_64 -plugin "$MODEL,$X86_MODEL,out=$out/workload-x86_64.json" ./w-x86_64 reps=2 >/dev/null)
(cd "$work" && $G qemu-arm -cpu arm1176 -plugin "$MODEL,$ARM_MODEL,out=$out/workload-armv6.json" ./w-armv6 reps=2 >/dev/null)
(cd "$work" && $G qemu-sparc64 -plugin "$MODEL,$SPARC_MODEL,out=$out/workload-sparc64.json" ./w-sparc64 reps=2 >/dev/null)

for id in loop-order x86-split-lock malloc-chunk-chase strlen-loop; do
    log=$(cd "$ROOT" && ./run.sh run "$id" --platform model --quick --fresh 2>&1) || { echo "$log" >&2; exit 1; }
    run=$(printf '%s\n' "$log" | sed -n 's/.*done: \(.*\) (.*/\1/p' | tail -1)
    [ -d "$run" ] || { echo "check-identical: no run directory for $id" >&2; echo "$log" >&2; exit 1; }
    python3 - "$run" "$out/$id" <<'EOF'
import json, os, re, sys
run, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
for f in sorted(os.listdir(os.path.join(run, "entries"))):
    d = json.load(open(os.path.join(run, "entries", f)))
    d.pop("seconds", None)
    json.dump(d, open(os.path.join(dest, f), "w"), indent=1, sort_keys=True)
for f in sorted(os.listdir(os.path.join(run, "raw"))):
    text = open(os.path.join(run, "raw", f)).read()
    blocks = re.findall(r"^--- model stats ---\n(\{.*?^\})", text, re.S | re.M)
    with open(os.path.join(dest, f + ".stats"), "w") as o:
        for b in blocks:
            d = json.loads(b)
            # the whole run's total includes the guest's own timing output (the
            # digits of emulation wall-clock times it prints): not deterministic;
            # the regions are what the lanes report
            d.pop("total", None)
            o.write(json.dumps(d, indent=1, sort_keys=True) + "\n")
EOF
    rm -rf "$run"
done

if [ "$mode" = record ]; then
    echo "check-identical: recorded in $out ($(find "$out" -type f | wc -l) files)"
    exit 0
fi
if diff -r "$ref" "$out" >"$work/diff"; then
    echo "check-identical: identical ($(find "$out" -type f | wc -l) files)"
    rm -rf "$out"
else
    head -50 "$work/diff"
    echo "check-identical: DIFFERENT (new output in $out)" >&2
    exit 1
fi
