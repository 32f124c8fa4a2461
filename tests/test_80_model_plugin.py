"""The timing-model plugin (model/plugin/trapline-model.c) under QEMU user
mode, checked against independent oracles:

- caches: pycachesim (PyPI) replays the very access stream the plugin saw
  (its trace=PATH option) and must give exactly the same per-level hits and
  misses, on 24 randomly drawn configurations and streams with straddling
  accesses, for write-back and write-through L1Ds, with and without an L2;
  the stream itself must be exactly the recorded list of loads and stores
  the guest program performed;
- TLBs: strided and pseudo-randomly ordered cyclic page walks give the
  closed-form LRU miss count, uniform random walks the analytic expectation;
- SPARC: a recursion of depth N spills and fills N - (nwindows - 2) windows
  per descent; a misaligned load under unaligned<w>=trap is one trap;
- instruction counts equal a one-callback-per-instruction reference plugin;
- locked RMW, prefetch classes, regions, options and determinism;
- the option table (model/plugin/options.def): help=json prints exactly what
  trapline/platforms/model/plugin.py parses from it, values outside a row's range are refused
  naming the option and the range, trapline.platforms.model.plugin.args maps every machine as
  the hand-written mapping did (tests/data/plugin_args.json), and docs/model.md carries the generated
  table.

The guest programs are in model/tests/, built here with gcc -static -O1
(and sparc64-linux-gnu-gcc for the SPARC ones). Skipped only when the QEMU
plugin header cannot be fetched (model/fetch-qemu-headers.sh)."""

import json
import os
import random
import re
import shutil
import stat
import struct
import subprocess
from pathlib import Path

import pytest

from trapline import machine as M
from trapline.platforms.model import plugin as P
from trapline.platforms.model import counters as C

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "model"
TESTS = MODEL / "tests"
INCLUDE = ROOT / "kernels" / "common"

# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def qemu_src():
    r = subprocess.run([str(MODEL / "fetch-qemu-headers.sh")], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        pytest.skip("the QEMU plugin header could not be fetched (model/fetch-qemu-headers.sh):\n" + r.stderr)
    return Path(r.stdout.strip())


@pytest.fixture(scope="session")
def plugin(qemu_src):
    r = subprocess.run([str(MODEL / "build.sh")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    so = Path(r.stdout.strip())
    assert so.is_file(), r.stdout
    return so


@pytest.fixture(scope="session")
def bins(tmp_path_factory, qemu_src):
    """The guest programs and the reference instruction counter."""
    d = tmp_path_factory.mktemp("model-bins")
    out = {}

    def cc(compiler, name, src, *flags):
        exe = d / name
        r = subprocess.run([compiler, "-O1", "-static", *flags, f"-I{INCLUDE}", str(TESTS / src), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{compiler} {src}:\n{r.stderr}"
        out[name] = exe

    for src in ("replay.c", "tlbwalk.c", "features.c"):
        cc("gcc", src[:-2] + ".x86_64", src)
    sparc = ("-mcpu=ultrasparc",)
    cc("sparc64-linux-gnu-gcc", "windows.sparc64", "windows.c", *sparc, "-fno-shrink-wrap")
    cc("sparc64-linux-gnu-gcc", "misalign.sparc64", "misalign.c", *sparc)
    cc("sparc64-linux-gnu-gcc", "features.sparc64", "features.c", *sparc)
    cc("sparc64-linux-gnu-gcc", "replay.sparc64", "replay.c", *sparc)
    ref = d / "libinsn-count.so"
    r = subprocess.run(["gcc", "-O2", "-fPIC", "-shared", f"-I{qemu_src}/include/qemu", str(TESTS / "insn-count.c"),
                        "-o", str(ref)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out["insn-count"] = ref
    return out


QEMU = {"x86_64": "qemu-x86_64", "sparc64": "qemu-sparc64"}


def run_model(plugin, arch, exe, args=(), opts=None, tmp=None, trace=False, check=True):
    """Run exe under the plugin; returns (completed process, stats dict, trace path)."""
    opts = dict(opts or {})
    out = tmp / f"stats-{len(list(tmp.glob('stats-*')))}.json"
    opts["out"] = out
    tr = None
    if trace:
        tr = out.with_suffix(".trace")
        opts["trace"] = tr
    spec = ",".join([str(plugin)] + [f"{k}={v}" for k, v in opts.items()])
    r = subprocess.run([QEMU[arch], "-plugin", spec, str(exe), *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
        return r, json.loads(out.read_text()), tr
    return r, None, tr


def kv(stdout):
    """key=value words of a program's output."""
    return {w.split("=", 1)[0]: w.split("=", 1)[1] for w in stdout.split() if "=" in w}


# ------------------------------------------------------- caches vs pycachesim

STATS = ("HIT_count", "MISS_count", "LOAD_count", "STORE_count", "EVICT_count")


def need_pycachesim():
    try:
        import cachesim  # noqa: F401
    except ImportError:
        pytest.fail("pycachesim (PyPI) is missing from the test venv: requirements.txt needs pycachesim==0.3.1")


def draw_config(rng):
    def level(lines, max_sets):
        line = rng.choice(lines)
        assoc = rng.choice([1, 2, 4, 8])
        sets = rng.choice([s for s in (1, 1, 2, 4, 8, 16, 32, 64) if s <= max_sets])  # 1: fully associative
        return line * assoc * sets, assoc, line

    c = {}
    c["l1i_size"], c["l1i_assoc"], c["l1i_line"] = level([16, 32, 64, 128], 32)
    c["l1d_size"], c["l1d_assoc"], c["l1d_line"] = level([16, 32, 64, 128], 32)
    c["l1d_write"] = rng.choice(["wb", "wt"])
    if rng.random() < 0.8:
        l1max = max(c["l1i_size"], c["l1d_size"])
        line = rng.choice([x for x in (16, 32, 64, 128, 256) if x >= max(c["l1i_line"], c["l1d_line"])])
        assoc = rng.choice([1, 2, 4, 8, 16])
        size = line * assoc
        while size < 2 * l1max or rng.random() < 0.5:
            size *= 2
        c.update(l2_size=size, l2_assoc=assoc, l2_line=line)
        if rng.random() < 0.5:  # an L3 below it
            line3 = rng.choice([x for x in (32, 64, 128, 256) if x >= line])
            assoc3 = rng.choice([1, 2, 4, 8, 16])
            size3 = line3 * assoc3
            while size3 < 2 * size or (rng.random() < 0.3 and size3 < (1 << 19)):
                size3 *= 2
            c.update(l3_size=size3, l3_assoc=assoc3, l3_line=line3)
    else:
        c["l2_size"] = 0
    c.setdefault("l3_size", 0)
    return c


def draw_ops(rng, cfg, n=3000):
    """(offset, size, store) records: a hot region, random accesses over a span
    a few times the largest cache, and forced line straddles."""
    big = max(cfg.get("l3_size", 0), cfg["l2_size"], cfg["l1d_size"])
    span = min(big * rng.choice([2, 3, 4, 8]), 1 << 20)
    hot = max(cfg["l1d_size"] * 2, 256)
    line = cfg["l1d_line"]
    ops = []
    for _ in range(n):
        size = rng.choice([1, 2, 4, 8])
        u = rng.random()
        if u < 0.45:
            off = rng.randrange(hot)
        elif u < 0.85:
            off = rng.randrange(span)
        else:
            size = rng.choice([2, 4, 8])
            off = rng.randrange(1, span // line) * line - rng.randint(1, size - 1)
        ops.append((off, size, rng.random() < 0.4))
    return span, ops


def write_ops(path, span, ops, order="<"):
    """The ops file of model/tests/replay.c, in the guest's byte order."""
    with open(path, "wb") as f:
        f.write(struct.pack(order + "IIQ", 0x504F4C54, len(ops), span))
        for off, size, store in ops:
            f.write(struct.pack(order + "IBBH", off, size, int(store), 0))


def read_trace(path):
    recs = []
    with open(path) as f:
        for line in f:
            p = line.split()
            recs.append((p[0], int(p[1], 16), int(p[2])) if len(p) == 3 else (p[0], 0, 0))
    return recs


def pycachesim_replay(recs, cfg):
    """Replay the plugin's trace into pycachesim: L1I and L1D over one L2 (over an L3).
    A write-back, write-allocate store is a read for ownership followed by the
    write (load + store: an LRU update on a store hit, a counted miss and a
    fill on a store miss); a write-through store is a plain store."""
    from cachesim import Cache

    def cache(name, size, assoc, line, **kw):
        return Cache(name, size // (line * assoc), assoc, line, "LRU", **kw)

    l3 = cache("L3", cfg["l3_size"], cfg["l3_assoc"], cfg["l3_line"]) if cfg.get("l3_size") else None
    l2 = (cache("L2", cfg["l2_size"], cfg["l2_assoc"], cfg["l2_line"], load_from=l3, store_to=l3)
          if cfg["l2_size"] else None)
    wb = cfg["l1d_write"] == "wb"
    l1d = cache("L1D", cfg["l1d_size"], cfg["l1d_assoc"], cfg["l1d_line"], write_back=wb, write_allocate=wb,
                load_from=l2, store_to=l2)
    l1i = cache("L1I", cfg["l1i_size"], cfg["l1i_assoc"], cfg["l1i_line"], load_from=l2, store_to=l2)
    caches = {"l1i": l1i, "l1d": l1d, **({"l2": l2} if l2 else {}), **({"l3": l3} if l3 else {})}

    def snap():
        return {n: {k: getattr(c.backend, k) for k in STATS} for n, c in caches.items()}

    regions, begin = [], None
    for kind, addr, size in recs:
        # iterload/iterstore: their address is a C long (load()'s is a 32-bit int)
        if kind == "I":
            l1i.iterload([addr], length=size)
        elif kind == "R":
            l1d.iterload([addr], length=size)
        elif kind == "W":
            if wb:
                l1d.iterload([addr], length=size)
            l1d.iterstore([addr], length=size)
        elif kind == "B":
            begin = snap()
        elif kind == "E":
            end = snap()
            regions.append({n: {k: end[n][k] - begin[n][k] for k in STATS} for n in end})
    return regions, snap()


def compare(model, pyc, cfg, where):
    """The model's counts against pycachesim's, level by level. pycachesim
    counts HIT only for reads (loads, instruction fetches, L1 fills) and MISS
    for every allocation (a read miss or a write-allocate miss); a
    write-through L1 counts its stores nowhere (they go to the L2 as writes)."""
    assert (model["l1i"]["hits"], model["l1i"]["misses"]) == (pyc["l1i"]["HIT_count"], pyc["l1i"]["MISS_count"]), where
    d = model["l1d"]
    if cfg["l1d_write"] == "wb":
        assert (d["hits"], d["misses"]) == (pyc["l1d"]["HIT_count"], pyc["l1d"]["MISS_count"]), where
        assert d["writebacks"] == pyc["l1d"]["EVICT_count"], where
    else:
        assert (d["load_hits"], d["load_misses"]) == (pyc["l1d"]["HIT_count"], pyc["l1d"]["MISS_count"]), where
    for lvl in ("l2", "l3"):
        if cfg.get(f"{lvl}_size"):
            m = model[lvl]
            assert (m["read_hits"], m["read_misses"] + m["write_misses"]) == (
                pyc[lvl]["HIT_count"], pyc[lvl]["MISS_count"]), f"{lvl}: {where}"
            assert m["write_hits"] + m["write_misses"] == pyc[lvl]["STORE_count"], f"{lvl}: {where}"
            assert m["writebacks"] == pyc[lvl]["EVICT_count"], f"{lvl}: {where}"
        else:
            assert model[lvl] is None
    # what reaches memory: the last level's dirty victims, or (write-through, no
    # L2) every stored line
    last = "l3" if cfg.get("l3_size") else "l2" if cfg["l2_size"] else "l1d"
    to_memory = (d["store_hits"] + d["store_misses"] if last == "l1d" and cfg["l1d_write"] == "wt"
                 else model[last]["writebacks"])
    assert model["memory_writes_by_node"] == [to_memory], where


@pytest.mark.parametrize("seed", range(24))
def test_cache_model_matches_pycachesim_exactly(seed, plugin, bins, tmp_path):
    need_pycachesim()
    rng = random.Random(1000 + seed)
    cfg = draw_config(rng)
    span, ops = draw_ops(rng, cfg)
    write_ops(tmp_path / "ops.bin", span, ops)
    r, stats, trace = run_model(plugin, "x86_64", bins["replay.x86_64"], [tmp_path / "ops.bin"], cfg, tmp_path,
                                trace=True)
    buf = int(kv(r.stdout)["buf"], 16)
    recs = read_trace(trace)
    assert [k for k, _, _ in recs if k in "BE"] == ["B", "E"]
    roi = recs[recs.index(("B", 0, 0)) + 1:recs.index(("E", 0, 0))]
    data = [(k, a, s) for k, a, s in roi if k in "RW"]

    # the stream is exactly what the program did: its list, in order
    mine = [(a - buf, s, k == "W") for k, a, s in data if buf <= a < buf + span + 8]
    assert mine == ops
    region = stats["regions"][0]
    assert region["memory_accesses"] == {"loads": sum(k == "R" for k, _, _ in data),
                                         "stores": sum(k == "W" for k, _, _ in data)}
    line = cfg["l1d_line"]
    straddles = sum((a % line) + s > line for _, a, s in data)
    assert region["straddling_accesses"] == straddles and straddles >= 100
    assert region["unaligned_accesses"] == sum(s in (2, 4, 8) and a % s != 0 for _, a, s in data)

    regions, total = pycachesim_replay(recs, cfg)
    where = f"config {cfg}"
    compare(region, regions[0], cfg, "region of interest, " + where)
    compare(stats["total"], total, cfg, "whole run, " + where)
    # every level saw misses, so the comparison is not vacuous
    assert region["l1d"]["misses"] > 0 and stats["total"]["l1i"]["misses"] > 0
    if cfg["l2_size"]:
        assert region["l2"]["read_misses"] > 0
    if cfg["l3_size"]:
        assert region["l3"]["read_misses"] > 0 and region["l3"]["read_hits"] + region["l3"]["write_hits"] > 0


def test_split_tag_array_matches_pycachesim_exactly(plugin, bins, tmp_path):
    """An L3 of 262144 entries and 16 ways (a 2 MiB tag array): the plugin keeps
    each set's first ways apart from the others (model.h, SPLIT_HEAD); loads and
    stores to 18 lines of one set (hits at every depth) and 40 of another (misses,
    dirty victims from the far ways) count exactly what pycachesim counts."""
    need_pycachesim()
    cfg = dict(l1i_size=1024, l1i_assoc=2, l1i_line=16, l1d_size=1024, l1d_assoc=2, l1d_line=16, l1d_write="wb",
               l2_size=4096, l2_assoc=4, l2_line=16, l3_size=4 << 20, l3_assoc=16, l3_line=16)
    stride = cfg["l3_size"] // cfg["l3_assoc"]  # lines this far apart share every level's set
    rng = random.Random(77)
    ops = []
    for _ in range(6000):
        j, base = (rng.randrange(18), 0) if rng.random() < 0.5 else (rng.randrange(40), 5 * 16)
        ops.append((base + j * stride + 4 * rng.randrange(4), 4, rng.random() < 0.3))
    span = 40 * stride + 256
    write_ops(tmp_path / "ops.bin", span, ops)
    r, stats, trace = run_model(plugin, "x86_64", bins["replay.x86_64"], [tmp_path / "ops.bin"], cfg, tmp_path,
                                trace=True)
    recs = read_trace(trace)
    regions, total = pycachesim_replay(recs, cfg)
    compare(stats["regions"][0], regions[0], cfg, "region of interest, split L3")
    compare(stats["total"], total, cfg, "whole run, split L3")
    l3 = stats["regions"][0]["l3"]
    assert l3["read_misses"] > 1000 and l3["read_hits"] > 1000 and l3["writebacks"] > 100, l3


def test_cache_comparison_covers_both_write_policies_and_no_l2():
    configs = [draw_config(random.Random(1000 + s)) for s in range(24)]
    assert {c["l1d_write"] for c in configs} == {"wb", "wt"}
    assert any(c["l2_size"] == 0 for c in configs) and any(c["l2_size"] for c in configs)
    assert sum(1 for c in configs if c["l3_size"]) >= 5  # three levels, more than a token
    assert any(c["l1d_assoc"] == 1 for c in configs)  # direct mapped
    assert any(c["l1d_size"] == c["l1d_line"] * c["l1d_assoc"] for c in configs)  # one set: fully associative


def test_sparc_stream_matches_pycachesim(plugin, bins, tmp_path):
    """The same on sparc64 (big-endian, 8 KiB pages, the progress audit on)."""
    need_pycachesim()
    rng = random.Random(77)
    cfg = dict(l1i_size=2048, l1i_assoc=2, l1i_line=32, l1d_size=1024, l1d_assoc=4, l1d_line=32, l1d_write="wt",
               l2_size=16384, l2_assoc=4, l2_line=64, page=8192)
    span, ops = draw_ops(rng, cfg, n=2000)
    ops = [(o & ~(s - 1), s, st) for o, s, st in ops]  # SPARC traps misaligned accesses
    write_ops(tmp_path / "ops.bin", span, ops, order=">")
    r, stats, trace = run_model(plugin, "sparc64", bins["replay.sparc64"], [tmp_path / "ops.bin"], cfg, tmp_path,
                                trace=True)
    recs = read_trace(trace)
    regions, total = pycachesim_replay(recs, cfg)
    compare(stats["regions"][0], regions[0], cfg, "sparc64 region")
    compare(stats["total"], total, cfg, "sparc64 whole run")


# ------------------------------------------------------------------ TLBs


def cyclic_misses(vpns, sets, ways, reps):
    """LRU on a cyclic reference string: a set whose k pages fit (k <= ways)
    misses k times (cold), one with k > ways misses on every reference."""
    per_set = {}
    for v in vpns:
        per_set.setdefault(v % sets, set()).add(v)
    return sum(len(p) if len(p) <= ways else len(p) * reps for p in per_set.values())


CYCLES = [
    # dtlb entries/assoc (0 = fully associative), stlb entries/assoc, pages, stride, page size, reps, seed
    dict(dtlb=(16, 4), pages=16, stride=1, page=4096, reps=5, seed=0),   # fits: cold misses only
    dict(dtlb=(16, 4), pages=32, stride=1, page=4096, reps=5, seed=0),   # 8 pages per 4-way set: all miss
    dict(dtlb=(16, 4), pages=8, stride=4, page=4096, reps=5, seed=0),    # stride 4 = the set count: one set
    dict(dtlb=(16, 2), pages=16, stride=3, page=4096, reps=4, seed=7),   # odd stride, permuted order
    dict(dtlb=(64, 0), pages=64, stride=5, page=4096, reps=3, seed=3),   # fully associative, fits
    dict(dtlb=(64, 0), pages=128, stride=1, page=4096, reps=3, seed=11),  # fully associative, 2x too many
    dict(dtlb=(16, 2), pages=16, stride=2, page=8192, reps=4, seed=0),   # SPARC-sized pages
    dict(dtlb=(16, 0), stlb=(256, 4), pages=64, stride=1, page=4096, reps=4, seed=5),  # STLB catches all
    dict(dtlb=(16, 0), stlb=(32, 2), pages=64, stride=1, page=4096, reps=4, seed=0),   # STLB thrashes too
]


@pytest.mark.parametrize("case", CYCLES, ids=[f"walk{i}" for i in range(len(CYCLES))])
def test_tlb_cyclic_walks_match_closed_form(case, plugin, bins, tmp_path):
    entries, assoc = case["dtlb"]
    opts = dict(dtlb_entries=entries, dtlb_assoc=assoc, page=case["page"])
    if "stlb" in case:
        opts.update(stlb_entries=case["stlb"][0], stlb_assoc=case["stlb"][1], stlb_lat=7)
    r, stats, _ = run_model(plugin, "x86_64", bins["tlbwalk.x86_64"],
                            [f"mode=cycle", f"pages={case['pages']}", f"stride={case['stride']}",
                             f"reps={case['reps']}", f"seed={case['seed']}", f"page={case['page']}"], opts, tmp_path)
    base = int(kv(r.stdout)["base"], 16)
    region = stats["regions"][0]
    loads = case["pages"] * case["reps"]
    assert region["dtlb"]["accesses"] == loads and region["memory_accesses"] == {"loads": loads, "stores": 0}
    vpns = [base // case["page"] + i * case["stride"] for i in range(case["pages"])]
    ways = assoc or entries
    expect = cyclic_misses(vpns, entries // ways, ways, case["reps"])
    assert region["dtlb"]["misses"] == expect
    if "stlb" in case:
        s_entries, s_assoc = case["stlb"]
        assert expect == loads, "the STLB cases need a DTLB that misses every time"
        s_expect = cyclic_misses(vpns, s_entries // s_assoc, s_assoc, case["reps"])
        assert region["stlb"] == {"accesses": loads, "hits": loads - s_expect, "misses": s_expect}
        assert region["cycles_breakdown"]["tlb"] == loads * 7 + s_expect * stats["options"]["tlb_miss"]
    else:
        assert region["stlb"] is None
        assert region["cycles_breakdown"]["tlb"] == (expect + region["itlb"]["misses"]) * stats["options"]["tlb_miss"]


def expected_random_misses(ways, pages, n):
    """Uniform independent references to `pages` pages through a fully
    associative LRU of `ways` entries, starting empty: the next reference hits
    with probability resident/pages, and resident = min(distinct pages seen,
    ways). Exact expectation by dynamic programming over that count."""
    dist = [0.0] * (ways + 1)
    dist[0] = 1.0
    misses = 0.0
    for _ in range(n):
        new = [0.0] * (ways + 1)
        for c, p in enumerate(dist):
            if not p:
                continue
            miss = 1 - c / pages
            misses += p * miss
            if c < ways:
                new[c + 1] += p * miss
                new[c] += p * (1 - miss)
            else:
                new[c] += p
        dist = new
    return misses


@pytest.mark.parametrize("entries,assoc,pages", [(16, 0, 64), (32, 0, 64), (64, 4, 256), (16, 2, 32)])
def test_tlb_random_walk_matches_expectation(entries, assoc, pages, plugin, bins, tmp_path):
    n = 20000
    r, stats, _ = run_model(plugin, "x86_64", bins["tlbwalk.x86_64"],
                            ["mode=random", f"pages={pages}", f"n={n}", "seed=12345"],
                            dict(dtlb_entries=entries, dtlb_assoc=assoc), tmp_path)
    region = stats["regions"][0]
    assert region["dtlb"]["accesses"] == n
    ways = assoc or entries
    sets = entries // ways
    # sets are independent; each sees about n/sets uniform references to its pages/sets pages
    expect = sets * expected_random_misses(ways, pages // sets, n // sets)
    p = 1 - entries / pages
    sigma = (n * p * (1 - p)) ** 0.5
    assert abs(region["dtlb"]["misses"] - expect) <= 5 * sigma + sets, (region["dtlb"], expect, sigma)


# ------------------------------------------------------------------ SPARC


@pytest.mark.parametrize("nwindows,depth", [(8, 6), (8, 20), (8, 100), (4, 30), (16, 40), (32, 31)])
def test_sparc_window_spills_and_fills_per_descent(nwindows, depth, plugin, bins, tmp_path):
    reps = 10
    _, stats, _ = run_model(plugin, "sparc64", bins["windows.sparc64"], [f"depth={depth}", f"reps={reps}"],
                            dict(nwindows=nwindows, window_trap=50), tmp_path)
    region = stats["regions"][0]
    per_descent = max(0, depth - (nwindows - 2))
    assert region["traps"]["window_spill"] == reps * per_descent
    assert region["traps"]["window_fill"] == reps * per_descent
    assert region["cycles_breakdown"]["window_trap"] == 2 * reps * per_descent * 50


@pytest.mark.parametrize("width", [2, 4, 8])
def test_sparc_misaligned_load_is_one_trap_each(width, plugin, bins, tmp_path):
    n = 500
    r, stats, _ = run_model(plugin, "sparc64", bins["misalign.sparc64"], [f"width={width}", f"n={n}"],
                            {f"unaligned{width}": "trap", "trap_cost": 300}, tmp_path)
    assert int(kv(r.stdout)["traps"]) == n  # the guest's SIGBUS handler ran once per load
    region, total = stats["regions"][0], stats["total"]
    assert region["traps"]["unaligned"] == n and region["unaligned_accesses"] == n
    assert total["traps"]["unaligned"] == n and total["other_faults"] == 0
    assert region["cycles_breakdown"]["unaligned_trap"] == n * 300


def test_sparc_misaligned_load_done_by_hardware_is_a_penalty(plugin, bins, tmp_path):
    _, stats, _ = run_model(plugin, "sparc64", bins["misalign.sparc64"], ["width=4", "n=300"],
                            dict(unaligned4="hw", unaligned_penalty=7), tmp_path)
    region = stats["regions"][0]
    assert region["traps"]["unaligned"] == 0 and region["unaligned_accesses"] == 300
    assert region["cycles_breakdown"]["unaligned_hw"] == 300 * 7


@pytest.mark.parametrize("arch,exe,args", [
    ("sparc64", "windows.sparc64", ["depth=60", "reps=20"]),   # QEMU's own window traps restart save/restore
    ("sparc64", "misalign.sparc64", ["width=4", "n=200"]),    # SIGBUS in the middle of a block
    ("x86_64", "features.x86_64", ["n=300"]),
])
def test_instruction_count_matches_reference_plugin(arch, exe, args, plugin, bins, tmp_path):
    _, stats, _ = run_model(plugin, arch, bins[exe], args, {}, tmp_path)
    # x86 rep-prefixed string instructions run once per iteration: count every execution there
    ref_plugin = str(bins["insn-count"]) + (",repeats=1" if arch == "x86_64" else "")
    r = subprocess.run([QEMU[arch], "-plugin", ref_plugin, str(bins[exe]), *args], capture_output=True,
                       text=True, timeout=300)
    ref = int(r.stderr.split("insn-count")[-1].split()[0])
    assert stats["total"]["instructions"] == ref


REP_STOSB_C = r"""
/* rep stosb of argv[1] bytes (QEMU 7.2 runs one iteration per execution of its block, the
 * instruction alone: the plugin's rep_exec_lean) */
#include <stdio.h>
#include <stdlib.h>
static char buf[1 << 20];
int main(int argc, char **argv)
{
    void *p = buf;
    unsigned long n = strtoul(argv[1], 0, 0);
    __asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(1) : "memory");
    printf("%d\n", buf[n / 2]);
    return 0;
}
"""


@pytest.mark.parametrize("machine_opts", [False, True])
def test_a_rep_string_block_counts_every_iteration(machine_opts, plugin, bins, tmp_path):
    """A block that is one rep stosb takes one callback for the block and the instruction
    (rep_exec_lean): every execution counted as the reference counter counts it (repeats=1),
    each a repeat after the first, each byte one L1D store, with the default options and with
    x86-2012-server's (its timeline and prefetchers)."""
    (tmp_path / "rep.c").write_text(REP_STOSB_C)
    exe = tmp_path / "rep"
    subprocess.run(["gcc", "-O1", "-static", "-o", str(exe), str(tmp_path / "rep.c")], check=True, timeout=120)
    opts = dict(a.split("=", 1) for a in P.args(M.load("x86-2012-server"))) if machine_opts else {}
    got = {}
    for n in (64, 200000):
        _, stats, _ = run_model(plugin, "x86_64", exe, [n], opts, tmp_path)
        got[n] = stats["total"]
        r = subprocess.run([QEMU["x86_64"], "-plugin", f"{bins['insn-count']},repeats=1", str(exe), str(n)],
                           capture_output=True, text=True, timeout=300)
        assert got[n]["instructions"] == int(r.stderr.split("insn-count")[-1].split()[0]), (n, r.stderr)
    # (the longer argument costs strtoul a few more instructions and stores of its own)
    assert got[200000]["rep_repeats"] - got[64]["rep_repeats"] == 200000 - 64, got
    stores = got[200000]["memory_accesses"]["stores"] - got[64]["memory_accesses"]["stores"]
    assert 200000 - 64 <= stores < 200000, stores


# ------------------------------------------------------ locks, prefetch, regions


def test_x86_locked_rmw_prefetch_and_straddles(plugin, bins, tmp_path):
    n = 400
    _, stats, _ = run_model(plugin, "x86_64", bins["features.x86_64"], [f"n={n}"],
                            dict(lock_cost=20, split_lock_cost=1000, straddle_penalty=5), tmp_path)
    regs = stats["regions"]
    assert len(regs) == 6 and all(r["marked"] and r["closed_by"] == "end_marker" for r in regs)
    inline, split, xchg, pf_reg, pf_rip, straddle = regs
    assert inline["locked"] == {"in_line": n, "split": 0} and inline["straddling_accesses"] == 0
    assert inline["cycles_breakdown"]["lock"] == 20 * n
    assert split["locked"] == {"in_line": 0, "split": n}
    assert split["straddling_accesses"] == 2 * n  # the read and the write of each locked add
    assert split["cycles_breakdown"]["lock"] == 1000 * n and split["cycles_breakdown"]["straddle"] == 5 * 2 * n
    assert xchg["locked"] == {"in_line": n, "split": 0}
    # x86 prefetches are hints: weak; through a register the model cannot see the address
    assert pf_reg["prefetches"] == {"issued": n, "dropped": 0, "trapped": 0, "unknown_address": n}
    assert pf_rip["prefetches"] == {"issued": n, "dropped": 0, "trapped": 0, "unknown_address": 0}
    assert straddle["straddling_accesses"] == n and straddle["locked"] == {"in_line": 0, "split": 0}
    for r in regs:
        assert r["traps"]["prefetch"] == 0
        assert r["cycles"] == sum(r["cycles_breakdown"].values())


@pytest.mark.parametrize("machine", ["strong", "weak"])
def test_sparc_prefetch_strong_and_weak(machine, plugin, bins, tmp_path):
    n = 400
    _, stats, _ = run_model(plugin, "sparc64", bins["features.sparc64"], [f"n={n}"],
                            dict(prefetch=machine, prefetch_trap=900), tmp_path)
    strong, weak, unknown, casx = stats["regions"]
    if machine == "strong":  # fcn 22 at address 0: the TLB misses, the walk finds nothing: a trap
        assert strong["prefetches"] == {"issued": n, "dropped": 0, "trapped": n, "unknown_address": 0}
        assert strong["traps"]["prefetch"] == n and strong["cycles_breakdown"]["prefetch_trap"] == 900 * n
    else:  # a machine that drops strong prefetches too (UltraSPARC T2)
        assert strong["prefetches"] == {"issued": n, "dropped": n, "trapped": 0, "unknown_address": 0}
    assert weak["prefetches"] == {"issued": n, "dropped": n, "trapped": 0, "unknown_address": 0}
    assert unknown["prefetches"] == {"issued": n, "dropped": 0, "trapped": 0, "unknown_address": n}
    assert casx["locked"] == {"in_line": n, "split": 0}


@pytest.mark.parametrize("arch", ["x86_64", "sparc64"])
def test_fast_forward_models_nothing_before_the_first_region(arch, plugin, bins, tmp_path):
    """fast_forward=1 (the guest lane's boot): nothing is counted before the first
    region marker, the region itself has exactly the same instructions and
    accesses (they do not depend on cache state), and its caches start cold."""
    rng = random.Random(5)
    cfg = dict(l1i_size=4096, l1i_assoc=2, l1i_line=64, l1d_size=4096, l1d_assoc=2, l1d_line=64, l1d_write="wb",
               l2_size=0, l3_size=0)
    span, ops = draw_ops(rng, cfg, n=2000)
    if arch == "sparc64":  # SPARC traps misaligned accesses; big-endian
        ops = [(o & ~(s - 1), s, st) for o, s, st in ops]
    write_ops(tmp_path / "ops.bin", span, ops, order=">" if arch == "sparc64" else "<")
    runs = {}
    for ff in (0, 1):
        _, stats, _ = run_model(plugin, arch, bins[f"replay.{arch}"], [tmp_path / "ops.bin"], {**cfg, "fast_forward": ff},
                                tmp_path)
        runs[ff] = stats
    full, ff = runs[0], runs[1]
    assert ff["options"]["fast_forward"] == 1
    r0, r1 = full["regions"][0], ff["regions"][0]
    assert r0["marked"] and r1["marked"]
    assert r1["instructions"] == r0["instructions"]
    assert r1["memory_accesses"] == r0["memory_accesses"] and r1["l1d"]["accesses"] == r0["l1d"]["accesses"]
    assert r1["l1d"]["misses"] >= r0["l1d"]["misses"] and r1["l1i"]["misses"] >= r0["l1i"]["misses"]
    # the start-up (loading the ops, libc) is not in the whole run any more
    assert ff["total"]["instructions"] < full["total"]["instructions"] - 1000


@pytest.mark.parametrize("arch", ["x86_64", "sparc64"])
def test_fast_forward_2_models_only_inside_regions(arch, plugin, bins, tmp_path):
    """fast_forward=2 (what runs between a guest's regions is not modelled): every
    region has the same instructions, accesses, locked operations and prefetches
    as when everything is modelled, and nothing outside the regions is counted."""
    runs = {}
    for ff in (0, 2):
        _, runs[ff], _ = run_model(plugin, arch, bins[f"features.{arch}"], ["n=500"], {"fast_forward": ff}, tmp_path)
    full, only = runs[0], runs[2]
    assert only["options"]["fast_forward"] == 2
    keys = ("instructions", "memory_accesses", "locked", "prefetches", "straddling_accesses")
    r0 = [{k: r[k] for k in keys} for r in full["regions"] if r["marked"]]
    r2 = [{k: r[k] for k in keys} for r in only["regions"] if r["marked"]]
    assert len(r2) == len(r0) >= 4 and r2 == r0
    inside = sum(r["instructions"] for r in only["regions"] if r["marked"])
    # outside the regions only each end marker's own block is counted: the marker
    # and what follows it in that block (a region stops before its end marker)
    assert 0 < only["total"]["instructions"] - inside <= 8 * len(r2)
    assert full["total"]["instructions"] > inside + 1000  # start-up, libc and the code between regions


def test_without_markers_the_whole_run_is_one_region(plugin, bins, tmp_path):
    r = subprocess.run([str(bins["tlbwalk.x86_64"]), "mode=cycle", "pages=4", "reps=1"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0  # natively the markers are plain no-ops
    exe = bins["windows.sparc64"].with_name("nomarker")
    c = subprocess.run(["gcc", "-O1", "-static", "-x", "c", "-", "-o", str(exe)],
                       input="int main(void){volatile int s=0; for(int i=0;i<1000;i++) s+=i; return s!=499500;}",
                       capture_output=True, text=True, timeout=120)
    assert c.returncode == 0, c.stderr
    _, stats, _ = run_model(plugin, "x86_64", exe, [], {}, tmp_path)
    assert stats["roi_markers"] is False and len(stats["regions"]) == 1
    whole = dict(stats["regions"][0])
    assert whole.pop("marked") is False and whole.pop("closed_by") == "exit"
    whole.pop("vcpu"), whole.pop("index"), whole.pop("seq"), whole.pop("vcpu_node")
    assert whole == stats["total"]


def test_fill_buffers_beyond_256_still_overlap_more_misses(plugin, bins, tmp_path):
    """core=ooo: every value in an option's range is modelled, none cut short by a table of
    the plugin's: 20,000 independent loads of random lines, memory 2,000 cycles away and a
    4,096-instruction window (about 240 loads of replay.c), so that 512 fill buffers overlap
    more of them than 256 (the MSHR rings and the window's queue held 256 before, and 512
    or 1,024 gave 256's time), 1,024 no more than 512 (the window binds), and 128 fewer."""
    rng = random.Random(7)
    span = 64 << 20
    write_ops(tmp_path / "ops.bin", span, [(line * 64, 8, False) for line in rng.sample(range(span // 64), 20000)])
    base = {"core": "ooo", "cpi": 0.25, "mem_lat": 2000, "tlb_miss": 0, "rob": 4096, "lq": 4096, "sb": 4096}
    cycles = {}
    for fb in (128, 256, 512, 1024):
        _, stats, _ = run_model(plugin, "x86_64", bins["replay.x86_64"], [tmp_path / "ops.bin"],
                                {**base, "l1d_mshrs": fb}, tmp_path)
        region = stats["regions"][0]
        assert region["l1d"]["load_misses"] >= 20000
        cycles[fb] = (region["cycles"], region["timing"]["data_stall_cycles"])
    assert cycles[128][0] > cycles[256][0] > cycles[512][0] >= cycles[1024][0], cycles
    assert cycles[512][1] > 0, cycles  # the window still stalls: the fill buffers were what bound 256


def test_no_line_crosses_the_fill_path_faster_than_it_allows_whatever_the_fill_buffers(plugin, bins, tmp_path):
    """l2_fill_width=32: a 64-byte line takes 2 cycles on the L2's path to the L1D, so a
    stream over 128 KiB (the L1D misses it, the L2 holds it), eight times, issued at almost
    no cost (cpi=0.01), takes at least about 2 cycles per L1D miss with 32 fill buffers and
    with 512 (the path remembered 32 transfers, and with 512 fill buffers the lines crossed
    at 0.70 cycles each)."""
    write_ops(tmp_path / "ops.bin", 128 << 10, [((i % 2048) * 64, 8, False) for i in range(2048 * 8)])
    base = {"core": "ooo", "cpi": 0.01, "tlb_miss": 0, "rob": 4096, "lq": 4096, "sb": 4096, "l2_fill_width": 32}
    per_miss = {}
    for fb in (32, 512):
        _, stats, _ = run_model(plugin, "x86_64", bins["replay.x86_64"], [tmp_path / "ops.bin"],
                                {**base, "l1d_mshrs": fb}, tmp_path)
        region = stats["regions"][0]
        assert region["l1d"]["load_misses"] >= 16384
        per_miss[fb] = region["cycles"] / region["l1d"]["load_misses"]
    assert 1.95 <= per_miss[32] < 2.2 and 1.95 <= per_miss[512] <= per_miss[32], per_miss


def test_more_fill_buffers_never_slow_a_prefetched_stride(plugin, bins, tmp_path):
    """x86-2012-server's four prefetchers on one load per 128 B over 64 MiB (beyond its L3; the odd
    lines never used): with 64 fill buffers the demand misses keep the L2's 16 MSHRs busy, and an
    L1D prefetch that misses the L2 then waits behind them (dropped: a demand miss first) instead
    of taking an MSHR from them and from the L2's streamer. Before, 64 fill buffers were slower
    than 10 (30.9 against 25.3 cycles a load here; miss-overlap's stride128 9.72 against 8.83 ns,
    where gem5 O3 gives 5.72 against 8.93) and read more lines from memory (1.11 M against 0.87 M)."""
    span = 64 << 20
    loads = span // 128
    write_ops(tmp_path / "ops.bin", span, [(i * 128, 8, False) for i in range(loads)])
    opts = dict(a.split("=", 1) for a in P.args(M.load("x86-2012-server")))
    cycles, reads = {}, {}
    for fb in (10, 64):
        _, stats, _ = run_model(plugin, "x86_64", bins["replay.x86_64"], [tmp_path / "ops.bin"],
                                {**opts, "l1d_mshrs": fb}, tmp_path)
        region = stats["regions"][0]
        assert region["l1d"]["load_misses"] >= loads // 2
        cycles[fb] = region["cycles"] / loads
        reads[fb] = sum(region["memory_reads_by_node"])
    assert cycles[64] < cycles[10], cycles
    assert reads[64] <= reads[10], reads


def test_output_is_byte_identical_across_runs(plugin, bins, tmp_path):
    rng = random.Random(5)
    cfg = draw_config(rng)
    span, ops = draw_ops(rng, cfg, n=1000)
    write_ops(tmp_path / "ops.bin", span, ops)
    outs = []
    for _ in range(2):
        _, stats, _ = run_model(plugin, "x86_64", bins["replay.x86_64"], [tmp_path / "ops.bin"], cfg, tmp_path)
        outs.append(sorted(tmp_path.glob("stats-*.json"), key=lambda p: p.stat().st_mtime_ns)[-1].read_bytes())
    assert outs[0] == outs[1]
    outs = []
    for _ in range(2):
        run_model(plugin, "sparc64", bins["windows.sparc64"], ["depth=30", "reps=5"], {}, tmp_path)
        outs.append(sorted(tmp_path.glob("stats-*.json"), key=lambda p: p.stat().st_mtime_ns)[-1].read_bytes())
    assert outs[0] == outs[1]


def test_out_to_a_fifo_or_device_is_written_in_place(plugin, bins, fifo, tmp_path):
    """out=/dev/null as root: the stats' atomic rename would put a regular file where the
    device was (the machine's /dev/null then a file no other user can write); a device or
    a FIFO is written in place."""
    path, read = fifo
    r = subprocess.run([QEMU["x86_64"], "-plugin", f"{plugin},out={path}", str(bins["features.x86_64"])],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert stat.S_ISFIFO(os.stat(path).st_mode), "the FIFO was replaced by a file"
    got = read()
    assert got and json.loads(got)["tool"] == "trapline-model"
    assert [f.name for f in tmp_path.iterdir()] == ["pipe"]  # no temporary file left


# ------------------------------------------------------------------ options

# every option of the table but trace= (the tests' own access stream, exercised by the pycachesim tests)
CONTRACT = [o.name for o in P.OPTIONS if o.name != "trace"]


@pytest.mark.parametrize("opt,words", [
    ("bogus=1", ["unknown option 'bogus'"] + CONTRACT),
    ("l1d_size=3000", ["l1d_size=3000", "whole number of lines"]),
    ("l1d_size=3072", ["l1d_size=3072", "power-of-two number of sets"]),
    ("l1d_line=48", ["l1d_line=48", "power of two"]),
    ("l1d_size=64,l1d_assoc=4", ["l1d_size=64", "smaller than one set"]),
    ("l2_size=65536,l2_line=32,l1d_line=64", ["l2_line=32"]),
    ("page=3000", ["page=3000", "power of two"]),
    ("dtlb_entries=48,dtlb_assoc=32", ["dtlb_entries=48", "power-of-two number of sets"]),
    ("l1d_write=wa", ["l1d_write=wa", "wb", "wt"]),
    ("unaligned4=emulate", ["unaligned4=emulate", "hw", "trap"]),
    ("prefetch=maybe", ["prefetch=maybe", "strong", "weak"]),
    ("cpi=-1", ["cpi=-1"]),
    ("mem_lat=5,l2_lat=14", ["mem_lat=5"]),
    ("nwindows=8", ["nwindows=8", "sparc64"]),
    ("arch=sparc64", ["arch=sparc64", "x86_64"]),
    ("lock_cost=many", ["lock_cost=many", "integer"]),
    ("l3_size=1048576,l3_assoc=16,l3_line=64,l3_lat=30,l2_size=0", ["l3_size=1048576", "needs an L2"]),
    ("l2_size=65536,l2_line=64,l3_size=1048576,l3_line=32", ["l3_line=32", "l2_line=64"]),
    ("numa_nodes=2,numa_lat=200:300:300", ["numa_lat has 3 values", "needs 4"]),
    ("numa_nodes=9", ["numa_nodes=9", "1 to 8"]),
    ("numa_nodes=2,numa_cpus=0:2", ["numa_cpus", "node 2"]),
    ("numa_nodes=2,numa_mem=1024", ["numa_mem has 1 values"]),
    ("numa_interleave=48", ["numa_interleave=48", "power of two"]),
    ("trap_table=4325376", ["trap_table=4325376", "sparc64"]),  # right address, wrong arch (x86_64)
    ("fast_forward=3", ["fast_forward=3", "only inside regions"]),
    ("ff_reset=1,fast_forward=2", ["ff_reset=1", "system mode only"]),  # (a user-mode run: qemu-x86_64)
])
def test_bad_options_fail_fast_naming_the_option(opt, words, plugin, bins, tmp_path):
    spec = f"{plugin},{opt}"
    r = subprocess.run(["qemu-x86_64", "-plugin", spec, str(bins["tlbwalk.x86_64"])], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def test_every_contract_option_is_accepted(plugin, bins, tmp_path):
    opts = dict(arch="x86_64", cpi=0.8, l1i_size=16384, l1i_assoc=4, l1i_line=32, l1i_lat=2, l1d_size=16384,
                l1d_assoc=4, l1d_line=32, l1d_lat=3, l1d_write="wt", l2_size=262144, l2_assoc=8, l2_line=64,
                l2_lat=12, mem_lat=150, itlb_entries=32, itlb_assoc=0, dtlb_entries=64, dtlb_assoc=4, page=4096,
                tlb_miss=40, stlb_entries=512, stlb_assoc=4, stlb_lat=7, unaligned2="hw", unaligned4="trap",
                unaligned8="trap", unaligned_penalty=3, straddle_penalty=4, trap_cost=900, lock_cost=18,
                split_lock_cost=1200, prefetch="strong", prefetch_trap=700, nwindows=0, window_trap=80,
                l3_size=1048576, l3_assoc=16, l3_line=64, l3_lat=30, numa_nodes=2, numa_lat="150:210:210:150",
                numa_mem="1073741824:1073741824", numa_cpus="1", numa_interleave=0, trap_table=0, fast_forward=0)
    assert set(opts) <= set(CONTRACT), sorted(set(opts) - set(CONTRACT))
    # an option the list above does not name (a new row of options.def) is passed at its table default
    opts = {**{o.name: int(o.default) if o.kind == "U64" else float(o.default) if o.kind in ("F64", "F64P")
               else o.default
               for o in P.OPTIONS if o.name in CONTRACT and o.name not in opts and o.default != ""}, **opts}
    assert sorted(opts) == sorted(set(CONTRACT) - {"out"})
    _, stats, _ = run_model(plugin, "x86_64", bins["tlbwalk.x86_64"], ["pages=4"], opts, tmp_path)
    o = stats["options"]
    lists = dict(numa_lat=[[150, 210], [210, 150]], numa_mem=[1 << 30, 1 << 30], numa_cpus=[1])
    for k, v in dict(opts, itlb_assoc=32, **lists).items():  # assoc 0 = fully associative, echoed as the way count
        assert o[k] == v, k
    r = stats["regions"][0]
    assert r["cycles"] == sum(r["cycles_breakdown"].values())
    assert r["cycles_breakdown"]["base"] == round(0.8 * r["instructions"])


def test_build_is_cached_and_prints_the_path(plugin):
    r = subprocess.run([str(MODEL / "build.sh")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == str(plugin) and r.stderr == ""
    assert plugin.parent.name == plugin.parent.name.lower() and len(plugin.parent.name) == 64
    assert shutil.which("qemu-x86_64") and shutil.which("qemu-sparc64")


# ------------------------------------------------------------------ NUMA

@pytest.mark.parametrize("cpu_node", [0, 1])
def test_numa_charges_the_latency_matrix_by_node(cpu_node, plugin, bins, tmp_path):
    """Lines interleaved over two nodes (user mode has no physical addresses:
    the node of a line is (address / 64) % 2): every read that reaches memory
    is counted on its node and charged numa_lat[vCPU node][that node]."""
    rng = random.Random(77)
    cfg = dict(l1i_size=4096, l1i_assoc=2, l1i_line=64, l1d_size=4096, l1d_assoc=2, l1d_line=64, l1d_write="wb",
               l2_size=0, l3_size=0)
    span, ops = draw_ops(rng, dict(cfg, l2_size=0), n=2000)
    write_ops(tmp_path / "ops.bin", span, ops)
    lat = [[100, 300], [300, 100]]
    numa = dict(numa_nodes=2, numa_lat="100:300:300:100", numa_interleave=64, numa_cpus=str(cpu_node), mem_lat=100)
    _, stats, _ = run_model(plugin, "x86_64", bins["replay.x86_64"], [tmp_path / "ops.bin"], {**cfg, **numa},
                            tmp_path)
    r = stats["regions"][0]
    n0, n1 = r["memory_reads_by_node"]
    assert r["vcpu_node"] == cpu_node
    # with no L2 every L1 read miss (loads, write-allocate fills, fetches) is a memory read
    assert n0 + n1 == r["l1d"]["misses"] + r["l1i"]["misses"]
    assert n0 > 100 and n1 > 100  # interleaving put lines on both nodes
    assert r["memory_read_cycles"] == n0 * lat[cpu_node][0] + n1 * lat[cpu_node][1]
    w0, w1 = r["memory_writes_by_node"]  # dirty L1D victims, on the node of their line
    assert w0 + w1 == r["l1d"]["writebacks"] and w0 > 10 and w1 > 10
    # the same stream on one node at mem_lat: the matrix is what changed the cycles
    _, flat, _ = run_model(plugin, "x86_64", bins["replay.x86_64"], [tmp_path / "ops.bin"], {**cfg, "mem_lat": 100},
                           tmp_path)
    f = flat["regions"][0]
    assert f["memory_reads_by_node"] == [n0 + n1]
    assert r["cycles"] - f["cycles"] == (n1 if cpu_node == 0 else n0) * 200


# ------------------------------------------------------------------ the option table

def test_help_json_prints_the_table_trapline_plugin_parses(plugin, tmp_path):
    r = subprocess.run(["qemu-x86_64", "-plugin", f"{plugin},help=json", "/bin/true"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    table = json.loads(r.stdout)
    assert table["tool"] == "trapline-model"
    assert table["options"] == [o.to_dict() for o in P.OPTIONS]
    assert [o["name"] for o in table["options"]] == CONTRACT + ["trace"]
    out = tmp_path / "help.json"  # to out= instead, and the guest does not run
    r = subprocess.run(["qemu-x86_64", "-plugin", f"{plugin},help=json,out={out}", "/bin/false"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "" and json.loads(out.read_text()) == table
    r = subprocess.run(["qemu-x86_64", "-plugin", f"{plugin},help=yaml", "/bin/true"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "help=yaml" in r.stderr and "json" in r.stderr


def test_every_default_lies_in_its_range_and_is_echoed(plugin, bins, tmp_path):
    _, stats, _ = run_model(plugin, "x86_64", bins["tlbwalk.x86_64"], ["pages=4"], {}, tmp_path)
    echoed = stats["options"]
    assert list(echoed) == [o.name for o in P.OPTIONS if o.kind != "STR"]  # every option but the file names
    for o in P.OPTIONS:
        if o.kind in ("U64", "F64", "F64P") and o.default:
            assert o.min <= float(o.default) <= o.max, o.name
            assert echoed[o.name] == float(o.default), o.name
        elif o.kind == "ENUM":
            assert o.default == "" or o.default in o.choices, o.name
            assert echoed[o.name] in o.choices, o.name


@pytest.mark.parametrize("opt", [
    f"dtlb_entries={2 ** 64}",           # tlb.dtlb.entries=2^64
    "dtlb_entries=16777217",
    f"mem_lat={10 ** 30}",               # memory.latency=1e30ns
    f"l2_size={1099511627776 << 30}",    # caches.l2.size=1099511627776GB
    "l2_size=1099511627777",
    "cpi=1e30",
    "cpi=0",
    "tlb_miss=10000001",
    "straddle_penalty=1e9",
    "numa_lat=1:20000000",
    "page=128",
])
def test_out_of_range_values_are_refused_naming_the_option_and_range(opt, plugin, bins, tmp_path):
    name, value = opt.split("=")
    o = P.BY_NAME[name]
    r = subprocess.run(["qemu-x86_64", "-plugin", f"{plugin},{opt}", str(bins["tlbwalk.x86_64"])],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    line = next(x for x in r.stderr.splitlines() if x.startswith("trapline-model:"))
    assert f"{name}={value} is not valid" in line and str(o.max) in line and str(o.min) in line, line
    assert o.doc in line, line


def test_the_table_maps_every_machine_as_the_hand_written_mapping_did():
    """tests/data/plugin_args.json holds what the hand-written machine -> options
    mapping (machine.plugin_args, before the table replaced it) gave for every
    machine and for --set variants: the table-driven mapping must give exactly that."""
    golden = json.loads((Path(__file__).parent / "data" / "plugin_args.json").read_text())
    assert len(golden) >= 10
    for case in golden:
        m = M.load(case["machine"], [M.pair(s) for s in case["sets"]])
        # transfer_lat (coherence.transfer_latency, the lockstep lane's) came after that mapping, and so did
        # the options of the core, the MSHRs, the fill paths, the prefetchers and the memory channels (timing.c)
        later = {o.name for o in P.OPTIONS if o.name == "transfer_lat" or re.match(
            r"(core(\.|$)|caches\.\w+\.(mshrs|fill_width|prefetch)|memory\.(channels|channel_width|transfer_rate))", o.field)}
        assert [a for a in P.args(m) if a.split("=", 1)[0] not in later] == case["plugin_args"], \
            (case["machine"], case["sets"])


def test_every_machine_option_is_in_range():
    for name, m in M.load_all().items():
        for a in P.args(m):
            k, v = a.split("=", 1)
            o = P.BY_NAME[k]
            if o.kind == "ENUM":
                assert v in o.choices, (name, a)
            elif o.kind == "MATRIX":
                assert all(o.min <= int(x) <= o.max for x in v.split(":")), (name, a)
            else:
                assert o.min <= float(v) <= o.max and (o.kind != "F64P" or float(v) > o.min), (name, a)


def test_the_table_is_well_formed():
    with pytest.raises(ValueError, match="kind"):
        P.parse('OPT(x, U32, "0", 0, 1, "-", "a.b", "count", "doc")')
    with pytest.raises(ValueError, match="conversion"):
        P.parse('OPT(x, U64, "0", 0, 1, "-", "a.b", "furlongs", "doc")')
    with pytest.raises(ValueError, match="twice"):
        row = 'OPT(x, U64, "0", 0, 1, "-", "-", "platform", "doc")'
        P.parse(row + "\n" + row)
    with pytest.raises(ValueError, match="not OPT"):
        P.parse('OPT(x, U64, 0, 0, 1)')
    assert {o.how for o in P.OPTIONS} <= set(P.HOWS)


def test_region_counts_come_from_the_counter_list():
    g = {"instructions": 5, "cycles": 9, "l2": None, "trap_table_entries": {"unaligned": 3, "spill": 1},
         "exceptions": {"data_abort": 4}, "memory_reads_by_node": [1, 2], "memory_writes_by_node": [3, 4],
         "traps": {"window_spill": 2}, "l1d": {"misses": 6}}
    c = C.region_counts(g, 11)
    assert c["model_ops"] == 11 and c["model_instructions"] == 5 and c["model_cycles"] == 9
    assert c["model_l2_misses"] == 0 and c["model_l3_misses"] == 0 and c["model_l1d_misses"] == 6
    assert (c["model_trap_entries_unaligned"], c["model_trap_entries_spill"], c["model_data_aborts"]) == (3, 1, 4)
    assert (c["model_memory_reads"], c["model_memory_writes"], c["model_memory_reads_node1"]) == (3, 7, 2)
    # one meaning with gem5's (simstats.SCALARS): a rep string instruction once, lines the L2 filled on demand
    r = C.region_counts({"instructions": 25, "rep_repeats": 20, "l2": {"misses": 7, "read_misses": 5}}, 1)
    assert r["model_instructions"] == 5 and r["model_l2_misses"] == 5
    assert c["model_window_spills"] == 2 and c["model_window_fills"] == 0
    assert "model_data_aborts" not in C.region_counts({}, 0)
    names = {x.name for x in C.COUNTERS}
    assert all(k in names or any(n.endswith("{}") and k.startswith(n[:-2]) for n in names) for k in c)


@pytest.mark.parametrize("which", ["options", "counters"])
def test_docs_carry_the_generated_tables(which):
    text = (ROOT / "docs" / "model.md").read_text()
    begin, end, generated = P.marks()[which]
    assert begin in text and end in text, f"docs/model.md lacks the {which} table's markers"
    i, j = text.index(begin), text.index(end) + len(end) + 1
    assert text[i:j] == generated(), f"docs/model.md's {which} table is stale: python -m trapline.platforms.model.plugin --markdown"
