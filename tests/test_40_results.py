"""Results: atomic writes, no summary.json before completion, resume."""

import json
import os

import pytest

from trapline import results


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "a.json"
    results.atomic_json(p, {"x": 1})
    results.atomic_json(p, {"x": 2})
    assert json.loads(p.read_text()) == {"x": 2}
    assert [f.name for f in tmp_path.iterdir()] == ["a.json"]


def test_atomic_write_failure_keeps_old_content_and_leaves_no_temp(tmp_path, monkeypatch):
    p = tmp_path / "a.json"
    results.atomic_json(p, {"x": 1})

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        results.atomic_json(p, {"x": 2})
    assert json.loads(p.read_text()) == {"x": 1}
    assert [f.name for f in tmp_path.iterdir()] == ["a.json"]


def test_rundir_resumes_same_args_and_not_others(tmp_path):
    a = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path)
    a.release()  # a's owner ended (interrupted): the same arguments resume it
    b = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path)
    assert b.resumed and b.run_id == a.run_id
    busy = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path)
    assert not busy.resumed and busy.run_id != a.run_id  # b's owner is still running it
    busy.release()
    c = results.RunDir.open({"command": "run", "quick": False}, root=tmp_path)
    assert not c.resumed and c.run_id != a.run_id
    d = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path, fresh=True)
    assert not d.resumed


def test_finish_is_one_rename_and_updates_latest(tmp_path):
    rd = results.RunDir.open({"command": "run"}, root=tmp_path)
    rd.save_entry({"id": "e", "platform": "host", "status": "reproduced"}, "raw")
    assert not (tmp_path / rd.run_id).exists()
    final = rd.finish({"run_id": rd.run_id, "experiments": []}, {"m": 1}, {"report.md": "# r"})
    assert final == tmp_path / rd.run_id and (final / "summary.json").exists()
    assert (tmp_path / "latest").resolve() == final
    assert not any((tmp_path / ".incomplete").iterdir())


def test_killed_run_leaves_no_summary_and_resumes(quick_all):
    """reproduce-all --quick was SIGKILLed after its second entry (fixture)."""
    killed = quick_all["killed"]
    assert killed["entries_done"] >= 2
    assert killed["summaries"] == [], "a killed run must not leave a summary.json"
    assert not killed["latest"]
    final = quick_all["final"]
    assert "resuming run" in quick_all["resume_log"]
    summary = json.loads((final / "summary.json").read_text())
    assert summary["run_id"] == killed["run_id"]
    # entries written before the kill were kept, not recomputed
    for name, mtime in killed["entry_mtimes"].items():
        assert os.path.getmtime(final / "entries" / name) == mtime


# ------------------------------------------------------------ modes, entries, the report

def _finished_run(tmp_path, umask: int):
    """A finished run of two hand-made entries (no kernels), its report drawn from the run directory."""
    from trapline import report
    from trapline.entry import Entry
    old = os.umask(umask)
    try:
        rd = results.RunDir.open({"command": "reproduce-all"}, root=tmp_path)
        long_note = "A note that goes on. " * 30 + "THE END."
        es = [Entry(id="loop-order", platform="model", catalogue="E9", description="d", metric="m", unit="x",
                    claimed=None, reproduced=7.33, status="reproduced", note="modelled", platform_label="timing model",
                    platform_meaning="cycles charged by the model", plot={"title": "t"},
                    groups=[{"variant": "row", "n": 5, "median_ns_per_op": 1.0, "iqr_percent": 1.0}]),
              Entry(id="x86-split-lock", platform="host", catalogue="E3", description="d", metric="m", unit="x",
                    claimed=100.0, reproduced=50.0, ratio_to_claim=0.5, status="differs", note=long_note,
                    platform_label="host", platform_meaning="real time",
                    source={"title": "Split locks", "author": "a", "date": "2012", "original_machine": "Xeon"}),
              Entry(id="x86-split-lock", platform="qemu", catalogue="E3", description="d", metric="m", unit="x",
                    claimed=100.0, reproduced=90.0, ratio_to_claim=0.9, status="reproduced", note="n",
                    platform_label="QEMU-functional", platform_meaning="emulated", times_are_real=False,
                    groups=[{"variant": "locked", "n": 5, "median_ns_per_op": 9.0, "iqr_percent": 2.0}])]
        for e in es:
            rd.save_entry(e.to_dict(), "raw")
        summary = {"run_id": rd.run_id, "command": "reproduce-all", "quick": True, "sets": {},
                   "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:01:00+00:00",
                   "experiments": [{"id": e.id, "platform": e.platform} for e in es],
                   "counts": {"reproduced": 2, "differs": 1, "not-applicable": 0, "failed": 0}}
        # what each platform tells the report (its column, modelled or not), as a run writes it
        from trapline import platforms
        info = {e.platform: platforms.find(e.platform).report_facts({}) for e in es}
        manifest = {"trapline": "0", "run_id": rd.run_id, "finished": summary["finished"], "platforms": {},
                    "platform_report": info,
                    "git": {"commit": "c" * 40, "dirty": False, "describe": "c0ffee"}, "compilers": {}}
        return rd.finish(summary, manifest, report.render), es, long_note
    finally:
        os.umask(old)


@pytest.mark.parametrize("umask, want", [(0o022, 0o644), (0o077, 0o600)])
def test_result_files_get_the_users_umask(tmp_path, umask, want):
    final, _, _ = _finished_run(tmp_path, umask)
    files = [p for p in final.rglob("*") if p.is_file()]
    assert {"report.html", "report.md", "summary.json", "manifest.json", "summary.csv"} <= {p.name for p in files}
    assert {p.relative_to(final).as_posix(): oct(p.stat().st_mode & 0o777) for p in files} == \
        {p.relative_to(final).as_posix(): oct(want) for p in files}
    for d in [final] + [p for p in final.rglob("*") if p.is_dir()]:
        assert d.stat().st_mode & 0o777 == (0o755 if umask == 0o022 else 0o700), d


def test_entry_round_trips_and_keeps_unknown_keys():
    from trapline.entry import Entry
    d = {"id": "e", "platform": "host", "catalogue": "E1", "description": "d", "metric": "m", "unit": "x",
         "claimed": 2.0, "reproduced": 1.0, "ratio_to_claim": 0.5, "status": "differs", "note": "n",
         "from_a_newer_version": [1]}
    e = Entry.from_dict(d)
    assert e.ratio_to_claim == 0.5 and e.extra == {"from_a_newer_version": [1]}
    assert {k: v for k, v in e.to_dict().items() if k in d} == d
    assert "ratio_to_claim" not in Entry.from_dict({**d, "ratio_to_claim": None}).to_dict()


def test_report_is_a_pure_function_of_the_run_directory(tmp_path):
    from trapline import report
    final, es, long_note = _finished_run(tmp_path, 0o022)
    again = report.render(final)
    assert again == report.render(final)
    for name, data in again.items():  # what finish() wrote is what a redraw gives, byte for byte
        assert (final / name).read_bytes() == (data.encode() if isinstance(data, str) else data), name
    md = (final / "report.md").read_text()
    html = (final / "report.html").read_text()
    # both open with the claim matrix: rows in catalogue order (E3 before E9), columns host, QEMU, model
    for text in (md, html):
        assert text.index("Claim matrix") < text.index("Overview") < text.index("E3 x86-split-lock [host]")
        assert text.index(">E3<" if text is html else "| E3 |") < text.index(">E9<" if text is html else "| E9 |")
    assert "| claim | experiment | host | QEMU-functional | timing model |" in md
    assert "50.0x [host]; 0.5 of the claimed 100x; differs" in md
    # notes are whole in both; report.md links exactly the plots that exist (no QEMU timing plot)
    assert long_note in md and long_note in html
    linked = set(__import__("re").findall(r"\]\((plots/[^)]+)\)", md))
    assert linked == {f"plots/{p.name}" for p in (final / "plots").iterdir()} == {"plots/loop-order.model.png", "plots/overview.png"}
    assert "emulation time, not a prediction" in md
    assert "Source: Split locks (a, 2012); original machine: Xeon." in md


def test_report_of_a_run_missing_an_entry_is_a_one_line_error(tmp_path):
    from trapline import report
    from trapline.errors import UsageError
    final, _, _ = _finished_run(tmp_path, 0o022)
    (final / "entries" / "loop-order.model.json").unlink()
    with pytest.raises(UsageError, match=r"missing entries/loop-order.model.json"):
        report.render(final)
