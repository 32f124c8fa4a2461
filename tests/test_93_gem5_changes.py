"""trapline's changes to gem5 (gem5_configs/changes/), each run for real on trapline's gem5.

With trapline's gem5 (`./run.sh gem5 build`, found by binary.for_tests: GEM5, trapline's
build for the current changes, PATH, the shared stock binary): a static glibc SPARC
program starts and its clocks, rusage and fstat are right (sparc-glibc); the three lanes
stock gem5 cannot run give figures: one bus lock per straddling locked add and the hold
in its time (bus-lock), every memory read of a buffer touched on node 0 served by node
0's memory at the remote latency (numa-first-touch), one trap per strong prefetch of
address 0 at the machine's trap cost and none for a weak one (sparc-prefetch); a misaligned
SPARC load or store of every size traps once and is completed as Linux's fixup would, and
sparc-misalign-trap's trap variant runs at the machine's traps.cost per trap
(sparc-unaligned-trap); the build has no Ruby and gem5's standard library runs on it, while a
Ruby protocol is still refused, and every SimObject and enum has its pybind11 wrapper though they are compiled
several to a unit (lean-build). Skipped, naming the change and `./run.sh gem5 build`, where the gem5
found lacks it.

With the stock gem5 in ../shared/gem5 (always, when it is there): those three lanes are
not-applicable and the reason names `./run.sh gem5 build`; a misaligned SPARC load is one
message naming the change and the command, not gem5's panic.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, trapline
from trapline import build, machine
from trapline.platforms.gem5 import binary, from_source

DATA = ROOT / "tests" / "data"
LANES = {"x86-split-lock": ["bus-lock"], "numa-first-touch": ["numa-first-touch"],
         "sparc-strong-prefetch": ["sparc-prefetch", "sparc-glibc"],
         "sparc-misalign-trap": ["sparc-unaligned-trap", "sparc-glibc"], "miss-overlap": ["prefetchers"]}


@pytest.fixture(scope="module")
def found_gem5():
    """The gem5 the tests take (binary.for_tests: never compiled here) and its facts."""
    try:
        g = binary.for_tests()
    except binary.Gem5Missing as e:
        pytest.skip(f"no gem5: {e}")
    return g, binary.facts(g)


def _needs(found, *changes) -> Path:
    """The found gem5 if it has trapline's `changes`, else a skip naming the ones it lacks and
    the command that builds them."""
    g, facts = found
    lacking = binary.lacking(facts, changes)
    if lacking:
        pytest.skip(f"needs trapline's gem5 with the change(s) {', '.join(lacking)}: build it with "
                    f"{binary.BUILD_IT} (found {binary.described(facts)})")
    return g


def _entry(results: Path, exp_id: str) -> dict:
    (path,) = (results / "latest" / "entries").glob(f"{exp_id}*gem5*.json")
    return json.loads(path.read_text())


def _figure(entry: dict, name: str):
    return next(f["value"] for f in entry["figures"] if f["name"] == name)


def _lane(exp_id: str, gem5: Path, results: Path) -> dict:
    r = trapline("run", exp_id, "--platform", "gem5", "--quick", "--gem5", str(gem5),
                 env={"TRAPLINE_RESULTS": str(results)}, timeout=3000)
    assert r.returncode == 0, r.stderr[-3000:]
    return _entry(results, exp_id)


# ------------------------------------------------------------------ stock gem5: the lanes say why not

def test_with_a_stock_gem5_the_lanes_that_need_changes_say_how_to_get_them(stock_gem5, tmp_path):
    results = tmp_path / "results"
    for exp_id, needs in LANES.items():
        r = trapline("run", exp_id, "--platform", "gem5", "--quick", "--gem5", str(stock_gem5),
                     env={"TRAPLINE_RESULTS": str(results)}, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        e = _entry(results, exp_id)
        assert e["status"] == "not-applicable", (exp_id, e["status"])
        why = json.dumps(e)
        assert "./run.sh gem5 build" in why and all(n in why for n in needs), exp_id
        assert "a stock gem5" in why


# ------------------------------------------------------------------ lean-build

REQUIRES_PROBE = """
from gem5.coherence_protocol import CoherenceProtocol
from gem5.isas import ISA
from gem5.utils.requires import requires
requires(isa_required=ISA.X86)
print("ISA-ACCEPTED", flush=True)
try:
    requires(coherence_protocol_required=CoherenceProtocol.MESI_TWO_LEVEL)
    print("PROTOCOL-ACCEPTED", flush=True)
except Exception as e:
    print("PROTOCOL-REFUSED", type(e).__name__, e, flush=True)
"""


def test_a_build_without_ruby_runs_the_stdlib_and_still_refuses_a_ruby_protocol(found_gem5, tmp_path):
    trapline_gem5 = _needs(found_gem5, "lean-build")
    assert found_gem5[1]["protocol"] == "", found_gem5[1]
    script = tmp_path / "requires_probe.py"
    script.write_text(REQUIRES_PROBE)
    r = subprocess.run([str(trapline_gem5), "-q", f"--outdir={tmp_path / 'm5out'}", str(script)],
                       capture_output=True, text=True, timeout=120)
    assert "ISA-ACCEPTED" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "PROTOCOL-ACCEPTED" not in r.stdout
    assert "PROTOCOL-REFUSED NotImplementedError Protocol '' not recognized." in r.stdout, r.stdout[-2000:]


WRAPPERS_PROBE = """
import inspect
import m5.objects
import m5.params
import m5.internal.params as p
from m5.SimObject import SimObject
types = sorted({c.__dict__["type"] for c in vars(m5.objects).values()
                if inspect.isclass(c) and issubclass(c, SimObject) and "type" in c.__dict__})
enums = sorted(n for n, e in m5.params.allEnums.items() if e not in (m5.params.Enum, m5.params.ScopedEnum))
missing = [t + "Params" for t in types if not hasattr(p, t + "Params")]
missing += ["enum_" + e for e in enums if not hasattr(p, "enum_" + e)]
print("WRAPPERS", len(types), len(enums), "MISSING", *missing, flush=True)
"""


def test_every_simobject_and_enum_has_its_pybind_wrapper_though_they_are_compiled_in_units(found_gem5, tmp_path):
    """lean-build compiles the generated pybind11 wrappers several to a unit, their static names renamed:
    one dropped or shadowed would leave its SimObject without a Params class in m5.internal.params."""
    trapline_gem5 = _needs(found_gem5, "lean-build")
    script = tmp_path / "wrappers_probe.py"
    script.write_text(WRAPPERS_PROBE)
    r = subprocess.run([str(trapline_gem5), "-q", f"--outdir={tmp_path / 'm5out'}", str(script)],
                       capture_output=True, text=True, timeout=120)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("WRAPPERS ")), None)
    assert line, r.stdout[-2000:] + r.stderr[-2000:]
    _, types, enums, _, *missing = line.split()
    assert missing == [], missing
    # the classic caches, the CPUs, the devices and trapline's extras: several hundred SimObjects
    # (412 on the stock build with Ruby), and the enums their parameters use
    assert int(types) >= 300 and int(enums) >= 25, line


# ------------------------------------------------------------------ sparc-glibc

def test_a_static_glibc_sparc_program_starts_and_its_clocks_are_right(found_gem5, tmp_path):
    trapline_gem5 = _needs(found_gem5, "sparc-glibc")
    from trapline.platforms.gem5 import run
    prog = tmp_path / "probe"
    cc = build.ARCHES["sparc64"].cc
    subprocess.run([cc, "-O2", "-static", "-o", str(prog), str(DATA / "sparc_glibc_probe.c")], check=True)
    g = run.simulate(machine.load("ultrasparc-t1"), [str(prog)], cpu="timing", gem5=trapline_gem5)
    assert g.error is None and g.status == 0, (g.error, g.stderr[-2000:])
    kv = dict(w.split("=", 1) for w in g.stdout.split())
    assert kv["rusage"] == "0" and kv["tod"] == "0" and kv["fstat"] == "0"
    assert kv["spin"] == str(sum(range(200000)))
    assert kv["res_ns"] == "1" and int(kv["elapsed_ns"]) > 0
    # getrusage gives gem5's elapsed simulated time: its microseconds must be in the
    # 32-bit tv_usec of sparc64's timeval, not in its padding (which read 0 before)
    usec = int(kv["utime_s"]) * 1_000_000 + int(kv["utime_us"])
    assert 0 < int(kv["utime_us"]) < 1_000_000
    assert usec * 1000 >= int(kv["elapsed_ns"])  # the whole run so far, the timed loop included
    assert 0 <= int(kv["tv_usec"]) < 1_000_000


def test_the_sparc_lanes_run_glibc_builds_on_trapline_gem5(found_gem5):
    trapline_gem5 = _needs(found_gem5, "sparc-glibc")
    from trapline.platforms.gem5.engine import kernel_flavour
    assert kernel_flavour("sparc64", binary.facts(trapline_gem5)) == "gem5"
    prog = build.build("sparc64", flavour="gem5") / "sparc-spill-fill" / "spill-fill"
    syms = subprocess.run([build.ARCHES["sparc64"].objdump, "-t", str(prog)], capture_output=True, text=True,
                          check=True).stdout
    assert "__libc_start_main" in syms


# ------------------------------------------------------------------ the three lanes

def test_bus_lock_one_lock_per_straddling_locked_add_and_the_hold_in_its_time(found_gem5, tmp_path):
    trapline_gem5 = _needs(found_gem5, "bus-lock")
    e = _lane("x86-split-lock", trapline_gem5, tmp_path / "results")
    assert e["status"] in ("reproduced", "differs"), e["status"]
    assert _figure(e, "bus locks per straddling locked add (gem5)") == pytest.approx(1.0)
    assert _figure(e, "bus locks per in-line locked add (gem5)") == 0
    straddling = _figure(e, "straddling locked add (ns, gem5; the bus lock is the machine's split_lock_cost)")
    in_line = _figure(e, "in-line locked add (ns, gem5)")
    assert straddling > in_line + 400  # the 420 ns hold (x86-2012-server's atomics.split_lock_cost)
    assert e["reproduced"] > 20  # the cliff is there (the model predicts about 55x)


def test_numa_first_touch_pages_on_the_touching_node_and_remote_reads_slower(found_gem5, tmp_path):
    trapline_gem5 = _needs(found_gem5, "numa-first-touch")
    e = _lane("numa-first-touch", trapline_gem5, tmp_path / "results")
    assert e["status"] in ("reproduced", "differs"), e["status"]
    assert _figure(e, "share of memory reads served by node 0 after touching on node 0 and reading from node 1") \
        > 0.99
    assert _figure(e, "share of memory reads served by node 1 when touching and reading on node 1") > 0.99
    assert _figure(e, "pages of node 1's memory read from node 1 after touching on node 0 (counted at the memory)") \
        <= 4  # the measuring thread's own stack, at most
    pages0 = _figure(e, "pages of node 0's memory read from node 1 after touching on node 0 (counted at the memory)")
    assert pages0 >= 25165824 // 4096  # the whole 24 MiB buffer (quick)
    # 120 vs 90 ns: remote reads are slower, by about the latency ratio
    assert 1.15 < e["reproduced"] < 1.4
    assert _figure(e, "simulated time, touching and reading on node 1 / first touch on the local node (gem5)") == \
        pytest.approx(1.0, rel=0.02)


def test_prefetchers_and_overlap_stats_on_the_miss_overlap_lane(found_gem5, tmp_path):
    """prefetchers: the L2's streamer (StreamPrefetcher) and adjacent-line prefetcher run the machine's
    rule; overlap-stats: the L1D's misses made while another was outstanding."""
    trapline_gem5 = _needs(found_gem5, "prefetchers", "overlap-stats")
    e = _lane("miss-overlap", trapline_gem5, tmp_path / "results")
    assert e["status"] == "reproduced", e["status"]
    per = {g["variant"]: g["counts_per_op"] for g in e["groups"]}
    ns = {g["variant"]: g["median_ns_per_op"] for g in e["groups"]}
    # one miss at a time in a dependent chase; two or four chains keep every miss beside another
    assert per["chase"]["misses_overlapped"] < 0.05
    assert per["chase2"]["misses_overlapped"] > 0.9 and per["chase4"]["misses_overlapped"] > 0.9
    assert ns["chase"] / ns["chase4"] == pytest.approx(4, rel=0.2)  # Little's law, 4 chains in 10 MSHRs
    # a stream's lines come from the L2's streamer (one miss of the L2 in several), a chase's from memory:
    # nothing a prefetcher fetched helps it
    assert per["stream"]["l2_misses"] < 0.3 and per["stream"]["hw_prefetches_issued"] > 0.5
    assert per["chase"]["l2_misses"] > 0.95 and per["chase"]["hw_prefetches_useful"] < 0.01
    assert ns["stream"] < ns["chase"] / 8


def test_sparc_prefetch_a_trap_per_strong_prefetch_of_address_0_and_none_for_weak(found_gem5, tmp_path):
    trapline_gem5 = _needs(found_gem5, "sparc-prefetch", "sparc-glibc")
    e = _lane("sparc-strong-prefetch", trapline_gem5, tmp_path / "results")
    assert e["status"] == "reproduced", e["status"]
    assert _figure(e, "prefetch traps per strong prefetch of address 0 (gem5)") == pytest.approx(1.0)
    assert _figure(e, "prefetch traps per weak prefetch of address 0 (gem5)") == 0
    assert _figure(e, "prefetch traps per strong prefetch of a mapped page (gem5)") == 0
    # the machine's prefetch.trap_cost (2,636.87 ns) and the loop around it
    per = _figure(e, "time per strong prefetch of address 0 (ns, gem5; the trap cost is the machine's)")
    assert 2636.87 < per < 2636.87 * 1.1
    assert _figure(e, "strong prefetch of a mapped page (ns, gem5; fills the TLB once, never traps)") < 100


# ------------------------------------------------------------------ sparc-unaligned-trap

def _unaligned_probe(tmp_path) -> Path:
    prog = tmp_path / "unaligned"
    subprocess.run([build.ARCHES["sparc64"].cc, "-O2", "-static", "-o", str(prog),
                    str(DATA / "sparc_unaligned_probe.c")], check=True)
    return prog


@pytest.mark.parametrize("cpu", ["timing", "o3"])
def test_sparc_unaligned_loads_and_stores_trap_once_each_and_complete_as_linux_would(found_gem5, tmp_path, cpu):
    trapline_gem5 = _needs(found_gem5, "sparc-unaligned-trap", "sparc-glibc")
    from trapline.platforms.gem5 import run
    g = run.simulate(machine.load("ultrasparc-iv-plus"), [str(_unaligned_probe(tmp_path))], cpu=cpu,
                     gem5=trapline_gem5, timeout=900)
    assert g.error is None and g.status == 0, (g.error, g.stderr[-2000:])
    kv = dict(w.split("=", 1) for w in g.stdout.split())
    # buf[1 + i] = 0x81 + i: big-endian values, signed loads sign-extended
    assert kv["lduh"] == "8182" and kv["ldsh"] == "ffffffffffff8182"
    assert kv["lduw"] == "81828384" and kv["ldsw"] == "ffffffff81828384" and kv["ldx"] == "8182838485868788"
    assert kv["lduw_rr"] == "83848586" and kv["ldd"] == "84858687,88898a8b"
    assert kv["delay"] == "81828384"  # in a delay slot: on at the branch target, the next instruction skipped
    assert kv["crossing"] == "a1a2a3a4"  # across a cache line, trapped too
    want = bytearray(28)
    want[1:3], want[5:9], want[9:17], want[20:28] = (bytes.fromhex("1122"), bytes.fromhex("33445566"),
                                                     bytes.fromhex("778899aabbccddee"),
                                                     bytes.fromhex("0102030405060708"))
    assert kv["stored"] == want.hex()
    # one trap per misaligned instruction (glibc itself never misaligns), each at the machine's traps.cost
    traps = g.tail_region["counts"]["gem5_traps_unaligned"]
    assert traps == int(kv["traps"]) == 13
    assert g.ticks >= traps * 2_866_000  # 2,866 ns (ultrasparc-iv-plus traps.cost) in ps


def test_sparc_misalign_trap_lane_one_trap_per_misaligned_load_at_the_trap_cost(found_gem5, tmp_path):
    trapline_gem5 = _needs(found_gem5, "sparc-unaligned-trap", "sparc-glibc")
    from trapline import experiment
    e = _lane("sparc-misalign-trap", trapline_gem5, tmp_path / "results")
    assert e["status"] == "reproduced", (e["status"], e["note"])
    assert e["reproduced"] >= 100  # the model lane's criterion
    assert _figure(e, "traps per misaligned load (gem5)") == pytest.approx(1.0)
    per = _figure(e, "time per misaligned load (ns, gem5; the trap cost is the machine's traps.cost)")
    assert 2866 < per < 2866 * 1.1
    assert _figure(e, "byte-wise unaligned / byte-wise aligned (same speed claimed)") == pytest.approx(1.0, rel=0.01)
    assert all(c["ok"] for c in e["checks"]), e["checks"]  # the sums, no trap for aligned or byte loads
    # traps.cost is calibrated on E1: the entry says its figure rests on a fitted parameter, as declared
    assert e["rests_on"] == "fitted" == experiment.get("sparc-misalign-trap").platform("gem5")["rests_on"]
    assert "traps.cost" in e["platform_facts"]["calibrated_on_this_claim"]


def test_a_misaligned_sparc_load_on_a_stock_gem5_is_one_message_naming_the_change(stock_gem5):
    from trapline.platforms.gem5 import run
    from trapline.platforms.gem5.engine import FREESTANDING
    # a stock gem5 cannot start glibc on SPARC: the misalign kernel of the freestanding flavour
    prog = build.build("sparc64", flavour=FREESTANDING) / "sparc-misalign-trap" / "misalign"
    g = run.simulate(machine.load("ultrasparc-iv-plus"), [str(prog), "mode=trap", "align=unaligned", "outer=1",
                                                          "reps=1", "warmup=0"], cpu="timing", gem5=stock_gem5)
    assert g.error and not g.regions
    first = g.error.splitlines()[0]
    assert first.startswith("gem5 stopped at a misaligned SPARC access")
    assert "sparc-unaligned-trap" in first and "./run.sh gem5 build" in first
