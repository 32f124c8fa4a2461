"""The guest machinery shared by the QEMU lane and the timing model's guest
lane: boot an image (images/boot.sh), read its console into per-command
results, tell why a boot failed, and say which guest ran.

    b = guest.boot(image, ["/trapline/bin/x/y k=v"], timeout=120, log=log)
    for cmd in b.commands: cmd.status, cmd.output ...
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trapline import arch as arch_table, build
from trapline.errors import UsageError
from trapline.images import IMAGES, Image
from trapline.proc import run_command, tail

if TYPE_CHECKING:
    from trapline.context import RunContext

# Every guest reaches our /init within 5 s here (sun4u's OpenBIOS is the slowest);
# one that has printed no "TLG init" after this long is stuck before Linux runs.
INIT_TIMEOUT_S = 90


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
    env.update(arch_table.get(image.arch).boot_env(env))
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


def qemu_version(arch: str) -> str:
    try:
        out = subprocess.run([arch_table.get(arch).qemu_system, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
        return out.splitlines()[0] if out else "unknown"
    except OSError:
        return "not installed"


def guest_image_facts(arch: str, img: Image | None) -> dict:
    """What identifies a booted guest in a manifest: QEMU's version, the machine,
    the guest Linux's and initramfs's sha256 (the QEMU and the model's guest lane)."""
    return {"machine": arch_table.get(arch).machine_label, "qemu": qemu_version(arch),
            "linux_sha256": img.facts.get("LINUX_SHA256") if img else None,
            "initrd_sha256": img.facts.get("INITRD_SHA256") if img else None}


def guest_commands(ctx: RunContext, exp, spec: dict, sets: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """The guest's command lines for the experiment's runs, and how to show them."""
    from trapline.platforms.base import kernel_args  # (platforms import this module)
    commands, shown = [], []
    for r in spec.get("runs", []):
        argv = [f"/trapline/bin/{exp.kernel}/{r['binary']}"] + kernel_args(ctx, exp, r, sets)
        commands.append(" ".join(argv))
        shown.append([f"{exp.kernel}/{r['binary']}"] + argv[1:])
    return commands, shown


def boot_once_more_if_silent(exp_id: str, image: Image, commands: list[str], timeout: float, log,
                             **kw) -> tuple[Boot, bool]:
    """Boot; a guest that never reached its init is booted once more (seen once
    here under heavy load: QEMU printed nothing at all; that is the emulator, not
    the experiment). Returns the boot and whether it was retried."""
    b = boot(image, commands, timeout, log=log, **kw)
    if b.status == 0 or reached_init(b):
        return b, False
    log(f"{exp_id}: the {image.arch} guest printed nothing before its init; booting it once more")
    return boot(image, commands, timeout, log=log, **kw), True


def command_outputs(b: Boot, commands: list[str], shown: list[list[str]], timeout: float,
                    under: str = "") -> tuple[list[str], str | None]:
    """What each guest command printed, in order, or the first failure (a boot
    that did not complete, a command never run or ending non-zero) as one
    message with the console's tail."""
    err = describe_failure(b, timeout)
    if err:
        return [], err
    outs = []
    for i, cmd in enumerate(commands):
        got = next((c for c in b.commands if c.n == i + 1), None)
        if got is None:
            return outs, f"the guest never ran command {i + 1} ({cmd}); console tail:\n{tail(b.console)}"
        if got.status != "0":
            return outs, (f"guest command {i + 1} ({' '.join(shown[i])}) ended with status {got.status}{under}; "
                          f"its output:\n{tail(got.output)}")
        outs.append(got.output)
    return outs, None


def guest_hashes(image: Image, bindir: Path, kernel: str) -> dict[str, str]:
    """sha256 of the experiment's binaries and of the guest's Linux and initramfs."""
    hashes = {f"{kernel}/{k}": v for k, v in build.binary_hashes(bindir / kernel).items()}
    hashes["guest/linux"] = image.facts.get("LINUX_SHA256", "")
    hashes["guest/initramfs"] = image.facts.get("INITRD_SHA256", "")
    return hashes


