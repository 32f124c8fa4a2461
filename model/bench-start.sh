#!/bin/bash
# bench-start.sh - what a ./run.sh command pays before it does anything, and the timing
# model through the public interface (./run.sh simulate) against Cachegrind.
#
#   model/bench-start.sh [runs=10] [reps=100]
#
# Start-up (best of `runs`, interleaved; wall and CPU = user + sys of that run):
#   list              ./run.sh list (every experiment file read and known valid)
#   simulate-empty    ./run.sh simulate --machine x86-2012-server --arch x86_64 -- empty
#                     (a static program that returns at once: the harness, the machine,
#                     the plugin's path and QEMU's start)
#   python-list       python -m trapline list, without run.sh; list minus it is run.sh's
#                     own checks (the Debian packages, the venv)
# The targets: list and simulate of an empty program within 0.15 s.
# BENCH_BASE=<another clone> adds its list and simulate-empty to the same interleaved
# rounds (a before/after comparison in one run).
#
# The model through simulate: model/tests/workload.c as model/bench-x86.sh builds it
# (-DN=262144 -DSPIN=200000, reps=100: about 390 M x86_64 instructions), under
#   cachegrind  valgrind --tool=cachegrind --cache-sim=yes with x86-2012-server's L1I,
#               L1D and L3 as LL
#   simulate    ./run.sh simulate --machine x86-2012-server --arch x86_64 (everything a
#               user's call costs: run.sh, the harness, the plugin's whole machine)
# best of `runs` (at most 3 here), interleaved; ratio = simulate / Cachegrind.
# The load average is printed before and after: on a shared machine compare CPU times.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=model/bench-lib.sh
. "$HERE/bench-lib.sh"
ROOT=$(dirname "$HERE")
runs=10
reps=100
for a in "$@"; do
    case "$a" in
    runs=*) runs=${a#runs=} ;;
    reps=*) reps=${a#reps=} ;;
    *) echo "usage: model/bench-start.sh [runs=N] [reps=N]" >&2; exit 2 ;;
    esac
done
# A user's Python writes the bytecode of trapline's modules at the first command (the image's
# build compiles them, Dockerfile); where the environment forbids it (PYTHONDONTWRITEBYTECODE),
# every command compiles every module it imports again: timed as a user's machine runs it.
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
    echo "PYTHONDONTWRITEBYTECODE is set here: unset for these runs (a user's machine writes the bytecode once)"
    unset PYTHONDONTWRITEBYTECODE
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/trapline-bench-start.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$ROOT/run.sh" list >/dev/null # the first call may install or build; not timed
VENV_PY=$(ls -d "${TRAPLINE_CACHE:-$HOME/.cache/trapline}"/venv-*/bin/python | head -1)
printf 'int main(void) { return 0; }\n' >"$work/empty.c"
gcc -O1 -static -o "$work/empty" "$work/empty.c"
gcc -O1 -static -DN=262144 -DSPIN=200000 -o "$work/w" "$HERE/tests/workload.c"
"$ROOT/run.sh" simulate --machine x86-2012-server --arch x86_64 -- "$work/empty" >/dev/null 2>&1

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(git -C "$ROOT" describe --always --dirty)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); best of $runs interleaved runs (wall), with that run's CPU time"

declare -A CMD=() BEST=() CPU=()
CMD[list]="$ROOT/run.sh list"
CMD[simulate-empty]="$ROOT/run.sh simulate --machine x86-2012-server --arch x86_64 -- $work/empty"
CMD[python-list]="env PYTHONPATH=$ROOT $VENV_PY -m trapline list"
CONFS="list simulate-empty python-list"
if [ -n "${BENCH_BASE:-}" ]; then
    "$BENCH_BASE/run.sh" list >/dev/null
    "$BENCH_BASE/run.sh" simulate --machine x86-2012-server --arch x86_64 -- "$work/empty" >/dev/null 2>&1
    CMD[base-list]="$BENCH_BASE/run.sh list"
    CMD[base-simulate-empty]="$BENCH_BASE/run.sh simulate --machine x86-2012-server --arch x86_64 -- $work/empty"
    CONFS+=" base-list base-simulate-empty"
fi
for ((i = 0; i < runs; i++)); do
    for c in $CONFS; do bench_once "$c"; done
done
printf '\n%-46s %9s %9s\n' "start-up" "wall ms" "CPU ms"
for c in $CONFS; do
    printf '%-46s %9d %9d\n' "$c" "${BEST[$c]}" "${CPU[$c]}"
done
printf '%-46s %9d %9d\n' "run.sh's checks (list - python list)" $((BEST[list] - BEST[python-list])) \
    $((CPU[list] - CPU[python-list]))
for c in list simulate-empty; do
    [ "${BEST[$c]}" -le 150 ] && met=met || met="NOT met"
    echo "target: $c within 150 ms wall: ${BEST[$c]} ms, $met"
    [ -n "${BEST[base-$c]:-}" ] && awk -v n="${BEST[$c]}" -v b="${BEST[base-$c]}" -v nu="${CPU[$c]}" \
        -v bu="${CPU[base-$c]}" -v c="$c" 'BEGIN { printf "  %s: %.2fx the base clone'"'"'s wall, %.2fx its CPU\n", c, n / b, nu / bu }'
done

# the model through the public interface against Cachegrind, on the same program
CMD[cachegrind]="valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=$work/cg.out --I1=32768,8,64 --D1=32768,8,64 --LL=20971520,20,64 $work/w reps=$reps"
CMD[simulate]="$ROOT/run.sh simulate --machine x86-2012-server --arch x86_64 -- $work/w reps=$reps"
big=$((runs < 3 ? runs : 3))
for ((i = 0; i < big; i++)); do
    for c in cachegrind simulate; do bench_once "$c"; done
done
insns=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['stats']['total']['instructions'])" "$work/simulate.out")
echo
echo "model/tests/workload.c -DN=262144 -DSPIN=200000 reps=$reps: $insns guest instructions; best of $big"
printf '%-46s %9s %9s\n' "configuration" "wall ms" "CPU ms"
printf '%-46s %9d %9d\n' "Cachegrind --cache-sim=yes (I1, D1, LL)" "${BEST[cachegrind]}" "${CPU[cachegrind]}"
printf '%-46s %9d %9d\n' "./run.sh simulate (x86-2012-server, everything)" "${BEST[simulate]}" "${CPU[simulate]}"
awk -v m="${BEST[simulate]}" -v g="${BEST[cachegrind]}" -v mu="${CPU[simulate]}" -v gu="${CPU[cachegrind]}" \
    'BEGIN { printf "simulate / Cachegrind: %.2fx wall, %.2fx CPU\n", m / g, mu / gu }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
