"""The report in a real headless browser (Debian's chromium): a finished run's
report.html opens with the claim matrix, a row per experiment, cells coloured by
status, and every plot decodes. The run is a real one (loop-order --quick on the host
and the timing model), made under umask 022: every file in it is readable by others,
and `report RUN` redraws it byte for byte."""

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import trapline
from trapline.report import STATUS_COLOR

CHROMIUM = shutil.which("chromium")

# run in the page after load: what the browser decoded and painted, written into the DOM
PROBE = """<script>window.addEventListener("load", function () {
  for (const i of document.images) i.setAttribute("data-natural-width", i.naturalWidth);
  for (const c of document.querySelectorAll("#claim-matrix td[data-status]"))
    c.setAttribute("data-painted", getComputedStyle(c).backgroundColor);
  document.body.setAttribute("data-probed", "1");
});</script>"""


@pytest.fixture(scope="module")
def loop_order_run(tmp_path_factory):
    results = tmp_path_factory.mktemp("browser") / "results"
    old = os.umask(0o022)
    try:
        r = trapline("run", "loop-order", "--quick", env={"TRAPLINE_RESULTS": str(results)})
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr[-3000:]
    return (results / "latest").resolve()


def test_every_file_of_a_run_is_readable_under_umask_022(loop_order_run):
    paths = list(loop_order_run.rglob("*"))
    assert any(p.name == "report.html" for p in paths) and any(p.suffix == ".png" for p in paths)
    unreadable = [str(p) for p in paths if (p.stat().st_mode & 0o044) != 0o044]
    assert not unreadable, unreadable


def test_report_command_redraws_the_run_byte_for_byte(loop_order_run):
    before = {p: p.read_bytes() for p in loop_order_run.rglob("*") if p.is_file()}
    r = trapline("report", loop_order_run.name, env={"TRAPLINE_RESULTS": str(loop_order_run.parent)})
    assert r.returncode == 0, r.stderr
    after = {p: p.read_bytes() for p in loop_order_run.rglob("*") if p.is_file()}
    assert [str(p) for p in before if before[p] != after.get(p)] == []


class _Dom(HTMLParser):
    """The claim matrix's rows and status cells, and every <img>, from the dumped DOM."""

    def __init__(self):
        super().__init__()
        self.in_matrix, self.rows, self.cells, self.imgs, self.probed = False, 0, [], [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body" and a.get("data-probed") == "1":
            self.probed = True
        if tag == "table" and a.get("id") == "claim-matrix":
            self.in_matrix = True
        elif self.in_matrix and tag == "tr":
            self.rows += 1
        elif self.in_matrix and tag == "td" and "data-status" in a:
            self.cells.append((a["data-status"], a.get("data-painted")))
        elif tag == "img":
            self.imgs.append(a)

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_matrix = False


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_report_html_in_a_headless_browser(loop_order_run, tmp_path):
    assert CHROMIUM, "Debian's chromium is missing: run.sh installs it (APT_PACKAGES)"
    page = tmp_path / "report.html"
    page.write_text((loop_order_run / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                        "--user-data-dir=" + str(tmp_path / "profile"), "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "</html>" in r.stdout, r.stderr[-2000:]
    dom = _Dom()
    dom.feed(r.stdout)
    assert dom.probed, "the probe script did not run"
    summary = json.loads((loop_order_run / "summary.json").read_text())
    experiments = {e["id"] for e in summary["experiments"]}
    assert dom.rows == 1 + len(experiments)  # the header and one row per claim
    # one cell per entry, painted in its status colour by the browser
    statuses = sorted(e["status"] for e in summary["experiments"])
    assert sorted(s for s, _ in dom.cells) == statuses
    assert all(painted == _rgb(STATUS_COLOR[s]) for s, painted in dom.cells), dom.cells
    # the matrix comes first, and every plot the run drew is in the page and decoded
    assert r.stdout.index('id="claim-matrix"') < min(m.start() for m in re.finditer("<img", r.stdout))
    drawn = list((loop_order_run / "plots").iterdir())
    assert len(dom.imgs) == len(drawn) >= 2
    assert all(int(i.get("data-natural-width", 0)) > 100 for i in dom.imgs), dom.imgs
