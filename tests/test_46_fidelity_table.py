"""The fidelity table: modelled against claimed for every figure a
simulated lane models, |log2(modelled / claimed)| per row, the median and the worst,
and the rule that a prediction headline is within 2x of its claim or says differs."""

import json
import math
import re

import pytest

from conftest import trapline
from trapline.entry import Entry
from trapline.report import fidelity


def _entry(id_, platform, claimed, reproduced, status, rests_on, figures=(), cat="E1"):
    return {"id": id_, "platform": platform, "catalogue": cat, "description": f"{id_} test", "metric": f"{id_} ratio",
            "unit": "x", "claimed": claimed, "reproduced": reproduced, "status": status, "note": "test",
            "ratio_to_claim": reproduced / claimed if claimed and reproduced else None, "rests_on": rests_on,
            "figures": list(figures), "checks": [], "groups": [], "warnings": []}


# log2 per row: a 1.0 (x2), its figures 2.0 (x1/4) and 0.0; b 2.0 (x4, differs); the host
# entry, the figure with no claim and the zero figure are not rows
ENTRIES = [
    _entry("a", "model", 10, 20, "reproduced", "prediction", cat="E1", figures=[
        {"name": "a ns", "unit": "ns", "claimed": 8, "value": 2},
        {"name": "a count", "unit": "count", "claimed": 1, "value": 1},
        {"name": "a unclaimed", "unit": "x", "claimed": None, "value": 3},
        {"name": "a zero", "unit": "count", "claimed": 1, "value": 0}]),
    _entry("b", "model", 100, 25, "differs", "prediction", cat="E2"),
    _entry("a", "host", 10, 1000, "reproduced", "measurement", cat="E1"),
]


def _run_dir(tmp_path, entries):
    d = tmp_path / "20260101-000000-run-test"
    (d / "entries").mkdir(parents=True)
    for e in entries:
        (d / "entries" / f"{e['id']}.{e['platform']}.json").write_text(json.dumps(e))
    (d / "summary.json").write_text(json.dumps({"experiments": [{"id": e["id"], "platform": e["platform"]}
                                                                for e in entries]}))
    (d / "manifest.json").write_text(json.dumps({"run_id": d.name}))
    return d


def test_rows_median_and_worst_from_a_synthetic_run_dir(tmp_path):
    d = _run_dir(tmp_path, ENTRIES)
    r = trapline("fidelity", str(d))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    table = [x for x in lines if x.startswith("|")]
    # header, separator, four rows (a's headline and two figures, b's headline), nine cells each
    assert len(table) == 2 + 4
    cells = [re.split(r"(?<!\\)\|", x)[1:-1] for x in table]
    assert all(len(c) == 9 for c in cells), cells
    assert [c[2].strip() for c in cells[2:]] == ["headline: a ratio", "a ns", "a count", "headline: b ratio"]
    assert [c[6].strip() for c in cells[2:]] == ["1.00", "2.00", "0.00", "2.00"]
    assert [c[7].strip() for c in cells[2:]] == ["prediction", "", "", "prediction"]
    # median of 1, 2, 0, 2 is 1.5; the worst is 2 (a's ns figure comes first)
    assert "All figures: 4 rows, median |log2| 1.50 (x2.83), worst 2.00 (x4.00, a: a ns)" in r.stdout
    assert "Headlines: 2 rows, median |log2| 1.50" in r.stdout and "worst 2.00 (x4.00, b: b ratio)" in r.stdout
    # without the count row: 1, 2, 2
    assert "Times and ratios (without the counts: traps, calls or reads per operation): 3 rows, median |log2| 2.00" in r.stdout
    assert "Within a factor of two: 2 of 4 rows." in r.stdout
    assert "Prediction headlines beyond 2x and not reported differs: none." in r.stdout


def test_a_prediction_beyond_2x_that_says_reproduced_breaks_the_rule():
    bad = [Entry.from_dict(_entry("c", "model", 10, 45, "reproduced", "prediction")),
           Entry.from_dict(_entry("d", "model", 10, 45, "reproduced", "input")),     # input: not the rule's
           Entry.from_dict(_entry("e", "model", 10, 19, "reproduced", "prediction")),  # within 2x
           Entry.from_dict(_entry("f", "model", 10, 2, "reproduced", "fitted"))]
    rs = fidelity.rows(bad)
    s = fidelity.summary(rs)
    assert s["breaking_rule"] == ["c [model]"] and s["fitted_headlines"] == ["f"]
    assert s["headlines"]["worst"] == pytest.approx(abs(math.log2(2 / 10)))
    assert s["headlines"]["median"] == pytest.approx(statistics_median([math.log2(4.5), math.log2(4.5),
                                                                        math.log2(1.9), abs(math.log2(0.2))]))
    md = fidelity.markdown(bad)
    assert "reproduced (BREAKS the 2x rule)" in md and "not reported differs: c [model]." in md


def statistics_median(xs):
    xs = sorted(xs)
    return (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2 if len(xs) % 2 == 0 else xs[len(xs) // 2]


def test_fidelity_of_an_unknown_run_is_one_line_and_exit_2(results_dir):
    r = trapline("fidelity", "no-such-run")
    assert r.returncode == 2 and "no-such-run" in r.stderr and r.stdout == ""


def test_the_report_of_a_model_run_has_the_fidelity_table(results_dir):
    """A real model run (x86-split-lock, user mode, deterministic): its report has the
    section, one row per claimed figure, and the same table as ./run.sh fidelity."""
    r = trapline("run", "x86-split-lock", "--platform", "model", "--quick", "--fresh")
    assert r.returncode == 0, r.stderr[-3000:]
    run = (results_dir / "latest").resolve()
    md = (run / "report.md").read_text()
    html = (run / "report.html").read_text()
    assert "Fidelity of the modelled figures" in md and 'id="fidelity"' in html
    e = json.loads((run / "entries" / "x86-split-lock.model.json").read_text())
    claimed = 1 + sum(1 for f in e["figures"] if f.get("claimed"))
    out = trapline("fidelity").stdout
    assert sum(1 for x in out.splitlines() if x.startswith("| E3 ")) == claimed
    head = next(x for x in out.splitlines() if "headline:" in x)
    assert f"{abs(math.log2(e['reproduced'] / e['claimed'])):.2f}" in head and "prediction" in head and "differs" in head


def test_the_table_in_methodology_md_is_consistent():
    """docs/methodology.md's fidelity table (./run.sh fidelity output pasted there): each
    row's |log2| agrees with its claimed and modelled columns, the summary's median and
    worst agree with the rows, and no prediction headline beyond 2x says reproduced."""
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "methodology.md").read_text()
    part = doc.split("### Fidelity of the modelled figures")[1]
    rows = [re.split(r"(?<!\\)\|", x)[1:-1] for x in part.splitlines() if re.match(r"\| E[0-9]+ \|", x)]
    assert len(rows) >= 20 and all(len(r) == 9 for r in rows)

    def num(cell):
        return float(re.match(r"\s*([0-9.]+)", cell).group(1))
    logs = []
    for r in rows:
        c, m, lg = num(r[3]), num(r[4]), float(r[6])
        assert abs(abs(math.log2(m / c)) - lg) < 0.03, r
        if "headline" in r[2] and r[7].strip() == "prediction" and lg > 1:
            assert r[8].strip() == "differs", r
        logs.append(lg)
    med = re.search(r"All figures: (\d+) rows, median \|log2\| ([0-9.]+) .*?worst ([0-9.]+)", part)
    assert int(med.group(1)) == len(rows)
    assert abs(float(med.group(2)) - statistics_median(logs)) < 0.011
    assert float(med.group(3)) == pytest.approx(max(logs), abs=0.006)
    heads = [float(r[6]) for r in rows if r[2].strip().startswith("headline")]
    h = re.search(r"Headlines: (\d+) rows, median \|log2\| ([0-9.]+) .*?worst ([0-9.]+)", part)
    assert int(h.group(1)) == len(heads) and abs(float(h.group(2)) - statistics_median(heads)) < 0.011
    assert "Fitted headlines: none." in part
