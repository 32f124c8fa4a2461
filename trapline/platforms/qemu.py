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

import subprocess
import time
from pathlib import Path

from trapline import build, images, kernelio
from trapline.platforms.base import Platform, PlatformRun, check_kernel_sets, kernel_args
from trapline.proc import tail

QUICK_BOOT_TIMEOUT_S = 300
FULL_BOOT_TIMEOUT_S = 1800


def qemu_version(arch: str) -> str:
    try:
        out = subprocess.run([images.QEMU_BINARY[arch], "--version"], capture_output=True, text=True,
                             timeout=30).stdout
        return out.splitlines()[0] if out else "unknown"
    except OSError:
        return "not installed"


def guest_image_facts(arch: str, img: images.Image | None) -> dict:
    """What identifies a booted guest in a manifest: QEMU's version, the machine,
    the guest Linux's and initramfs's sha256 (the QEMU and the model's guest lane)."""
    return {"machine": images.MACHINE[arch], "qemu": qemu_version(arch),
            "linux_sha256": img.facts.get("LINUX_SHA256") if img else None,
            "initrd_sha256": img.facts.get("INITRD_SHA256") if img else None}


def guest_commands(exp, spec: dict, quick: bool, sets: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """The guest's command lines for the experiment's runs, and how to show them."""
    commands, shown = [], []
    for r in spec.get("runs", []):
        argv = [f"/trapline/bin/{exp.kernel}/{r['binary']}"] + kernel_args(exp, r, quick, sets)
        commands.append(" ".join(argv))
        shown.append([f"{exp.kernel}/{r['binary']}"] + argv[1:])
    return commands, shown


def boot_once_more_if_silent(exp_id: str, image: images.Image, commands: list[str], timeout: float, log,
                             **kw) -> tuple[images.Boot, bool]:
    """Boot; a guest that never reached its init is booted once more (seen once
    here under heavy load: QEMU printed nothing at all; that is the emulator, not
    the experiment). Returns the boot and whether it was retried."""
    b = images.boot(image, commands, timeout, log=log, **kw)
    if b.status == 0 or images.reached_init(b):
        return b, False
    log(f"{exp_id}: the {image.arch} guest printed nothing before its init; booting it once more")
    return images.boot(image, commands, timeout, log=log, **kw), True


def command_outputs(b: images.Boot, commands: list[str], shown: list[list[str]], timeout: float,
                    under: str = "") -> tuple[list[str], str | None]:
    """What each guest command printed, in order, or the first failure (a boot
    that did not complete, a command never run or ending non-zero) as one
    message with the console's tail."""
    err = images.describe_failure(b, timeout)
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


def guest_hashes(image: images.Image, bindir: Path, kernel: str) -> dict[str, str]:
    """sha256 of the experiment's binaries and of the guest's Linux and initramfs."""
    hashes = {f"{kernel}/{k}": v for k, v in build.binary_hashes(bindir / kernel).items()}
    hashes["guest/linux"] = image.facts.get("LINUX_SHA256", "")
    hashes["guest/initramfs"] = image.facts.get("INITRD_SHA256", "")
    return hashes


class QemuPlatform(Platform):
    name = "qemu"
    label = "QEMU-functional"
    _images: dict[str, images.Image] = {}
    _bindirs: dict[str, Path] = {}
    _used: set[str] = set()

    def describe(self) -> dict:
        out = {}
        for arch in sorted(self._used):
            img = self._images.get(arch)
            out[arch] = {**guest_image_facts(arch, img), "compiler": build.compiler_version(arch),
                         "kernel_build": self._bindirs[arch].name if arch in self._bindirs else None,
                         "linux_cache": img.facts.get("LINUX_CACHE") if img else None}
        return out

    def image(self, arch: str, log=None) -> images.Image:
        if arch not in self._images:
            if arch not in self._bindirs:
                self._bindirs[arch] = build.build(arch, log=log)
            if log:
                log(f"guest image for {arch} (kernel and initramfs, cached by content hash)")
            self._images[arch] = images.build_image(arch, self._bindirs[arch], log=log)
        self._used.add(arch)
        return self._images[arch]

    def validate_sets(self, exp, sets: dict[str, str]) -> None:
        check_kernel_sets(exp, self.name, sets)

    def run(self, exp, quick: bool, sets: dict[str, str], log) -> PlatformRun:
        spec = exp.platform(self.name)
        arch = spec["arch"]
        t0 = time.monotonic()
        image = self.image(arch, log)
        commands, shown = guest_commands(exp, spec, quick, sets)
        timeout = spec.get("boot_timeout_s", QUICK_BOOT_TIMEOUT_S if quick else FULL_BOOT_TIMEOUT_S)
        log(f"{exp.id}: booting the {arch} guest ({images.MACHINE[arch]}) with {len(commands)} command(s)")
        b, retried = boot_once_more_if_silent(exp.id, image, commands, timeout, log)
        hashes = guest_hashes(image, self._bindirs[arch], exp.kernel)
        raw = f"$ {b.qemu_cmdline}\n{b.console}\n--- boot.sh ---\n{b.stderr}"
        output = kernelio.KernelOutput()
        facts = {"arch": arch, "boot": b.facts, "boot_retried": retried,
                 "emulation_seconds": {c.argv: {"wall": c.wall_s, "user": c.user_s, "sys": c.sys_s}
                                       for c in b.commands}}
        outs, err = command_outputs(b, commands, shown, timeout)
        for o in outs:
            output.extend(kernelio.parse(o))
        run = PlatformRun(output, raw, shown, error=err, binaries=hashes, seconds=time.monotonic() - t0)
        run.facts = facts
        return run
