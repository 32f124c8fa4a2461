"""The architecture table: everything trapline knows about one target
architecture, written once.

Every other place derives from it: the kernel build (build.py passes CC,
OBJDUMP and ARCHFLAGS to kernels/Makefile), the guest images (images.py hands
the Linux and initramfs values to images/build.sh, and the QEMU machine
arguments, NUMA layout included, to images/boot.sh, as TL_* environment
variables), the timing model's user-mode and guest lanes (qemu-user binary,
sysroot, -icount), the CLI's help and choices, and gem5's ISA. The schema enums
(experiment and machine files) are checked against ARCHES by a test.

    python3 -m trapline.arch build ARCH   # TL_* for images/build.sh (what it asks when run by hand)
    python3 -m trapline.arch boot ARCH    # TL_* for images/boot.sh: QEMU binary, machine arguments, console

Only the standard library is imported, so the scripts can ask for the table
before the virtualenv exists (the Docker build's image layer).
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass

from trapline.errors import UsageError


@dataclass(frozen=True)
class Numa:
    """A guest's memory layout: node i holds node_mib[i] MiB, node 0 from
    guest-physical address 0; vCPU i runs on node cpu_nodes[i]. The timing
    model's guest lane maps a guest-physical address to its node with it."""
    node_mib: tuple[int, ...]
    cpu_nodes: tuple[int, ...]

    @property
    def node_bytes(self) -> list[int]:
        return [m << 20 for m in self.node_mib]


@dataclass(frozen=True)
class Linux:
    """How the guest's Linux is built: make ARCH=, the targets, the image QEMU
    boots (kimage, stored as kname) and the device tree (dtb, '' if none)."""
    karch: str
    targets: str
    kimage: str
    kname: str
    dtb: str = ""
    # seconds its build takes on 2 vCPUs (the tarball's extraction, tinyconfig + fragment,
    # make -j2 at nice 19): the run's up-front estimate when it is not in the cache (trapline/eta.py)
    build_s: float = 300.0


@dataclass(frozen=True)
class Arch:
    name: str                    # x86_64, sparc64, armv6 (also the plugin's arch= and TL_TARGET_ARCH)
    cross: str                   # cross prefix ('' for the host's own tools)
    cflags: str                  # kernel and guest-userland code generation flags
    gcc_package: str             # the Debian package of the compiler
    qemu_user: str               # QEMU user mode (the timing model)
    sysroot: str | None          # qemu-user -L (None: the host's own libraries)
    sysroot_libs: tuple[str, ...]  # where the initramfs finds an ELF interpreter and shared libraries
    qemu_system: str             # QEMU system emulator (the guest lanes)
    machine: str                 # qemu-system -M
    machine_label: str           # the machine as a manifest names it
    mem_mib: int                 # guest RAM (TRAPLINE_MEM overrides it unless mem_fixed)
    mem_fixed: bool              # the board fixes its RAM (raspi0)
    console: str                 # the guest kernel's console=
    powers_off: bool             # the guest can end QEMU itself (raspi0 can only halt)
    linux: Linux
    numa: Numa
    cpu: str | None = None       # qemu-system -cpu under TCG (None: the machine's own)
    icount: tuple[str, ...] = ()  # the model's guest lane: extra QEMU arguments for a deterministic clock
    # QEMU 7.2 saves (and restores) this machine only when it sees host pages of at least
    # this many bytes (its target page size; 0: any host): images/boot.sh then runs QEMU
    # with images/qemu-pagesize.c preloaded (QEMU issue 1456, explained there)
    snapshot_host_page: int = 0
    gem5_isa: str = ""
    # its programs' ELF header: (EI_CLASS: 1 32-bit, 2 64-bit; e_machine), trapline/program.py
    elf: tuple[int, int] = (0, 0)

    @property
    def cc(self) -> str:
        return f"{self.cross}gcc"

    @property
    def objdump(self) -> str:
        return f"{self.cross}objdump"

    @property
    def smp(self) -> int:
        return len(self.numa.cpu_nodes)

    def qemu_machine_args(self, mem_mib: int | None = None, accel: str | None = None) -> list[str]:
        """qemu-system's machine arguments (binary not included): -M, CPU and
        accelerator, RAM and, with more than one node, the -numa layout (each
        node an even share of the RAM). accel 'kvm' uses the host CPU as it is
        (untested: KVM failed on the nested build host, QEMU 7.2 asserts in
        kvm_buf_set_msrs with -cpu max or host and hangs in the BIOS with kvm64)."""
        mem = self.mem_mib if self.mem_fixed or not mem_mib else mem_mib
        args = ["-M", self.machine]
        if self.cpu:
            accel = accel or "tcg"
            args += ["-accel", accel, "-cpu", "host" if accel == "kvm" else self.cpu]
        args += ["-m", str(mem)]
        nodes = len(self.numa.node_mib)
        if self.smp > 1:
            args += ["-smp", str(self.smp)]
        if nodes > 1:
            sizes = [mem // nodes] * (nodes - 1)
            sizes.append(mem - sum(sizes))
            args += [a for i, s in enumerate(sizes) for a in ("-object", f"memory-backend-ram,id=mem{i},size={s}M")]
            for n in range(nodes):  # a node's vCPUs are consecutive
                c = [i for i, cn in enumerate(self.numa.cpu_nodes) if cn == n]
                cpus = f"{c[0]}-{c[-1]}" if len(c) > 1 else str(c[0])
                args += ["-numa", f"node,nodeid={n},cpus={cpus},memdev=mem{n}"]
        return args

    def build_env(self) -> dict[str, str]:
        """What images/build.sh and images/lib/*.sh take from the table."""
        return {"TL_ARCH": self.name, "TL_CROSS": self.cross, "TL_GCC_PKG": self.gcc_package, "TL_CFLAGS": self.cflags,
                "TL_SYSROOT_LIBS": " ".join(self.sysroot_libs), "TL_KARCH": self.linux.karch,
                "TL_KTARGETS": self.linux.targets, "TL_KIMAGE": self.linux.kimage, "TL_KNAME": self.linux.kname,
                "TL_DTBSRC": self.linux.dtb}

    def boot_env(self, environ: dict | None = None) -> dict[str, str]:
        """What images/boot.sh takes from the table (TRAPLINE_MEM and
        TRAPLINE_ACCEL in environ adjust the machine arguments)."""
        env = os.environ if environ is None else environ
        mem = env.get("TRAPLINE_MEM") or None
        if mem is not None and not mem.isdigit():
            raise UsageError(f"TRAPLINE_MEM must be MiB as a whole number, not '{mem}'")
        return {"TL_ARCH": self.name, "TL_QEMU": self.qemu_system,
                "TL_QEMU_MACHINE": " ".join(self.qemu_machine_args(int(mem) if mem else None,
                                                                   env.get("TRAPLINE_ACCEL") or None)),
                "TL_CONSOLE": self.console, "TL_GRACE": "5" if self.powers_off else "0",
                "TL_DTB_NAME": os.path.basename(self.linux.dtb),
                "TL_SNAPSHOT_HOST_PAGE": str(self.snapshot_host_page)}


# The model's guest lane: one instruction = 1 ns of virtual time, the vCPUs run
# in turn in one thread, an idle guest skips ahead at once; the RTC starts at a
# fixed date, not the host's (the sun4u guest reads it at boot). Not for the
# two-vCPU x86_64 guest: under QEMU 7.2 with -icount, Linux 6.1 hangs at
# "x86: Booting SMP configuration" (tried: sleep on and off, shift 0, 3 and
# auto, -cpu max, Haswell and qemu64, tsc=reliable, lpj=, with and without
# -numa); that guest runs multi-threaded TCG (docs/model.md, "Guest lane").
ICOUNT = ("-icount", "shift=0,sleep=off,align=off", "-rtc", "base=2000-01-01T00:00:00,clock=vm")

ARCHES: dict[str, Arch] = {a.name: a for a in (
    Arch("x86_64", elf=(2, 62), cross="", cflags="", gcc_package="gcc", qemu_user="qemu-x86_64", sysroot=None,
         sysroot_libs=("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64"),
         qemu_system="qemu-system-x86_64", machine="pc", machine_label="QEMU pc, 2 vCPUs in 2 NUMA nodes (TCG)",
         mem_mib=512, mem_fixed=False, console="ttyS0", powers_off=True,
         linux=Linux("x86_64", "bzImage", "arch/x86/boot/bzImage", "bzImage-x86_64", build_s=340),
         # two vCPUs, one per node, each node half the RAM (QEMU exports it in ACPI SRAT/SLIT);
         # TCG runs -cpu max: every feature QEMU emulates
         numa=Numa((256, 256), (0, 1)), cpu="max", gem5_isa="X86"),
    Arch("sparc64", elf=(2, 43), cross="sparc64-linux-gnu-", cflags="-mcpu=ultrasparc", gcc_package="gcc-sparc64-linux-gnu",
         qemu_user="qemu-sparc64", sysroot="/usr/sparc64-linux-gnu",
         sysroot_libs=("/usr/sparc64-linux-gnu/lib", "/usr/sparc64-linux-gnu/lib64"),
         qemu_system="qemu-system-sparc64", machine="sun4u", machine_label="QEMU sun4u (UltraSPARC IIi, OpenBIOS)",
         mem_mib=256, mem_fixed=False, console="ttyS0", powers_off=True,
         # ARCH=sparc64 forces CONFIG_64BIT. arch/sparc/boot/image is vmlinux stripped: an ELF
         # that QEMU's sun4u loader hands to OpenBIOS (zImage is only a gzip of it, which the
         # loader does not unpack).
         linux=Linux("sparc64", "image", "arch/sparc/boot/image", "vmlinux-sparc64", build_s=100),
         # 8 KiB target pages: QEMU 7.2 saves the machine only with 8 KiB host pages (boot.sh)
         numa=Numa((256,), (0,)), icount=ICOUNT, gem5_isa="SPARC", snapshot_host_page=8192),
    # The ARM1176JZF-S is ARMv6 (no Thumb-2); -marm keeps every kernel in ARM state so
    # LDRD/LDM/LDR are the instructions the Raspberry Pi 1 ran.
    Arch("armv6", elf=(1, 40), cross="arm-linux-gnueabi-", cflags="-march=armv6 -marm", gcc_package="gcc-arm-linux-gnueabi",
         qemu_user="qemu-arm", sysroot="/usr/arm-linux-gnueabi", sysroot_libs=("/usr/arm-linux-gnueabi/lib",),
         qemu_system="qemu-system-arm", machine="raspi0", machine_label="QEMU raspi0 (ARM1176JZF-S)",
         mem_mib=512, mem_fixed=True, console="ttyAMA0", powers_off=False,
         # 6.1 keeps the ARM device trees in arch/arm/boot/dts (no vendor subdir yet)
         linux=Linux("arm", "zImage bcm2835-rpi-zero.dtb", "arch/arm/boot/zImage", "zImage-armv6",
                     "arch/arm/boot/dts/bcm2835-rpi-zero.dtb", build_s=270),
         numa=Numa((512,), (0,)), icount=ICOUNT, gem5_isa="ARM"),
)}


def get(name: str) -> Arch:
    """The architecture called name; a UsageError naming the valid choices otherwise."""
    if name not in ARCHES:
        raise UsageError(f"unknown arch '{name}'; valid choices: {', '.join(ARCHES)}")
    return ARCHES[name]


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("build", "boot"):
        print("usage: python3 -m trapline.arch build|boot ARCH", file=sys.stderr)
        return 2
    try:
        a = get(argv[1])
        env = a.build_env() if argv[0] == "build" else a.boot_env()
    except UsageError as e:
        print(f"trapline.arch: {e}", file=sys.stderr)
        return 2
    for k, v in env.items():
        print(f"{k}={shlex.quote(v)}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
