"""A program on this host under `perf stat` (Debian's linux-perf): its user-mode
hardware counters where the host lets an unprivileged process count them
(perf_event_paranoid <= 2 and no seccomp filter in the way), else its real time
alone. Used by the host platform's simulate (trapline/platforms/host.py).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from trapline.proc import run_command

# the common format's figures (trapline/simstats.py SCALARS: one meaning on every platform) from perf's
# generic events, user mode only (:u): each figure the sum of its events, present only when the host
# counted every one of them (perf's *-loads events alone count loads, where a figure means loads and stores)
FIGURES = {"instructions": ("instructions",), "cycles": ("cycles",),
           "l1d_accesses": ("L1-dcache-loads", "L1-dcache-stores"),
           "l1d_misses": ("L1-dcache-load-misses", "L1-dcache-store-misses"),
           "l1i_misses": ("L1-icache-load-misses",),
           "l3_accesses": ("LLC-loads", "LLC-stores"), "l3_misses": ("LLC-load-misses", "LLC-store-misses"),
           "dtlb_misses": ("dTLB-load-misses", "dTLB-store-misses"), "itlb_misses": ("iTLB-load-misses",)}
EVENTS = [f"{e}:u" for events in FIGURES.values() for e in events]


def parse(text: str) -> tuple[dict[str, int], list[str]]:
    """perf stat -x, output: (the figures whose events were all counted, the events the host did not count)."""
    counted, missing = {}, []
    names = {e for events in FIGURES.values() for e in events}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        value, event = parts[0], parts[2].split(":")[0]
        if event not in names:
            continue
        if value.strip().isdigit():
            counted[event] = int(value)
        else:  # <not supported>, <not counted>
            missing.append(event)
    got = {f: sum(counted[e] for e in events) for f, events in FIGURES.items() if all(e in counted for e in events)}
    return got, missing


def run(argv: list[str], timeout: float, cwd: Path | None = None) -> dict:
    """argv under perf stat (or alone when perf cannot count here): {"status", "stdout",
    "stderr", "seconds" (real), "counters", "not_counted", "perf" (None or why not)}."""
    perf = shutil.which("perf")
    with tempfile.TemporaryDirectory(prefix="trapline-perf-") as tmp:
        out = Path(tmp) / "perf.csv"
        cmd = list(argv)
        why = None if perf else "perf is not installed (Debian: linux-perf)"
        if perf:
            cmd = [perf, "stat", "-x,", "-o", str(out), "-e", ",".join(EVENTS), "--", *argv]
        t0 = time.monotonic()
        status, so, se = run_command(cmd, timeout, cwd=cwd)
        seconds = time.monotonic() - t0
        text = out.read_text() if out.exists() else ""
    counters, missing = parse(text)
    if perf and not counters:
        why = (f"perf stat counted nothing here ({text.strip().splitlines()[-1] if text.strip() else se.strip()[-200:]})"
               or "perf stat counted nothing here")
        if status is not None and status != 0 and not text.strip():
            # perf itself failed (no permission): run the program alone
            t0 = time.monotonic()
            status, so, se = run_command(list(argv), timeout, cwd=cwd)
            seconds = time.monotonic() - t0
    return {"status": status, "stdout": so, "stderr": se, "seconds": seconds, "counters": counters,
            "not_counted": missing, "perf": why}
