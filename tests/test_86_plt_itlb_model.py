"""plt-itlb's model lane: the four builds and two, four time-sliced copies of the
per-library build in the sun4u guest under the model (ultrasparc-t1), with
instruction fetches indexed by guest-physical line (fetch_phys) and the TLBs
emptied at each switch of address space (ctx_switch). Run for real in
--quick (20-60 s each here, with the machine's load); kernels/plt-itlb/README.md
has the figures."""

import json

import pytest

from conftest import trapline


def _lane(results_dir, *extra):
    r = trapline("run", "plt-itlb", "--platform", "model", "--quick", "--fresh", *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    return _read((results_dir / "latest").resolve())


def _read(final):
    e = json.loads((final / "entries" / "plt-itlb.model.json").read_text())
    stats = json.loads((final / "raw" / "plt-itlb.model.log").read_text().split("--- model stats ---\n", 1)[1])
    return e, {f["name"]: f["value"] for f in e["figures"]}, stats


def _fig(figs, start):
    (v,) = [v for k, v in figs.items() if k.startswith(start)]
    return v


def test_one_copy_fits_the_itlb_and_time_slicing_does_not_thrash_it(quick_all):
    # the lane as `run plt-itlb --platform model --quick` runs it: the suite's one
    # reproduce-all --quick (conftest.quick_all) ran it
    e, f, stats = _read(quick_all["final"])
    # structure: every build and copy count ran, as a prediction on the T1 in the guest
    assert e["platform_facts"]["guest"] is True and e["platform_facts"]["machine"] == "ultrasparc-t1"
    assert e["rests_on"] == "prediction" and e["platform_facts"]["calibrated_on_this_claim"] == []
    assert {(g["variant"], g["copies"]) for g in e["groups"]} == {
        ("exe", 1), ("onelib", 1), ("internal", 1), ("perlib", 1), ("perlib", 2), ("perlib", 4)}
    assert all(c["ok"] for c in e["checks"]), e["checks"]
    assert len(e["figures"]) == 13 and all(isinstance(x["value"], float) for x in e["figures"])
    assert stats["options"]["fetch_phys"] == 1 and stats["options"]["ctx_switch"] > 0
    # the prediction: one copy's pages fit the 64-entry ITLB, so perlib is not 10x exe
    assert e["status"] == "differs" and 1.5 < e["reproduced"] < 5, e["note"]
    exe_itlb = _fig(f, "model ITLB misses per routine call, executable")
    perlib_itlb = _fig(f, "model ITLB misses per routine call, one library per routine")
    assert perlib_itlb > exe_itlb and perlib_itlb < 0.01, (perlib_itlb, exe_itlb)
    # what perlib pays instead: all 26 routines at one page offset share one set of
    # the 4-way L1I (26 text lines and their PLT lines); the L2 holds them, now
    # that fetches are indexed physically (virtually: about 1.5 L2 misses per call)
    assert 2 < _fig(f, "L1I misses per routine call, one library per routine") < 4
    assert _fig(f, "L2 misses per routine call, one library per routine") < 0.01
    # a 26-deep chain overflows the 8 windows in every build: Linux's spill handler runs
    assert 0.6 < _fig(f, "register-window spill traps per routine call, executable") < 0.8
    # time-sliced copies: the model sees the address-space switches (each empties its
    # TLBs: context.c), one copy has none inside a sample; the time per routine
    # call stays within 2% of one copy's, though the switches refill the TLBs
    assert _fig(f, "address-space switches per sample that emptied the model's TLBs, four copies") >= 2
    for k in ("two", "four"):
        assert 1.0 < _fig(f, f"per-library build, {k} copies on the one vCPU / one copy") < 1.02
    one = _fig(f, "MMU-miss traps into Linux per routine call (QEMU's")
    four = _fig(f, "MMU-miss traps into Linux per routine call, one library per routine, four copies")
    assert four > 3 * one and four < 0.01, (one, four)


def test_a_quarter_of_the_itlb_per_copy_thrashes_it(results_dir):
    """Four copies interleaved cycle by cycle on one core (the T1's strands) give
    a fully associative LRU ITLB of E entries the misses one copy has with E / 4
    (README): with 16 entries, about two ITLB misses per routine call (its text
    page and the PLT page it came through) and perlib an order of magnitude
    slower than exe, whose one page still fits."""
    e, f, _ = _lane(results_dir, "--set", "tlb.itlb.entries=16")
    perlib_itlb = _fig(f, "model ITLB misses per routine call, one library per routine")
    assert 1.5 < perlib_itlb < 3, perlib_itlb
    assert _fig(f, "model ITLB misses per routine call, executable") < 0.01
    assert e["reproduced"] > 10, e["note"]
