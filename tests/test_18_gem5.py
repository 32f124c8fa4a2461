"""gem5 itself: finding it, what it is, the machines as gem5 builds them, the
kernels' regions in gem5's statistics, and gem5 beside the timing model.

The tests marked with the gem5_binary fixture run a real gem5 (GEM5, gem5.opt on
PATH, or the shared binary in ../shared/gem5/ unpacked into the cache) and are
skipped, with the reason, where there is none. test_16 checks the same
configuration against stand-ins; only a real gem5 catches what they cannot
(gem5's own parameter names, its conversions, its limits).
"""

import configparser
import hashlib
import json
import lzma
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading

import pytest

from trapline import build, kernelio, machine as M
from trapline.errors import RunFailed, UsageError
from trapline.platforms.gem5 import machine_json as G
from trapline.platforms.gem5 import binary, run, stats
from trapline.platforms.gem5.engine import Gem5Engine
from trapline.platforms.model.counters import COUNTERS as MODEL_COUNTERS

from conftest import NO_PREFETCH, ROOT

sys.path.insert(0, str(ROOT / "gem5_configs"))
from trapline_gem5 import params as P  # noqa: E402

RUNNABLE = ["x86-2012-server", "generic-2020s-x86", "ultrasparc-t1", "ultrasparc-iv-plus"]


def _exe(path, text="#!/bin/sh\nexit 0\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# ------------------------------------------------------------------ finding gem5 (no gem5 needed)

def test_find_takes_the_flag_then_gem5_then_path(tmp_path):
    flag, env, on_path = _exe(tmp_path / "a" / "mine"), _exe(tmp_path / "b" / "theirs"), tmp_path / "c"
    _exe(on_path / "gem5")
    cache = str(tmp_path / "cache")  # no trapline build of gem5 in it (yet)
    assert binary.find(flag, {"GEM5": str(env), "PATH": str(on_path), "TRAPLINE_CACHE": cache}) == flag.resolve()
    assert binary.find(None, {"GEM5": str(env), "PATH": str(on_path), "TRAPLINE_CACHE": cache}) == env.resolve()
    assert binary.find(None, {"PATH": str(on_path), "TRAPLINE_CACHE": cache}) == (on_path / "gem5").resolve()
    _exe(on_path / "gem5.opt")
    assert binary.find(None, {"PATH": str(on_path), "TRAPLINE_CACHE": cache}) == (on_path / "gem5.opt").resolve()
    # trapline's own build for the current changes comes before PATH, after the flag and GEM5
    from trapline.platforms.gem5 import from_source
    own = _exe(tmp_path / "cache" / "gem5" / "trapline-0123456789abcdef" / "gem5.opt")
    (own.parent / "build.json").write_text(json.dumps({"changes_sha256": from_source.changes_sha256()}))
    assert binary.find(None, {"PATH": str(on_path), "TRAPLINE_CACHE": cache}) == own.resolve()
    assert binary.find(None, {"GEM5": str(env), "PATH": str(on_path), "TRAPLINE_CACHE": cache}) == env.resolve()
    (own.parent / "build.json").write_text(json.dumps({"changes_sha256": "0" * 64}))  # built for other changes
    assert binary.find(None, {"PATH": str(on_path), "TRAPLINE_CACHE": cache}) == (on_path / "gem5.opt").resolve()
    # GEM5=none: no gem5, whatever is on PATH
    with pytest.raises(binary.Gem5Missing, match="GEM5=none"):
        binary.find(None, {"GEM5": "none", "PATH": str(on_path), "TRAPLINE_CACHE": cache})


def test_find_names_a_bad_path_and_says_how_to_get_gem5(tmp_path):
    with pytest.raises(UsageError, match=r"^--gem5 .*nope: not an executable file"):
        binary.find(tmp_path / "nope", {})
    (tmp_path / "plain").write_text("")
    with pytest.raises(UsageError, match=r"^GEM5 .*plain: not an executable file"):
        binary.find(None, {"GEM5": str(tmp_path / "plain")})
    with pytest.raises(binary.Gem5Missing) as e:
        binary.find(None, {"PATH": str(tmp_path), "TRAPLINE_CACHE": str(tmp_path / "cache")})
    msg = str(e.value)
    assert "\n" not in msg and "--gem5 PATH" in msg and "GEM5=PATH" in msg and "docs/gem5.md" in msg


def test_unpack_is_verified_and_atomic(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAPLINE_CACHE", str(tmp_path / "cache"))
    payload = b"\x7fELF not really gem5\n" * 1000
    xz = tmp_path / "g.opt.xz"
    xz.write_bytes(lzma.compress(payload))
    key = hashlib.sha256(xz.read_bytes()).hexdigest()
    monkeypatch.setitem(binary.KNOWN_XZ, key, "0" * 64)
    with pytest.raises(RunFailed, match="unpacks to a binary with sha256"):
        binary.unpack(xz)
    assert not list((tmp_path / "cache" / "gem5").rglob("gem5.opt"))  # nothing half-made left behind
    monkeypatch.setitem(binary.KNOWN_XZ, key, hashlib.sha256(payload).hexdigest())
    got = []
    workers = [threading.Thread(target=lambda: got.append(binary.unpack(xz))) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(set(got)) == 1 and got[0].read_bytes() == payload and os.access(got[0], os.X_OK)
    assert got[0].parent.name == key[:16]
    assert [p.name for p in got[0].parent.iterdir()] == ["gem5.opt"]  # no temporary file left


def test_tests_find_the_shared_binary_or_say_why(tmp_path, monkeypatch):
    monkeypatch.delenv(binary.XZ_ENV, raising=False)
    nothing = {"PATH": str(tmp_path), "TRAPLINE_CACHE": str(tmp_path / "cache")}  # no gem5 on PATH, none built
    if binary.shared_xz() is None:
        with pytest.raises(binary.Gem5Missing, match=binary.XZ_ENV):
            binary.for_tests(nothing)
    with pytest.raises(UsageError, match=binary.XZ_ENV):
        binary.for_tests({**nothing, binary.XZ_ENV: str(tmp_path / "none.xz")})


def test_tests_take_trapline_gem5_shared_for_these_changes_only(stock_gem5, tmp_path, monkeypatch):
    """CI never compiles gem5: it takes trapline's gem5 from ../shared/gem5/ when one is shared
    there for the repository's current changes (its name carries their sha256, and the binary
    itself must say it has them), never one of other changes; else the stock one."""
    import shutil
    from trapline.platforms.gem5 import from_source
    stock_xz = binary.shared_xz()
    if stock_xz is None:
        pytest.skip("no shared stock gem5 (../shared/gem5/ or TRAPLINE_GEM5_XZ)")
    own = from_source.built()  # this machine's trapline's gem5 for the current changes, if built
    shared = tmp_path / "shared"
    shared.mkdir()
    shutil.copy2(stock_xz, shared / stock_xz.name)
    monkeypatch.delenv("GEM5", raising=False)
    monkeypatch.setenv("TRAPLINE_CACHE", str(tmp_path / "cache"))
    env = {"PATH": str(tmp_path), "TRAPLINE_CACHE": str(tmp_path / "cache"), binary.XZ_ENV: str(shared / stock_xz.name)}
    digest = from_source.changes_sha256()
    # shared for other changes: not taken
    shutil.copy2(stock_xz, shared / binary.SHARED_TRAPLINE.format("0" * 16))
    assert binary.shared_trapline_xz(env) is None and binary.facts(binary.for_tests(env))["build"] == "stock"
    # named for these changes, but a binary that does not say it has them: not taken either
    named = shared / binary.SHARED_TRAPLINE.format(digest[:16])
    shutil.copy2(stock_xz, named)
    assert binary.shared_trapline_xz(env) == named and binary.shared_trapline(env) is None
    assert binary.facts(binary.for_tests(env))["build"] == "stock"
    if own is None:
        return
    # trapline's gem5 for these changes, shared: taken before the stock one, as it says what it has
    with open(own, "rb") as src, lzma.open(named, "wb", preset=0) as dst:
        shutil.copyfileobj(src, dst)
    got = binary.for_tests(env)
    assert got != own and got.read_bytes() == own.read_bytes()
    assert binary.facts(got)["changes_sha256"] == digest


# ------------------------------------------------------------------ the gem5 flavour of the kernels

def test_the_gem5_flavour_marks_regions_with_m5_ops():
    nop_begin = bytes.fromhex("0f1f80 01004c54")  # nopl 0x544c0001(%rax): the model's marker
    reset, dump = bytes.fromhex("0f04 4000"), bytes.fromhex("0f04 4100")  # m5_reset_stats, m5_dump_stats
    default, gem5 = build.build("x86_64"), build.build("x86_64", flavour="gem5")
    assert default != gem5 and gem5.name.startswith("x86_64-gem5-") and default.name.startswith("x86_64-")
    plain, flavoured = (d / "loop-order" / "loop-order" for d in (default, gem5))
    assert nop_begin in plain.read_bytes() and reset not in plain.read_bytes()
    assert reset in flavoured.read_bytes() and dump in flavoured.read_bytes() and nop_begin not in flavoured.read_bytes()
    assert build.input_hash("x86_64", "gem5") != build.input_hash("x86_64")
    # SPARC: op 2, op3 0x37 (IMPDEP2), the function in bits 7..15 (gem5's util/m5/src/abi/sparc/m5op.S)
    words = [((2 << 30) | (0x37 << 19) | (f << 7)).to_bytes(4, "big") for f in (0x40, 0x41)]
    sparc = (build.build("sparc64", flavour="gem5") / "loop-order" / "loop-order").read_bytes()
    assert all(w in sparc for w in words) and words[0].hex() == "81b82000"
    with pytest.raises(UsageError, match="unknown build flavour 'fast'; valid choices: '', gem5, gem5-freestanding"):
        build.build("x86_64", flavour="fast")


# ------------------------------------------------------------------ stats.txt -> regions (no gem5 needed)

BLOCK = """---------- Begin Simulation Statistics ----------
simSeconds                                   0.000001                       # Number of seconds simulated (Second)
simTicks                                      {ticks}                       # Number of ticks simulated (Tick)
board.processor.cores.core.commitStats0.numInsts   {insts}   # Number of instructions committed (Count)
board.cache_hierarchy.l1dcaches.overallMisses::processor.cores.core.data   {miss}   # misses
board.cache_hierarchy.l1dcaches.overallMisses::total   {miss}   # number of overall misses (Count)
board.cache_hierarchy.l1dcaches.overallMshrMisses::total   {miss}   # number of overall MSHR misses (Count)
board.cache_hierarchy.l1dcaches.overallAvgMissLatency::total          nan   # average
board.cache_hierarchy.l1dcaches.replacements            0   # number of replacements (Count)
---------- End Simulation Statistics   ----------
"""


def test_stats_blocks_become_regions():
    text = BLOCK.format(ticks=3850, insts=7, miss=2) + "\n" + BLOCK.format(ticks=770, insts=1, miss=0).replace(
        "board.cache_hierarchy.l1dcaches.overallMisses::total   0   # number of overall misses (Count)\n", "")
    regions, last = stats.regions(text, 2.6e9)
    assert len(regions) == 1 and last["ticks"] == 770
    c = regions[0]["counts"]
    assert regions[0]["ticks"] == 3850 and regions[0]["cycles"] == c["gem5_cycles"] == 10  # 385-tick period
    assert c["gem5_instructions"] == 7 and c["gem5_l1d_misses"] == 2
    assert last["counts"]["gem5_l1d_misses"] == 0  # a vector's zero entries are left out of a dump
    assert "gem5_l2_misses" not in c and "gem5_dtlb_misses" not in c  # no L2, no TLB statistics: no counter
    assert stats.period_ticks(1.2e9) == 833 and stats.period_ticks(2.6e9) == 385
    with pytest.raises(stats.StatsError, match=r"line 3: 'many' is not a number"):
        stats.parse(BLOCK.format(ticks="many", insts=1, miss=1))


def _gem5():
    """The gem5 platform in a run context of its own (its engines read regions without a gem5)."""
    from trapline.context import RunContext
    from trapline.platforms.gem5 import Gem5Platform
    return Gem5Platform(RunContext.make())


def test_pair_regions_gives_samples_gem5s_time_and_counts():
    out = kernelio.parse("TL exp=e kind=sample variant=row rep=0 ops=100 ns=999999 rows=4\n"
                         "TL exp=e kind=sample variant=row rep=1 ops=100 ns=999999 rows=4\n")
    regions, _ = stats.regions(BLOCK.format(ticks=3850, insts=7, miss=2) * 3, 2.6e9)
    engine = _gem5().engine(M.load("x86-2012-server"), "se")
    assert engine.pair(out, regions[:1], "e row") == \
        "e row: gem5 dumped 1 regions for 2 samples; they must pair up one to one (is the kernel built in the gem5 flavour?)"
    assert engine.pair(out, regions, "e row") is None
    assert [s["ns"] for s in out.samples] == [4, 4] and out.timer["source"] == "gem5"
    counts = {(c["rep"] if "rep" in c else None, c["name"]): c["value"] for c in out.counts}
    assert counts[(None, "gem5_l1d_misses")] == 2 and counts[(None, "gem5_ops")] == 100
    assert all(c["rows"] == 4 and c["variant"] == "row" for c in out.counts)


def test_gem5_counters_mirror_the_models_by_suffix():
    model = {c.name for c in MODEL_COUNTERS}
    gem5 = {c.name for c in stats.COUNTERS}
    for suffix in ("ops", "instructions", "cycles", "l1d_misses", "l1i_misses", "l2_misses", "l3_misses",
                   "dtlb_misses", "itlb_misses", "memory_reads", "memory_writes"):
        assert f"model_{suffix}" in model and f"gem5_{suffix}" in gem5, suffix
    assert all(c.name.startswith("gem5_") and c.doc for c in stats.COUNTERS)
    assert stats.markdown() in (ROOT / "docs" / "gem5.md").read_text(), \
        "docs/gem5.md's counters table is stale: paste python -c 'from trapline.platforms.gem5 import stats; print(stats.markdown())'"


# ------------------------------------------------------------------ a real gem5

def test_facts_name_the_shared_binary(stock_gem5, monkeypatch):
    gem5_binary = stock_gem5
    f = binary.facts(gem5_binary)
    assert {"X86", "SPARC"} <= set(f["isas"]) and f["sha256"] == binary.sha256_file(gem5_binary)
    assert f["build"] == "stock" and f["changes"] == []
    if f["sha256"] in binary.KNOWN:
        assert f["version"] == binary.KNOWN[f["sha256"]] and f["reports_version"] in f["version"]
    # cached: a second look neither hashes 48 MB nor starts gem5
    monkeypatch.setattr(binary, "sha256_file", lambda p: pytest.fail("hashed again"))
    monkeypatch.setattr(binary, "run_command", lambda *a, **k: pytest.fail("probed again"))
    monkeypatch.setattr(binary, "KNOWN", {})
    assert binary.facts(gem5_binary)["version"] == f"unknown version (sha256 {f['sha256']})"


def _config(gem5_binary, name, tmp_path, cpu="o3", cores=1):
    m = M.load(name)
    arch = m.arch
    prog = build.build(arch) / "loop-order" / "loop-order"
    r = run.simulate(m, [str(prog)], cpu=cpu, cores=cores, gem5=gem5_binary, keep=tmp_path, max_ticks=0)
    assert r.error is None, r.error
    c = configparser.ConfigParser(interpolation=None)
    c.read(tmp_path / "config.ini")
    # config.ini hashed with the run's temporary folder (the program's copy and the output files'
    # paths) as $RUN and the program's folder as $PROGRAM_DIR
    text = (tmp_path / "config.ini").read_text()
    run_dirs = set(re.findall(re.escape(run.RUN_PARENT or tempfile.gettempdir()) + r"/trapline-gem5-[^/\s]+", text))
    assert len(run_dirs) == 1, run_dirs
    run_dir = run_dirs.pop()
    assert f"executable={run_dir}/exe/{prog.name}" in text
    assert r.config_sha256 == hashlib.sha256(text.replace(run_dir, "$RUN").replace(
        str(prog.resolve().parent), "$PROGRAM_DIR").encode()).hexdigest()
    return m, c


@pytest.mark.parametrize("name", RUNNABLE)
def test_gem5_builds_the_machine_the_file_describes(gem5_binary, name, tmp_path):
    """config.ini, as gem5 wrote it, against the machine file."""
    m, c = _config(gem5_binary, name, tmp_path)
    line = m.bytes("caches.l1d.line")
    assert int(c["board"]["cache_line_size"]) == line
    assert int(c["board.clk_domain"]["clock"]) == stats.period_ticks(m.clock_hz)
    # the mapping for this gem5's changes (trapline's adds the stream and adjacent-line prefetchers)
    p = P.from_machine(json.loads(json.dumps(G.export(m))), changes=binary.facts(gem5_binary).get("changes", []))
    section = {"l1i": "l1icaches", "l1d": "l1dcaches", "l2": "l2caches", "l3": "l3cache"}
    for lv in ("l1i", "l1d", "l2", "l3"):
        if not m.has(f"caches.{lv}"):
            assert f"board.cache_hierarchy.{section[lv]}" not in c
            continue
        cache, want = c[f"board.cache_hierarchy.{section[lv]}"], getattr(p, lv)
        size = m.bytes(f"caches.{lv}.size")
        assert int(cache["size"]) == size, lv
        ways = size // line if m.raw(f"caches.{lv}.assoc") == "full" else m.ways(f"caches.{lv}")
        assert int(cache["assoc"]) == ways, lv
        assert c[cache["replacement_policy"]]["type"] == "LRURP"
        # the machine's hardware prefetchers, one gem5 class each (a MultiPrefetcher holds several), or none
        pf = cache["prefetcher"]
        if not want.prefetchers:
            assert pf == "Null", lv
        else:
            kids = c[pf]["prefetchers"].split() if len(want.prefetchers) > 1 else [pf]
            assert [c[k]["type"] for k in kids] == [w.gem5_class for w in want.prefetchers], lv
            assert [int(c[k]["degree"]) for k in kids] == [w.degree for w in want.prefetchers], lv
        for k in ("tag_latency", "data_latency", "response_latency", "mshrs", "tgts_per_mshr"):
            assert int(cache[k]) == getattr(want, k), (lv, k)  # test_16: these add up to the machine's latency
        assert cache["clusivity"] == want.clusivity and cache["writeback_clean"] == str(want.writeback_clean).lower()
        if lv in ("l1i", "l1d"):
            assert max(int(cache["tag_latency"]), int(cache["data_latency"])) == m.icycles(f"caches.{lv}.latency")
    core = "board.processor.cores.core"
    cap = 64 if m.arch == "sparc64" else 10 ** 9  # gem5's SPARC TLB: at most 64 entries (src/arch/sparc/tlb.cc)
    assert int(c[f"{core}.mmu.itb"]["size"]) == min(m.raw("tlb.itlb.entries"), cap)
    assert int(c[f"{core}.mmu.dtb"]["size"]) == min(m.raw("tlb.dtlb.entries"), cap)
    assert c[core]["type"] == "DerivO3CPU" or "O3" in c[core]["type"]
    if m.has("core.rob"):  # the window and the load and store queues (O3)
        assert (int(c[core]["numROBEntries"]), int(c[core]["LQEntries"]), int(c[core]["SQEntries"])) == \
            (m.raw("core.rob"), m.raw("core.load_queue"), m.raw("core.store_buffer"))
    if line < 64:  # O3's fetch buffer may not exceed a line (src/cpu/o3/fetch.cc)
        assert int(c[core]["fetchBufferSize"]) == line
    # one memory, or on trapline's gem5 with a NUMA table one per node (change numa-first-touch)
    modules = [k for k in c.sections() if re.fullmatch(r"board\.memory\.modules?\d*", k)]
    assert modules and all(c[k]["latency"] + "ps" == p.memory.latency for k in modules), modules
    if m.has("memory.channels"):  # channels x width x transfer rate, bytes a second; gem5 keeps whole ps per byte
        want_bps = m.raw("memory.channels") * m.bytes("memory.channel_width") * m.quantity("memory.transfer_rate").value
        assert float(c[modules[0]]["bandwidth"]) == round(1e12 / want_bps)


def test_two_cores_get_private_l1s_and_l2s_and_share_the_l3(gem5_binary, tmp_path):
    m, c = _config(gem5_binary, "x86-2012-server", tmp_path, cpu="timing", cores=2)
    h = "board.cache_hierarchy"
    for i in (0, 1):
        # the core's data port, or on trapline's gem5 the bus-lock port between them (change bus-lock)
        if f"{h}.bus_lock_ports{i}" in c:
            assert c[f"{h}.bus_lock_ports{i}"]["cpu_side_port"] == f"board.processor.cores{i}.core.dcache_port"
            assert c[f"{h}.l1dcaches{i}"]["cpu_side"] == f"{h}.bus_lock_ports{i}.mem_side_port"
        else:
            assert c[f"{h}.l1dcaches{i}"]["cpu_side"] == f"board.processor.cores{i}.core.dcache_port"
        assert c[f"{h}.l1dcaches{i}"]["mem_side"].startswith(f"{h}.l2buses{i}.")
        assert c[f"{h}.l2caches{i}"]["mem_side"].startswith(f"{h}.l3bus.")
        assert int(c[f"board.processor.cores{i}.core.mmu.dtb"]["size"]) == m.raw("tlb.dtlb.entries")
    assert f"{h}.l2caches2" not in c and c[f"{h}.l3cache"]["mem_side"].startswith(f"{h}.membus.")


def test_arm_needs_a_gem5_with_arm(gem5_binary):
    if "ARM" in binary.facts(gem5_binary)["isas"]:
        pytest.skip("this gem5 has the ARM ISA")
    with pytest.raises(UsageError, match=r"machine 'arm1176-rpi1' needs gem5's ARM ISA, and gem5 .* has only SPARC, X86"):
        run.simulate(M.load("arm1176-rpi1"), [str(build.build("armv6") / "loop-order" / "loop-order")],
                     gem5=gem5_binary)
    with pytest.raises(UsageError, match="gem5.cpu: 'fast' is not a gem5 CPU model here; valid choices: o3, timing, minor"):
        run.simulate(M.load("x86-2012-server"), ["/bin/true"], cpu="fast", gem5=gem5_binary)


def test_gem5_failures_are_one_clear_message(gem5_binary, stock_gem5):
    # SPARC SE on a stock gem5 with Debian's static glibc: its first system call is one gem5 lacks
    # (trapline's gem5 has it: change sparc-glibc, tests/test_93)
    r = run.simulate(M.load("ultrasparc-t1"), [str(build.build("sparc64") / "loop-order" / "loop-order")],
                     cpu="timing", gem5=stock_gem5)
    assert r.status is None and r.error.startswith(
        "gem5 SE mode has no system call set_tid_address (#166) for this ISA (src/sim/syscall_emul.cc: ")
    assert "fatal" in r.error.splitlines()[0] and len(r.error.splitlines()) > 1  # then gem5's last lines
    prog = build.build("x86_64", flavour="gem5") / "loop-order" / "loop-order"
    r = run.simulate(M.load("x86-2012-server"), [str(prog), "rows=4096", "cols=4096"], cpu="o3", timeout=3,
                     gem5=gem5_binary)
    assert r.status is None and r.error.startswith("gem5 did not finish within 3 s (o3 CPU)")


def test_a_thread_needs_a_core(gem5_binary):
    prog = build.build("x86_64", flavour="gem5") / "stl-alloc-scaling" / "alloc-scaling"
    args = {"allocator": "pool-lock", "lock": "spin", "threads": "2", "capacity": "off", "iterations": "2000",
            "reps": "1", "warmup": "0"}
    argv = [str(prog)] + [f"{k}={v}" for k, v in args.items()]
    m = M.load("x86-2012-server")
    one = run.simulate(m, argv, cpu="timing", cores=1, gem5=gem5_binary)
    assert one.error is None and one.status == 1 and "pthread_create failed" in one.stderr
    assert run.cores_for(args) == 2
    two = run.simulate(m, argv, cpu="timing", cores=run.cores_for(args), gem5=gem5_binary)
    assert two.error is None and two.status == 0, two.stderr[-2000:]
    out = kernelio.parse(two.stdout)
    assert _gem5().engine(m, "se").pair(out, two.regions, "stl") is None and len(out.samples) == 1
    assert any(c["value"] == "ok" for c in out.checks)


ARGV0_PROBE = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int here;
    printf("%s %d %p %p\n", argv[0], argc, (void *)&here, malloc(16));
    return 0;
}
"""


def test_a_program_runs_as_dot_slash_its_name_with_the_same_stack_and_heap_wherever_it_sits(gem5_binary, tmp_path):
    """A lane names its kernel by its absolute path in the cache; gem5 runs it as ./<name> from a copy at a
    path of one length: argv[0] lies on the initial stack, and static glibc keeps the path gem5 answers for
    /proc/self/exe on the heap, so the stack and the heap, and every figure with them, would otherwise move
    with the folder the program sits in (the cache natively, /opt/trapline in the image)."""
    src = tmp_path / "probe.c"
    src.write_text(ARGV0_PROBE)
    m = M.load("x86-2012-server")
    seen = []
    for folder in (tmp_path / "a", tmp_path / ("a-much-longer-folder-name-" * 4)):
        folder.mkdir()
        subprocess.run(["gcc", "-O1", "-static", "-o", str(folder / "probe"), str(src)], check=True)
        r = run.simulate(m, [str(folder / "probe"), "x"], cpu="timing", cwd=folder, gem5=gem5_binary)
        assert r.error is None and r.status == 0, r.stderr[-2000:]
        seen.append((r.stdout, r.config_sha256))
    assert seen[0][0].split()[:2] == ["./probe", "2"], seen[0][0]
    assert seen[0] == seen[1]


ETC_PROBE = r"""
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("ld.so.cache %d ld.so.preload %d\n", access("/etc/ld.so.cache", F_OK), access("/etc/ld.so.preload", F_OK));
    return 0;
}
"""
# a shell that bind-mounts its $0 over /etc/ld.so.cache in a mount namespace of its own, then runs "$@"
OTHER_LDSO_CACHE = ["unshare", "-rm", "sh", "-c", 'mount --bind "$0" /etc/ld.so.cache && exec "$@"']


def test_a_dynamic_program_sees_the_same_etc_whatever_the_hosts_ld_so_cache(gem5_binary, tmp_path, monkeypatch):
    """gem5 answers a program's system calls with the host's files: a dynamically linked program's ld.so
    opened the host's /etc/ld.so.cache, mapped it and searched it for libc.so.6, so its instructions and
    where libc landed (and plt-itlb's figures) followed the Debian packages installed. The program gets an
    empty /etc of its run's own (run.GUEST_ETC): the same run with another file over the host's
    /etc/ld.so.cache (a bind mount in a mount namespace of gem5's own) is the same run, tick for tick."""
    if not os.path.isfile("/etc/ld.so.cache"):
        pytest.skip("this host has no /etc/ld.so.cache to replace")
    other = tmp_path / "other.cache"
    other.write_bytes(b"")  # any other file: ld.so would find no cache in it and search its folders
    if subprocess.run([*OTHER_LDSO_CACHE, str(other), "true"], capture_output=True).returncode:
        pytest.skip("cannot bind-mount over /etc/ld.so.cache in a mount namespace here (unshare -rm)")
    src = tmp_path / "probe.c"
    src.write_text(ETC_PROBE)
    subprocess.run(["gcc", "-O1", "-o", str(tmp_path / "probe"), str(src)], check=True)
    m = M.load("x86-2012-server")
    seen = []
    for namespaced in (False, True):
        if namespaced:
            real = run.run_command
            monkeypatch.setattr(run, "run_command", lambda cmd, *a, **k: real([*OTHER_LDSO_CACHE, str(other), *cmd],
                                                                              *a, **k))
        r = run.simulate(m, [str(tmp_path / "probe")], cpu="timing", cwd=tmp_path, gem5=gem5_binary)
        assert r.error is None and r.status == 0, r.stderr[-2000:]
        seen.append((r.stdout, r.ticks, r.tail_region["instructions_since_start"]))
    assert seen[0][0] == "ld.so.cache -1 ld.so.preload -1\n", seen[0][0]
    assert seen[0] == seen[1]


def _per_op(out, prefix, name):
    return {c["variant"] + str(c.get("requestsize", "")): c["value"] / c["ops"]
            for c in out.counts if c["name"] == f"{prefix}_{name}"}


@pytest.mark.parametrize("kernel,runs", [
    ("loop-order/loop-order", [["variant=row", "rows=256", "cols=256", "reps=1", "warmup=1"],
                               ["variant=column", "rows=256", "cols=256", "reps=1", "warmup=1"]]),
    ("malloc-chunk-chase/chunk-chase", [["allocator=chunk", "requestsize=9", "rounds=4", "objects=4000", "reps=1",
                                         "warmup=0"]]),
], ids=["loop-order", "malloc-chunk-chase"])
def test_gem5_and_the_model_agree_on_l1d_misses(gem5_binary, kernel, runs):
    """Issue 20's done-when: on x86-2012-server, gem5's (O3) and the model's L1D
    misses per operation agree within 25%: both are LRU set-associative caches of
    the same shape."""
    from trapline.context import RunContext
    from trapline.platforms.model import ModelPlatform
    # without the hardware prefetchers: two LRU caches of one shape (the prefetchers' timing decides which
    # lines they bring in time: the miss-overlap experiment's subject)
    m = M.load("x86-2012-server", [M.pair(s) for s in NO_PREFETCH])
    model_engine = ModelPlatform(RunContext.make()).engine(m, "user")
    for args in runs:
        default = build.build("x86_64") / kernel
        ran = model_engine.run([str(default)] + args, 900)
        assert ran.status == 0, ran.stderr[-2000:]
        model = kernelio.parse(ran.stdout)
        assert model_engine.pair(model, [g for g in ran.raw["regions"] if g.get("marked")], kernel) is None
        engine = Gem5Engine(_gem5(), m, "se", cpu="o3", gem5=gem5_binary)
        r = engine.run([str(build.build("x86_64", flavour="gem5") / kernel)] + args, 1800)
        assert r.error is None and r.status == 0, r.error or r.stderr[-2000:]
        assert json.loads(json.dumps(r.raw["gem5"]))["sha256"] and r.raw["config_sha256"]
        g5 = kernelio.parse(r.stdout)
        assert engine.pair(g5, r.regions, kernel) is None
        assert [s["ops"] for s in g5.samples] == [s["ops"] for s in model.samples]
        ours, theirs = _per_op(g5, "gem5", "l1d_misses"), _per_op(model, "model", "l1d_misses")
        assert ours.keys() == theirs.keys()
        for k in ours:
            assert theirs[k] > 0 and abs(ours[k] / theirs[k] - 1) <= 0.25, (k, ours[k], theirs[k])
        # the same program between the markers: the same instructions
        i5, im = _per_op(g5, "gem5", "instructions"), _per_op(model, "model", "instructions")
        assert all(abs(i5[k] / im[k] - 1) < 0.01 for k in i5), (i5, im)



def test_compare_checks_the_machine_and_its_sets_before_looking_for_gem5():
    """compare with a bad --set is one line naming the field and exit 2, before gem5 is looked for
    (here there is none)."""
    import subprocess
    py = [sys.executable, "-m", "trapline.platforms.gem5.compare", "--machine", "x86-2012-server",
          "--set", "caches.l1d.prefetch.next-line.kind=9", "loop-order/loop-order variant=row"]
    r = subprocess.run(py, cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "GEM5": "/no/such/gem5"})
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr)
    assert "caches.l1d.prefetch.next-line.kind" in lines[0] and "degree" in lines[0], lines
