"""The host lane in quick mode: every experiment has an entry, and the effects
the host can show, show. Uses the one reproduce-all --quick run of the
quick_all fixture (conftest.py)."""

import json
from pathlib import Path

import pytest

from conftest import trapline
from trapline import experiment


def _entry(quick_all, eid, platform="host"):
    for e in quick_all["summary"]["experiments"]:
        if e["id"] == eid and e["platform"] == platform:
            return e
    raise AssertionError(f"no entry for {eid} on {platform}")


def _figure(entry, prefix):
    for f in entry["figures"]:
        if f["name"].startswith(prefix):
            return f["value"]
    raise AssertionError(f"{entry['id']}: no figure {prefix!r}")


def test_summary_has_every_experiment_with_the_documented_shape(quick_all):
    s = quick_all["summary"]
    assert s["run_id"] and s["quick"] is True
    ids = [e["id"] for e in s["experiments"]]
    assert set(ids) == set(experiment.load_all())
    for e in s["experiments"]:
        assert {"id", "platform", "metric", "claimed", "reproduced", "status", "note"} <= set(e)
        assert e["status"] in ("reproduced", "differs", "not-applicable", "failed")
        assert e["note"], e["id"]
        assert e["status"] != "failed", (e["id"], e["note"])


def test_split_lock_straddling_locked_add_costs_at_least_20x(quick_all):
    e = _entry(quick_all, "x86-split-lock")
    assert e["status"] == "reproduced" and e["reproduced"] >= 20, e
    assert e["claimed"] == 206
    # a plain add barely notices the line boundary; a locked add does
    assert _figure(e, "straddling plain add / in-line plain add") < 5
    assert _figure(e, "packed 13-byte structs") > 2


def test_loop_order_column_is_slower(quick_all):
    e = _entry(quick_all, "loop-order")
    assert e["status"] == "reproduced" and e["reproduced"] >= 2


def test_strlen_called_every_iteration_only_in_the_condition_form(quick_all):
    e = _entry(quick_all, "strlen-loop")
    assert _figure(e, "strlen calls per iteration, in the condition") == pytest.approx(51 / 50)
    assert _figure(e, "strlen calls per iteration, hoisted") == pytest.approx(1 / 50)
    assert e["reproduced"] > 1.5


def test_chunk_walk_shortens_with_larger_chunks(quick_all):
    e = _entry(quick_all, "malloc-chunk-chase")
    assert _figure(e, "walk steps at requestsize 9 / at requestsize 30") > 3
    assert e["reproduced"] > 1


def test_one_library_per_routine_is_slower_than_one_executable(quick_all):
    e = _entry(quick_all, "plt-itlb")
    assert e["reproduced"] > 2, e


def test_single_lock_allocator_does_not_scale(quick_all):
    e = _entry(quick_all, "stl-alloc-scaling")
    assert e["status"] == "reproduced" and e["reproduced"] < 1.3


def test_alignment_experiments_are_contrast_with_correct_values(quick_all):
    for eid in ("sparc-misalign-trap", "armv6-unaligned", "sparc-strong-prefetch", "sparc-spill-fill"):
        e = _entry(quick_all, eid)
        assert e["status"] == "not-applicable" and e["note"].startswith("contrast only:"), e
        assert e["reproduced"] is not None
        assert all(c["ok"] for c in e["checks"]), e["checks"]
    # x86 does misaligned loads in hardware: nowhere near the 348x trap cost
    assert _entry(quick_all, "sparc-misalign-trap")["reproduced"] < 10


def test_numa_on_a_one_node_host_is_not_applicable_with_the_reason(quick_all):
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    e = _entry(quick_all, "numa-first-touch")
    if len(nodes) <= 1:
        assert e["status"] == "not-applicable" and e["reproduced"] is None
        assert "single numa node" in e["note"]
    else:
        assert e["status"] in ("reproduced", "differs")


def test_run_directory_has_report_plots_csv_and_manifest(quick_all):
    d = quick_all["final"]
    html = (d / "report.html").read_text()
    for eid in experiment.load_all():
        assert eid in html
    assert html.count("data:image/png;base64,") >= 5
    assert "How to cite" in html and "host: measured in real time" in html
    assert (d / "plots" / "x86-split-lock.host.png").stat().st_size > 5000
    assert (d / "summary.csv").read_text().count("\n") >= len(experiment.load_all()) + 1
    m = json.loads((d / "manifest.json").read_text())
    assert m["git"]["commit"] and "dirty" in m["git"]
    assert m["platforms"]["host"]["cpu"] and m["platforms"]["host"]["kernel_build"]
    assert all(len(h) == 64 for hs in m["binaries_sha256"].values() for h in hs.values())
    assert m["binaries_sha256"]["x86-split-lock.host"]
    assert "sparc64" in m["compilers"] and "armv6" in m["compilers"]


def test_set_reaches_the_kernel_and_a_wrong_line_size_differs(results_dir):
    """--set line=32 labels offsets 25..26 as straddling; on a 64-byte-line host
    they are not, so the cliff is absent and the run honestly says differs."""
    r = trapline("run", "x86-split-lock", "--platform", "host", "--quick",
                 "--set", "line=32", "--set", "offsets=22-26")
    assert r.returncode == 0, r.stderr
    final = (results_dir / "latest").resolve()
    entry = json.loads((final / "entries" / "x86-split-lock.host.json").read_text())
    labels = {(g["variant"], g["offset"]): g["straddle"] for g in entry["groups"] if "offset" in g}
    assert labels[("locked", 24)] == 0 and labels[("locked", 25)] == 1
    assert entry["status"] == "differs" and entry["reproduced"] < 5
    s = json.loads((final / "summary.json").read_text())
    assert s["sets"] == {"line": "32", "offsets": "22-26"}
