"""What every platform provides: the protocol a platform module implements (class
Platform: a new platform is one module of trapline/platforms/ defining one subclass),
the kinds of lane it runs (class Lane: each lane runs itself, its commands are Command),
what one run produced (PlatformRun), and the helpers every platform shares (kernel
arguments, --set checks, a guest's sweep keys). How a platform runs a program (its
engines) is trapline/platforms/engine.py; what a lane's figures rest on is its
machine's (trapline.machine.Machine.rests_on).

Callers ask a platform these attributes and methods (through the registry,
trapline/platforms/__init__.py); no module outside trapline/platforms/ switches on a
platform's name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import re

from trapline import machine as machines, kernelargs
from trapline.kernelargs import kernel_args, kernel_keys  # noqa: F401 (every platform's, from here)
from trapline.context import RunContext
from trapline.errors import UsageError
from trapline.kernelio import KernelOutput


@dataclass
class PlatformRun:
    """What one experiment produced on one platform."""
    output: KernelOutput | None
    raw: str                      # the console/stdout, with the commands run
    commands: list[list[str]] = field(default_factory=list)
    error: str | None = None      # set when the run failed (the message names why)
    binaries: dict[str, str] = field(default_factory=dict)  # path -> sha256
    seconds: float = 0.0
    facts: dict = field(default_factory=dict)  # platform specifics for the entry (e.g. emulation time)


class Engines(Mapping):
    """A platform's `engines` whose classes are imported when first asked for, each named
    "module:Class" (Engines(se="trapline.platforms.gem5.engine:Gem5Engine")): every command
    loads every platform for its options, and an engine whose module is heavy (gem5's: its
    parameter tables) costs only the commands that run it. Read as any mapping of mode ->
    Engine class."""

    def __init__(self, **names: str):
        self._names = names
        self._classes: dict[str, type] = {}

    def __getitem__(self, mode: str) -> type:
        if mode not in self._classes:
            module, _, cls = self._names[mode].partition(":")
            self._classes[mode] = getattr(importlib.import_module(module), cls)
        return self._classes[mode]

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass(frozen=True)
class CommandOption:
    """A command-line option a platform declares (Platform.options): the CLI adds every
    platform's options to the commands that run experiments (run, reproduce-all, sweep,
    sensitivity, simulate) and hands their values back to the platform
    (Platform.take_options) before anything runs, so no caller names the platform."""
    flag: str                 # "--gem5"
    metavar: str              # "PATH"
    help: str

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Command:
    """One of a lane's kernel runs: a binary of the experiment's kernel folder and its
    key=value arguments (the experiment's, its quick ones, the user's --set values)."""
    kernel: str                  # the experiment's kernel folder
    binary: str                  # the binary, as the experiment file names it
    args: tuple[str, ...]
    timeout_s: float | None      # the run's own time limit (`timeout_s`); None: the lane's

    @property
    def shown(self) -> list[str]:
        """As the entry and the log show it: kernel/binary and its arguments."""
        return [f"{self.kernel}/{self.binary}", *self.args]

    @property
    def what(self) -> str:
        return " ".join(self.shown)

    def limit(self, ctx: RunContext, default: float) -> float:
        """Its time limit: --timeout, else its own, else the lane's default."""
        return ctx.timeout_for(default if self.timeout_s is None else self.timeout_s)


class Lane:
    """One experiment's lane on one platform, as the kind of lane it is. A platform whose
    lanes differ (the model: user mode, or a booted guest) has one small Lane class per
    kind and picks one for each lane of an experiment file (Platform.lane_class); what
    differs between its lanes is owned here, once, not tested with spec.get(...) by its
    callers. Every lane runs here (run), on every platform."""
    # boots a guest image under qemu-system (the image and QEMU decide its figures too)
    guest = False
    # why a rerun would not give its figures again bit for bit; None: it would, and
    # `./run.sh verify` reruns its entries (trapline/bundle.py)
    not_repeatable: str | None = None

    def __init__(self, platform: "Platform", exp):
        self.platform = platform
        self.exp = exp
        self.spec = exp.platform(platform.name)

    @property
    def ctx(self) -> RunContext:
        return self.platform.ctx

    @property
    def arch(self) -> str:
        """The architecture it runs: its platform's own, else the lane's `arch`."""
        return self.platform.arch or self.spec["arch"]

    @property
    def kernel_sets(self) -> dict[str, str]:
        """The --set values its kernels take: all of them, or, on a platform that takes a
        machine, those that are not machine fields."""
        return self.ctx.kernel_sets if self.platform.takes_machine else self.ctx.sets

    def commands(self) -> list[Command]:
        """Its kernel runs, in the order the experiment file lists them."""
        exp = self.exp
        return [Command(exp.kernel, r["binary"], tuple(kernel_args(self.ctx, exp, r, self.kernel_sets)),
                        r.get("timeout_s")) for r in self.spec.get("runs", [])]

    def machine(self, use: bool = False) -> machines.Machine:
        """The machine it runs (a platform that takes a machine): --machine, else the lane's
        `machine`, with the machine's --set values, loaded and checked once per run context
        (a bad field raises, naming it); its arch must be the lane's. use: noted as used by a
        run (RunContext.machines_used, the platform's manifest facts)."""
        exp, name = self.exp, self.platform.name
        m = self.ctx.machine_for(self.spec.get("machine"), exp.id, name, use)
        if m.arch != self.arch:
            raise UsageError(f"machine '{m.name}' is {m.arch}, but {exp.id} runs its {name} lane on {self.arch}")
        return m

    def check(self, machines_elsewhere: str = "") -> None:
        """Reject its bad --set keys and its machine (UsageError) before anything runs.
        machines_elsewhere: where machine fields are set (the platforms that take a machine,
        named by the caller, which knows every platform), said when a platform that takes
        none is given one."""
        if self.platform.takes_machine:
            self.machine()
            also = (f"; or a machine field: {', '.join(sorted(machines.top_fields()))} "
                    f"(dotted, e.g. caches.l1d.line=32B)")
        else:
            also = ""
        check_kernel_sets(self, also, machines_elsewhere)

    def sweep_keys(self) -> dict:
        """What decides a sweep point on this lane besides its inputs, the kernel build and
        trapline's tree: the platform's own tools and images (made here once when missing,
        so the workers find them in the cache). trapline/sweep/points.py."""
        return {}

    @classmethod
    def why_not_repeatable(cls, facts: dict) -> str | None:
        """Why an entry of this lane (its platform_facts) would not repeat bit for bit on a
        rerun; None when it would."""
        return cls.not_repeatable

    def run(self) -> PlatformRun:
        """The experiment's lane: a PlatformRun (the kernel output, the raw log, the commands,
        hashes, facts)."""
        raise NotImplementedError


class GuestLane(Lane):
    """A lane whose commands run in a guest image booted under qemu-system."""
    guest = True

    def sweep_keys(self) -> dict:
        return guest_keys(self.ctx, self.arch)


class Platform:
    """Where an experiment runs: one subclass per module of trapline/platforms/, whose
    `name` is the module's name (--platform NAME; `platforms: NAME:` in an experiment
    file). It says what it is (the class attributes below that differ from the defaults),
    the kinds of lane it runs (`lanes`: each runs itself, Lane.run) and how it runs a
    program (`engines`: trapline/platforms/engine.py); the protocol in full:
    docs/methodology.md, "Platforms". Made for one run context; what it builds or loads
    lives there (ctx.kernels, ctx.image, ctx.tool)."""
    name = "?"
    # How figures from this platform are labelled ("timing model"); printed next to every figure.
    label = "?"
    # One sentence: what a figure from this platform is (the report prints "label: meaning").
    meaning = "?"
    # What its sample times are: "real" (measured), "emulation" (an emulator's
    # wall clock, never a prediction) or "predicted" (a simulator's cycles / clock:
    # its figures are modelled, and the fidelity table lists them).
    times = "real"
    # Its place among the claim matrix's columns (host 10, qemu 20, model 30; lower is further left).
    column = 100
    # A fixed architecture for every lane (the host's); None: each lane names its `arch`.
    arch: str | None = None
    # --machine applies to it, and --set keys that are machine fields (machine.is_machine_key).
    takes_machine = False
    # Sweep points on it may run side by side (False: they would disturb each other's figures).
    side_by_side = True
    # Why its sweep points run one at a time (when side_by_side is False).
    one_at_a_time = ""
    # The counts it adds to a kernel's own (model_*): each name starts with "<name>_"
    # ("{}": one count per key), and only its lanes may name them in an experiment file.
    counters: tuple[str, ...] = ()
    # The kinds of lane it runs; lane_class picks one per lane (the first by default).
    lanes: tuple[type[Lane], ...] = (Lane,)
    # How it runs a program, by mode, first the default: "user" (the program alone, no
    # kernel: QEMU user mode), "guest" (under Linux in a booted guest: --guest), "se"
    # (gem5's syscall emulation), "native" (on this machine's CPU) -> the Engine class
    # (trapline/platforms/engine.py) that runs it there (a dict, or Engines: imported when
    # first asked for). Empty: it runs no program of a user's.
    engines: Mapping[str, type] = {}
    # Its own command-line options (CommandOption), on every command that runs experiments.
    options: tuple[CommandOption, ...] = ()
    # What one of its lanes takes when its experiment file gives no `cost_s`: seconds in
    # full and quick mode on 2 vCPUs (the run's up-front estimate, trapline/eta.py).
    default_cost_s = {"full": 10.0, "quick": 3.0}
    # What a lane's `needs` names on it (e.g. gem5: trapline's changes to gem5); "" : a lane
    # of it needs nothing beyond the platform (why_lane_unavailable).
    lane_needs = ""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    # ------------------------------------------------ asked of the class (no run context)

    @classmethod
    def why_unavailable(cls) -> str | None:
        """Why it cannot run on this machine (a tool it needs is missing: say how to get it),
        or None when it can. An unavailable platform's lanes become not-applicable entries
        with this reason; --platform NAME is refused with it."""
        return None

    @classmethod
    def why_lane_unavailable(cls, spec: dict) -> str | None:
        """Why one lane (spec: its part of an experiment file) cannot run here although the
        platform can: something it `needs` that this machine's tool lacks (say how to get
        it); None when it can. Such a lane's entry is not-applicable with this reason."""
        return None

    @classmethod
    def take_options(cls, values: dict) -> None:
        """Take the values of its options (CommandOption.dest -> value, None when not given),
        before anything runs: e.g. set the environment its workers read. Bad values raise
        UsageError naming the option."""

    @classmethod
    def lane_class(cls, spec: dict) -> type[Lane]:
        """The kind of lane an experiment file's lane (or an entry's platform_facts) is."""
        return cls.lanes[0]

    @classmethod
    def expected_seconds(cls, spec: dict, quick: bool) -> float:
        """What a lane of it should take (reference machine, images built): the lane's own
        `cost_s`, else the platform's default."""
        mode = "quick" if quick else "full"
        return float(spec.get("cost_s", {}).get(mode, cls.default_cost_s[mode]))

    @classmethod
    def lane_problems(cls, at: str, spec: dict) -> list[str]:
        """Its own checks of a lane in an experiment file (trapline/experiment.py), as sentences naming the field."""
        errs = []
        if cls.arch is None and "arch" not in spec:
            errs.append(f"{at}: needs 'arch' (the guest: x86_64, sparc64 or armv6)")
        if "host_facts" in spec:
            errs.append(f"{at}.host_facts: only the host lane reads the host's facts")
        if "needs" in spec and not cls.lane_needs:
            errs.append(f"{at}.needs: a {cls.label} lane needs nothing beyond the platform")
        return errs

    @classmethod
    def counter_problem(cls, count: str) -> str | None:
        """Why `count` (named with this platform's prefix) is not one it reports; None if it is."""
        patterns = [re.escape(c).replace(r"\{\}", "[a-z0-9_]+") for c in cls.counters]
        if any(re.fullmatch(p, count) for p in patterns):
            return None
        return (f"'{count}' is not a count the {cls.label} reports; valid choices: "
                f"{', '.join(c.replace('{}', '<k>') for c in cls.counters)}")

    @classmethod
    def report_lines(cls, facts: dict) -> list[str]:
        """The report's lines for its manifest facts (describe()): what it ran on."""
        return [f"{cls.label}: {facts}"]

    @classmethod
    def report_facts(cls, facts: dict | None) -> dict:
        """What the report needs of it, written into the run's manifest.json
        (platform_report) so that the report is a function of the run directory."""
        return {"label": cls.label, "column": cls.column, "modelled": cls.times == "predicted",
                "lines": cls.report_lines(facts) if facts else []}

    # ------------------------------------------------ asked in a run context

    def lane(self, exp) -> Lane:
        """Its lane of the experiment, as the kind of lane it is."""
        return type(self).lane_class(exp.platform(self.name))(self, exp)

    def describe(self) -> dict:
        """Facts for the manifest: CPU, OS, tool versions (what it used in this context)."""
        return {}

    def engine(self, machine: machines.Machine, mode: str, lane: Lane | None = None):
        """The engine that runs a program of `machine` in `mode` (one of `engines`), complete
        when made: for one of its lanes (lane) or a user's program (`./run.sh simulate`)."""
        return type(self).engines[mode](self, machine, mode, lane)


# ------------------------------------------------ shared by every platform

def check_kernel_sets(lane: Lane, also: str = "", machines_elsewhere: str = "") -> None:
    """Reject a --set key that no kernel of the lane's runs declares (also: what else the
    platform takes, said with the valid choices), or a value outside the key's declared
    type and range (the run's own args are checked at load)."""
    sets, exp, ctx = lane.kernel_sets, lane.exp, lane.ctx
    if not sets:
        return
    valid: set[str] = set()
    for r in lane.spec.get("runs", []):
        valid |= set(kernel_keys(ctx, exp, r["binary"]))
    for k in sets:
        if k not in valid:
            hint = also
            if not also and machines_elsewhere and machines.is_machine_key(k):
                hint = f" ('{k}' is a machine field: {machines_elsewhere})"
            raise UsageError(f"unknown key '{k}' for {exp.id} on {lane.platform.name}; valid choices: "
                             f"{', '.join(sorted(valid))}{hint}")
    bad = kernelargs.problems(sets, kernelargs.declared(exp.folder), "--set ")
    if bad:
        raise UsageError(bad[0])


def guest_line(label: str, g: dict) -> str:
    """The report's line for a booted guest's facts (guest.guest_image_facts), ending with
    which builder made its image."""
    return (f"{label}: {g.get('qemu', '?')}, {g.get('machine', '?')}, "
            f"guest Linux sha256 {str(g.get('linux_sha256') or '-')[:12]}, "
            f"initramfs sha256 {str(g.get('initrd_sha256') or '-')[:12]}, {images_words(g.get('images'))}")


def images_words(images: dict | None) -> str:
    """Which builder made a guest's image: 'debian images', or 'buildroot images
    (Buildroot 2026.02.3, trapline_armv6_defconfig sha256 ...)'."""
    images = images or {"builder": "debian"}
    words = f"{images.get('builder', '?')} images"
    if images.get("buildroot"):
        words += (f" (Buildroot {images['buildroot']}, {images.get('defconfig', '?')} sha256 "
                  f"{str(images.get('defconfig_sha256') or '-')[:12]})")
    return words


def guest_keys(ctx: RunContext, arch: str) -> dict:
    """A guest lane's sweep keys: the guest image (its Linux and initramfs) and qemu-system's version."""
    from trapline import arch as arch_table
    from trapline.proc import tool_version
    img = ctx.image(arch)
    return {"image": {k: img.facts.get(k) for k in ("LINUX_SHA256", "INITRD_SHA256")},
            "qemu": tool_version(arch_table.get(arch).qemu_system)}
