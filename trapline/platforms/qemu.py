"""The QEMU platform: the experiment's kernels run inside a Linux guest booted
under QEMU system emulation (sun4u for sparc64, raspi0 for the ARM1176, a
two-node pc for x86_64), so traps, kernel fixups and NUMA placement really
happen in a real kernel.

What this platform reports are functional facts: counts (traps, fixups, pages
per node) and computed values, checked exactly. QEMU's wall clock is emulation
time; it is recorded (guest wall/user/sys per command) but never presented as a
prediction of the original machine's time: that is the timing model's job.
"""

from __future__ import annotations

import time

import tempfile
import time
from pathlib import Path

from trapline import arch as arch_table, build, guest, kernelio, simstats
from trapline.platforms.base import GuestLane, Platform, PlatformRun, guest_line
from trapline.platforms.engine import Engine

QUICK_BOOT_TIMEOUT_S = 300
FULL_BOOT_TIMEOUT_S = 1800
BOOT_S = 300  # a user's program: the guest's boot before the program starts


class QemuLane(GuestLane):
    """The experiment's commands in one boot of the arch's guest image."""
    not_repeatable = "the qemu lane boots a guest, which is not bit-for-bit repeatable"

    def run(self) -> PlatformRun:
        ctx, log, arch, exp = self.ctx, self.ctx.log, self.arch, self.exp
        t0 = time.monotonic()
        image = ctx.image(arch)
        ctx.use(self.platform.name, arch)
        cmds = self.commands()
        commands, shown = [guest.command_line(c) for c in cmds], [c.shown for c in cmds]
        timeout = ctx.timeout_for(self.spec.get("boot_timeout_s", QUICK_BOOT_TIMEOUT_S if ctx.quick else FULL_BOOT_TIMEOUT_S))
        log(f"{exp.id}: booting the {arch} guest ({arch_table.get(arch).machine_label}) with "
            f"{len(commands)} command(s)")
        b, retried = guest.boot_once_more_if_silent(exp.id, image, commands, timeout, log)
        hashes = guest.guest_hashes(image, ctx.kernels(arch), exp.kernel)
        raw = f"$ {b.qemu_cmdline}\n{b.console}\n--- boot.sh ---\n{b.stderr}"
        output = kernelio.KernelOutput()
        facts = {"arch": arch, "boot": b.facts, "boot_retried": retried,
                 "emulation_seconds": {c.argv: {"wall": c.wall_s, "user": c.user_s, "sys": c.sys_s}
                                       for c in b.commands}}
        outs, err = guest.command_outputs(b, commands, shown, timeout)
        for o in outs:
            output.extend(kernelio.parse(o))
        return PlatformRun(output, raw, shown, error=err, binaries=hashes, seconds=time.monotonic() - t0, facts=facts)


class GuestProgramEngine(Engine):
    """A user's program under Linux in the arch's guest, no model: its exit status, output and
    the guest's own times of it (emulation time, never a prediction)."""

    def simulate(self, program, argv: list[str], timeout: float) -> simstats.Run:
        machine = self.machine
        image = self.ctx.image(machine.arch)
        with tempfile.TemporaryDirectory(prefix="trapline-simulate-") as tmp:
            img, path = guest.with_program(image, Path(program.path), Path(tmp) / "initrd")
            b = guest.boot(img, [guest.program_command(path, argv[1:])], timeout + BOOT_S,
                           per_command_timeout=timeout, log=self.ctx.log)
        stats = simstats.stats(self.platform, machine, program, argv, self.mode, None, "emulation", {}, [],
                               {"seconds": simstats.EMULATION}, {"guest": guest.guest_image_facts(machine.arch, image)})
        run = guest.program_result(stats, b, timeout)
        wall = run.stats.get("guest_emulation_seconds", {}).get("wall")
        if wall is not None:
            run.stats["total"] = simstats.figures(seconds=wall)
            run.stats["rests_on"] = {"seconds": simstats.EMULATION}
        return run


class QemuPlatform(Platform):
    name = "qemu"
    label = "QEMU-functional"
    meaning = "counts and checks from an emulated machine; its wall clock is emulation time, not a prediction"
    times = "emulation"
    column = 20
    lanes = (QemuLane,)
    engines = {"guest": GuestProgramEngine}
    default_cost_s = {"full": 20.0, "quick": 8.0}  # a lane without cost_s (trapline/eta.py)

    def describe(self) -> dict:
        out = {}
        for arch in sorted(self.ctx.used.get(self.name, ())):
            img = self.ctx.images.get(arch)
            bindir = self.ctx.builds.get(arch)
            out[arch] = {**guest.guest_image_facts(arch, img), "compiler": build.compiler_version(arch),
                         "kernel_build": bindir.name if bindir else None,
                         "linux_cache": img.facts.get("LINUX_CACHE") if img else None}
        return out

    @classmethod
    def report_lines(cls, f: dict) -> list[str]:
        return [guest_line(f"{cls.label} ({arch})", a) for arch, a in sorted(f.items())]
