"""The model platform: kernels under QEMU user mode with the timing plugin and
a machine description. Deterministic, and a machine field changed with --set
moves the effect."""

import json

import pytest

from conftest import trapline
from trapline import build


def _run(results_dir, *extra):
    r = trapline("run", "x86-split-lock", "--platform", "model", "--quick", "--fresh", "--set", "offsets=20-35",
                 *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    final = (results_dir / "latest").resolve()
    return json.loads((final / "entries" / "x86-split-lock.model.json").read_text())


def _locked(entry):
    return {g["offset"]: g["median_ns_per_op"] for g in entry["groups"] if g["variant"] == "locked"}


def test_line_size_moves_the_straddling_offsets_and_runs_are_deterministic(results_dir):
    base = _locked(_run(results_dir, "--set", "line=64"))
    again = _locked(_run(results_dir, "--set", "line=64"))
    assert base == again, "the model must give identical figures for identical inputs"
    small = _run(results_dir, "--set", "line=32", "--set", "caches.l1d.line=32B")
    assert small["status"] == "reproduced", small["note"]
    s = _locked(small)
    # 64-byte lines: offsets 20..35 never straddle; 32-byte lines: 25..31 do (bus lock)
    assert max(base.values()) < 3 * min(base.values())
    assert s[28] > 20 * s[24] and s[28] > 20 * base[28]
    assert small["platform_facts"]["machine_sets"] == ["caches.l1d.line=32B"]


def test_bad_machine_field_is_named_before_anything_runs(results_dir):
    r = trapline("run", "x86-split-lock", "--platform", "model", "--set", "caches.l1d.line=48B")
    assert r.returncode == 2 and "caches.l1d.line" in r.stderr and "power of two" in r.stderr, r.stderr
    r = trapline("run", "x86-split-lock", "--machine", "no-such-machine")
    assert r.returncode == 2 and "no-such-machine" in r.stderr
    assert not (results_dir / "latest").exists()


def test_simulate_runs_a_users_static_program():
    prog = build.build("x86_64") / "loop-order" / "loop-order"
    r = trapline("simulate", "--machine", "x86-2012-server", "--arch", "x86_64", "--",
                 str(prog), "quick=1", "reps=2", "warmup=0", "rows=256", "cols=256")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    regions = [g for g in out["stats"]["regions"] if g.get("marked")]
    assert len(regions) == 2 and all(g["instructions"] > 0 and g["cycles"] > 0 for g in regions)
    r = trapline("simulate", "--machine", "x86-2012-server", "--arch", "sparc64", "--", str(prog))
    assert r.returncode == 2 and "x86_64" in r.stderr


def test_spill_fill_traps_are_counted_by_the_model_on_a_3mb_12way_l2(results_dir):
    """ultrasparc-t1: a 3 MB 12-way L2 (4096 sets) is a valid geometry; every call
    at depth 1000 spills once, counted by the model, not derived."""
    r = trapline("run", "sparc-spill-fill", "--platform", "model", "--quick")
    assert r.returncode == 0, r.stderr[-2000:]
    e = json.loads(((results_dir / "latest").resolve() / "entries" / "sparc-spill-fill.model.json").read_text())
    spills = next(f["value"] for f in e["figures"] if f["name"].startswith("window spill traps counted"))
    assert spills == pytest.approx(0.994, abs=0.002)
    assert e["status"] in ("reproduced", "differs") and e["reproduced"] > 0


def test_strong_prefetch_of_address_zero_traps_in_the_model_and_weak_does_not(results_dir):
    r = trapline("run", "sparc-strong-prefetch", "--platform", "model", "--quick")
    assert r.returncode == 0, r.stderr[-2000:]
    e = json.loads(((results_dir / "latest").resolve() / "entries" / "sparc-strong-prefetch.model.json").read_text())
    per_prefetch = {f["name"]: f["value"] for f in e["figures"]}
    assert per_prefetch["prefetch traps counted by the model per strong prefetch"] == 1.0
    assert per_prefetch["prefetch traps counted by the model per weak prefetch"] == 0.0
    assert e["status"] == "reproduced" and e["reproduced"] > 100
    assert "fitted to this claim (E4): prefetch.trap_cost" in e["note"]


@pytest.mark.parametrize("arch, machine", [("sparc64", "ultrasparc-iv-plus"), ("armv6", "arm1176-rpi1")])
def test_simulate_on_the_other_architectures(arch, machine):
    prog = build.build(arch) / "loop-order" / "loop-order"
    r = trapline("simulate", "--machine", machine, "--arch", arch, "--",
                 str(prog), "quick=1", "reps=1", "warmup=0", "rows=128", "cols=128")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["stats"]["arch"] == arch
    regions = [g for g in out["stats"]["regions"] if g.get("marked")]
    assert len(regions) == 1 and regions[0]["l1d"]["accesses"] >= 128 * 128
