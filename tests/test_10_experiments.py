"""Experiments as data: every catalogue entry has a file, and bad files are
rejected with a sentence that names the field."""

import copy
from pathlib import Path

import pytest
import yaml

from trapline import experiment
from trapline.errors import ExperimentError

GOOD = experiment.EXPERIMENTS_DIR / "x86-split-lock.yaml"


def test_every_catalogue_id_has_a_valid_file():
    exps = experiment.load_all()
    assert list(exps) == experiment.CATALOGUE_ORDER


def test_every_experiment_names_source_machine_claim_and_platforms():
    for e in experiment.load_all().values():
        assert e.data["source"]["title"] and e.data["source"]["date"]
        assert e.data["claimed"], e.id
        assert e.data["platforms"], e.id
        assert (experiment.KERNELS_DIR / e.kernel / "kernel.mk").exists()
        assert (experiment.ROOT / "docs" / "experiments" / f"{e.id}.md").exists(), e.id


def _write(tmp_path, data, name="x86-split-lock"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.fixture
def good():
    return yaml.safe_load(GOOD.read_text())


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d.update(colour="red"), "unknown field 'colour'; valid fields:"),
    (lambda d: d["headline"].update(unit="furlongs"), "headline.unit: 'furlongs' is not valid; choose one of: x,"),
    (lambda d: d.update(id="Not Kebab"), "id: 'Not Kebab' does not match"),
    (lambda d: d.pop("source"), "'source' is a required property"),
    (lambda d: d["platforms"].update(pdp11={}), "platforms: unknown field 'pdp11'; valid fields: gem5, host, model, qemu"),
    (lambda d: d["platforms"]["host"]["runs"][0].update(binary="nope"),
     "platforms.host.runs[0].binary: 'nope' is not built by kernels/x86-split-lock/kernel.mk; valid choices: split-lock"),
    (lambda d: d["platforms"]["host"].pop("criterion"), "platforms.host.reproduced_if: needs a 'criterion' sentence"),
    (lambda d: d["platforms"]["host"]["headline"]["ratio"]["num"].update(variant="bogus"),
     "platforms.host.headline.ratio.num.variant: 'bogus' is not a declared variant; valid choices:"),
    (lambda d: d["platforms"]["host"].update(reproduced_if={"min": 5, "max": 1}), "min (5) needs to be at most max (1)"),
    (lambda d: d.update(kernel="no-such-kernel"), "kernel: 'no-such-kernel' needs a folder kernels/no-such-kernel/"),
    (lambda d: d["platforms"]["host"]["headline"].update(value={"variant": "plain"}),
     "a metric needs exactly one of 'ratio' or 'value'"),
])
def test_bad_fields_are_named(tmp_path, good, mutate, expected):
    d = copy.deepcopy(good)
    mutate(d)
    with pytest.raises(ExperimentError) as ei:
        experiment.load_file(_write(tmp_path, d))
    assert expected in str(ei.value)
    assert str(ei.value).startswith(str(tmp_path / "x86-split-lock.yaml")) or "x86-split-lock.yaml" in str(ei.value)


def test_id_must_equal_file_name(tmp_path, good):
    with pytest.raises(ExperimentError, match="id: 'x86-split-lock' needs to equal the file name 'other'"):
        experiment.load_file(_write(tmp_path, good, name="other"))


def test_not_yaml(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("id: [unclosed")
    with pytest.raises(ExperimentError, match="not valid YAML"):
        experiment.load_file(p)


def test_the_good_file_loads(tmp_path, good):
    e = experiment.load_file(_write(tmp_path, good))
    assert e.id == "x86-split-lock" and e.headline["claimed"] == 206
