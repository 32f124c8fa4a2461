"""Sweeps (trapline/sweep, docs/sweeps.md): a grid of --set values run as independent
points on Dask distributed, each point stored once by its content hash.

The grid is loop-order's user-mode model lane (deterministic: the same inputs give the
same figures to the last digit) over a kernel argument and a machine field, sized so a
point lasts a second or two (rows x cols=2048 instead of quick's 512 x 512)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, dask, free_port, trapline, wait_listening

GRID = ["--set", "rows=2048,4096", "--set", "cols=2048", "--set", "tlb.dtlb.entries=64,1024,4096"]
SWEEP = ["sweep", "loop-order", "--quick", *GRID]


def _env(results: Path) -> dict:
    return {"TRAPLINE_RESULTS": str(results)}


def _sweep_dir(results: Path, stdout: str) -> Path:
    p = Path(stdout.strip().splitlines()[-1]).parent
    assert p.parent == results / "sweeps" and (p / "table.json").is_file(), stdout
    return p


def _rows(d: Path) -> list[dict]:
    return json.loads((d / "table.json").read_text())["rows"]


def _key(row: dict) -> tuple:
    return tuple(sorted(row["sets"].items()))


def _figures(row: dict) -> tuple:
    return row["status"], row["headline"], row["rests_on"], tuple(sorted(row["figures"].items()))


def _store(results: Path) -> list[Path]:
    return sorted((results / "sweeps" / ".points").glob("*.json"))


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """The 6-point grid on the embedded LocalCluster (2 worker processes)."""
    results = tmp_path_factory.mktemp("sweep-embedded") / "results"
    r = trapline(*SWEEP, "--workers", "2", env=_env(results), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return results, _sweep_dir(results, r.stdout), r


def test_embedded_sweep_writes_the_table_plots_report_and_manifest(embedded):
    results, d, r = embedded
    rows = _rows(d)
    assert len(rows) == 6 and len({_key(x) for x in rows}) == 6
    assert {x["sets"]["rows"] for x in rows} == {"2048", "4096"}
    assert {x["sets"]["tlb.dtlb.entries"] for x in rows} == {"64", "1024", "4096"}
    assert all(x["status"] == "reproduced" and x["rests_on"] == "prediction" and x["platform"] == "model"
               for x in rows)
    # the machine field moves the figures it should: in column order every element is on a
    # new page; at rows=2048 a 4096-entry DTLB holds a column's pages, 64 or 1024 entries do not
    by = {(x["sets"]["rows"], x["sets"]["tlb.dtlb.entries"]): x for x in rows}
    col = "DTLB misses per element, column order"
    assert by[("2048", "64")]["figures"][col] > 0.9 and by[("2048", "1024")]["figures"][col] > 0.9
    assert by[("2048", "4096")]["figures"][col] < 0.01
    assert by[("2048", "4096")]["headline"] < 0.6 * by[("2048", "64")]["headline"]
    assert len(_store(results)) == 6 and all(x["computed_now"] for x in rows)
    csv = (d / "table.csv").read_text().splitlines()
    assert csv[0].startswith("point,rows,cols,tlb.dtlb.entries,status,headline") and len(csv) == 7
    for name in ("plots/headline-vs-rows.png", "plots/headline-vs-tlb.dtlb.entries.png", "report.md",
                 "report.html", "manifest.json", "summary.json"):
        assert (d / name).is_file(), name
    # three keys (cols has one value): no heatmap; a line per other key's combination
    assert not (d / "plots/headline-heatmap.png").exists()
    m = json.loads((d / "manifest.json").read_text())
    assert m["engine"]["scheduler"] == "embedded LocalCluster" and m["engine"]["workers"] == 2
    assert m["python_packages"]["distributed"] and len(m["points"]) == 6
    assert len(m["point_keys"]["tree_sha256"]) == 64 and m["point_keys"]["plugin"]
    assert "sweep: 6/6 done (0 cached), 0 running, 0 left" in r.stderr
    assert (results / "sweeps" / "latest").resolve() == d
    assert not list((results / "sweeps" / ".incomplete").iterdir())


def _point_qemu(pid: int) -> tuple[int, list[str]] | None:
    """(pid, argv) of the QEMU below pid that runs a point's kernel: argv[0] a qemu-*
    and the kernel's rows= among its arguments. Not any qemu-*: a worker also asks
    `qemu-x86_64 --version` (once per process, for the point's key), which ends at once
    and has no rows= (killing the worker then left the test without the point it killed)."""
    import psutil
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return None
    for c in kids:
        try:
            argv = c.cmdline()
        except psutil.Error:  # ended meanwhile
            continue
        if argv and os.path.basename(argv[0]).startswith("qemu-") and any(a.startswith("rows=") for a in argv):
            return c.pid, argv
    return None


def test_distributed_sweep_survives_a_killed_worker(embedded, tmp_path):
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1; one worker
    is SIGKILLed while it runs a point (its QEMU is running): the scheduler gives that
    point to the other worker, and every point is stored once, with the embedded run's
    figures to the last digit."""
    _, emb_dir, _ = embedded
    port, pa, pb = free_port(), free_port(), free_port()
    sched = f"tcp://127.0.0.1:{port}"
    procs = [dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard")]
    results = tmp_path / "results"
    sweep = None
    try:
        wait_listening(port, procs[0])
        a = dask("worker", sched, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
                  "--worker-port", str(pa), "--no-dashboard", "--death-timeout", "120")
        b = dask("worker", sched, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
                  "--worker-port", str(pb), "--no-dashboard", "--death-timeout", "120")
        procs += [a, b]
        env = dict(os.environ, PYTHONPATH=str(ROOT), TRAPLINE_RESULTS=str(results))
        sweep = subprocess.Popen([sys.executable, "-m", "trapline", *SWEEP, "--scheduler", sched, "--workers", "2"],
                                 cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
        # kill worker a while it runs a point, after at least one point is stored
        deadline = time.monotonic() + 240
        killed_q = None
        while time.monotonic() < deadline and sweep.poll() is None:
            q = _point_qemu(a.pid)
            if q is not None and _store(results):
                killed_q = q
                os.kill(a.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        assert killed_q, "worker a never ran a point while the sweep ran:\n" + (
            sweep.communicate()[1][-3000:] if sweep.poll() is not None else "(still running)")
        a.wait(timeout=30)
        out, err = sweep.communicate(timeout=400)
        assert sweep.returncode == 0, err[-4000:]
        # the killed worker's QEMU died with it (PR_SET_PDEATHSIG)
        assert not os.path.exists(f"/proc/{killed_q[0]}") or \
            open(f"/proc/{killed_q[0]}/stat").read().split()[2] == "Z"
    finally:
        if sweep is not None and sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    d = _sweep_dir(results, out)
    rows = _rows(d)
    emb = {_key(x): x for x in _rows(emb_dir)}
    assert len(rows) == 6 and {_key(x) for x in rows} == set(emb)
    for x in rows:
        assert _figures(x) == _figures(emb[_key(x)]), x["sets"]
        assert x["hash"] == emb[_key(x)]["hash"]  # the same content hash on both engines
    assert len(_store(results)) == 6  # once each, though a point was started twice
    # the point the killed worker was running was computed by the other worker
    argv = killed_q[1]
    rows_arg = next(a.split("=", 1)[1] for a in argv if a.startswith("rows="))
    dtlb = next(o.split("=", 1)[1] for o in ",".join(argv).split(",") if o.startswith("dtlb_entries="))
    killed_row = next(x for x in rows if x["sets"]["rows"] == rows_arg and x["sets"]["tlb.dtlb.entries"] == dtlb)
    assert killed_row["worker"] == f"tcp://127.0.0.1:{pb}", (killed_row, pa, pb)
    m = json.loads((d / "manifest.json").read_text())
    assert m["engine"]["scheduler"] == sched
    assert f"tcp://127.0.0.1:{pb}" in m["engine"]["workers_used"]


def test_rerun_computes_nothing_and_an_extended_grid_only_the_new_points(embedded):
    results, first, _ = embedded
    before = {p.name: p.stat().st_mtime_ns for p in _store(results)}
    r = trapline(*SWEEP, "--workers", "2", env=_env(results), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    d = _sweep_dir(results, r.stdout)
    assert d != first
    rows = _rows(d)
    assert len(rows) == 6 and not any(x["computed_now"] for x in rows)
    assert "6 in the store, 0 to compute" in r.stderr and "sweep: 6/6 done (6 cached)" in r.stderr
    assert {p.name: p.stat().st_mtime_ns for p in _store(results)} == before
    assert [_figures(x) for x in rows] == [_figures(x) for x in _rows(first)]
    # one more DTLB size: two new points (rows 2048 and 4096), the six others from the store
    ext = ["sweep", "loop-order", "--quick", "--set", "rows=2048,4096", "--set", "cols=2048",
           "--set", "tlb.dtlb.entries=64,256,1024,4096"]
    r = trapline(*ext, "--workers", "2", env=_env(results), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = _rows(_sweep_dir(results, r.stdout))
    assert len(rows) == 8
    assert sorted(x["sets"]["rows"] for x in rows if x["computed_now"]) == ["2048", "4096"]
    assert {x["sets"]["tlb.dtlb.entries"] for x in rows if x["computed_now"]} == {"256"}
    assert len(_store(results)) == 8
    assert all(before[p.name] == p.stat().st_mtime_ns for p in _store(results) if p.name in before)
    # the sweep directory can be cited like a run (content hash and manifest sha256)
    c = trapline("cite", str(d), env=_env(results))
    assert c.returncode == 0, c.stderr
    import hashlib
    assert hashlib.sha256((d / "manifest.json").read_bytes()).hexdigest() in c.stdout.replace("\n", " ")
    assert "@misc{trapline-sweep-" in c.stdout and "results: sweep " in c.stdout, c.stdout


def test_an_interrupted_sweep_resumes_with_the_points_it_stored(tmp_path):
    """SIGTERM (docker stop, a batch system's time limit) ends the sweep like Ctrl-C: the
    points stored so far stay, its worker processes end with it, and the same command
    resumes the sweep directory, computing only the missing points."""
    import psutil
    results = tmp_path / "results"
    argv = ["sweep", "loop-order", "--quick", "--set", "rows=2048", "--set", "cols=2048",
            "--set", "tlb.dtlb.entries=64,1024,4096", "--workers", "2"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRAPLINE_RESULTS=str(results))
    p = subprocess.Popen([sys.executable, "-m", "trapline", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and p.poll() is None and not _store(results):
            time.sleep(0.05)
        kids = psutil.Process(p.pid).children(recursive=True)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err[-3000:]
    assert "rerun the same command to resume sweep" in err
    stored = len(_store(results))
    assert 1 <= stored < 3
    time.sleep(1)
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
    inc = list((results / "sweeps" / ".incomplete").iterdir())
    assert len(inc) == 1
    r = trapline(*argv, env=_env(results), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    d = _sweep_dir(results, r.stdout)
    assert d.name == inc[0].name  # the same sweep, resumed
    assert f"{stored} in the store, {3 - stored} to compute" in r.stderr
    assert sum(x["computed_now"] for x in _rows(d)) == 3 - stored and len(_store(results)) == 3


@pytest.mark.parametrize("args, words", [
    (["--set", "rows=256,-5"], ["rows=-5", "an integer"]),
    (["--set", "rows=256", "--set", "caches.l1d.line=64B,33B"], ["caches.l1d.line=33B"]),
    (["--set", "bogus=1,2"], ["bogus=1", "valid choices"]),
    (["--set", "rows=256,256"], ["rows", "'256' is given twice"]),
    (["--set", "rows=256,,512"], ["rows", "empty value"]),
    (["--set", "rows=256", "--set", "rows=512"], ["--set rows is given twice"]),
    (["--set", "rows"], ["key=v1,v2"]),
    (["--set", "rows=256", "--workers", "0"], ["--workers", "'0'"]),
    (["--set", "rows=256", "--platform", "gem5"], ["gem5", "GEM5=none"]),  # gem5 switched off (env below)
    (["--set", "rows=256", "--platform", "host", "--machine", "x86-2012-server"], ["--machine"]),
    (["--set", "rows=256", "--scheduler", "tcp://127.0.0.1:1"], ["--scheduler", "cannot connect"]),
    (["--set", "rows=256", "--scheduler", "http://127.0.0.1:1"], ["--scheduler", "tcp://host:8786"]),
])
def test_bad_values_reject_the_whole_sweep_before_any_point_runs(args, words, results_dir):
    r = trapline("sweep", "loop-order", "--quick", *args, timeout=120, env={"GEM5": "none"})
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr[-2000:])
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    assert not results_dir.exists()


def test_a_bad_combination_of_machine_fields_is_named(results_dir):
    """Each value alone is valid; one combination is not (8 DTLB entries in 4 ways, or 64 in 16
    ways, are whole sets; 8 entries in 16 ways are not)."""
    r = trapline("sweep", "loop-order", "--quick", "--set", "tlb.dtlb.entries=64,8",
                 "--set", "tlb.dtlb.assoc=4,16", timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "sweep point tlb.dtlb.entries=8 tlb.dtlb.assoc=16:" in r.stderr, r.stderr
    assert "multiple of its associativity" in r.stderr
    assert not results_dir.exists()


def test_a_failed_point_is_a_row_and_is_computed_again_by_the_next_sweep(results_dir):
    """A time limit of 0.3 s fails both points (status failed, exit 1); a failure is not
    cached: the same sweep again computes both again. reps=200 makes each kernel run
    many seconds under the model (without it, rows=2048 finished inside 0.3 s on an
    idle machine and the point was reproduced: CI failed on it)."""
    argv = ["sweep", "loop-order", "--quick", "--set", "rows=2048,4096", "--set", "cols=2048", "--set", "reps=200",
            "--timeout", "0.3", "--workers", "2"]
    for _ in range(2):
        r = trapline(*argv, timeout=300)
        assert r.returncode == 1, r.stderr[-3000:]
        assert "0 in the store, 2 to compute" in r.stderr, r.stderr[-3000:]
        rows = _rows(_sweep_dir(results_dir, r.stdout))
        assert [x["status"] for x in rows] == ["failed", "failed"] and all(x["computed_now"] for x in rows)
    assert len(_store(results_dir)) == 2
