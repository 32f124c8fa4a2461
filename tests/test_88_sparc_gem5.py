"""SPARC in gem5's SE mode (docs/gem5.md, "SPARC in SE mode").

The sparc64 kernels of the gem5-freestanding flavour (for a stock gem5, whose SPARC
SE mode cannot start glibc) link kernels/common/tl_freestanding.c instead of glibc
(kernels/common/freestanding.mk): the runtime must format and parse as glibc does
(both builds of tests/data/tl_fmt_cases.c under qemu-sparc64), the flavour must
link it and carry gem5's m5 ops as the region markers, the gem5 flavour (trapline's
gem5) must link glibc with the same markers, and in a real gem5 (skipped, saying why, when none is found)
sparc-spill-fill must take one window spill and one fill per call at depth 1000
through gem5's own SE handlers, and sparc-misalign-trap's byte-wise loads must
run while its misaligned word loads stop a stock gem5 (trapline's gem5 completes
them: tests/test_93_gem5_changes.py).
"""

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from trapline import build

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
CC = build.ARCHES["sparc64"].cc
OBJDUMP = build.ARCHES["sparc64"].objdump

# gem5's SPARC SE process (gem5 v24.0.0.1): the initial stack's top is
# 0x80000000000 (src/arch/sparc/process.hh, Sparc64Process: stack_base); the fill
# handler is written there and the spill handler right after its 32 instruction
# slots (src/arch/sparc/process.cc argsInit: fillStart = stack base, spillStart =
# fillStart + sizeof(MachInst) * numFillInsts; src/arch/sparc/handlers.hh:
# numFillInsts = 32). Each handler: wr %asi, 16 ldxa/stxa, restored/saved, retry.
FILL_START = 0x80000000000
SPILL_START = FILL_START + 4 * 32
HANDLER_LAST_BUT_ONE = 4 * 17  # offset of `restored` (fill) / `saved` (spill)
NWINDOWS = 8  # src/arch/sparc/sparc_traits.hh: NWindows = 8

# The m5 ops of trapline.h's gem5 flavour: op 2, op3 0x37, the function in bits 7..15.
M5_RESET_STATS = (2 << 30) | (0x37 << 19) | (0x40 << 7)
M5_DUMP_STATS = (2 << 30) | (0x37 << 19) | (0x41 << 7)


def _need(*tools):
    for t in tools:
        if not shutil.which(t):
            pytest.skip(f"{t} not found (./run.sh installs it from Debian)")


# --------------------------------------------------------------- gem5 fixture
# conftest's gem5_binary (trapline.platforms.gem5.binary.for_tests: GEM5 or gem5.opt on PATH, else
# the shared binary unpacked into the cache by its sha256; skipped, with the reason, without one)
@pytest.fixture(scope="module")
def gem5(gem5_binary):
    return gem5_binary


# ------------------------------------------------------------------- builds

def _make(out: Path, archflags_extra: str, targets, **extra):
    vars_ = [v if not v.startswith("ARCHFLAGS=") else f"{v} {archflags_extra}".rstrip() for v in build.make_vars("sparc64")]
    vars_ += [f"{k}={v}" for k, v in extra.items()]
    r = subprocess.run(["make", "-s", "-C", str(KERNELS), *vars_, f"O={out}", *[str(out / t) for t in targets]],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


GEM5_BINS = ["sparc-spill-fill/spill-fill", "sparc-misalign-trap/misalign"]


@pytest.fixture(scope="module")
def gem5_flavour(tmp_path_factory):
    """The gem5-freestanding flavour's sparc64 kernels (they run on any gem5)."""
    _need(CC)
    return _make(tmp_path_factory.mktemp("gem5-sparc64"), "-DTL_GEM5 -DTL_FREESTANDING", GEM5_BINS)


@pytest.fixture(scope="module")
def gem5_glibc_flavour(tmp_path_factory):
    """The gem5 flavour's sparc64 kernels (glibc, for trapline's gem5)."""
    _need(CC)
    return _make(tmp_path_factory.mktemp("gem5-glibc-sparc64"), "-DTL_GEM5", GEM5_BINS)


@pytest.fixture(scope="module")
def t1_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("machine") / "t1.json"
    r = subprocess.run([sys.executable, "-m", "trapline.platforms.gem5", "--machine", "ultrasparc-t1", "-o", str(out)],
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


# ----------------------------------------------------- the runtime, natively

def test_freestanding_runtime_formats_and_parses_as_glibc(tmp_path):
    _need(CC, "qemu-sparc64")
    src = ROOT / "tests" / "data" / "tl_fmt_cases.c"
    flags = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-format", "-Wno-format-overflow", "-fno-pie",
             *build.ARCHES["sparc64"].cflags.split(), "-static", "-no-pie"]
    glibc, free = tmp_path / "fmt-glibc", tmp_path / "fmt-freestanding"
    for cmd in ([CC, *flags, "-o", glibc, src],
                [CC, *flags, "-nostdlib", "-o", free, src, KERNELS / "common" / "tl_freestanding.c", "-lgcc"]):
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    want = subprocess.run(["qemu-sparc64", str(glibc)], capture_output=True, text=True, timeout=60)
    got = subprocess.run(["qemu-sparc64", str(free)], capture_output=True, text=True, timeout=60)
    assert want.returncode == 0 and got.returncode == 0, (want.stderr, got.stderr)
    assert len(want.stdout.splitlines()) > 60  # the cases ran
    assert got.stdout == want.stdout
    assert got.stderr == ""  # no unsupported conversion was met


def test_gem5_flavour_links_the_sparc_kernels_without_glibc_and_marks_regions_with_m5_ops(gem5_flavour,
                                                                                        gem5_glibc_flavour):
    default = build.build("sparc64")
    for b in GEM5_BINS:
        words = {}
        for name, p in (("gem5", gem5_flavour / b), ("default", default / b), ("glibc", gem5_glibc_flavour / b)):
            dis = subprocess.run([OBJDUMP, "-d", str(p)], capture_output=True, text=True, check=True).stdout
            syms = subprocess.run([OBJDUMP, "-t", str(p)], capture_output=True, text=True, check=True).stdout
            found = [int(w, 16) for w in re.findall(r"^\s+[0-9a-f]+:\s+((?:[0-9a-f]{2} ){4})", dis, re.M)
                     for w in [w.replace(" ", "")]]
            words[name] = (found.count(M5_RESET_STATS), found.count(M5_DUMP_STATS), "__libc_start_main" in syms,
                           "tl_start_c" in syms)
        assert words["gem5"] == (1, 1, False, True), (b, words)  # one region loop, the runtime's _start
        assert words["default"] == (0, 0, True, False), (b, words)  # glibc, the sethi markers
        assert words["glibc"] == (1, 1, True, False), (b, words)  # glibc, the m5-op markers


# ------------------------------------------------------------ in a real gem5

def _regions(stats: Path):
    """One dict per stats dump: the regions of interest (m5 resetstats .. dumpstats)."""
    out = []
    for block in stats.read_text().split("---------- Begin Simulation Statistics ----------")[1:]:
        def g(key):
            m = re.search(r"^" + re.escape(key) + r"\s+([0-9.e+-]+)", block, re.M)
            return float(m.group(1)) if m else None
        out.append({"ticks": g("simTicks"), "final": g("finalTick"),
                    "insts": g("board.processor.cores.core.commitStats0.numInsts")})
    return out


def _run_gem5(gem5, tmp_path, machine, prog, args, trace_pcs=None, cpu="timing"):
    """gem5 run_se.py ... -- prog args; with trace_pcs, gem5's Exec trace goes to a FIFO
    read here, and the ticks at which each of those PCs executed are returned."""
    outdir = tmp_path / f"m5out-{Path(prog).name}-{len(list(tmp_path.iterdir()))}"
    cmd = [str(gem5), f"--outdir={outdir}"]
    hits = {pc: [] for pc in (trace_pcs or {})}
    insn_at = {}
    reader = None
    if trace_pcs:
        fifo = tmp_path / f"exec-{os.getpid()}-{len(list(tmp_path.iterdir()))}.fifo"
        os.mkfifo(fifo)
        cmd += ["--debug-flags=Exec", f"--debug-file={fifo}"]
        line_re = re.compile(r"^\s*(\d+): \S+: T\d+ : (0x[0-9a-f]+) [^:]*:\s*(\S+)")

        def read():
            with open(fifo) as f:
                for line in f:
                    m = line_re.match(line)
                    if m:
                        pc = int(m.group(2), 16)
                        if pc in hits:
                            hits[pc].append(int(m.group(1)))
                        elif pc - FILL_START in range(0, 8 * 32 * 4):
                            insn_at.setdefault(pc, m.group(3))
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
    cmd += [str(ROOT / "gem5_configs" / "run_se.py"), "--params", str(machine), "--cpu", cpu, "--", str(prog), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if reader:
        if reader.is_alive() and not r.returncode == 0:
            try:  # gem5 stopped before opening the trace: unblock the reader
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        reader.join(timeout=120)
        assert not reader.is_alive()
    return r, outdir, hits, insn_at


def _samples(stdout, kind="sample"):
    return [dict(kv.split("=", 1) for kv in l.split()[1:] if "=" in kv)
            for l in stdout.splitlines() if l.startswith("TL ") and f" kind={kind} " in l]


def test_spill_fill_in_gem5_takes_one_window_spill_and_one_fill_per_call(gem5, gem5_flavour, t1_json, tmp_path):
    depth, repeats = 1000, 5
    r, outdir, hits, insn_at = _run_gem5(
        gem5, tmp_path, t1_json, gem5_flavour / "sparc-spill-fill" / "spill-fill",
        [f"depth={depth}", f"repeats={repeats}", "reps=1", "warmup=1"], trace_pcs={FILL_START, SPILL_START})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    # the traced PCs are gem5's handlers: their last-but-one instructions are restored / saved
    assert insn_at.get(FILL_START + HANDLER_LAST_BUT_ONE) == "restored", insn_at
    assert insn_at.get(SPILL_START + HANDLER_LAST_BUT_ONE) == "saved", insn_at
    (sample,) = _samples(r.stdout)
    assert int(sample["ops"]) == depth * repeats
    region = _regions(outdir / "stats.txt")[0]
    start, end = region["final"] - region["ticks"], region["final"]
    spills = sum(start <= t <= end for t in hits[SPILL_START])
    fills = sum(start <= t <= end for t in hits[FILL_START])
    # NWINDOWS - 2 windows are free to save into (CANSAVE + CANRESTORE + OTHERWIN =
    # NWINDOWS - 2): a descent of depth N that starts with them empty spills N - 6
    # windows and its ascent fills as many back; the region's first descent may find
    # up to NWINDOWS - 2 of its callers' windows still in the register file.
    least = repeats * (depth - (NWINDOWS - 2))
    for n in (spills, fills):
        assert least <= n <= least + (NWINDOWS - 2), (spills, fills, least)
    # the kernel's clock (gettimeofday: gem5's simulated time, 1 us) agrees with the region's ticks
    assert abs(int(sample["ns"]) - region["ticks"] / 1000) <= 2000, (sample["ns"], region["ticks"])
    # the calls, their returns and gem5's 19-instruction handlers
    per_call = region["insts"] / (depth * repeats)
    assert 2 * 19 < per_call < 2 * 19 + 20, per_call


def test_misalign_bytewise_runs_in_gem5_and_a_misaligned_word_load_stops_a_stock_gem5(gem5, stock_gem5, gem5_flavour,
                                                                                      t1_json, tmp_path):
    prog = gem5_flavour / "sparc-misalign-trap" / "misalign"
    per_load = {}
    for align in ("aligned", "unaligned"):
        r, outdir, _, _ = _run_gem5(gem5, tmp_path, t1_json, prog, ["mode=bytewise", f"align={align}", "outer=10",
                                                                    "reps=1", "warmup=0"])
        assert r.returncode == 0, r.stderr[-3000:]
        (check,) = _samples(r.stdout, "check")  # the kernel exits 1 on a wrong sum
        (sample,) = _samples(r.stdout)
        per_load[align] = _regions(outdir / "stats.txt")[0]["ticks"] / int(sample["ops"])
    # byte loads cost the same wherever the array starts (claim: -xmemalign=1s is alignment-blind)
    assert per_load["unaligned"] == pytest.approx(per_load["aligned"], rel=0.01), per_load
    # the -xmemalign=4i case: stock gem5's SE mode has no handler for mem_address_not_aligned
    r, _, _, _ = _run_gem5(stock_gem5, tmp_path, t1_json, prog, ["mode=trap", "align=unaligned", "outer=10", "reps=1"])
    assert r.returncode != 0
    assert "fault (mem_address_not_aligned)" in r.stderr and "src/sim/faults.cc" in r.stderr, r.stderr[-2000:]
    assert "kind=sample" not in r.stdout
