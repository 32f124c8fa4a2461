#!/bin/bash
# bench-simulate-guest.sh - what `./run.sh simulate --platform model --guest` costs on
# top of the program's own run: per arch, a tiny static program (one marked region
# of a few thousand loads) is run `runs` times (after one untimed run that builds
# the guest image and the plugin); the table gives the best wall time of the whole
# command, QEMU's part of it (boot.sh: start to exit), the guest's own wall time of
# the program (its init's TLG time line: emulation time under the plugin) and the
# overhead (the command less the program's own time: the restore, Python, the plugin). The guest
# is restored from the program snapshot kind (made by the untimed run) and the program written
# into it (trapline/guest.py program_image, docs/model.md).
#
#   model/bench-simulate-guest.sh [runs=3] [ARCH ...]     (default: x86_64 sparc64 armv6)
#
# Figures: docs/performance.md.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
runs=3 arches=()
for a in "$@"; do
    case "$a" in
    runs=*) runs=${a#runs=} ;;
    x86_64 | sparc64 | armv6) arches+=("$a") ;;
    *) echo "usage: model/bench-simulate-guest.sh [runs=N] [x86_64|sparc64|armv6 ...]" >&2; exit 2 ;;
    esac
done
[ ${#arches[@]} -gt 0 ] || arches=(x86_64 sparc64 armv6)
declare -A MACHINE=([x86_64]=x86-2012-server [sparc64]=ultrasparc-iv-plus [armv6]=arm1176-rpi1)
declare -A CC=([x86_64]="gcc" [sparc64]="sparc64-linux-gnu-gcc -mcpu=ultrasparc"
               [armv6]="arm-linux-gnueabi-gcc -march=armv6 -marm")
work=$(mktemp -d "${TMPDIR:-/tmp}/trapline-bench-simulate-guest.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/p.c" <<'C'
#include "trapline.h"
int main(void)
{
	static volatile int a[4096];
	long s = 0;
	TL_ROI_BEGIN();
	for (int i = 0; i < 4096; i++)
		s += a[i];
	TL_ROI_END();
	return (int)s;
}
C
printf '| arch | machine | simulate --guest, best of %s (s) | QEMU start to exit (s) | the program in the guest (s) | overhead (s) | modelled time of its region (s) |\n|---|---|---|---|---|---|---|\n' "$runs"
for arch in "${arches[@]}"; do
    # shellcheck disable=SC2086
    ${CC[$arch]} -O1 -static -I "$ROOT/kernels/common" -o "$work/p-$arch" "$work/p.c"
    cmd=("$ROOT/run.sh" simulate --machine "${MACHINE[$arch]}" --guest --format json -- "$work/p-$arch")
    "${cmd[@]}" >/dev/null 2>"$work/err" || { tail -5 "$work/err" >&2; exit 1; }  # builds; not timed
    best=
    for _ in $(seq "$runs"); do
        t0=$(date +%s.%N)
        "${cmd[@]}" >"$work/out.json" 2>"$work/err" || { tail -5 "$work/err" >&2; exit 1; }
        t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
        if [ -z "$best" ] || awk -v t="$t" -v b="$best" 'BEGIN { exit !(t < b) }'; then
            best=$t
            cp "$work/out.json" "$work/best.json"
        fi
    done
    python3 - "$arch" "${MACHINE[$arch]}" "$best" "$work/best.json" <<'PY'
import json, sys
arch, machine, best, path = sys.argv[1:]
s = json.load(open(path))
qemu = float(s.get("boot", {}).get("host_wall_s", "nan"))
prog = float(s.get("guest_emulation_seconds", {}).get("wall", "nan"))
print(f"| {arch} | {machine} | {best} | {qemu:.2f} | {prog:.2f} | {float(best) - prog:.2f} | "
      f"{s['total'].get('seconds', 0):.2e} |")
PY
done
