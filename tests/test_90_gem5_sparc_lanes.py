"""gem5's SPARC lanes and the gem5 in the Docker image.

Without gem5: `python -m trapline.platforms.gem5 binary` says how to get one (exit 1) and
refuses extra arguments (exit 2); the Dockerfile's GEM5 step comes after every
layer the image without gem5 builds (their cache and contents unchanged) and, run
as a shell snippet outside Docker, stops with one line on a GEM5 that is not an
executable file. With a real gem5 (conftest's gem5_binary; skipped, saying why,
without one): the step links the binary on PATH and caches its facts, which
`trapline.platforms.gem5.binary` then prints.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def _binary_cli(*args, env=None):
    e = dict(os.environ, PYTHONPATH=str(ROOT))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "trapline.platforms.gem5", "binary", *args], capture_output=True, text=True,
                          cwd=ROOT, env=e, timeout=300)


def test_binary_cli_without_gem5_says_how_to_get_one(tmp_path):
    r = _binary_cli(env={"GEM5": "", "PATH": str(tmp_path), "TRAPLINE_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("trapline: failed: gem5 not found:") and "docs/gem5.md" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _binary_cli("--version")
    assert r.returncode == 2 and "usage:" in r.stderr
    r = _binary_cli(str(tmp_path / "no-such-gem5"))
    assert r.returncode == 2 and "no-such-gem5: not an executable file" in r.stderr


def _gem5_step() -> str:
    """The shell of the main image's GEM5 step (the root one): its `if [ -z "$GEM5" ]; then ... fi`
    (trapline's gem5 from the gem5 stage; elif a path: that binary on PATH; none: nothing)."""
    text = DOCKERFILE.read_text().replace("\\\n", "")  # as Docker joins continued lines
    m = re.search(r'if \[ -z "\$GEM5" \]; then(.*?)\bfi\b', text[text.index("COPY . ."):], re.S)
    assert m, "the Dockerfile has no GEM5 step"
    return 'if [ -z "$GEM5" ]; then' + m.group(1) + "fi\n"


def _main_stage(lines: list[str]) -> list[str]:
    """The main image's lines: from its FROM (the last one) on; the gem5 stage builds apart."""
    return lines[max(i for i, ln in enumerate(lines) if ln.startswith("FROM ")):]


def test_dockerfile_gem5_step_comes_after_the_layers_of_the_image_without_gem5():
    lines = _main_stage([ln for ln in DOCKERFILE.read_text().splitlines() if ln and not ln.startswith("#")])
    arg = next(i for i, ln in enumerate(lines) if ln.startswith("ARG GEM5"))
    copy_all = next(i for i, ln in enumerate(lines) if ln.startswith("COPY . ."))
    # a build argument changes the cache key of the RUN steps after its ARG only
    assert arg > copy_all
    assert not any("GEM5" in ln for ln in lines[:arg]), "an earlier layer depends on GEM5"


def test_dockerfile_gem5_step_refuses_a_path_that_is_not_an_executable(tmp_path):
    script = _gem5_step().replace("/usr/local/bin", str(tmp_path / "bin"))
    (tmp_path / "bin").mkdir()
    for bad in ("gem5-bin/no-such-gem5", "README.md"):
        r = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, GEM5=bad))
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == f"GEM5: '{bad}' is not an executable file in the build context (docs/docker.md)"
    assert not any((tmp_path / "bin").iterdir())
    r = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, GEM5="none"))
    assert r.returncode == 0 and r.stdout == r.stderr == ""
    # no GEM5: trapline's gem5 from the gem5 stage, which the step checks is found
    assert "./run.sh gem5 which" in script.split("elif")[0]


def test_dockerfile_gem5_step_puts_the_binary_on_path_with_its_facts(gem5_binary, tmp_path):
    bindir, cache = tmp_path / "bin", tmp_path / "cache"
    bindir.mkdir()
    script = _gem5_step().replace("/usr/local/bin", str(bindir)).replace("./run.sh gem5 which",
                                                                         f"{sys.executable} -m trapline gem5 which")
    env = dict(os.environ, GEM5=str(gem5_binary), TRAPLINE_CACHE=str(cache), PYTHONPATH=str(ROOT),
               PATH=f"{bindir}:{os.environ['PATH']}")  # /usr/local/bin is on the image's PATH
    r = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)
    assert (bindir / "gem5.opt").resolve() == gem5_binary.resolve()
    assert facts["path"] == str(gem5_binary.resolve()) and "SPARC" in facts["isas"] and len(facts["sha256"]) == 64
    cached = json.loads((cache / "gem5" / "facts.json").read_text())
    assert facts["sha256"] in cached["probe"]
    # later, as another user with the cache read-only: found on PATH, the facts from the cache
    r = _binary_cli(env={"GEM5": "", "PATH": f"{bindir}:{os.environ['PATH']}", "TRAPLINE_CACHE": str(cache)})
    assert r.returncode == 0 and json.loads(r.stdout) == facts


# ------------------------------------------------- SPARC window traps, counted from gem5's Exec trace

def test_trace_hits_count_handler_entries_and_refuse_a_handler_elsewhere():
    from trapline.platforms.gem5 import stats
    pcs = stats.TRACED["SPARC"]
    spill, fill = stats.SPARC_SPILL_START, stats.SPARC_FILL_START
    lines = [f"  100: board.processor.cores.core: {spill:#x}    : \twr    0x16, %asi          : ",
             f"  110: board.processor.cores.core: {spill + 4:#x}    : \tstxa   %l0, [%sp + 0x7ff] : ",
             f"  200: board.processor.cores.core: {fill:#x}    : \twr    0x16, %asi          : ",
             f"  300: board.processor.cores.core: {spill:#x}    : \twr    0x16, %asi          : ",
             "warn: something gem5 said"]
    hits, problems = stats.trace_hits(lines, pcs)
    assert hits == {"gem5_trap_entries_spill": [100, 300], "gem5_trap_entries_fill": [200]} and problems == []
    regions = [{"ticks": 150, "end_tick": 250, "counts": {}}, {"ticks": 10, "end_tick": 300, "counts": {}}]
    stats.add_trace_counts(regions, hits)
    assert regions[0]["counts"] == {"gem5_trap_entries_spill": 1, "gem5_trap_entries_fill": 1}
    assert regions[1]["counts"] == {"gem5_trap_entries_spill": 1, "gem5_trap_entries_fill": 0}
    hits, problems = stats.trace_hits([f"  5: cpu: {fill:#x} : \tsave %sp, -176, %sp : "], pcs)
    assert hits["gem5_trap_entries_fill"] == [] and "not the gem5_trap_entries_fill handler's 'wr'" in problems[0]


def test_minor_cpu_is_refused_for_sparc_before_gem5_starts(tmp_path):
    from trapline import machine
    from trapline.errors import UsageError
    from trapline.platforms.gem5 import run
    prog = tmp_path / "prog"
    prog.write_text("")
    with pytest.raises(UsageError) as e:
        run.simulate(machine.load("ultrasparc-t1"), [str(prog)], cpu="minor", gem5=tmp_path / "no-gem5")
    msg = str(e.value)
    assert msg.startswith("gem5.cpu: 'minor' cannot run SPARC here") and "faults.cc:688" in msg
    assert msg.endswith("valid choices for SPARC: o3, timing") and "\n" not in msg


@pytest.fixture(scope="module")
def sparc_gem5_kernels(gem5_binary):
    """The sparc64 kernels the gem5 platform runs on this gem5 (glibc on trapline's, the
    freestanding runtime on a stock one: kernel_flavour)."""
    from trapline import build
    from trapline.platforms.gem5 import binary
    from trapline.platforms.gem5.engine import kernel_flavour
    return build.build("sparc64", flavour=kernel_flavour("sparc64", binary.facts(gem5_binary)))


def test_run_simulate_counts_window_spills_and_fills_per_region(gem5_binary, sparc_gem5_kernels):
    from trapline import machine
    from trapline.platforms.gem5 import run
    depth, repeats, nwindows = 1000, 5, 8  # NWindows: src/arch/sparc/sparc_traits.hh
    r = run.simulate(machine.load("ultrasparc-t1"),
                     [str(sparc_gem5_kernels / "sparc-spill-fill" / "spill-fill"), f"depth={depth}",
                      f"repeats={repeats}", "reps=2", "warmup=0"], cpu="timing", gem5=gem5_binary, timeout=900)
    assert r.error is None and r.status == 0, r.error
    assert len(r.regions) == 2
    least = repeats * (depth - (nwindows - 2))  # each descent spills N - 6 windows, its ascent fills them
    for g in r.regions:
        spills, fills = g["counts"]["gem5_trap_entries_spill"], g["counts"]["gem5_trap_entries_fill"]
        assert least <= spills <= least + nwindows - 2 and least <= fills <= least + nwindows - 2, (spills, fills)
        # the calls and returns, and 19 handler instructions per trap
        assert 2 * 19 < g["counts"]["gem5_instructions"] / (depth * repeats) < 2 * 19 + 20
    # the trace counts only the regions' own entries: the two regions and what ran between them fit the tail
    assert r.tail_region["counts"]["gem5_trap_entries_spill"] >= r.regions[-1]["counts"]["gem5_trap_entries_spill"]


# ------------------------------------------------------------------ the gem5 lanes, end to end

def _run_lane(gem5_binary, results, *args):
    from conftest import trapline
    r = trapline("run", *args, "--platform", "gem5", "--quick",
                 env={"GEM5": str(gem5_binary), "TRAPLINE_RESULTS": str(results)}, timeout=900)
    entries = sorted(results.glob("latest/entries/*.json"))
    return r, [json.loads(p.read_text()) for p in entries]


def _figure(entry, start):
    (f,) = [f for f in entry["figures"] if f["name"].startswith(start)]
    return f["value"]


def test_spill_fill_gem5_lane_counts_a_spill_and_a_fill_per_call(gem5_binary, tmp_path):
    r, (e,) = _run_lane(gem5_binary, tmp_path / "results", "sparc-spill-fill", "--set", "depths=10,1000",
                        "--set", "reps=1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert e["platform"] == "gem5" and e["platform_facts"]["cpu"] == "timing"
    assert e["platform_facts"]["machine"] == "ultrasparc-t1"
    # 5 descents of 1000 calls: 5 x 994 spills (NWINDOWS = 8) and the region's first call's
    for start in ("spill traps per call", "fill traps per call"):
        assert 0.994 <= _figure(e, start) <= 0.9952, e["figures"]
    assert 2 * 19 < _figure(e, "instructions per call") < 2 * 19 + 20
    # a simulated time per call that the criterion judges (the timing CPU: about 330 ns here)
    assert e["status"] in ("reproduced", "differs") and e["reproduced"] > _figure(e, "time per call at depth 10")


@pytest.mark.parametrize("exp, source", [("armv6-unaligned", "src/sim/faults.cc:60")])
def test_not_applicable_gem5_lanes_name_the_gem5_source(gem5_binary, tmp_path, exp, source):
    r, (e,) = _run_lane(gem5_binary, tmp_path / "results", exp)
    assert r.returncode == 0, r.stderr[-3000:]
    assert e["status"] == "not-applicable" and source in e["note"]


def test_minor_cpu_on_a_sparc_lane_is_one_line_before_anything_runs(gem5_binary, tmp_path):
    r, entries = _run_lane(gem5_binary, tmp_path / "results", "sparc-spill-fill", "--set", "gem5.cpu=minor")
    assert r.returncode == 2 and entries == []
    assert r.stderr.strip().startswith("trapline: error: gem5.cpu: 'minor' cannot run SPARC here")
    assert len(r.stderr.strip().splitlines()) == 1
