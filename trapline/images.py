"""Guest images: a thin, typed wrapper around images/build.sh and
images/boot.sh (the shell scripts are the one definition of how an image is
built and booted; docs/images.md explains them).

    image = images.build("armv6", bindir, log)      # cached by content hash
    boot = images.boot(image, ["/trapline/bin/x/y k=v"], timeout=120, log=log)
    for cmd in boot.commands: cmd.status, cmd.output ...
"""

from __future__ import annotations

import os
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from trapline import build
from trapline.errors import RunFailed, UsageError
from trapline.proc import run_command, tail

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "images"
ARCHES = ("sparc64", "armv6", "x86_64")
MACHINE = {"sparc64": "QEMU sun4u (UltraSPARC IIi, OpenBIOS)", "armv6": "QEMU raspi0 (ARM1176JZF-S)",
           "x86_64": "QEMU pc, 2 vCPUs in 2 NUMA nodes (TCG)"}
QEMU_BINARY = {"sparc64": "qemu-system-sparc64", "armv6": "qemu-system-arm", "x86_64": "qemu-system-x86_64"}
BUILD_TIMEOUT_S = 3600
# Every guest reaches our /init within 5 s here (sun4u's OpenBIOS is the slowest);
# one that has printed no "TLG init" after this long is stuck before Linux runs.
INIT_TIMEOUT_S = 90
# The guests' memory layout as images/boot.sh makes it (the timing model maps a
# guest-physical address to its NUMA node with it): x86_64 has two nodes of
# 256 MiB each, node 0 from address 0, vCPU i on node i; the others one node.
NUMA_LAYOUT = {"x86_64": {"node_bytes": [256 << 20, 256 << 20], "cpu_nodes": [0, 1]},
               "sparc64": {"node_bytes": [256 << 20], "cpu_nodes": [0]},
               "armv6": {"node_bytes": [512 << 20], "cpu_nodes": [0]}}


def check_arch(arch: str) -> None:
    if arch not in ARCHES:
        raise UsageError(f"unknown guest arch '{arch}'; valid choices: {', '.join(ARCHES)}")


@dataclass
class Image:
    arch: str
    kernel: Path
    initrd: Path
    dtb: Path | None
    facts: dict  # LINUX_SHA256, INITRD_SHA256, caches ...


def build_image(arch: str, bindir: Path | None, log=None) -> Image:
    """Build (or find in the cache) the kernel and the initramfs holding bindir."""
    check_arch(arch)
    cmd = ["bash", str(IMAGES / "build.sh"), arch, "", str(bindir) if bindir else ""]
    env = dict(os.environ, TRAPLINE_CACHE=str(build.cache_root()))

    status, out, err = run_command(cmd, BUILD_TIMEOUT_S, env=env, log=None)
    if status != 0:
        raise RunFailed(f"building the {arch} guest image failed (status {status}):\n{tail(err, 25)}")
    facts = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", out, re.M))
    for line in err.splitlines():
        if log and ("built" in line or "cached" in line or "took" in line):
            log("    " + line.strip())
    if "KERNEL" not in facts or "INITRD" not in facts:
        raise RunFailed(f"images/build.sh {arch} printed no KERNEL=/INITRD= lines:\n{tail(out + err)}")
    return Image(arch, Path(facts["KERNEL"]), Path(facts["INITRD"]),
                 Path(facts["DTB"]) if facts.get("DTB") else None, facts)


def symbol(image: Image, name: str) -> int:
    """The address of a symbol of the guest's Linux, from the System.map the
    kernel build left beside it (e.g. sparc64_ttable_tl0, the trap table)."""
    smap = Path(image.facts.get("LINUX_CACHE", "")) / "System.map"
    try:
        for line in smap.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2] == name:
                return int(parts[0], 16)
    except OSError as e:
        raise RunFailed(f"cannot read the {image.arch} guest's System.map ({smap}): {e.strerror}") from None
    raise RunFailed(f"the {image.arch} guest's System.map ({smap}) has no symbol {name}")


@dataclass
class GuestCommand:
    n: int
    argv: str
    status: str = "missing"     # exit code as text, sigN, timeout, or missing
    output: str = ""
    wall_s: float | None = None  # emulation time, not a prediction
    user_s: float | None = None
    sys_s: float | None = None


@dataclass
class Boot:
    status: int | None            # boot.sh: 0 done, 124 timeout, 125 no TLG done
    console: str
    stderr: str
    commands: list[GuestCommand] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # init_seen_s, done_seen_s, qemu_exit_s
    qemu_cmdline: str = ""


def append_line(commands: list[str], per_command_timeout: float) -> str:
    """The kernel command line that tells our /init what to run."""
    for c in commands:
        if ";" in c or '"' in c:
            raise UsageError(f"a guest command cannot contain ';' or '\"': {c}")
    return f'quiet tlg.timeout={int(per_command_timeout)} tlg.run="{";".join(commands)}"'


def parse_console(console: str) -> list[GuestCommand]:
    cmds: dict[int, GuestCommand] = {}
    current: GuestCommand | None = None
    buf: list[str] = []
    for raw in console.splitlines():
        line = raw.rstrip("\r")
        m = re.match(r"^TLG (cmd|begin|end|time) (\d+)\s*(.*)$", line)
        if not m:
            if current is not None:
                buf.append(line)
            continue
        kind, n, rest = m.group(1), int(m.group(2)), m.group(3)
        c = cmds.setdefault(n, GuestCommand(n, ""))
        if kind == "cmd":
            c.argv = rest
        elif kind == "begin":
            current, buf = c, []
        elif kind == "end":
            c.output = "\n".join(buf) + "\n"
            sm = re.search(r"status=(\S+)", rest)
            c.status = sm.group(1) if sm else "?"
            current, buf = None, []
        elif kind == "time":
            for k, v in re.findall(r"(wall|user|sys)=([0-9.]+)", rest):
                setattr(c, f"{k}_s", float(v))
    return [cmds[k] for k in sorted(cmds)]


def boot(image: Image, commands: list[str], timeout: float, per_command_timeout: float | None = None,
         log=None, qemu_extra: list[str] | None = None) -> Boot:
    """Boot the image, run commands in order, return what the console said.
    boot.sh kills QEMU at timeout; this process adds a margin of its own.
    qemu_extra: more QEMU arguments (no spaces inside one; the timing model's
    -plugin and -icount)."""
    env = dict(os.environ, TRAPLINE_APPEND=append_line(commands, per_command_timeout or timeout))
    if qemu_extra:
        if any(" " in a for a in qemu_extra):
            raise UsageError(f"QEMU arguments may not contain spaces: {qemu_extra}")
        env["TRAPLINE_QEMU_EXTRA"] = " ".join(qemu_extra)
    if image.dtb:
        env["TRAPLINE_DTB"] = str(image.dtb)
    cmd = ["bash", str(IMAGES / "boot.sh"), image.arch, str(image.kernel), str(image.initrd), str(int(timeout))]
    seen = []

    def on_line(line):
        if log and line.startswith("TLG cmd "):
            seen.append(line)
            log(f"    guest: {line.strip()[4:]}")

    t0 = time.monotonic()
    status, out, err = run_command(cmd, timeout + 60, env=env, on_line=on_line,
                                   marker="TLG init", marker_timeout=INIT_TIMEOUT_S)
    facts = dict(re.findall(r"(init_seen_s|done_seen_s|qemu_exit_s)=(\S+)", err))
    facts["host_wall_s"] = f"{time.monotonic() - t0:.3f}"
    qemu = next((l.split("qemu:", 1)[1].strip() for l in err.splitlines() if l.startswith("boot.sh: qemu:")), "")
    return Boot(status, out, err, parse_console(out), facts, qemu)


def reached_init(b: Boot) -> bool:
    return "TLG init" in b.console


def describe_failure(b: Boot, timeout: float) -> str | None:
    """None when the boot completed; else one message with the console tail."""
    if b.status == 0:
        return None
    if not reached_init(b):
        return (f"the guest did not reach its init (no 'TLG init' within {INIT_TIMEOUT_S} s) and QEMU was "
                f"killed; console tail:\n{tail(b.console)}\n{tail(b.stderr, 5)}")
    what = {124: f"the guest did not finish within {timeout:.0f} s and QEMU was killed",
            125: "QEMU ended before the guest printed 'TLG done' (kernel panic or crash)",
            None: "boot.sh itself hung and was killed"}.get(b.status, f"boot.sh failed with status {b.status}")
    return f"{what}; console tail:\n{tail(b.console)}"


def shell_quote(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
