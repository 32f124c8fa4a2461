"""Platforms as a protocol: a platform is one module of
trapline/platforms/ found by scanning, callers ask it (trapline/platforms/base.py)
and none switches on its name, and the harness's modules import each other
without a circle and never up a layer (LAYERS, written once below).

The proof that a new platform is one module: a throwaway platform module in a
folder of its own ($TRAPLINE_PLATFORMS, scanned like trapline/platforms/) and an
experiment with a lane for it, nothing else touched: --platform lists it, a run
gives its entry (real: it runs the host's kernel natively under its own name), the
report's claim matrix has its column and its manifest lines, a sweep runs its
points on Dask workers, and a platform that says it is unavailable here becomes a
not-applicable entry with its reason, and one line for --platform."""

import ast
import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, trapline
from test_10_experiments import DEMO_C, DEMO_MK, DEMO_YAML, _tree
from trapline import platforms

# A platform module as a user would write one: the host's kernels, run natively, under
# another name and label, with its own column and its own word on repeatability.
REPLICA = '''"""A throwaway platform made by the test suite: the host lane, under another name."""
from trapline.platforms.host import HostLane, HostPlatform


class ReplicaLane(HostLane):
    not_repeatable = "the replica lane measures real time"


class ReplicaPlatform(HostPlatform):
    name = "replica"
    label = "replica host"
    meaning = "the host's kernels run natively again, under a platform of its own"
    column = 15
    side_by_side = True
    lanes = (ReplicaLane,)
'''

# A platform whose tool this machine lacks: found, but not available.
GHOST = '''"""A throwaway platform made by the test suite: one that cannot run here."""
from trapline.platforms.base import Platform


class GhostPlatform(Platform):
    name = "ghost"
    label = "ghost simulator"
    meaning = "cycles from a simulator nobody has installed"
    times = "predicted"
    column = 40
    arch = "x86_64"

    @classmethod
    def why_unavailable(cls):
        return "no ghost binary (set GHOST=PATH, or put ghost on PATH)"

    def run(self, exp):
        raise AssertionError("an unavailable platform is never run")
'''


def _demo_tree(tmp_path: Path, lanes: dict, modules: dict, planned: dict | None = None) -> tuple[dict, Path]:
    """The demo experiment with its host lane and `lanes` (name -> what differs from the host's),
    its kernels, and a platform folder of `modules` (file name -> source)."""
    kdir = _tree(tmp_path)
    demo = kdir / "zz-demo"
    demo.mkdir()
    (demo / "demo.c").write_text(DEMO_C)
    (demo / "kernel.mk").write_text(DEMO_MK)
    y = copy.deepcopy(DEMO_YAML)
    host = y["platforms"]["host"]
    for name, differs in lanes.items():
        y["platforms"][name] = {**copy.deepcopy(host), **differs}
    if planned:
        y["planned"] = planned
    (demo / "experiment.yaml").write_text(yaml.safe_dump(y, sort_keys=False))
    (demo / "README.md").write_text("# zz-demo\n\nA throwaway experiment made by the test suite.\n")
    pdir = tmp_path / "platforms"
    pdir.mkdir()
    for name, source in modules.items():
        (pdir / name).write_text(source)
    env = {"TRAPLINE_KERNELS": str(kdir), "TRAPLINE_PLATFORMS": str(pdir), "TRAPLINE_CACHE": str(tmp_path / "cache")}
    return env, kdir


def _platform_tree(tmp_path: Path) -> tuple[dict, Path]:
    """The demo experiment with host, replica and ghost lanes; its kernels and platform folders."""
    return _demo_tree(tmp_path, {"replica": {"criterion": "as on the host: the kernel counts its additions"},
                                 "ghost": {"criterion": "as on the host"}},
                      {"replica.py": REPLICA, "ghost.py": GHOST},
                      planned={"gem5": "gem5 with the same machine, once its platform lands"})


def test_a_new_platform_is_one_module(tmp_path, results_dir):
    env, _ = _platform_tree(tmp_path)

    # --platform's valid choices are the modules found, in column order
    r = trapline("run", "zz-demo", "--platform", "nope", env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "unknown platform 'nope'; valid choices: host, replica, qemu, model, gem5, ghost" in r.stderr
    # a platform that cannot run here: one line, with its reason
    r = trapline("run", "zz-demo", "--platform", "ghost", "--quick", env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "platform 'ghost' is not available here: no ghost binary (set GHOST=PATH" in r.stderr
    assert not results_dir.exists()

    # every lane: host and replica run the kernel, ghost is an honest not-applicable
    r = trapline("run", "zz-demo", "--quick", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    run = (results_dir / "latest").resolve()
    entries = {p.name: json.loads(p.read_text()) for p in (run / "entries").glob("*.json")}
    assert sorted(entries) == ["zz-demo.ghost.json", "zz-demo.host.json", "zz-demo.replica.json"]
    rep, ghost = entries["zz-demo.replica.json"], entries["zz-demo.ghost.json"]
    assert (rep["status"], rep["reproduced"], rep["platform_label"]) == ("reproduced", 8, "replica host")
    assert rep["rests_on"] == "measurement" and rep["commands"][0][0] == "zz-demo/demo"
    assert ghost["status"] == "not-applicable" and ghost["platform_label"] == "ghost simulator"
    assert "the ghost platform is not available here: no ghost binary" in ghost["note"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest["platforms"]) == {"host", "replica"}  # what ran describes itself
    info = manifest["platform_report"]
    assert (info["replica"]["column"], info["replica"]["modelled"]) == (15, False)
    assert (info["ghost"]["column"], info["ghost"]["modelled"], info["ghost"]["lines"]) == (40, True, [])
    assert info["replica"]["lines"][0].startswith("replica host: ")

    # the report: a column per platform in column order, its lines in the manifest section
    md = (run / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| claim | experiment"))
    assert [c.strip() for c in header.strip("|").split("|")] == ["claim", "experiment", "host", "replica host",
                                                                "ghost simulator"]
    assert "replica host: the host's kernels run natively again" in md
    assert "- " + info["replica"]["lines"][0] in md
    assert "Planned platforms: gem5: gem5 with the same machine" in md
    # redrawn from the run directory alone, byte for byte
    before = (run / "report.md").read_bytes()
    assert trapline("report", run.name, env=env).returncode == 0
    assert (run / "report.md").read_bytes() == before

    # a sweep on the new platform: its points on Dask workers, which find it the same way
    r = trapline("sweep", "zz-demo", "--platform", "replica", "--set", "n=1000,2000", "--quick", "--workers", "2",
                 env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    table = json.loads((results_dir / "sweeps" / "latest" / "table.json").read_text())
    assert [(row["sets"], row["status"], row["headline"], row["platform"]) for row in table["rows"]] == [
        ({"n": "1000"}, "reproduced", 8, "replica"), ({"n": "2000"}, "reproduced", 8, "replica")]
    assert {row["worker"] for row in table["rows"]} and all(row["worker"].startswith("tcp://")
                                                            for row in table["rows"])
    sweep_manifest = json.loads((results_dir / "sweeps" / "latest" / "manifest.json").read_text())
    # a platform module outside the tree: its own source decides its points too
    assert sweep_manifest["point_keys"]["platform_sha256"] == __import__("hashlib").sha256(
        REPLICA.encode()).hexdigest()


# A simulator as a user would add one: one module with its engine (trapline/platforms/engine.py).
# It runs the kernel natively and charges one cycle per operation each sample reports; its
# lanes and `simulate` are the engine's (SimulatorLane on run_lane, Engine.simulate), nothing else written.
TALLY = '''"""A throwaway platform made by the test suite: a simulator of its own."""
import re

from trapline import simstats
from trapline.kernelio import MODELLED_TIMER
from trapline.platforms.base import Platform
from trapline.platforms.engine import Engine, Ran, SimulatorLane
from trapline.proc import run_command


class TallyEngine(Engine):
    """Each sample the program prints is a region of one cycle per operation."""
    prefix = "tally"
    under = "the tally simulator"
    timer = MODELLED_TIMER

    def run(self, argv, timeout, cwd=None):
        status, so, se = run_command(argv, timeout, cwd=cwd)
        regions = [{"cycles": int(m.group(1))} for m in re.finditer(r"kind=sample .*?\\bops=(\\d+)", so)]
        return Ran(so, se, status, regions, raw={"samples": len(regions)})

    def region_ns(self, g):
        return g["cycles"] / self.machine.clock_hz * 1e9

    def region_counts(self, g, ops):
        return {"tally_ops": ops, "tally_cycles": g["cycles"]}

    def figures(self, g):
        return simstats.figures(seconds=g["cycles"] / self.machine.clock_hz, cycles=g["cycles"])


class TallyPlatform(Platform):
    name = "tally"
    label = "tally simulator"
    meaning = "one cycle per operation the kernel reports"
    times = "predicted"
    column = 45
    arch = "x86_64"
    takes_machine = True
    counters = ("tally_ops", "tally_cycles")
    lanes = (SimulatorLane,)
    engines = {"user": TallyEngine}
'''


def test_a_new_simulator_is_one_module_for_its_lanes_and_simulate(tmp_path, results_dir):
    env, _ = _demo_tree(tmp_path, {"tally": {"machine": "x86-2012-server",
                                             "criterion": "as on the host: the kernel counts its additions"}},
                        {"tally.py": TALLY})

    # its lane: the engine's run loop pairs each sample with its region
    r = trapline("run", "zz-demo", "--platform", "tally", "--quick", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    run = (results_dir / "latest").resolve()
    e = json.loads((run / "entries" / "zz-demo.tally.json").read_text())
    assert (e["status"], e["reproduced"], e["platform_label"]) == ("reproduced", 8, "tally simulator")
    assert e["platform_facts"] == {}
    # each sample's time and counts are its region's: one cycle per addition at the machine's 2.6 GHz
    assert [g["variant"] for g in e["groups"]] == ["short", "long"]
    for g in e["groups"]:
        assert g["counts_per_op"]["cycles"] == 1.0 and g["median_ns_per_op"] == pytest.approx(1 / 2.6, rel=1e-3)

    # simulate: the engine's regions and total as the common statistics, resting on the one table
    prog = next((tmp_path / "cache" / "kernels").glob("x86_64-*/zz-demo/demo"))
    r = trapline("simulate", "--platform", "tally", "--machine", "x86-2012-server", "--format", "json", "--",
                 str(prog), "variant=long", "quick=1", "reps=3", "warmup=0", env=env)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert (s["platform"], s["mode"], s["time_kind"], s["exit_status"]) == ("tally", "user", "simulated", 0)
    assert [g["cycles"] for g in s["regions"]] == [80000] * 3 and s["total"]["cycles"] == 240000
    assert s["total"]["seconds"] == pytest.approx(240000 / 2.6e9)
    assert s["rests_on"] == {"seconds": "prediction", "cycles": "prediction"}


def test_a_lane_for_no_platform_is_named_with_the_valid_choices(tmp_path):
    env, kdir = _platform_tree(tmp_path)
    y = kdir / "zz-demo" / "experiment.yaml"
    data = yaml.safe_load(y.read_text())
    data["platforms"]["vax"] = data["platforms"].pop("ghost")
    y.write_text(yaml.safe_dump(data, sort_keys=False))
    r = trapline("list", env=env)
    assert r.returncode == 2
    assert ("platforms: unknown field 'vax'; valid fields: gem5, ghost, host, model, qemu, replica" in r.stderr), r.stderr


# ------------------------------------------------ no switch on a platform's name

def _platform_names() -> set[str]:
    return set(platforms.names())


def _compared_names(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """String constants that name a platform and are compared (==, !=, in, not in) with something."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        if any(isinstance(o, ast.Attribute) and o.attr == "command" for o in [node.left, *node.comparators]):
            continue  # a command's name (./run.sh gem5 writes a machine for gem5), not a platform's
        for operand in [node.left, *node.comparators]:
            consts = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            out += [(node.lineno, c.value) for c in consts
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in names]
    return out


def test_no_module_outside_platforms_switches_on_a_platform_name():
    names = _platform_names() | {"gem5"}
    found = []
    for f in sorted((ROOT / "trapline").rglob("*.py")):
        if "platforms" in f.relative_to(ROOT / "trapline").parts:
            continue
        found += [f"{f.relative_to(ROOT)}:{line}: {name}" for line, name in _compared_names(ast.parse(f.read_text()),
                                                                                          names)]
    assert not found, "compare with a platform's name; ask the platform instead:\n" + "\n".join(found)
    # and the check can fail: it finds the switch the runner used to have
    assert _compared_names(ast.parse('if pname == "host" or p in ("model", "qemu"): pass'), names) == [
        (1, "host"), (1, "model"), (1, "qemu")]


# ------------------------------------------------ trapline's modules as layers

# trapline read as layers, lowest first: a module imports modules of its own layer or of
# layers below it, never above (a name covers the module and, for a package, all in it;
# the longest name that covers a module decides its layer).
LAYERS = (
    ("foundations", ("trapline", "trapline.errors", "trapline.paths", "trapline.proc", "trapline.yamlfile")),
    ("facts", ("trapline.arch", "trapline.hostfacts", "trapline.kernelargs", "trapline.kernelio",
               "trapline.perfstat", "trapline.simstats", "trapline.program", "trapline.results",
               "trapline.runfiles", "trapline.checked", "trapline.eta")),
    ("machines", ("trapline.machine",)),
    ("builds", ("trapline.build", "trapline.images", "trapline.imagebuilders", "trapline.guest")),
    ("run context", ("trapline.context",)),
    ("platform protocol", ("trapline.platforms", "trapline.platforms.base", "trapline.platforms.engine")),
    ("platforms", ("trapline.platforms.host", "trapline.platforms.qemu", "trapline.platforms.model",
                   "trapline.platforms.gem5")),
    ("experiments", ("trapline.experiment", "trapline.analysis", "trapline.entry")),
    ("report", ("trapline.report",)),
    ("runs", ("trapline.runner", "trapline.simulate", "trapline.cite")),
    ("runs of runs", ("trapline.sweep", "trapline.sensitivity", "trapline.bundle")),
    ("command line", ("trapline.cli", "trapline.__main__")),
)


def layer_of(module: str) -> int:
    """The index in LAYERS of the layer that holds module (the longest name covering it)."""
    best = max(((len(n), i) for i, (_, names) in enumerate(LAYERS) for n in names
                if module == n or module.startswith(n + ".")), default=None)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (tests/test_11_platforms.py)")
    return best[1]


def import_graph(root: Path) -> dict[str, set[str]]:
    """trapline's modules and the trapline modules each imports: at module level, inside a
    function, or only for the type checker (under `if TYPE_CHECKING`: a reader and a checker
    follow it as they follow any import); `from pkg import sub` is an edge to pkg.sub, and
    an import of a module of another package is an edge to that package's __init__ too
    (Python runs it first: machine -> platforms.model.plugin runs platforms.model)."""
    pkg = root / "trapline"
    mods = {}
    for f in pkg.rglob("*.py"):
        parts = list(f.relative_to(root).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    def runs(m: str, target: str) -> set[str]:
        """target and the packages Python imports on the way to it that m is not inside of."""
        out, parts = {target}, target.split(".")
        for i in range(2, len(parts)):
            p = ".".join(parts[:i])
            if p in mods and not (m == p or m.startswith(p + ".")):
                out.add(p)
        return out

    graph: dict[str, set[str]] = {}
    for m, f in mods.items():
        tree = ast.parse(f.read_text())
        edges = set()
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                           for a in node.names]
            edges |= {x for t in targets if t.startswith("trapline") for r in [resolve(t)] if r
                      for x in runs(m, r) if x != m}
        graph[m] = edges
    return graph


def upward(graph: dict[str, set[str]]) -> list[str]:
    """The imports that run from a lower layer up to a higher one, as 'a -> b'."""
    return sorted(f"{a} -> {b}" for a, bs in graph.items() for b in bs if layer_of(b) > layer_of(a))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_harness_has_no_import_circle():
    graph = import_graph(ROOT)
    assert {"trapline.paths", "trapline.build", "trapline.experiment", "trapline.platforms.model.plugin"} <= set(graph)
    assert graph["trapline.paths"] == set()  # where things are imports nothing of trapline's
    assert cycles(graph) == []
    # the check can fail: the circle build -> experiment -> plugin -> build of before
    assert cycles({"a.build": {"a.experiment"}, "a.experiment": {"a.plugin"}, "a.plugin": {"a.build"}}) == [
        ["a.build", "a.experiment", "a.plugin"]]


def test_no_import_runs_up_a_layer():
    graph = import_graph(ROOT)
    assert upward(graph) == [], "an import from a lower layer up to a higher one (LAYERS)"
    # the machines import no platform
    assert not any(b.startswith("trapline.platforms") for a, bs in graph.items() if a.startswith("trapline.machine")
                   for b in bs)
    # the checks can fail: the machine package importing the model's option table of before
    # is an upward import and, through the package Python runs first, a circle
    before = {"trapline.machine": {"trapline.platforms.model.plugin"}}
    assert import_graph_edges_of_plugin_import() >= {"trapline.platforms.model.plugin", "trapline.platforms.model"}
    assert upward(before) == ["trapline.machine -> trapline.platforms.model.plugin"]
    assert cycles({"trapline.machine": {"trapline.platforms.model", "trapline.platforms.model.plugin"},
                   "trapline.platforms.model": {"trapline.machine"}}) == [
        ["trapline.machine", "trapline.platforms.model"]]
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("trapline_elsewhere")


def import_graph_edges_of_plugin_import() -> set[str]:
    """What import_graph makes of `from trapline.platforms.model import plugin` in a module
    of the machine package (a throwaway tree of empty modules)."""
    return _throwaway_graph({"trapline/machine/__init__.py": "def f():\n    from trapline.platforms.model import plugin\n",
                             "trapline/platforms/__init__.py": "", "trapline/platforms/model/__init__.py": "",
                             "trapline/platforms/model/plugin.py": ""})["trapline.machine"]


def _throwaway_graph(files: dict[str, str]) -> dict[str, set[str]]:
    """import_graph of a throwaway tree: trapline/__init__.py and `files` (path -> source)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for f, text in {"trapline/__init__.py": "", **files}.items():
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text(text)
        return import_graph(root)


def test_type_only_and_function_level_imports_count():
    """An import only the type checker follows, or one inside a function, is an edge like any
    other: the circle between the image builders and the run context of before (a type-only
    import back up a layer) is found, and so is the function-level import of the platform
    registry that base.py had."""
    graph = _throwaway_graph({
        "trapline/context.py": "from trapline import imagebuilders\n",
        "trapline/imagebuilders/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from trapline.context import RunContext\n",
        "trapline/platforms/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from trapline.platforms.base import Platform\n",
        "trapline/platforms/base.py": "def check():\n    from trapline import platforms\n"})
    assert graph["trapline.imagebuilders"] == {"trapline.context"}
    assert graph["trapline.platforms.base"] == {"trapline.platforms"}
    assert sorted(cycles(graph)) == [["trapline.context", "trapline.imagebuilders"],
                                     ["trapline.platforms", "trapline.platforms.base"]]
    assert upward(graph) == ["trapline.imagebuilders -> trapline.context"]


def test_root_is_defined_once():
    defs = [f"{f.relative_to(ROOT)}" for f in (ROOT / "trapline").rglob("*.py")
            if re.search(r"^ROOT\s*=", f.read_text(), re.M)]
    assert defs == ["trapline/paths.py"]


def test_a_run_made_before_platform_report_keeps_its_column_order():
    """An old run directory (its manifest has no platform_report): the columns follow what
    the entries rest on (a measurement, a functional count, then modelled figures), as the
    old fixed order did, and each platform's manifest facts are one line."""
    from trapline.entry import Entry
    from trapline.report import sections

    def entry(platform, label, rests_on):
        return Entry(id="x", platform=platform, catalogue="E1", description="d", metric="m", unit="x",
                     claimed=None, reproduced=None, status="not-applicable", note="n", platform_label=label,
                     rests_on=rests_on)
    es = [entry("model", "timing model", None), entry("model", "timing model", "prediction"),
          entry("host", "host", "measurement"), entry("qemu", "QEMU-functional", "functional count")]
    manifest = {"platforms": {"host": {"cpu": "Z80", "cores": 1}, "qemu": {"sparc64": {"qemu": "7.2"}}}}
    info = sections.platform_report(manifest, es)
    assert sections.platforms_in(es, info) == ["host", "qemu", "model"]
    assert sections.platform_lines(manifest, es) == ["host: cpu Z80; cores 1", "QEMU-functional: sparc64 (manifest.json)"]
    # a run that wrote platform_report is drawn as it says
    manifest["platform_report"] = {"model": {"column": 1, "lines": ["m"]}, "host": {"column": 2, "lines": ["h"]},
                                   "qemu": {"column": 3, "lines": []}}
    info = sections.platform_report(manifest, es)
    assert sections.platforms_in(es, info) == ["model", "host", "qemu"]
    assert sections.platform_lines(manifest, es) == ["h", "m"]


def test_a_command_that_runs_no_gem5_loads_no_gem5_engine():
    """Every command that runs experiments loads every platform for its options; gem5's
    engine module (its run, machine export and parameter tables) is imported only when a
    gem5 engine is asked for (base.Engines), so `simulate` on the model does not pay for it
    (start-up, docs/performance.md)."""
    import subprocess
    import sys
    code = ("import sys; from trapline import cli, platforms; cli.parser('simulate'); "
            "e = 'trapline.platforms.gem5.engine'; print(e in sys.modules); "
            "cls = platforms.all()['gem5'].engines['se']; print(e in sys.modules, cls.__name__, "
            "list(platforms.all()['gem5'].engines), list(platforms.all()['model'].engines))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["False", "True Gem5Engine ['se'] ['user', 'guest']"]
