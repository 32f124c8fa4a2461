"""A run's up-front estimate and time left (trapline/eta.py), the guest kernels built
ahead in the background (imagebuilders.Ahead) and the order the run takes its entries
in meanwhile (runner.Schedule)."""

import json
import threading
import time

import pytest

from trapline import eta, experiment, platforms, runner
from trapline.imagebuilders import Ahead


def test_costs_are_recorded_merged_and_survive_a_damaged_file(tmp_path):
    f = tmp_path / "costs.json"
    a = eta.Costs.load(f)
    assert a.seconds == {}
    a.record("loop-order.host.full", 2.04)
    b = eta.Costs.load(f)              # another run, meanwhile
    b.record("plt-itlb.model.quick", 5)
    a.record("strlen-loop.host.full", 3)  # a's write keeps b's key
    assert json.loads(f.read_text()) == {"loop-order.host.full": 2.0, "plt-itlb.model.quick": 5.0,
                                         "strlen-loop.host.full": 3.0}
    assert not list(tmp_path.glob("*.tmp"))
    for damaged in ("[1, 2]", "{\"a\": \"x\", \"b\": -1, \"c\": true, \"d\": 4}", "{trunc", "\x00\xff"):
        f.write_text(damaged)
        assert eta.Costs.load(f).seconds == ({"d": 4.0} if damaged.startswith("{\"a") else {})


def test_estimate_prefers_this_machines_record_and_scales_the_rest_by_its_pace(tmp_path):
    costs = eta.Costs(None, {"a.host.full": 20.0, "b.host.full": 40.0})
    steps = [eta.Step("a.host.full", 10), eta.Step("b.host.full", 20), eta.Step("c.host.full", 30)]
    e = eta.Estimate(costs, steps)
    assert e.pace == pytest.approx(2.0)           # this machine took twice the reference
    assert e.total == pytest.approx(20 + 40 + 60)
    assert "2 of 3 entries timed by earlier runs here" in e.words() and "x 2.00" in e.words()
    # half-way, at the estimated pace: what is left is the rest's estimate
    assert e.left({"a.host.full": 20.0}) == pytest.approx(100)
    # a run going at twice its estimate: the rest is doubled (after 30 s of evidence)
    assert e.left({"a.host.full": 40.0, "b.host.full": 80.0}) == pytest.approx(120)
    assert e.left({s.key: 1.0 for s in steps}) == 0


def test_kernels_build_beside_the_steps_that_may_run_meanwhile():
    steps = [eta.Step("m.model.full", 100, beside_build=True), eta.Step("q.qemu.full", 20),
             eta.Step("h.host.full", 30)]
    # 300 s of kernels beside 100 s of model lanes: the kernels decide, then the rest
    e = eta.Estimate(eta.Costs(None), steps, kernels_s=300)
    assert e.total == pytest.approx(300 + 20 + 30)
    assert "guest kernels to build first: about 5.0 min" in e.words()
    assert eta.Estimate(eta.Costs(None), steps, kernels_s=50).total == pytest.approx(100 + 50)
    assert e.left({"m.model.full": 100.0}, kernels_left=120) == pytest.approx(120 + 50)


@pytest.mark.parametrize("s,words", [(5, "5 s"), (89.6, "90 s"), (150, "2.5 min"), (1800, "30 min"),
                                     (3900, "1 h 05 min")])
def test_durations_read_as_a_person_would_say_them(s, words):
    assert eta.duration(s) == words


def test_ahead_builds_in_order_waits_per_arch_and_keeps_failures_for_the_lane():
    order, gate = [], threading.Event()
    built = {}

    def build(arch, stop):
        order.append(arch)
        if arch == "armv6":
            raise RuntimeError("no cross compiler\nmore")
        if arch == "x86_64":
            gate.wait(5)

    a = Ahead(["sparc64", "armv6", "x86_64"], build, on_built=lambda arch, s: built.setdefault(arch, s))
    a.wait("armv6")
    assert order[:2] == ["sparc64", "armv6"] and a.failed == {"armv6": "no cross compiler"}
    assert "sparc64" in built and "armv6" not in built
    assert a.busy() and a.pending() == ["x86_64"]
    gate.set()
    a.wait()
    assert not a.busy() and order == ["sparc64", "armv6", "x86_64"]


def test_ahead_cancel_stops_the_build_it_is_in():
    seen = []

    def build(arch, stop):
        t0 = time.monotonic()
        while not stop() and time.monotonic() - t0 < 10:
            time.sleep(0.01)
        seen.append((arch, stop()))

    a = Ahead(["sparc64", "x86_64"], build)
    time.sleep(0.05)
    t0 = time.monotonic()
    a.cancel()
    assert time.monotonic() - t0 < 2 and seen == [("sparc64", True)] and not a.busy()


def test_run_order_while_kernels_build_ahead():
    """Lanes that need no guest and measure no real time first (beside the build), the guest
    lanes in the order their kernels are built, the host (real-time) lanes last."""
    from trapline.context import RunContext
    exps, ids = runner.load(None, tolerate_broken=True)
    steps = runner.plan(exps, ids, None, RunContext(quick=True), strict=False)
    st = [runner.Schedule.of(step, quick=True) for step in steps]
    by = {s.key: s for s in st}
    assert by["sparc-misalign-trap.qemu.quick"].guest == "sparc64"
    assert by["numa-first-touch.model.quick"].guest == "x86_64"
    assert by["loop-order.model.quick"].beside_build and not by["loop-order.model.quick"].guest
    assert by["loop-order.host.quick"].real_time and not by["loop-order.host.quick"].beside_build
    guests = list(dict.fromkeys(s.guest for s in st if s.guest))
    ranked = sorted(st, key=lambda s: s.rank(guests))
    kinds = [0 if s.beside_build else 1 if s.guest else 2 for s in ranked]
    assert kinds == sorted(kinds) and set(kinds) == {0, 1, 2}
    arches = [s.guest for s in ranked if s.guest]
    assert arches == sorted(arches, key=guests.index)
    # every lane has its reference cost; an entry that cannot run has none (it costs nothing)
    for (e, p, _, r), s in zip(steps, st):
        if r or e.error or "not_applicable" in e.platform(p):
            assert s.reference is None, s
        else:
            assert s.reference == platforms.find(p).expected_seconds(e.platform(p), quick=True) >= 0, s


def test_lane_reference_cost_from_the_experiment_file_else_the_platform():
    exp = experiment.load_all()["malloc-chunk-chase"]
    host = platforms.find("host")
    spec = exp.platform("host")
    assert host.expected_seconds(dict(spec, cost_s={"full": 42}), quick=False) == 42
    assert host.expected_seconds(dict(spec, cost_s={"full": 42}), quick=True) == host.default_cost_s["quick"]


def test_reproduce_all_says_what_it_expects_and_what_is_left(quick_all):
    import re
    log = quick_all["resume_log"]
    assert re.search(r"expected: about [\d.]+ (s|min) on this machine \(", log), log[-3000:]
    steps = [ln for ln in log.splitlines() if re.search(r"\] \[\d+/\d+\] \S+ on \S+ ", ln)]
    assert steps and all(re.search(r"\(\d+(\.\d)? (s|min) in, about \d+(\.\d)? (s|min) left\)$", ln) for ln in steps), steps


def test_a_killed_kernel_builds_tree_is_dropped_only_while_no_build_runs(tmp_path, monkeypatch):
    import fcntl
    from trapline import images
    monkeypatch.setenv("TRAPLINE_CACHE", str(tmp_path))
    cache = tmp_path / "images"
    (cache / ".build-sparc64-abcd1234" / "b").mkdir(parents=True)
    (cache / ".repro-sparc64-abcd1234").mkdir()          # kept for diffoscope: never dropped
    (cache / "sparc64-linux-0123").mkdir()
    with open(cache / ".lock-linux", "a") as held:  # as build.sh holds it while it compiles
        fcntl.flock(held, fcntl.LOCK_EX)
        images.drop_stale_kernel_builds()
        assert (cache / ".build-sparc64-abcd1234").is_dir()   # a build runs: its tree stays
    images.drop_stale_kernel_builds()
    assert sorted(p.name for p in cache.iterdir()) == [".lock-linux", ".repro-sparc64-abcd1234", "sparc64-linux-0123"]
    assert not images.linux_built("sparc64")
    (cache / "sparc64-linux-0123" / "manifest.txt").write_text("arch=sparc64\n")
    assert images.linux_built("sparc64") and not images.linux_built("armv6")
