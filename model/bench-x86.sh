#!/bin/bash
# bench-x86.sh - the timing model against the tools a user would reach for
# instead, on model/tests/workload.c, for x86_64 and armv6 (model/bench.sh is the
# sparc64 sibling):
#   native     the x86_64 binary on the host (x86_64 only)
#   plain      qemu-x86_64 / qemu-arm, no plugin
#   cachegrind valgrind --tool=cachegrind --cache-sim=yes with the machine's
#              L1I, L1D and its last level as LL (x86_64 only: valgrind does
#              not run an armv6 binary under qemu-arm)
#   contrib    QEMU's contrib cache plugin (contrib/plugins/cache.c of the
#              same QEMU source, model/build.sh cache): L1I + L1D (+ L2)
#   callbacks  the model's plugin with fast_forward=1 on this marker-less
#              workload: QEMU calls it on every block and access and it
#              returns at once (the floor any plugin pays under QEMU 7.2)
#   model      trapline's model with the machine's every option: x86_64
#              x86-2012-server (L1I, L1D, L2, L3, ITLB, DTLB, STLB);
#              armv6 arm1176-rpi1 (L1I, L1D, ITLB, DTLB, STLB)
#
#   model/bench-x86.sh [arch=x86_64|armv6|both] [workload=workload|misses] [reps=N] [runs=3]
#
# BENCH_MODEL_SO=path times another build of the plugin as "model";
# BENCH_BASE_SO=path adds a second build as one more configuration of the same
# interleaved rounds (a before/after comparison in one run, stats compared);
# BENCH_BASE_OPTS=options runs it with other options than the machine's (an older
# build that does not know today's: `run.sh python -m trapline.platforms.model.plugin
# --args MACHINE` in the older tree prints its own).
#
# workload=workload (the default) is model/tests/workload.c built with -DN=262144
# -DSPIN=200000 (2^18 unsigned ints updated through an index array and gathered,
# then a 200,000-step arithmetic loop; reps=100, the default: about 390 M x86_64
# instructions); workload=misses is model/tests/misses.c (a chase, four chases, a
# stream, a gather, a 4 KiB stride and a store stream over 64 MiB, one access per
# line: what missing every cache does to the model; reps=2, the default: about
# 170 M x86_64 instructions). Both static, gcc -O1. The configurations run `runs` times interleaved; the best
# (shortest) wall time counts, and the CPU time (user + sys) of that run is
# printed too: on a shared machine CPU time moves less than wall time. The
# machine's load is printed before and after. Figures: docs/performance.md.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=model/bench-lib.sh
. "$HERE/bench-lib.sh"
arch=both
workload=workload
reps=
runs=3
for a in "$@"; do
    case "$a" in
    arch=*) arch=${a#arch=} ;;
    reps=*) reps=${a#reps=} ;;
    workload=*) workload=${a#workload=} ;;
    runs=*) runs=${a#runs=} ;;
    *) echo "usage: model/bench-x86.sh [arch=x86_64|armv6|both] [workload=workload|misses] [reps=N] [runs=N]" >&2; exit 2 ;;
    esac
done
case "$arch" in
x86_64 | armv6) ARCHES=$arch ;;
both) ARCHES="x86_64 armv6" ;;
*) echo "bench-x86: arch=$arch; choose one of: x86_64 armv6 both" >&2; exit 2 ;;
esac
case "$workload" in
workload) SIZE="-DN=262144 -DSPIN=200000" reps=${reps:-100} ;;
misses) SIZE="" reps=${reps:-2} ;;
*) echo "bench-x86: workload=$workload; choose one of: workload misses" >&2; exit 2 ;;
esac

MODEL=${BENCH_MODEL_SO:-$("$HERE/build.sh")} # BENCH_MODEL_SO: another build of the plugin (a before/after comparison)
BASE=${BENCH_BASE_SO:-} # BENCH_BASE_SO: a second build, run as one more configuration in the same rounds
BASE_OPTS=${BENCH_BASE_OPTS:-} # BENCH_BASE_OPTS: that build's options when they are not the machine's of today
CONTRIB=$("$HERE/build.sh" cache)
work=$(mktemp -d "${TMPDIR:-/tmp}/trapline-bench-x86.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The machines' plugin options, as the model lane passes them (read from the machine files).
ROOT=$(cd "$HERE/.." && pwd)
X86_MODEL=$("$ROOT/run.sh" python -m trapline.platforms.model.plugin --args x86-2012-server)
ARM_MODEL=$("$ROOT/run.sh" python -m trapline.platforms.model.plugin --args arm1176-rpi1)
X86_CONTRIB="icachesize=32768,iassoc=8,iblksize=64,dcachesize=32768,dassoc=8,dblksize=64"
X86_CONTRIB+=",l2=on,l2cachesize=262144,l2assoc=8,l2blksize=64,evict=lru"
X86_CG="--I1=32768,8,64 --D1=32768,8,64 --LL=20971520,20,64"
ARM_CONTRIB="icachesize=16384,iassoc=4,iblksize=32,dcachesize=16384,dassoc=4,dblksize=32,evict=lru"

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(qemu-x86_64 --version | head -1); $(valgrind --version)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); best of $runs interleaved runs (wall), with that run's CPU time"

for A in $ARCHES; do
    declare -A CMD=() LABEL=()
    if [ "$A" = x86_64 ]; then
        gcc -O1 -static $SIZE -o "$work/w" "$HERE/tests/$workload.c"
        CONFS="native plain cachegrind contrib callbacks model"
        CMD[native]="$work/w reps=$reps"
        CMD[cachegrind]="valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=$work/cg.out $X86_CG $work/w reps=$reps"
        QEMU="qemu-x86_64" CONTRIB_OPTS=$X86_CONTRIB MODEL_OPTS=$X86_MODEL
        LABEL[native]="native"
        LABEL[cachegrind]="Cachegrind --cache-sim=yes (I1,D1,LL)"
        LABEL[contrib]="contrib cache plugin (L1I+L1D+L2)"
        LABEL[model]="model x86-2012-server (+L3,TLBs)"
    else
        arm-linux-gnueabi-gcc -O1 -static -march=armv6 -marm $SIZE -o "$work/w" "$HERE/tests/$workload.c"
        CONFS="plain contrib callbacks model"
        QEMU="qemu-arm -cpu arm1176" CONTRIB_OPTS=$ARM_CONTRIB MODEL_OPTS=$ARM_MODEL
        LABEL[contrib]="contrib cache plugin (L1I+L1D)"
        LABEL[model]="model arm1176-rpi1 (+TLBs)"
    fi
    CMD[plain]="$QEMU $work/w reps=$reps"
    CMD[contrib]="$QEMU -plugin $CONTRIB,$CONTRIB_OPTS $work/w reps=$reps"
    CMD[callbacks]="$QEMU -plugin $MODEL,$MODEL_OPTS,fast_forward=1,out=$work/ff.json $work/w reps=$reps"
    CMD[model]="$QEMU -plugin $MODEL,$MODEL_OPTS,out=$work/stats.json $work/w reps=$reps"
    if [ -n "$BASE" ]; then
        CONFS+=" base"
        CMD[base]="$QEMU -plugin $BASE,${BASE_OPTS:-$MODEL_OPTS},out=$work/base.json $work/w reps=$reps"
        LABEL[base]="model, BENCH_BASE_SO build"
    fi
    LABEL[plain]="plain qemu ($A)"
    LABEL[callbacks]="model's callbacks only (fast_forward=1)"
    declare -A BEST=() CPU=()
    for ((i = 0; i < runs; i++)); do
        for c in $CONFS; do bench_once "$c"; done
    done
    for c in $CONFS; do
        [ "$c" = cachegrind ] && continue
        cmp -s "$work/plain.out" "$work/$c.out" || { echo "bench-x86: the workload's output differs under $c" >&2; exit 1; }
    done
    insns=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['total']['instructions'])" "$work/stats.json")
    echo
    echo "$A: model/tests/$workload.c $SIZE reps=$reps, $insns guest instructions; load now $(cut -d' ' -f1-3 /proc/loadavg)"
    ref=${BEST[plain]}
    [ "$A" = x86_64 ] && ref=${BEST[native]}
    printf "%-40s %9s %9s %10s\n" "configuration" "wall ms" "CPU ms" "vs $([ "$A" = x86_64 ] && echo native || echo plain)"
    for c in $CONFS; do
        awk -v l="${LABEL[$c]}" -v w="${BEST[$c]}" -v u="${CPU[$c]}" -v r="$ref" \
            'BEGIN { printf "%-40s %9d %9d %9.1fx\n", l, w, u, w / r }'
    done
    if [ "$A" = x86_64 ]; then
        awk -v m="${BEST[model]}" -v g="${BEST[cachegrind]}" -v mu="${CPU[model]}" -v gu="${CPU[cachegrind]}" \
            'BEGIN { printf "model / Cachegrind: %.2fx wall, %.2fx CPU (target: at most 1x)\n", m / g, mu / gu }'
    else
        echo "(no Cachegrind for armv6: valgrind does not run a guest binary under qemu-arm)"
    fi
    awk -v m="${BEST[model]}" -v c="${BEST[contrib]}" -v mu="${CPU[model]}" -v cu="${CPU[contrib]}" \
        'BEGIN { printf "contrib plugin / model: %.2fx wall, %.2fx CPU\n", c / m, cu / mu }'
    if [ -n "$BASE" ]; then
        cmp -s <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['regions'])" "$work/stats.json") \
            <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['regions'])" "$work/base.json") &&
            same="stats identical" || same="STATS DIFFER"
        awk -v m="${BEST[model]}" -v b="${BEST[base]}" -v mu="${CPU[model]}" -v bu="${CPU[base]}" -v s="$same" \
            'BEGIN { printf "model / BENCH_BASE_SO build: %.2fx wall, %.2fx CPU (%s)\n", m / b, mu / bu, s }'
    fi
    unset CMD LABEL BEST CPU
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
