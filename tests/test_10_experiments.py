"""Experiments as data: every catalogue entry is one folder kernels/<id>/ with a
valid experiment.yaml, bad files are rejected with a sentence that names the
field, and adding a host-only experiment is adding one folder."""

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import trapline
from trapline import experiment, platforms
from trapline.errors import ExperimentError

GOOD = experiment.kernels_dir() / "x86-split-lock" / "experiment.yaml"

# shared/claims.md E1..E11, in catalogue order: the order of `list` and the report.
CATALOGUE = [
    "sparc-misalign-trap", "armv6-unaligned", "x86-split-lock", "sparc-strong-prefetch",
    "numa-first-touch", "malloc-chunk-chase", "plt-itlb", "sparc-spill-fill",
    "loop-order", "strlen-loop", "stl-alloc-scaling",
]


# trapline's own validation experiments (catalogue V<n>): after the claims, in their order
VALIDATION = ["miss-overlap"]


def test_every_catalogue_id_has_a_valid_file():
    exps = experiment.load_all()
    assert list(exps) == CATALOGUE + VALIDATION
    assert [e.data["catalogue"] for e in exps.values()] == [f"E{i}" for i in range(1, 12)] + ["V1"]


def test_every_experiment_names_source_machine_claim_and_platforms():
    for e in experiment.load_all().values():
        assert e.data["source"]["title"] and e.data["source"]["date"]
        assert e.data["claimed"], e.id
        assert e.data["platforms"], e.id
        assert e.kernel == e.id and e.folder == experiment.kernels_dir() / e.id
        assert (experiment.kernels_dir() / e.kernel / "kernel.mk").exists()
        assert (e.folder / "README.md").exists(), e.id


def test_one_folder_per_experiment_and_no_central_list():
    assert not (experiment.ROOT / "experiments").exists()
    assert not (experiment.ROOT / "docs" / "experiments").exists()
    assert not hasattr(experiment, "CATALOGUE_ORDER")


def test_catalogue_order_is_numeric():
    keys = [("E10", "a"), ("E2", "z"), ("E2", "b"), ("X1", "c"), ("E1", "y")]
    got = sorted(keys, key=lambda k: experiment.catalogue_key(*k))
    assert got == [("E1", "y"), ("E2", "b"), ("E2", "z"), ("E10", "a"), ("X1", "c")]


def _tree(tmp_path: Path, *kernels: str) -> Path:
    """A kernels directory of its own: the Makefile, common/ and copies of `kernels`."""
    src, dst = experiment.kernels_dir(), tmp_path / "kernels"
    dst.mkdir(exist_ok=True)
    shutil.copy(src / "Makefile", dst / "Makefile")
    if not (dst / "common").exists():
        shutil.copytree(src / "common", dst / "common")
    for k in kernels:
        if not (dst / k).exists():
            shutil.copytree(src / k, dst / k, ignore=shutil.ignore_patterns("experiment.yaml", "README.md"))
    return dst


def _write(tmp_path, data, name="x86-split-lock"):
    d = _tree(tmp_path, "x86-split-lock") / name
    d.mkdir(exist_ok=True)
    p = d / "experiment.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.fixture
def good():
    return yaml.safe_load(GOOD.read_text())


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d.update(colour="red"), "unknown field 'colour'; valid fields:"),
    (lambda d: d["headline"].update(unit="furlongs"), "headline.unit: 'furlongs' is not valid; choose one of: x,"),
    (lambda d: d.update(id="x86-split-lock"), "id: remove it; the id is the folder's name ('x86-split-lock')"),
    (lambda d: d.update(kernel="x86-split-lock"), "kernel: remove it; the kernel is the folder's name"),
    (lambda d: d.pop("source"), "'source' is a required property"),
    # the valid fields are the platforms found (trapline/platforms/: gem5, host, model, qemu once gem5 lands)
    (lambda d: d["platforms"].update(pdp11={}),
     f"platforms: unknown field 'pdp11'; valid fields: {', '.join(sorted(platforms.names()))}"),
    (lambda d: d["platforms"]["host"]["runs"][0].update(binary="nope"),
     "platforms.host.runs[0].binary: 'nope' is not built by kernels/x86-split-lock/kernel.mk; valid choices: split-lock"),
    (lambda d: d["platforms"]["host"].pop("criterion"), "platforms.host.reproduced_if: needs a 'criterion' sentence"),
    (lambda d: d["platforms"]["host"]["headline"]["ratio"]["num"].update(variant="bogus"),
     "platforms.host.headline.ratio.num.variant: 'bogus' is not a declared variant; valid choices:"),
    (lambda d: d["platforms"]["host"].update(reproduced_if={"min": 5, "max": 1}), "min (5) needs to be at most max (1)"),
    (lambda d: d["platforms"]["host"]["headline"].update(value={"variant": "plain"}),
     "a metric needs exactly one of 'ratio' or 'value'"),
])
def test_bad_fields_are_named(tmp_path, good, mutate, expected):
    d = copy.deepcopy(good)
    mutate(d)
    with pytest.raises(ExperimentError) as ei:
        experiment.load_file(_write(tmp_path, d))
    assert expected in str(ei.value)
    assert str(ei.value).startswith(str(tmp_path / "kernels" / "x86-split-lock" / "experiment.yaml"))


def test_the_id_is_the_folder_name(tmp_path, good):
    with pytest.raises(ExperimentError, match="the folder name 'Not Kebab' is the experiment id and needs to be kebab-case"):
        experiment.load_file(_write(tmp_path, good, name="Not Kebab"))


def test_the_folder_needs_a_kernel(tmp_path, good):
    with pytest.raises(ExperimentError, match=r"kernels/no-such-kernel/ needs a kernel.mk beside experiment.yaml"):
        experiment.load_file(_write(tmp_path, good, name="no-such-kernel"))


def test_not_yaml(tmp_path):
    p = tmp_path / "x" / "experiment.yaml"
    p.parent.mkdir()
    p.write_text("catalogue: [unclosed")
    with pytest.raises(ExperimentError, match="not valid YAML"):
        experiment.load_file(p)


def test_the_good_file_loads(tmp_path, good):
    e = experiment.load_file(_write(tmp_path, good))
    assert e.id == "x86-split-lock" and e.kernel == "x86-split-lock" and e.headline["claimed"] == 206


# A host-only experiment written from scratch: a kernel that adds n or 8n
# numbers and counts the additions, so its headline (8) is exact.
DEMO_C = r"""
#include "trapline.h"

TL_ARGS({"variant", "short", "[choice] short|long"},
        {"n", "100000", "[int 1..100000000] additions of the short variant (quick: 10000)"});

struct ctx { long n; };

__attribute__((noinline)) static uint64_t body(void *vc)
{
    struct ctx *c = vc;
    uint64_t s = 0;
    for (long i = 0; i < c->n; i++)
        s += (uint64_t)i;
    TL_USE(s);
    return (uint64_t)c->n;
}

int main(int argc, char **argv)
{
    tl_exp = "zz-demo";
    tl_parse_args(argc, argv, args);
    const char *variant = tl_choice(args, "variant", "short|long");
    long n = tl_int(args, "n");
    if (tl_int(args, "quick") && !tl_given(args, "n"))
        n = 10000;
    if (!strcmp(variant, "long"))
        n *= 8;
    tl_timer_check();
    struct ctx c = {.n = n};
    tl_measure(variant, "", tl_int(args, "warmup"), tl_int(args, "reps"), body, &c);
    tl_count(variant, "adds", (uint64_t)n, "");
    return 0;
}
"""

DEMO_MK = """\
BINS += $(O)/zz-demo/demo
$(O)/zz-demo/demo: zz-demo/demo.c common/trapline.h
\t$(tl_static)
"""

DEMO_YAML = {
    "description": "A throwaway host-only experiment: the long variant does eight times the additions.",
    "catalogue": "E99",
    "source": {"title": "the test suite", "author": "tests/test_10_experiments.py", "date": "2024"},
    "original_machine": "none",
    "claimed": [{"label": "additions, long / short", "value": 8, "unit": "x"}],
    "headline": {"name": "additions, long / short", "unit": "x", "claimed": 8,
                 "derivation": "the long variant adds 8n numbers, the short one n"},
    "variants": [{"name": "short", "what": "n additions"}, {"name": "long", "what": "8n additions"}],
    "platforms": {"host": {
        "runs": [{"binary": "demo", "args": {"variant": "short"}, "quick": {}},
                 {"binary": "demo", "args": {"variant": "long"}, "quick": {}}],
        "headline": {"name": "additions, long / short",
                     "ratio": {"num": {"variant": "long", "count": "adds"},
                               "den": {"variant": "short", "count": "adds"}}},
        "reproduced_if": {"min": 7.5, "max": 8.5},
        "criterion": "the kernel counts its additions, so the ratio is exactly 8",
    }},
}


def test_a_new_experiment_is_one_folder(tmp_path, results_dir):
    """Adding a host-only experiment is adding one folder: list shows it, run
    builds and runs it, and the report has its entry."""
    kdir = _tree(tmp_path)
    demo = kdir / "zz-demo"
    demo.mkdir()
    (demo / "demo.c").write_text(DEMO_C)
    (demo / "kernel.mk").write_text(DEMO_MK)
    (demo / "experiment.yaml").write_text(yaml.safe_dump(DEMO_YAML, sort_keys=False))
    (demo / "README.md").write_text("# zz-demo\n\nA throwaway experiment made by the test suite.\n")
    env = {"TRAPLINE_KERNELS": str(kdir), "TRAPLINE_CACHE": str(tmp_path / "cache")}

    r = trapline("list", env=env)
    assert r.returncode == 0, r.stderr
    assert [l.split()[0] for l in r.stdout.splitlines()] == ["zz-demo"]
    assert DEMO_YAML["description"] in r.stdout

    r = trapline("run", "zz-demo", "--platform", "host", "--quick", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "cache" / "kernels").is_dir()
    assert any((tmp_path / "cache" / "kernels").glob("x86_64-*/zz-demo/demo"))

    latest = results_dir / "latest"
    summary = json.loads((latest / "summary.json").read_text())
    [entry] = summary["experiments"]
    assert (entry["id"], entry["platform"], entry["status"]) == ("zz-demo", "host", "reproduced")
    assert entry["reproduced"] == 8
    manifest = json.loads((latest / "manifest.json").read_text())
    assert manifest["experiments"]["zz-demo"]["file"] == str(demo / "experiment.yaml")
    assert manifest["environment"]["TRAPLINE_KERNELS"] == str(kdir)
    md = (latest / "report.md").read_text()
    assert "zz-demo" in md and "reproduced" in md


def test_prose_beside_a_kernel_does_not_rebuild_it(tmp_path, monkeypatch):
    """The build key covers the kernels directory's sources, not its prose and data."""
    from trapline import build
    kdir = _tree(tmp_path, "loop-order")
    monkeypatch.setenv("TRAPLINE_KERNELS", str(kdir))
    key = build.input_hash("x86_64")
    for name in ("experiment.yaml", "README.md", "disasm.yaml"):
        (kdir / "loop-order" / name).write_text("# edited\n")
    assert build.input_hash("x86_64") == key
    (kdir / "loop-order" / "loop_order.c").write_text("/* edited */\n")
    assert build.input_hash("x86_64") != key


def test_a_remembered_pass_is_checked_again_once_anything_it_was_checked_with_changes(tmp_path, monkeypatch):
    """trapline.checked: a file that passed is read from the cache (its data as loaded, in
    its own key order) until the file, the kernels directory or trapline's code changes; a
    failure is never remembered."""
    tree = tmp_path / "kernels"
    shutil.copytree(experiment.kernels_dir(), tree, ignore=shutil.ignore_patterns("build"))
    env = {"TRAPLINE_KERNELS": str(tree), "TRAPLINE_CACHE": str(tmp_path / "cache")}
    first = trapline("list", env=env)
    assert first.returncode == 0, first.stderr
    stamps = sorted((tmp_path / "cache" / "checked").iterdir())
    assert len(stamps) == len(CATALOGUE + VALIDATION)
    assert trapline("list", env=env).stdout == first.stdout
    monkeypatch.setenv("TRAPLINE_KERNELS", str(tree))
    monkeypatch.setenv("TRAPLINE_CACHE", str(tmp_path / "cache"))
    remembered = experiment.load_file(tree / "x86-split-lock" / "experiment.yaml")
    fresh = yaml.safe_load((tree / "x86-split-lock" / "experiment.yaml").read_text())
    assert remembered.data == fresh and json.dumps(remembered.data) == json.dumps(fresh)  # order too
    # another file of the tree changes what loop-order's checks see: checked again, and refused
    mk = tree / "loop-order" / "kernel.mk"
    mk.write_text(mk.read_text().replace("loop-order/loop-order", "loop-order/loop-order-renamed"))
    r = trapline("list", env=env)
    assert r.returncode == 2 and "loop-order" in r.stderr and "kernel.mk" in r.stderr, r.stderr
    assert "strlen-loop" in r.stdout
    assert len(list((tmp_path / "cache" / "checked").iterdir())) == 2 * len(CATALOGUE + VALIDATION) - 1  # no pass for it
