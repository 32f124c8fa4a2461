#!/bin/bash
# bench-gem5.sh - how slow gem5 is: simulated instructions per second of gem5's
# TimingSimpleCPU and O3CPU beside the timing model's, on the same kernel and
# machine, in one interleaved run (trapline/platforms/gem5/bench.py says how it measures).
#
#   model/bench-gem5.sh [--runs 3] [--machine x86-2012-server] [-- EXP/BINARY key=value ...]
#
# Default workload: malloc-chunk-chase/chunk-chase allocator=chunk requestsize=9
# rounds=4 objects=4000 reps=1 warmup=0 (about 2.7 M x86_64 instructions, a
# pointer-chasing allocator). gem5 comes from GEM5 or gem5.opt on PATH, or
# --gem5 PATH (docs/gem5.md). Figures: docs/performance.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec "$ROOT/run.sh" python -m trapline.platforms.gem5.bench "$@"
