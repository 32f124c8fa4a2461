"""The gem5 platform (trapline/platforms/gem5/__init__.py) with a real gem5 (conftest's gem5_binary:
the shared v24.0.0.1 unpacked into the cache; skipped, saying why, without one).

Sizes are tiny (gem5's O3 core runs about 0.3 M instructions a second, the timing CPU
about 1.2 M): loop-order at 128 x 512 ints (256 KiB: a column walk with a 2 KiB stride
thrashes two sets of the 32 KiB L1D), x86-split-lock over a few offsets, a sweep of two
small points."""

import json
import os
import signal
from pathlib import Path

import pytest

from conftest import NO_PREFETCH, ROOT, dask, free_port, trapline, wait_listening
from trapline.platforms.gem5 import binary

TINY = ["--set", "rows=128", "--set", "cols=512"]


def _env(gem5: Path | str, results: Path, **more) -> dict:
    return {"GEM5": str(gem5), "TRAPLINE_RESULTS": str(results), **more}


def _run_dir(stdout: str) -> Path:
    return Path(stdout.strip().splitlines()[-1]).parent


def _entries(d: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((d / "entries").glob("*.json"))]


# ------------------------------------------------ bad input: one line, exit 2, before gem5 runs

def test_platform_gem5_without_a_gem5_is_one_line(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    r = trapline("run", "loop-order", "--platform", "gem5", "--quick",
                 env={"GEM5": "", "PATH": f"{empty}:/usr/bin:/bin", "TRAPLINE_RESULTS": str(tmp_path / "r"),
                      "TRAPLINE_CACHE": str(tmp_path / "cache")})  # and no trapline build of gem5
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "platform 'gem5' is not available here: gem5 not found" in lines[0]
    assert "--gem5 PATH" in lines[0] and "docs/gem5.md" in lines[0]  # how to get one
    assert not (tmp_path / "r").exists()  # no run directory: refused before anything ran


@pytest.mark.parametrize("args,words", [
    (["--set", "gem5.cpu=fast"], ["gem5.cpu", "fast", "timing", "minor", "o3"]),
    (["--gem5", "/no/such/gem5"], ["--gem5", "/no/such/gem5", "not an executable file"]),
    (["--set", "gem5.cores=2"], ["gem5.cores", "unknown field", "cpu"]),
])
def test_bad_gem5_input_is_one_line(gem5_binary, tmp_path, args, words):
    r = trapline("run", "loop-order", "--platform", "gem5", "--quick", *args, env=_env(gem5_binary, tmp_path / "r"))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert not (tmp_path / "r").exists()


def test_the_machines_name_their_gem5_cpu():
    from trapline import machine as M
    from trapline.platforms.gem5 import engine as G
    want = {"x86-2012-server": "o3", "generic-2020s-x86": "o3", "ultrasparc-t1": "timing",
            "ultrasparc-iv-plus": "o3", "arm1176-rpi1": "minor"}
    assert {n: G.cpu_of(M.load(n)) for n in want} == want
    assert G.cpu_of(M.load("x86-2012-server", [("gem5.cpu", "timing")])) == "timing"


# ------------------------------------------------ lanes with the real gem5

@pytest.fixture(scope="module")
def loop_order_run(gem5_binary, tmp_path_factory):
    """loop-order's gem5 lane at 128 x 512 on the machine's CPU (O3), gem5 given by --gem5."""
    results = tmp_path_factory.mktemp("gem5-lane") / "results"
    r = trapline("run", "loop-order", "--platform", "gem5", "--quick", *TINY,
                 "--gem5", str(gem5_binary), env={"GEM5": "", "TRAPLINE_RESULTS": str(results)}, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return _run_dir(r.stdout)


def test_loop_order_lane_runs_in_gem5(loop_order_run):
    (e,) = _entries(loop_order_run)
    assert e["platform"] == "gem5" and e["status"] == "reproduced", (e["status"], e["note"])
    assert e["reproduced"] >= 2  # column order slower, in gem5's simulated time
    assert e["rests_on"] == "prediction" and e["platform_label"] == "gem5"
    f = e["platform_facts"]
    assert f["cpu"] == "o3" and f["machine"] == "x86-2012-server" and f["machine_sets"] == []
    assert f["deterministic"] is True
    assert len(f["runs"]) == 2 and all(len(r["config_sha256"]) == 64 and r["cores"] == 1 for r in f["runs"])
    figs = {x["name"]: x["value"] for x in e["figures"]}
    # row order: at most one miss per 64-byte line of 16 ints, the L1D's next-line prefetcher taking
    # most; column order: every access a new line 2 KiB on, the page-bounded stride prefetcher at most
    # every other one (the caches alone, one miss per line: test_gem5_and_the_model_agree_... below)
    row, column = figs["L1D misses per element, row order"], figs["L1D misses per element, column order"]
    assert 0 < row <= 1 / 16 * 1.05
    assert column >= 0.45 and column > 5 * row


def test_manifest_records_gem5_and_every_config(loop_order_run, gem5_binary):
    from trapline.platforms.gem5 import binary
    m = json.loads((loop_order_run / "manifest.json").read_text())
    g = m["platforms"]["gem5"]["gem5"]
    assert g["sha256"] == binary.sha256_of(gem5_binary) and g["version"].startswith("v24.0.0.1")
    assert "X86" in g["isas"]
    assert "x86-2012-server" in m["platforms"]["gem5"]["machines"]
    report = m["platform_report"]["gem5"]
    assert report["column"] == 40 and report["modelled"] is True
    assert any(g["sha256"][:12] in line for line in report["lines"])


def test_split_lock_on_stock_gem5_locks_each_line_and_has_no_cliff():
    """Stock gem5 locks each line of a split locked add separately and holds no bus: no
    bus-lock cliff. That finding is why trapline's gem5 has the change bus-lock and why the
    lane needs it (with a stock gem5 the lane is not-applicable and says so:
    tests/test_93_gem5_changes.py; with the change it locks the bus: the same file). Run on
    the shared stock gem5, the lane's kernel and machine, timing CPU, two lines per
    straddling add and about two in-line adds' time."""
    from trapline import build, kernelio, machine
    from trapline.platforms.gem5 import run
    xz = binary.shared_xz()
    if xz is None:
        pytest.skip("no stock gem5 in ../shared/gem5/")
    stock = binary.unpack(xz)
    prog = build.build("x86_64", flavour="gem5") / "x86-split-lock" / "split-lock"
    g = run.simulate(machine.load("x86-2012-server"), [str(prog), "variant=locked", "offsets=55-58", "iters=5",
                                                       "reps=1", "warmup=1"], cpu="timing", gem5=stock)
    assert g.error is None and g.status == 0, g.error
    out = kernelio.parse(g.stdout)
    assert len(out.samples) == len(g.regions) == 4  # one region per offset, 55..58
    per = {}
    for s, reg in zip(out.samples, g.regions):
        per.setdefault(int(s["straddle"]), []).append((reg["counts"]["gem5_locked_lines"] / s["ops"],
                                                       reg["ticks"] / 1000 / s["ops"]))
    assert {lines for lines, _ in per[1]} == {2.0} and {lines for lines, _ in per[0]} == {1.0}
    in_line = min(ns for _, ns in per[0])
    assert max(ns for _, ns in per[1]) < 5 * in_line  # no cliff: about two in-line locked adds
    # what the gem5 side says of the field a stock gem5 cannot take
    import sys as _sys
    _sys.path.insert(0, str(ROOT / "gem5_configs"))
    from trapline_gem5 import params as P
    from trapline.platforms.gem5.machine_json import export
    (note,) = P.from_machine(export(machine.load("x86-2012-server"))).notes_for("atomics.split_lock_cost")
    assert "locks each cache line" in note.text and "./run.sh gem5 build" in note.text


# ------------------------------------------------ gem5 beside the model: the same LRU caches

@pytest.mark.parametrize("runs", [
    ["loop-order/loop-order variant=row rows=256 cols=256 reps=1 warmup=1",
     "loop-order/loop-order variant=column rows=256 cols=256 reps=1 warmup=1"],
    ["malloc-chunk-chase/chunk-chase allocator=chunk requestsize=9 rounds=4 objects=1000 reps=1 warmup=0"],
], ids=["loop-order", "malloc-chunk-chase"])
def test_gem5_and_the_model_agree_on_l1d_misses_per_operation(gem5_binary, runs):
    """Both simulators' L1Ds are 32 KiB 8-way LRU caches of 64-byte lines (x86-2012-server),
    so on the same kernel, the prefetchers off (NO_PREFETCH: whether a prefetch comes in time is
    timing, miss-overlap's subject), their L1D misses per operation agree within 25%."""
    from trapline import machine
    from trapline.platforms.gem5 import compare
    rows = compare.compare("x86-2012-server", runs, ["o3"], gem5=gem5_binary, log=lambda s: None,
                           sets=[machine.pair(s) for s in NO_PREFETCH])
    by = {(r["group"], r["sim"]): r for r in rows}
    groups = sorted({g for g, _ in by})
    assert groups and all((g, "model") in by and (g, "gem5-o3") in by for g in groups), sorted(by)
    for g in groups:
        model, gem5 = by[(g, "model")]["l1d_misses"], by[(g, "gem5-o3")]["l1d_misses"]
        assert model > 0 and gem5 > 0, (g, model, gem5)
        assert abs(gem5 / model - 1) <= 0.25, f"{g}: gem5 {gem5:.4g} vs model {model:.4g} L1D misses per op"
        # row order: one miss per 64-byte line of 16 ints; column order (rows of 1 KiB): every access a new line
        if g.startswith("row"):
            assert model == pytest.approx(1 / 16, rel=0.1) and gem5 == pytest.approx(1 / 16, rel=0.1), (model, gem5)
        if g.startswith("column"):
            assert model >= 0.9 and gem5 >= 0.9, (model, gem5)


# ------------------------------------------------ a sweep on a real Dask scheduler and workers

def test_sweep_of_two_gem5_points_on_dask_workers(gem5_binary, tmp_path):
    port = free_port()
    sched = f"tcp://127.0.0.1:{port}"
    env = {"GEM5": str(gem5_binary)}
    procs = [dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard", env=env)]
    results = tmp_path / "results"
    try:
        wait_listening(port, procs[0])
        for _ in range(2):
            procs.append(dask("worker", sched, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
                               "--no-dashboard", "--death-timeout", "120", env=env))
        r = trapline("sweep", "loop-order", "--platform", "gem5", "--quick", "--set", "rows=32,64", "--set", "cols=64",
                     "--set", "gem5.cpu=timing", "--scheduler", sched, "--workers", "2",
                     env=_env(gem5_binary, results), timeout=900)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    assert r.returncode == 0, r.stderr[-3000:]
    d = Path(r.stdout.strip().splitlines()[-1]).parent
    rows = json.loads((d / "table.json").read_text())["rows"]
    assert sorted(x["sets"]["rows"] for x in rows) == ["32", "64"]
    assert all(x["platform"] == "gem5" and x["worker"].startswith("tcp://127.0.0.1") for x in rows), rows
    assert all(x["headline"] and x["headline"] > 1 for x in rows), rows  # column order slower in both points
    m = json.loads((d / "manifest.json").read_text())
    assert m["engine"]["scheduler"] == sched
    from trapline.platforms.gem5 import binary
    keys = json.dumps(m)
    assert binary.sha256_of(gem5_binary) in keys  # the points' key: gem5's binary


def test_known_differences_name_a_count_of_the_platform():
    """A lane's known_differences are keyed by count suffix (gem5_<suffix> beside model_<suffix>);
    a key the platform does not count is one error naming the field and the valid counts."""
    import copy
    from trapline import experiment
    exp = experiment.get("x86-split-lock")
    assert experiment._semantic_checks(exp.id, exp.path, exp.data) == []
    data = copy.deepcopy(exp.data)
    data["platforms"]["gem5"]["known_differences"] = {"bogus_misses": "a reason long enough to pass"}
    errs = experiment._semantic_checks(exp.id, exp.path, data)
    assert len(errs) == 1 and "platforms.gem5.known_differences.bogus_misses" in errs[0], errs
    assert "gem5_locked_lines" in errs[0]


@pytest.mark.parametrize("args,words", [
    (["sensitivity", "loop-order", "--platform", "host", "--quick"], ["--platform host", "model, gem5"]),
    (["sensitivity", "loop-order", "--platform", "vax", "--quick"], ["unknown platform 'vax'", "gem5"]),
    (["sweep", "loop-order", "--platform", "gem5", "--set", "rows=32,64", "--gem5", "/no/such/gem5"],
     ["--gem5 /no/such/gem5", "not an executable file"]),
])
def test_platform_options_on_sensitivity_and_sweep_are_one_line(tmp_path, args, words):
    r = trapline(*args, env={"TRAPLINE_RESULTS": str(tmp_path / "r")})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
