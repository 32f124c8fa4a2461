"""The repository's own conventions, checked as sentences: each test file has a number of
its own and conftest's legend names it; the docs and the README describe the present
(no dates, loads or session words: history is in git); the README's first 40 lines hold
the two commands and the Docker commands."""

import re

from conftest import ROOT

TESTS = ROOT / "tests"
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
HISTORY = re.compile(
    r"\b20\d\d-[01]\d-[0-3]\d\b(?!T)"                                      # a date (not a timestamp value)
    r"|\b(January|February|March|April|May|June|July|August|September|October|November|December) 20\d\d\b"
    r"|\bat a load of\b|\bload average \d|[(,;] load \d"                    # a load average
    r"|\bthis session\b|\bthe change before\b|\bbranch h-")


def _numbers():
    return [int(m.group(1)) for p in TESTS.glob("test_*.py") if (m := re.match(r"test_(\d+)_", p.name))]


def test_every_test_file_has_a_number_of_its_own():
    nums = _numbers()
    dup = sorted({n for n in nums if nums.count(n) > 1})
    assert not dup, f"test numbers used twice: {dup}"


def test_the_legend_names_every_test_number():
    import conftest
    legend = conftest.__doc__
    missing = sorted(n for n in set(_numbers()) if not re.search(rf"\b{n:02d}\b", legend))
    assert not missing, f"tests/conftest.py's legend lacks {missing}"


def test_docs_describe_the_present():
    found = [f"{p.relative_to(ROOT)}:{i}: {ln.strip()[:100]}" for p in DOCS
             for i, ln in enumerate(p.read_text().splitlines(), 1) if HISTORY.search(ln)]
    assert not found, "dates, loads or history in the docs (history belongs in git):\n" + "\n".join(found)


def test_the_readme_starts_with_what_and_the_commands():
    head = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    for cmd in ("./run.sh reproduce-all", "./run.sh test", "docker build", "docker run"):
        assert cmd in head, f"README's first 40 lines lack {cmd!r}"


def test_the_performance_doc_is_a_page_of_current_tables():
    lines = (ROOT / "docs" / "performance.md").read_text().splitlines()
    assert len(lines) < 300, f"docs/performance.md has {len(lines)} lines: one current table per topic, under 300"
