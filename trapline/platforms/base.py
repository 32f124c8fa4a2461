"""What every platform provides: the protocol a platform module implements (class
Platform: a new platform is one module of trapline/platforms/ defining one subclass),
the kind of lane it runs (class Lane), what one run produced (PlatformRun), and the
helpers every platform shares (kernel arguments, --set checks, a guest's sweep keys).

Callers ask a platform these attributes and methods (through the registry,
trapline/platforms/__init__.py); no module outside trapline/platforms/ switches on a
platform's name.
"""

from __future__ import annotations

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


class Lane:
    """One kind of lane of a platform. A platform whose lanes differ (the model: user
    mode, or a booted guest) has one small Lane class per kind and picks one for each
    lane of an experiment file (Platform.lane_class); what differs between its lanes is
    owned here, once, not tested with spec.get(...) by its callers."""
    # boots a guest image under qemu-system (the image and QEMU decide its figures too)
    guest = False
    # why a rerun would not give its figures again bit for bit; None: it would, and
    # `./run.sh verify` reruns its entries (trapline/bundle.py)
    not_repeatable: str | None = None

    def __init__(self, platform: "Platform", spec: dict):
        self.platform = platform
        self.spec = spec

    @property
    def ctx(self) -> RunContext:
        return self.platform.ctx

    @property
    def arch(self) -> str:
        return type(self.platform).lane_arch(self.spec)

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


class GuestLane(Lane):
    """A lane whose commands run in a guest image booted under qemu-system."""
    guest = True

    def sweep_keys(self) -> dict:
        return guest_keys(self.ctx, self.arch)


class Platform:
    """Where an experiment runs: one subclass per module of trapline/platforms/, whose
    `name` is the module's name (--platform NAME; `platforms: NAME:` in an experiment
    file). Made for one run context; what it builds or loads lives there (ctx.kernels,
    ctx.image, ctx.tool). A new platform defines the class attributes below that differ
    from the defaults, and run() (the protocol in full: docs/methodology.md, "Platforms")."""
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
    # --machine applies to it, and --set keys that are machine fields (context.split_sets).
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
    def lane_arch(cls, spec: dict) -> str:
        """The architecture a lane runs: the platform's own, else the lane's `arch`."""
        return cls.arch or spec["arch"]

    @classmethod
    def lane_problems(cls, at: str, spec: dict) -> list[str]:
        """Its own checks of a lane in an experiment file (trapline/experiment.py), as sentences naming the field."""
        errs = []
        if cls.arch is None and "arch" not in spec:
            errs.append(f"{at}: needs 'arch' (the guest: x86_64, sparc64 or armv6)")
        if "host_facts" in spec:
            errs += cls.host_facts_problems(f"{at}.host_facts", spec["host_facts"])
        if "needs" in spec and not cls.lane_needs:
            errs.append(f"{at}.needs: a {cls.label} lane needs nothing beyond the platform")
        return errs

    @classmethod
    def host_facts_problems(cls, at: str, names: list) -> list[str]:
        """Its checks of a lane's `host_facts` (the facts of the machine trapline runs on
        that the lane's figures depend on: trapline/hostfacts.py)."""
        return [f"{at}: only the host lane reads the host's facts"]

    @classmethod
    def counter_problem(cls, count: str) -> str | None:
        """Why `count` (named with this platform's prefix) is not one it reports; None if it is."""
        patterns = [re.escape(c).replace(r"\{\}", "[a-z0-9_]+") for c in cls.counters]
        if any(re.fullmatch(p, count) for p in patterns):
            return None
        return (f"'{count}' is not a count the {cls.label} reports; valid choices: "
                f"{', '.join(c.replace('{}', '<k>') for c in cls.counters)}")

    @classmethod
    def why_not_repeatable(cls, facts: dict) -> str | None:
        """Why an entry's figures (from its platform_facts) would not repeat bit for bit on a rerun; None when they would."""
        return cls.lane_class(facts).why_not_repeatable(facts)

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

    @property
    def timing_plots(self) -> bool:
        """Whether its times may be drawn and compared as times."""
        return self.times != "emulation"

    # ------------------------------------------------ asked in a run context

    @property
    def kernel_sets(self) -> dict[str, str]:
        """The --set values its kernels take: all of them, or, on a platform that takes a
        machine, those that are not machine fields."""
        return self.ctx.kernel_sets if self.takes_machine else self.ctx.sets

    def lane(self, exp) -> Lane:
        """Its lane of the experiment, as the kind of lane it is."""
        spec = exp.platform(self.name)
        return type(self).lane_class(spec)(self, spec)

    def describe(self) -> dict:
        """Facts for the manifest: CPU, OS, tool versions (what it used in this context)."""
        return {}

    def validate(self, exp) -> None:
        """Reject bad --set keys and machines before anything runs (UsageError)."""
        check_kernel_sets(self.ctx, exp, self.name, self.kernel_sets)

    def run(self, exp) -> PlatformRun:
        raise NotImplementedError

    # ------------------------------------------------ a platform that takes a machine (takes_machine)

    @classmethod
    def unused_fields(cls, machine: machines.Machine) -> frozenset[str]:
        """The fields of machine this platform's simulator does not read (its user-mode lanes): what
        sensitivity does not scale and a figure does not rest on."""
        return frozenset()

    def machine_of(self, exp) -> machines.Machine:
        """The machine its lane of exp runs: --machine, else the lane's `machine`, with the
        machine's --set values, loaded and checked once per run context (a bad field raises,
        naming it); its arch must be the lane's."""
        spec = exp.platform(self.name)
        m = self.ctx.machine_for(spec.get("machine"), exp.id, self.name)
        arch = type(self).lane_arch(spec)
        if m.arch != arch:
            raise UsageError(f"machine '{m.name}' is {m.arch}, but {exp.id} runs its {self.name} lane on {arch}")
        return m

    def use_machine(self, exp) -> machines.Machine:
        """machine_of(exp), noted as used by this context's runs (machines_used)."""
        m = self.machine_of(exp)
        self.ctx.use(f"{self.name}-machines", self.ctx.machine_name or exp.platform(self.name).get("machine"))
        return m

    def machines_used(self) -> dict:
        """The machines its runs in this context used (use_machine), for describe(): Machine.to_dict()
        by name (+ the --set values)."""
        ctx = self.ctx
        return {m.name + ("+" + ",".join(m.sets) if m.sets else ""): m.to_dict()
                for k, m in sorted(ctx.machines.items()) if k in ctx.used.get(f"{self.name}-machines", ())}

    # ------------------------------------------------ ./run.sh simulate (trapline/simulate.py)

    # How it runs a user's program, first the default: "user" (the program alone, no
    # kernel: QEMU user mode), "guest" (under Linux in a booted guest: --guest), "se"
    # (gem5's syscall emulation), "native" (on this machine's CPU). () : it does not.
    simulates: tuple[str, ...] = ()

    @classmethod
    def simulate_problem(cls, machine, mode: str) -> str | None:
        """Why it cannot run a program of `machine` in `mode` (one sentence naming what would
        work), or None when it can. Asked before anything runs."""
        if not cls.simulates:
            return f"platform '{cls.name}' does not run a user's program"
        if mode not in cls.simulates:
            return f"platform '{cls.name}' runs a program only in {' or '.join(cls.simulates)} mode, not {mode}"
        if cls.arch and machine.arch != cls.arch:
            return (f"platform '{cls.name}' runs only {cls.arch} programs and machine '{machine.name}' "
                    f"is {machine.arch}")
        return None

    def engine(self, machine, mode: str):
        """A simulator's engine (trapline/platforms/engine.py) for the machine in `mode`: what
        its lanes and `simulate` run a program with. None: it is not a simulator."""
        return None

    def simulate(self, machine, program, argv: list[str], mode: str, timeout: float):
        """`./run.sh simulate`: the user's checked program (trapline.program.Program; argv:
        its path and arguments) on this platform; a trapline.simstats.Run (the common stats,
        the program's output and exit status). simulate_problem said it can. A simulator's
        engine runs it; a platform that is not one says how it runs a program here."""
        engine = self.engine(machine, mode)
        if engine is None:
            raise UsageError(self.simulate_problem(machine, mode) or f"platform '{self.name}' does not simulate")
        return engine.simulate(type(self), program, argv, mode, timeout)

    def _lane(self, exp) -> tuple[dict, str, float]:
        """A guest or model run's start: its lane of the experiment, the lane's arch, the start time."""
        import time
        spec = exp.platform(self.name)
        return spec, type(self).lane_arch(spec), time.monotonic()


# ------------------------------------------------ shared by every platform

def check_kernel_sets(ctx: RunContext, exp, platform: str, sets: dict[str, str], also: str = "") -> None:
    """Reject a --set key that no kernel of this experiment's runs declares, or a value
    outside the key's declared type and range (the run's own args are checked at load)."""
    if not sets:
        return
    valid: set[str] = set()
    for r in exp.platform(platform).get("runs", []):
        valid |= set(kernel_keys(ctx, exp, r["binary"]))
    for k in sets:
        if k not in valid:
            hint = also
            if not also and ("." in k or "[" in k or k.split(".")[0] in machines.top_fields()):
                from trapline import platforms  # (the registry imports this module)
                takers = [c.label for c in platforms.all().values() if c.takes_machine]
                hint = (f" ('{k}' is a machine field: machine fields are set on the "
                        f"{' or the '.join(takers)}, {platforms.machine_options()})")
            raise UsageError(f"unknown key '{k}' for {exp.id} on {platform}; valid choices: "
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


def machine_lines(label: str, machines_facts: dict) -> list[str]:
    """The report's lines for the machines a platform that takes a machine ran (describe()'s
    "machines": Machine.to_dict() by name), with the --set values applied and the file's hash."""
    out = []
    for m in machines_facts.values():
        sets = f" with {', '.join(m['sets'])}" if m.get("sets") else ""
        out.append(f"{label} machine: {m.get('summary', m.get('name'))}{sets} "
                   f"({m.get('file')}, sha256 {str(m.get('file_sha256') or '-')[:12]})")
    return out


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


# ------------------------------------------------ what a modelled figure rests on (platforms with a machine)

def calibrated_on(exp, m: machines.Machine, unused: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """The machine parameters fitted to this experiment's own claim that a lane uses
    (unused: the machine fields this lane's simulator does not read)."""
    cat = exp.data["catalogue"]
    # the claim line names the claim first ("E3: ...", "E3 (post): ..."); E1 must not match E10
    return sorted(k for k, v in m.sources().items()
                  if re.match(rf"calibrated: {cat}\b", str(v)) and k not in unused)


def rests_on(calibrated: list[str], from_claim: list[str]) -> str:
    """What a modelled figure rests on: 'fitted' (a parameter was fitted to this claim),
    'input' (the claim's own figures are machine parameters) or 'prediction'."""
    return "fitted" if calibrated else "input" if from_claim else "prediction"


def machine_provenance(exp, m: machines.Machine, unused: frozenset[str] | set[str] = frozenset()) -> dict:
    """A lane's facts about its machine's provenance: the parameters fitted to this claim
    (calibrated_on_this_claim), taken from its figures (from_this_claim), assumed, and
    so what its figures rest on. The model and gem5 compute it here, each naming the
    machine fields its simulator does not read (unused)."""
    cat = exp.data["catalogue"]
    srcs = m.sources()
    calibrated = calibrated_on(exp, m, unused)
    # numbers the machine file takes from the claim itself (its own figures, not fitted)
    from_claim = sorted(k for k, v in srcs.items() if k not in unused
                        and not str(v).startswith("calibrated") and re.search(rf"claims\.md {cat}\b", str(v)))
    # numbers no source was found for that the simulator reads (docs/machines.md lists them with the reasoning)
    assumed = sorted(k for k, v in srcs.items() if str(v).startswith("assumed:") and k not in unused)
    return {"machine": m.name, "machine_sets": list(m.sets), "machine_file_sha256": m.to_dict().get("file_sha256"),
            "clock_hz": m.clock_hz, "calibrated_on_this_claim": calibrated, "from_this_claim": from_claim,
            "assumed": assumed, "rests_on": rests_on(calibrated, from_claim)}
