"""Run a static program under gem5 on a trapline machine: the gem5 equivalent
of the timing model's ``simulate()`` (trapline/platforms/model.py).

    from trapline import machine
    from trapline.platforms.gem5 import run
    r = run.simulate(machine.load("x86-2012-server"), ["./loop-order", "variant=row"], cpu="o3")
    r.regions      # one dict per region the program marked (gem5 flavour), see trapline.platforms.gem5.stats
    r.error        # None, or one message with gem5's last lines

The machine goes to gem5 as its typed JSON (trapline.platforms.gem5.machine_json.export) and is
built there by gem5_configs/run_se.py with trapline_gem5's board; gem5 runs in
a temporary output directory (``keep`` copies what it wrote), with the
program's output in files so that it stays apart from gem5's own messages.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from trapline import machine as machines
from trapline.errors import UsageError
from trapline.platforms.gem5 import binary, stats
from trapline.platforms.gem5.machine_json import export, isa as isa_of
from trapline.proc import run_command, tail

from trapline.paths import GEM5_CONFIGS
from trapline.runpath import RUN_PARENT, argv0, program, run_folder, stage  # noqa: F401 (RUN_PARENT: the tests')

# The program runs from a copy, /tmp/trapline-gem5-XXXXXXXX/exe/<name>, as ./<name> (trapline/runpath.py
# says why: gem5 puts its path on the stack and, through /proc/self/exe, on glibc's heap)
RUN_SE = GEM5_CONFIGS / "run_se.py"
# The program's /etc: this empty folder of the run's (run_se.py --etc, a gem5 RedirectPath), not the
# host's. gem5 answers a program's system calls with the host's files, and a dynamically linked
# program's ld.so opens /etc/ld.so.cache, maps it and searches it for libc.so.6 (and asks for
# /etc/ld.so.preload): with the host's file, its instructions and where libc lands followed the host's
# installed libraries (plt-itlb 4.537x natively against 4.568x in the image, whose file is smaller).
# With no cache ld.so finds libc in its own system folders (/lib/x86_64-linux-gnu first), as on every
# host with that glibc.
GUEST_ETC = "etc"
# gem5's CPU models (run_se.py --cpu): O3 for headlines (the claims are about real
# pipelines), timing (TimingSimpleCPU: not pipelined, about 10x faster) for quick checks
CPUS = ("o3", "timing", "minor")
DEFAULT_CPU = "o3"
TIMEOUT_S = 1800
PROGRAM_EXIT = "exiting with last active thread context"  # run_se.py's PROGRAM_EXIT
_FATAL = re.compile(r"^(?:\S+: )?(fatal|panic): (.*)$")
_SYSCALL = re.compile(r"syscall (\w+) \(#(\d+)\) unimplemented")
_UNALIGNED = "fault (mem_address_not_aligned)"   # src/sim/faults.cc, FaultBase::invoke outside full system
UNALIGNED_CHANGE = "sparc-unaligned-trap"          # trapline's change that completes the access in SE mode


@dataclass
class Gem5Result:
    """One gem5 run of a program."""
    regions: list[dict]          # one per marked region, in order (trapline.platforms.gem5.stats.region)
    tail_region: dict | None     # gem5's exit dump: from the last region's start (or the start) to the exit
    stdout: str                  # the program's standard output
    stderr: str                  # the program's standard error, then gem5's own messages
    status: int | None           # the program's exit status; None when it did not exit (error says why)
    error: str | None            # gem5 stopped (fatal, panic, an unimplemented system call), timed out, no stats
    config_sha256: str | None    # of gem5's config.ini: the system as gem5 built it
    gem5: dict = field(default_factory=dict)  # binary.facts(): path, sha256, version, ISAs
    cpu: str = DEFAULT_CPU
    cores: int = 1
    ticks: int = 0               # simulated ticks at the exit
    seconds: float = 0.0         # host wall-clock time of the run
    cmd: list[str] = field(default_factory=list)


def cores_for(kernel_args: dict) -> int:
    """Cores a kernel run needs in SE mode: one per thread it runs at once. The kernels
    that start threads take the count as `threads` (stl-alloc-scaling: the calling
    thread is thread 0, so `threads` in all); every other kernel is single-threaded.
    A thread created when every core is busy fails (clone returns EAGAIN:
    src/sim/syscall_emul.hh, cloneFunc, threads.findFree()); a core whose thread
    exited is free again (its context is halted)."""
    try:
        return max(1, int(kernel_args.get("threads", 1)))
    except (TypeError, ValueError):
        raise UsageError(f"threads: '{kernel_args.get('threads')}' is not a whole number") from None


# CPU models gem5 v24.0.0.1 cannot run an ISA's programs with, and why (measured with the
# sparc-spill-fill kernel: the Exec trace shows the instruction after a call's delay slot
# executed as the call's target, then a panic)
BROKEN_CPUS = {
    ("SPARC", "minor"): "gem5's minor CPU does not run SPARC programs: it executes the instruction after a "
                        "call's delay slot as the call's target and stops with 'Tried to access unmapped "
                        "address' (src/arch/sparc/faults.cc:688)",
}


def check_cpu(cpu: str, isa: str | None = None) -> None:
    """A UsageError for a CPU model that is not gem5's, or that cannot run the ISA's programs."""
    if cpu not in CPUS:
        raise UsageError(f"gem5.cpu: '{cpu}' is not a gem5 CPU model here; valid choices: {', '.join(CPUS)}")
    why = BROKEN_CPUS.get((isa, cpu))
    if why:
        ok = [c for c in CPUS if (isa, c) not in BROKEN_CPUS]
        raise UsageError(f"gem5.cpu: '{cpu}' cannot run {isa} here ({why}); valid choices for {isa}: {', '.join(ok)}")


class _Tracer:
    """gem5's Exec trace through a FIFO, read while gem5 writes it: the ticks at which the
    ISA's SE trap handlers were entered (stats.TRACED). Nothing is written to disk."""

    def __init__(self, fifo: Path, pcs: dict):
        self.fifo, self.pcs = fifo, pcs
        self.hits: dict[str, list[int]] = {name: [] for _, name in pcs.values()}
        self.problems: list[str] = []
        os.mkfifo(fifo)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        with open(self.fifo, errors="replace") as f:
            self.hits, self.problems = stats.trace_hits(f, self.pcs)

    def finish(self) -> tuple[dict[str, list[int]], list[str]]:
        """After gem5 ended: the hits. If gem5 stopped before it opened the trace, the
        reader still waits in open(): a writer that opens and closes the FIFO ends it."""
        if self.thread.is_alive():
            try:
                os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader waiting (it is reading the rest)
        self.thread.join(timeout=120)
        return self.hits, self.problems


def check_isa(m: machines.Machine, facts: dict) -> str:
    """The machine's gem5 ISA; a UsageError when this gem5 was built without it."""
    isa = isa_of(m)
    if isa not in facts.get("isas", []):
        raise UsageError(f"machine '{m.name}' needs gem5's {isa} ISA, and gem5 {facts.get('path')} has only "
                         f"{', '.join(facts.get('isas', [])) or 'none'}; build one with it "
                         f"(scons build/{isa}/gem5.opt or build/ALL/gem5.opt: docs/gem5.md)")
    return isa


def explain(gem5_err: str) -> str | None:
    """gem5's fatal or panic line as one sentence (None if it printed none)."""
    for line in reversed(gem5_err.splitlines()):
        m = _FATAL.match(line.strip())
        if not m:
            continue
        if _UNALIGNED in m.group(2):
            return (f"gem5 stopped at a misaligned SPARC access: its SE mode has no kernel to complete the "
                    f"mem_address_not_aligned trap ({line.strip()}); trapline's gem5 completes it (change "
                    f"{UNALIGNED_CHANGE}): build it with {binary.BUILD_IT}")
        s = _SYSCALL.search(m.group(2))
        if s:
            return (f"gem5 SE mode has no system call {s.group(1)} (#{s.group(2)}) for this ISA "
                    f"(src/sim/syscall_emul.cc: {line.strip()})")
        return f"gem5 {m.group(1)}: {m.group(2)}"
    return None


def simulate(m: machines.Machine, argv: list[str], cpu: str = DEFAULT_CPU, cores: int = 1,
             timeout: float = TIMEOUT_S, gem5: Path | None = None, cwd: Path | None = None,
             mem_size: str | None = None, keep: Path | None = None, max_ticks: int | None = None,
             exported: dict | None = None) -> Gem5Result:
    """Run argv (a static program of the machine's ISA and its arguments) in gem5's SE
    mode on machine m with `cores` cores of CPU model `cpu`. gem5 is `gem5` or
    binary.find()'s. Bad input (CPU model, cores, an ISA this gem5 lacks) raises
    UsageError before gem5 starts; what goes wrong in gem5 is the result's error. exported:
    export(m), when the caller made it already (a lane's runs share one)."""
    check_cpu(cpu, isa_of(m))
    if cores < 1:
        raise UsageError(f"gem5 cores: {cores}; needs at least 1")
    prog = program(argv, cwd)
    if not prog.is_file():
        raise UsageError(f"program '{argv[0]}' is not a file")
    gem5 = Path(gem5) if gem5 else binary.find()
    facts = binary.facts(gem5)
    isa = check_isa(m, facts)
    traced = stats.TRACED.get(isa, {})
    t0 = time.monotonic()
    with run_folder("trapline-gem5-") as tmp:
        d = Path(tmp)
        (d / "machine.json").write_text(json.dumps(exported or export(m), indent=1))
        exe = stage(prog, d)
        # the program's /etc: an empty folder, the same on every host (GUEST_ETC says why)
        etc = d / GUEST_ETC
        etc.mkdir()
        out_f, err_f, outdir = d / "program.stdout", d / "program.stderr", d / "m5out"
        cmd = [str(gem5), "-q", f"--outdir={outdir}", str(RUN_SE), "--params", str(d / "machine.json"),
               "--cpu", cpu, "--cores", str(cores), "--stdout", str(out_f), "--stderr", str(err_f),
               "--etc", str(etc)]
        if mem_size:
            cmd += ["--mem-size", mem_size]
        if max_ticks is not None:
            cmd += ["--max-ticks", str(max_ticks)]
        tracer = _Tracer(d / "exec-trace.fifo", traced) if traced else None
        if tracer:
            cmd[2:2] = [f"--debug-flags={stats.TRACE_FLAGS}", f"--debug-file={tracer.fifo}"]
        cmd += ["--argv0", argv0(prog), "--", str(exe), *argv[1:]]
        try:
            status, g_out, g_err = run_command(cmd, timeout, cwd=cwd)
        finally:
            hits, trace_problems = tracer.finish() if tracer else ({}, [])
        so = out_f.read_text(errors="replace") if out_f.exists() else ""
        se = err_f.read_text(errors="replace") if err_f.exists() else ""
        result_file = outdir / "trapline-result.json"
        ended = json.loads(result_file.read_text()) if result_file.exists() else None
        config = outdir / "config.ini"
        # the run's own temporary folder (the program's copy and the output files' paths) hashed as $RUN
        # and the program's own folder (a lane's working folder) as $PROGRAM_DIR: the same system on the
        # same machine file hashes the same on every run, wherever the program sits (./run.sh verify)
        config_sha = hashlib.sha256(config.read_text(errors="replace").replace(str(d), "$RUN").replace(
            str(prog.resolve().parent), "$PROGRAM_DIR").encode()).hexdigest() if config.exists() else None
        stats_file = outdir / "stats.txt"
        text = stats_file.read_text() if stats_file.exists() else ""
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for f in ("config.ini", "stats.txt", "trapline-result.json", "machine.json"):
                src = outdir / f if f != "machine.json" else d / f
                if src.exists():
                    shutil.copy2(src, keep / f)
    r = Gem5Result(regions=[], tail_region=None, stdout=so, stderr=se + g_err, status=None, error=None,
                   config_sha256=config_sha, gem5=facts, cpu=cpu, cores=cores,
                   seconds=time.monotonic() - t0, cmd=cmd)
    gem5_lines = tail(g_out + g_err, 15)
    if status is None:
        r.error = f"gem5 did not finish within {timeout:.0f} s ({cpu} CPU); its last lines:\n{gem5_lines}"
        return r
    if ended is None:
        why = explain(g_err) or f"gem5 exited with status {status} before the program ended"
        r.error = f"{why}; gem5's last lines:\n{gem5_lines}"
        return r
    r.ticks = int(ended.get("tick", 0))
    if ended.get("cause") == PROGRAM_EXIT:
        r.status = int(ended.get("code", 0))
    elif max_ticks is None:
        r.error = f"gem5 stopped before the program ended: {ended.get('cause')}; its last lines:\n{gem5_lines}"
        return r
    try:
        r.regions, r.tail_region = stats.regions(text, m.clock_hz)
    except stats.StatsError as e:
        r.error = f"gem5's stats.txt: {e}"
        return r
    if trace_problems:
        r.error = f"gem5's Exec trace: {'; '.join(trace_problems)} (trapline.platforms.gem5.stats.TRACED)"
        return r
    stats.add_trace_counts(r.regions + ([r.tail_region] if r.tail_region else []), hits)
    if r.tail_region is None and max_ticks is None:
        r.error = f"gem5 wrote no statistics (stats.txt in its output directory); its last lines:\n{gem5_lines}"
    return r
