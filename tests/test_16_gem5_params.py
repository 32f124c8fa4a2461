"""The gem5 side of the machine descriptions (gem5_configs/trapline_gem5/,
gem5_configs/run_se.py, trapline/gem5.py).

trapline writes the typed machine as JSON (trapline.gem5.export: every number
in bytes, Hz or cycles); params.py maps that JSON, as run_se.py does inside gem5.

gem5 is not installed here, so: the parameters are checked against the
machines' own converted values; every machine field is either mapped to a gem5
parameter or noted; the JSON round-trips; the gem5-side files compile and
import only names verified in gem5's sources (VERIFIED_GEM5_API below); and
the gem5-side classes are run against stand-ins generated from that same list,
which catches wiring mistakes (a name not in the list cannot even be imported).
"""

import ast
import enum
import json
import py_compile
import subprocess
import sys
import types
from pathlib import Path

import pytest

from trapline import gem5 as G
from trapline import machine as M
from trapline.plugin import args as plugin_args

ROOT = Path(__file__).resolve().parent.parent
GEM5_CONFIGS = ROOT / "gem5_configs"
PKG = GEM5_CONFIGS / "trapline_gem5"
sys.path.insert(0, str(GEM5_CONFIGS))

from trapline_gem5 import params as P  # noqa: E402

MACHINES = ["arm1176-rpi1", "generic-2020s-x86", "ultrasparc-iv-plus", "ultrasparc-t1", "x86-2012-server"]
GEM5_SIDE = [PKG / "cache_hierarchy.py", PKG / "memory.py", PKG / "board.py", GEM5_CONFIGS / "run_se.py"]
PURE = [PKG / "params.py", PKG / "__init__.py"]

# Every gem5/m5 name the gem5-side files import, with the gem5 source file that
# defines it (looked up in the gem5 repository, v23/v24 stdlib).
VERIFIED_GEM5_API = {
    "m5": {"options": "src/python/m5/main.py (options.outdir, read by configs/example/gem5_library scripts)"},
    "m5.objects": {
        "Cache": "src/mem/cache/Cache.py",
        "LRURP": "src/mem/cache/replacement_policies/ReplacementPolicies.py",
        "L2XBar": "src/mem/XBar.py",
        "SystemXBar": "src/mem/XBar.py",
        "BaseXBar": "src/mem/XBar.py",
        "BadAddr": "src/dev/Device.py",
        "Port": "src/python/m5/params.py (imported from m5.objects by abstract_classic_cache_hierarchy.py)",
    },
    "m5.util": {"warn": "src/python/m5/util/__init__.py (imported by simple_processor.py)"},
    "gem5.components.boards.abstract_board": {"AbstractBoard": "src/python/gem5/components/boards/abstract_board.py"},
    "gem5.components.boards.simple_board": {"SimpleBoard": "src/python/gem5/components/boards/simple_board.py"},
    "gem5.components.cachehierarchies.abstract_cache_hierarchy": {
        "AbstractCacheHierarchy": "src/python/gem5/components/cachehierarchies/abstract_cache_hierarchy.py"},
    "gem5.components.cachehierarchies.classic.abstract_classic_cache_hierarchy": {
        "AbstractClassicCacheHierarchy":
            "src/python/gem5/components/cachehierarchies/classic/abstract_classic_cache_hierarchy.py"},
    "gem5.components.cachehierarchies.classic.caches.mmu_cache": {
        "MMUCache": "src/python/gem5/components/cachehierarchies/classic/caches/mmu_cache.py"},
    "gem5.components.memory.simple": {
        "SingleChannelSimpleMemory": "src/python/gem5/components/memory/simple.py"},
    "gem5.components.processors.cpu_types": {"CPUTypes": "src/python/gem5/components/processors/cpu_types.py"},
    "gem5.components.processors.simple_processor": {
        "SimpleProcessor": "src/python/gem5/components/processors/simple_processor.py"},
    "gem5.isas": {"ISA": "src/python/gem5/isas.py"},
    "gem5.resources.resource": {"BinaryResource": "src/python/gem5/resources/resource.py"},
    "gem5.simulate.simulator": {"Simulator": "src/python/gem5/simulate/simulator.py"},
    "gem5.utils.override": {"overrides": "src/python/gem5/utils/override.py"},
}
STDLIB_OK = {"argparse", "os", "sys", "typing", "json", "math", "re", "dataclasses", "__future__"}


def load(name, sets=()):
    return M.load(name, list(sets))


def typed(m) -> dict:
    """The typed machine as run_se.py reads it: trapline's export, through JSON."""
    return json.loads(json.dumps(G.export(m)))


def gem5_params(m) -> "P.Gem5Params":
    return P.from_machine(typed(m))


@pytest.fixture(scope="module")
def machines():
    return {n: load(n) for n in MACHINES}


def gem5_memory_size(text: str) -> int:
    """gem5's m5.util.convert.toMemorySize: binary prefixes (k and Ki = 1024)."""
    prefixes = {"Gi": 1024 ** 3, "G": 1024 ** 3, "Mi": 1024 ** 2, "M": 1024 ** 2, "Ki": 1024, "k": 1024}
    assert text.endswith("B"), text
    body = text[:-1]
    for p, mult in prefixes.items():
        if body.endswith(p):
            return int(body[: -len(p)]) * mult
    return int(body)


def gem5_metric(text: str, unit: str) -> float:
    """gem5's toFrequency / toLatency: metric prefixes."""
    prefixes = {"G": 1e9, "M": 1e6, "k": 1e3, "m": 1e-3, "u": 1e-6, "n": 1e-9, "p": 1e-12}
    assert text.endswith(unit), text
    body = text[: -len(unit)]
    if body and body[-1] in prefixes:
        return float(body[:-1]) * prefixes[body[-1]]
    return float(body)


# ------------------------------------------------------------------ the numbers

@pytest.mark.parametrize("name", MACHINES)
def test_params_equal_the_machines_converted_values(machines, name):
    m = machines[name]
    p = gem5_params(m)
    assert p.machine == name and p.arch == m.arch
    assert p.isa == {"x86_64": "X86", "sparc64": "SPARC", "armv6": "ARM"}[m.arch]
    assert p.clock_hz == m.clock_hz and gem5_metric(p.clock, "Hz") == pytest.approx(m.clock_hz)
    assert p.cache_line_size == m.bytes("caches.l1d.line")
    plugin = dict(a.split("=", 1) for a in plugin_args(m))
    levels = [lv for lv in ("l1i", "l1d", "l2", "l3") if m.has(f"caches.{lv}")]
    assert [c.level for c in p.caches()] == levels
    for c in p.caches():
        at = f"caches.{c.level}"
        assert c.size_bytes == m.bytes(f"{at}.size") == gem5_memory_size(c.size)
        assert c.line_bytes == m.bytes(f"{at}.line")
        assert c.latency_cycles == m.icycles(f"{at}.latency")
        if m.raw(f"{at}.assoc") == "full":
            assert c.assoc == c.size_bytes // p.cache_line_size
        else:
            assert c.assoc == m.ways(at)
        # one set at least, a power-of-two number of them at gem5's line size
        sets = c.size_bytes // (c.assoc * p.cache_line_size)
        assert sets >= 1 and sets & (sets - 1) == 0
        assert c.replacement_policy == "LRURP"
        if c.level in ("l1i", "l1d", "l2"):  # the plugin's options agree too
            assert int(plugin[f"{c.level}_size"]) == c.size_bytes
            assert int(plugin[f"{c.level}_lat"]) == c.latency_cycles
    assert p.memory.latency_cycles == m.icycles("memory.latency") == int(plugin["mem_lat"])
    assert p.tlb.itb_size == m.raw("tlb.itlb.entries") and p.tlb.dtb_size == m.raw("tlb.dtlb.entries")
    assert p.tlb.page_bytes == m.bytes("tlb.dtlb.page")
    if m.has("numa"):
        assert p.numa.nodes == m.raw("numa.nodes") and p.numa.latency_cycles == m.numa_cycles()
    else:
        assert p.numa is None


@pytest.mark.parametrize("name", MACHINES)
def test_latencies_add_up_to_the_machines_load_to_use(machines, name):
    """A hit at L1 costs data_latency; below, the path (upper levels' tag and
    response latencies, crossbars) plus data_latency is the machine's figure,
    and memory's path plus SimpleMemory.latency is memory.latency."""
    p = gem5_params(machines[name])
    for c in (p.l1i, p.l1d):
        assert max(c.tag_latency, c.data_latency) == c.latency_cycles
    path, up = 0, p.l1d
    for c in [c for c in (p.l2, p.l3) if c is not None]:
        path += (up.tag_latency + up.response_latency + p.cache_bus.request_cycles()
                 + p.cache_bus.response_cycles(p.cache_line_size))
        assert path + c.data_latency == c.latency_cycles, c.level
        assert c.data_latency >= c.tag_latency
        up = c
    path += up.tag_latency + up.response_latency + p.membus.request_cycles() + p.membus.response_cycles(p.cache_line_size)
    assert p.memory.path_cycles == path
    assert path + p.memory.module_latency_cycles == p.memory.latency_cycles
    ps = gem5_metric(p.memory.latency, "s") * 1e12
    assert abs(ps - p.memory.module_latency_cycles / p.clock_hz * 1e12) <= 0.5


def test_clamped_latency_is_noted_not_hidden():
    m = load("x86-2012-server", ["caches.l2.latency=6cycles"])
    p = gem5_params(m)
    assert p.l2.data_latency == p.l2.tag_latency
    assert P.Note in map(type, p.notes_for("caches.l2.latency"))
    assert "not 6" in p.notes_for("caches.l2.latency")[0].text


# ------------------------------------------------------------------ --set and the JSON

def run_export(*args):
    return subprocess.run([sys.executable, "-m", "trapline.gem5", *args], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)


def test_a_set_shows_up_in_the_json(tmp_path):
    out = tmp_path / "m.json"
    r = run_export("--machine", "x86-2012-server", "--set", "caches.l1d.line=32B",
                   "--set", "caches.l1d.size=64kB", "-o", str(out))
    assert r.returncode == 0, r.stderr
    d = P.from_machine(json.loads(out.read_text())).to_dict()
    assert d["sets"] == ["caches.l1d.line=32B", "caches.l1d.size=64kB"]
    assert d["l1d"]["size"] == "64KiB" and d["l1d"]["size_bytes"] == 65536
    assert d["l1d"]["line_bytes"] == 32 and d["cache_line_size"] == 32
    # gem5 has one line size: the 64-byte levels are now noted by field name
    noted = {n["field"] for n in d["notes"]}
    assert {"caches.l1i.line", "caches.l2.line", "caches.l3.line"} <= noted
    # and the plain export differs
    plain = P.from_machine(json.loads(run_export("--machine", "x86-2012-server").stdout)).to_dict()
    assert plain["l1d"]["size_bytes"] == 32768 and plain["cache_line_size"] == 64 and plain["sets"] == []


def test_write_through_l1_is_noted_by_field_name(machines):
    p = gem5_params(machines["ultrasparc-iv-plus"])
    assert M.load("ultrasparc-iv-plus").raw("caches.l1d.write") == "write-through"
    notes = p.notes_for("caches.l1d.write")
    assert len(notes) == 1 and notes[0].value == "write-through"
    assert "write-through" in notes[0].text and "write-back" in notes[0].text
    assert "caches.l1d.write" not in p.mapped
    x86 = gem5_params(machines["x86-2012-server"])
    assert not x86.notes_for("caches.l1d.write") and "caches.l1d.write" in x86.mapped


def test_qemu_model_only_fields_are_noted(machines):
    p = gem5_params(machines["x86-2012-server"])
    for f in ("numa.nodes", "numa.latency_ns", "atomics.split_lock_cost", "atomics.lock_cost", "unaligned.w8",
              "unaligned.line_cross_penalty", "prefetch.semantics", "traps.cost", "tlb.stlb.entries", "cpi"):
        assert p.notes_for(f), f
    t1 = gem5_params(machines["ultrasparc-t1"])
    assert t1.notes_for("windows.spill_fill_cost") and "windows.count" in t1.mapped  # NWindows = 8 in gem5
    assert not gem5_params(load("ultrasparc-t1", ["windows.count=16"])).mapped.get("windows.count")


@pytest.mark.parametrize("name", MACHINES)
def test_every_field_is_mapped_or_noted_on_purpose(machines, name):
    m = machines[name]
    p = gem5_params(m)
    assert P.uncovered(p, typed(m)) == []
    fallback = [n.field for n in p.notes if n.text.startswith("not used by the gem5 configuration")]
    assert fallback == [], f"fields no rule handles: {fallback}"
    # every field of the machine appears, and nothing else
    assert set(p.mapped) | {n.field for n in p.notes} == set(P.leaves(typed(m)))


def test_an_unknown_field_is_noted_not_dropped(machines):
    data = typed(machines["arm1176-rpi1"])
    data["fields"]["caches.l1d.banks"] = {"text": 4}
    p = P.from_machine(data)
    assert [n.value for n in p.notes_for("caches.l1d.banks")] == [4]


@pytest.mark.parametrize("name", MACHINES)
def test_json_round_trips(machines, name):
    p = gem5_params(machines[name])
    text = p.to_json()
    assert P.Gem5Params.from_json(text) == p
    assert json.loads(text) == json.loads(P.from_machine(json.loads(json.dumps(G.export(machines[name])))).to_json())
    assert P.Gem5Params.from_json(json.dumps(json.loads(text))).to_json() == text


def test_params_takes_only_the_typed_machine_json(machines):
    """params.py parses no unit: it refuses anything but trapline's typed JSON, naming it."""
    m = machines["x86-2012-server"]
    for bad in (m, m.data):
        with pytest.raises(P.ParamsError, match="typed machine JSON written by python -m trapline.gem5"):
            P.from_machine(bad)
    d = typed(m)
    d["format"] = 99
    with pytest.raises(P.ParamsError, match="format 99"):
        P.from_machine(d)
    t = typed(m)["fields"]
    assert t["memory.latency"] == {"text": "90ns", "kind": "time", "value": m.cycles("memory.latency")}
    assert t["numa.latency_ns"]["value"] == [[m.cycles(f"numa.latency_ns[{i}][{j}]") for j in (0, 1)] for i in (0, 1)]
    assert t["clock"]["value"] == m.clock_hz and t["caches.l1d.assoc"] == {"text": 8, "kind": "ways", "value": 8}


def test_json_of_another_format_is_refused(machines):
    d = gem5_params(machines["arm1176-rpi1"]).to_dict()
    d["format"] = 99
    with pytest.raises(P.ParamsError, match="format"):
        P.Gem5Params.from_dict(d)


# ------------------------------------------------------------------ the command

def test_unknown_machine_exits_2_naming_the_machines():
    r = run_export("--machine", "nope")
    assert r.returncode == 2
    with pytest.raises(M.MachineError) as e:
        M.load("nope")
    assert r.stderr.strip() == f"trapline: error: {e.value}"
    for n in MACHINES:
        assert n in r.stderr


def test_bad_set_exits_2_with_machine_loads_error():
    r = run_export("--machine", "ultrasparc-t1", "--set", "caches.l1d.line=48B")
    assert r.returncode == 2
    with pytest.raises(M.MachineError) as e:
        M.load("ultrasparc-t1", ["caches.l1d.line=48B"])
    assert r.stderr.strip() == f"trapline: error: {e.value}"
    assert run_export().returncode == 2  # --machine is required
    assert r.stdout == ""


# ------------------------------------------------------------------ the gem5-side files

def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None, 0
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                yield node.module or "", a.name, node.level


@pytest.mark.parametrize("path", GEM5_SIDE + PURE, ids=lambda p: p.name)
def test_files_compile(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "x.pyc"), doraise=True)


@pytest.mark.parametrize("path", GEM5_SIDE, ids=lambda p: p.name)
def test_gem5_side_imports_only_verified_gem5_names(path):
    used = set()
    for mod, name, level in _imports(path):
        if level:  # relative: the package's own modules
            assert mod in ("params", "cache_hierarchy", "memory", "board"), mod
        elif mod.startswith(("gem5", "m5")) or mod == "m5":
            if name is None:
                assert mod in VERIFIED_GEM5_API, mod
            else:
                assert name in VERIFIED_GEM5_API.get(mod, {}), f"{mod}.{name} is not in VERIFIED_GEM5_API"
            used.add(mod)
        elif mod.startswith("trapline_gem5"):
            assert path.name == "run_se.py"
        else:
            assert mod.split(".")[0] in STDLIB_OK, mod
    assert used, "a gem5-side file that imports no gem5"


@pytest.mark.parametrize("path", PURE, ids=lambda p: p.name)
def test_params_imports_no_gem5_and_no_trapline(path):
    for mod, _name, level in _imports(path):
        assert not level and mod.split(".")[0] in STDLIB_OK, mod


# ------------------------------------------------------------------ stand-ins for gem5

class _Port:
    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    def __repr__(self):
        return f"{self.owner._label}.{self.name}"


class _SimObject:
    """Keyword parameters become attributes; ports appear on first use; assigning
    to a port records a connection (vector ports keep every peer)."""
    _port_names = ("cpu_side", "mem_side", "cpu_side_ports", "mem_side_ports", "pio", "port", "default")

    def __init__(self, **kw):
        object.__setattr__(self, "_label", type(self).__name__)
        object.__setattr__(self, "_peers", {})
        for k, v in kw.items():
            setattr(self, k, v)

    def __getattr__(self, name):
        if name in self._port_names:
            return _Port(self, name)
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if name in self._port_names:
            self._peers.setdefault(name, []).append(value)
        else:
            object.__setattr__(self, name, value)


def _fake_gem5():
    """Modules named in VERIFIED_GEM5_API, holding only the verified names."""
    class ISA(enum.Enum):
        X86 = "x86"
        RISCV = "riscv"
        ARM = "arm"
        MIPS = "mips"
        POWER = "power"
        SPARC = "sparc"
        NULL = "null"

    class CPUTypes(enum.Enum):
        ATOMIC = "atomic"
        KVM = "kvm"
        O3 = "o3"
        TIMING = "timing"
        MINOR = "minor"

    class Cache(_SimObject):
        pass

    class SnoopFilter(_SimObject):
        pass

    class BaseXBar(_SimObject):
        def __init__(self, **kw):
            super().__init__(snoop_filter=SnoopFilter(max_capacity="8MiB"), **kw)

    class L2XBar(BaseXBar):
        pass

    class SystemXBar(BaseXBar):
        pass

    class LRURP(_SimObject):
        pass

    class BadAddr(_SimObject):
        pass

    class MMUCache(Cache):
        def __init__(self, size, assoc=4):
            super().__init__(size=size, assoc=assoc)

    class Port:
        pass

    def overrides(base):
        def check(f):
            assert hasattr(base, f.__name__), f"{f.__name__} overrides nothing in {base.__name__}"
            return f
        return check

    class AbstractCacheHierarchy(_SimObject):
        def incorporate_cache(self, board):
            raise NotImplementedError

    class AbstractClassicCacheHierarchy(AbstractCacheHierarchy):
        def __init__(self):
            super().__init__()

        def get_mem_side_port(self):
            raise NotImplementedError

        def get_cpu_side_port(self):
            raise NotImplementedError

        def is_ruby(self):
            return False

    class TLB(_SimObject):
        pass

    class MMU(_SimObject):
        walkers = ["mmu.itb.walker.port", "mmu.dtb.walker.port"]

        def __init__(self, isa):
            super().__init__(itb=TLB(size=64), dtb=TLB(size=64))
            if isa == ISA.ARM:
                self.l2_shared = TLB(size=1280)

        @classmethod
        def walkerPorts(cls):
            return cls.walkers

    class SparcMMU(MMU):
        walkers = []

    class Core:
        def __init__(self, isa, cpu_type):
            self.isa = isa
            self.mmu = (SparcMMU if isa == ISA.SPARC else MMU)(isa)
            self.links = {}
            self.cpu = _SimObject(fetchBufferSize=64) if cpu_type == CPUTypes.O3 else _SimObject()

        def get_mmu(self):
            return self.mmu

        def get_simobject(self):
            return self.cpu

        def connect_icache(self, port):
            self.links["icache"] = port

        def connect_dcache(self, port):
            self.links["dcache"] = port

        def connect_walker_ports(self, p1, p2):
            self.links["walkers"] = (p1, p2)

        def connect_interrupt(self, req=None, resp=None):
            self.links["interrupt"] = (req, resp)

        def set_workload(self, process):
            self.workload = process

    class SimpleProcessor:
        def __init__(self, cpu_type, num_cores, isa):
            assert isinstance(cpu_type, CPUTypes) and isinstance(isa, ISA)
            self.cpu_type, self._isa = cpu_type, isa
            self._cores = [Core(isa, cpu_type) for _ in range(num_cores)]

        def get_cores(self):
            return self._cores

        def get_isa(self):
            return self._isa

    class SingleChannelSimpleMemory(_SimObject):
        def __init__(self, latency, latency_var, bandwidth, size):
            super().__init__(latency=latency, latency_var=latency_var, bandwidth=bandwidth, size=size)

        def get_mem_ports(self):
            return [("range", _Port(self, "port"))]

    class AbstractBoard:
        pass

    class SimpleBoard(AbstractBoard):
        def __init__(self, clk_freq, processor, memory, cache_hierarchy):
            self.clk_freq, self.processor, self.memory = clk_freq, processor, memory
            self.cache_hierarchy = cache_hierarchy
            self.cache_line_size = 64  # System's default

        def get_processor(self):
            return self.processor

        def get_memory(self):
            return self.memory

        def connect_system_port(self, port):
            self.system_port = port

        def has_coherent_io(self):
            return False

        def set_se_binary_workload(self, binary, exit_on_work_items=True, stdin_file=None, stdout_file=None,
                                   stderr_file=None, env_list=None, arguments=[], checkpoint=None):
            self.workload = (binary.get_local_path(), list(arguments))

        def _connect_things(self):
            self.cache_hierarchy.incorporate_cache(self)

    class BinaryResource:
        def __init__(self, local_path, **kw):
            assert Path(local_path).is_file()
            self._local_path = local_path

        def get_local_path(self):
            return self._local_path

    class Simulator:
        last = None

        def __init__(self, board, **kw):
            self.board = board
            Simulator.last = self

        def run(self):
            self.board._connect_things()

        def get_current_tick(self):
            return 1000

        def get_last_exit_event_cause(self):
            return "exiting with last active thread context"

    found = dict(locals())
    found["options"] = types.SimpleNamespace(outdir="m5out")
    found["warn"] = lambda msg: print("warn:", msg)
    mods = {}
    for mod, names in VERIFIED_GEM5_API.items():
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):
            mods.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
        for n in names:
            setattr(mods[mod], n, found[n])
    for name, mod in mods.items():  # parents expose children (m5.objects, m5.util)
        if "." in name:
            parent, _, child = name.rpartition(".")
            setattr(mods[parent], child, mod)
    return mods


@pytest.fixture
def fake_gem5(monkeypatch):
    mods = _fake_gem5()
    for name in [k for k in sys.modules if k.split(".")[0] in ("gem5", "m5")]:
        monkeypatch.delitem(sys.modules, name)
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    side = ("trapline_gem5.board", "trapline_gem5.cache_hierarchy", "trapline_gem5.memory")
    yield mods
    for name in side:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("name", MACHINES)
def test_board_built_against_stand_ins(fake_gem5, machines, name):
    import importlib
    board_mod = importlib.import_module("trapline_gem5.board")
    p = P.Gem5Params.from_json(gem5_params(machines[name]).to_json())
    o3 = fake_gem5["gem5.components.processors.cpu_types"].CPUTypes.O3
    board = board_mod.TraplineBoard(p, cpu_type=o3)
    # O3's 64-byte fetch buffer follows a shorter line
    assert board.get_processor().get_cores()[0].cpu.fetchBufferSize == min(64, p.cache_line_size)
    assert board.clk_freq == p.clock and board.cache_line_size == p.cache_line_size
    assert board.memory.latency == p.memory.latency and board.memory.size == "512MiB"
    core = board.get_processor().get_cores()[0]
    assert (core.mmu.itb.size, core.mmu.dtb.size) == (p.tlb.itb_size, p.tlb.dtb_size)
    if p.isa == "ARM":
        assert core.mmu.l2_shared.size == p.tlb.l2_size
    board._connect_things()
    h = board.cache_hierarchy
    built = h.levels()
    assert list(built) == [c.level for c in p.caches()]
    for c in p.caches():
        cache = built[c.level]
        for attr in ("size", "assoc", "tag_latency", "data_latency", "response_latency", "mshrs", "tgts_per_mshr",
                     "writeback_clean", "clusivity"):
            assert getattr(cache, attr) == getattr(c, attr), (c.level, attr)
        assert type(cache.replacement_policy).__name__ == "LRURP"
        assert not hasattr(cache, "prefetcher")  # no hardware prefetcher
    # top-down wiring: L1s -> (L2 bus -> L2 -> (L3 bus -> L3 ->)) membus -> memory
    last = built["l3"] if "l3" in built else built.get("l2")
    l1_bus = h.l2bus if "l2" in built else h.membus
    assert repr(built["l1d"]._peers["mem_side"][0]) == f"{type(l1_bus).__name__}.cpu_side_ports"
    if last is not None:
        assert repr(last._peers["mem_side"][0]) == "SystemXBar.cpu_side_ports"
    if "l3" in built:
        assert repr(built["l2"]._peers["mem_side"][0]) == "L2XBar.cpu_side_ports"
    assert [repr(x) for x in h.membus._peers["mem_side_ports"]] == ["TraplineMemory.port"]
    # every snoop filter holds at least the lines cached above it (gem5 panics past max_capacity)
    above = p.l1i.size_bytes + p.l1d.size_bytes
    buses = [("l2bus", p.l2), ("l3bus", p.l3)] if p.l2 is not None else []
    for bus_name, level in buses + [("membus", None)]:
        if bus_name == "l3bus" and p.l3 is None:
            continue
        bus = getattr(h, bus_name)
        assert gem5_memory_size(bus.snoop_filter.max_capacity) >= max(above, 8 * 1024 ** 2), bus_name
        above += level.size_bytes if level is not None else 0
    assert gem5_memory_size(h.membus.snoop_filter.max_capacity) >= sum(c.size_bytes for c in p.caches())
    assert (h.membus.width, h.membus.frontend_latency) == (p.membus.width, p.membus.frontend_latency)
    # page-walk caches only where the MMU has table walkers (not SPARC)
    assert hasattr(h, "iptw_cache") == (p.isa != "SPARC")
    assert ("walkers" in core.links) == (p.isa != "SPARC")


def test_run_se_runs_against_stand_ins(fake_gem5, tmp_path, capsys, monkeypatch):
    exe = tmp_path / "prog"
    exe.write_bytes(b"\x7fELF")
    js = tmp_path / "m.json"
    js.write_text(json.dumps(G.export(load("ultrasparc-t1"))))
    out = tmp_path / "m5out"
    fake_gem5["m5"].options.outdir = str(out)
    script = GEM5_CONFIGS / "run_se.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--params", str(js), "--cpu", "minor", "--", str(exe), "a", "b"])
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(compile(script.read_text(), str(script), "exec"), {"__file__": str(script), "__name__": "__m5_main__"})
    o = capsys.readouterr()
    assert o.out.strip() == str(out / "stats.txt")
    assert "not modelled by gem5: caches.l1d.write = write-through" in o.err
    sim = fake_gem5["gem5.simulate.simulator"].Simulator.last
    assert sim.board.workload == (str(exe), ["a", "b"])
    assert sim.board.get_processor().cpu_type.value == "minor"
    assert P.Gem5Params.from_json((out / "trapline-params.json").read_text()).machine == "ultrasparc-t1"


def test_run_sh_gem5_writes_the_same_json_as_the_module(tmp_path):
    """./run.sh gem5 is the module's export, with the CLI's error format."""
    from conftest import trapline
    out = tmp_path / "t1.json"
    r = trapline("gem5", "--machine", "ultrasparc-t1", "--set", "caches.l2.size=6MB", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out) and not out.with_name("t1.json.tmp").exists()
    d = json.loads(out.read_text())
    assert d["sets"] == ["caches.l2.size=6MB"] and P.from_machine(d).to_dict()["l2"]["size_bytes"] == 6 << 20
    # the typed machine: numbers in base units beside the text as written, and the ISA
    assert d["fields"]["caches.l2.size"] == {"text": "6MB", "kind": "size", "value": 6 << 20}
    assert d["fields"]["caches.l1d.write"] == {"text": "write-through"} and d["isa"] == "SPARC"
    assert d == json.loads(run_export("--machine", "ultrasparc-t1", "--set", "caches.l2.size=6MB").stdout)
    bad = trapline("gem5", "--machine", "ultrasparc-t1", "--set", "caches.l1d.line=48B", "-o", str(tmp_path / "x.json"))
    assert bad.returncode == 2 and "caches.l1d.line" in bad.stderr and not (tmp_path / "x.json").exists()
    unwritable = trapline("gem5", "--machine", "ultrasparc-t1", "-o", str(tmp_path / "no" / "dir" / "x.json"))
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr
