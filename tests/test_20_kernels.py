"""Kernels: every one builds for x86_64, sparc64 and armv6 with Debian's GNU
toolchains, contains the instruction its variant is about (disasm.yaml),
rejects unknown keys, and declares each key's type and range once (the harness's
static reading of the declaration equals the binary's --help)."""

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from trapline import build, experiment, kernelargs

KERNEL_DIRS = sorted(p.parent for p in experiment.kernels_dir().glob("*/kernel.mk"))


def _disasm_cases():
    cases = []
    for d in KERNEL_DIRS:
        f = d / "disasm.yaml"
        if f.exists():
            for i, c in enumerate(yaml.safe_load(f.read_text()) or []):
                cases.append(pytest.param(d.name, c, id=f"{d.name}-{c['arch']}-{c['binary']}-{c['function']}"))
    return cases


@pytest.fixture(scope="session")
def builds():
    return {arch: build.build(arch) for arch in build.ARCHES}


def test_every_experiment_kernel_has_binaries():
    for e in experiment.load_all().values():
        assert experiment.kernel_binaries(e.kernel), e.id


@pytest.mark.parametrize("arch", list(build.ARCHES))
def test_every_kernel_builds_static_for_every_arch(builds, arch):
    for d in KERNEL_DIRS:
        for name in experiment.kernel_binaries(d.name):
            p = builds[arch] / d.name / name
            assert p.exists(), f"{arch}: {d.name}/{name} was not built"
            info = subprocess.run(["file", "-b", str(p)], capture_output=True, text=True).stdout \
                if subprocess.run(["which", "file"], capture_output=True).returncode == 0 else ""
            head = p.read_bytes()[:20]
            assert head[:4] == b"\x7fELF"
            machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
            assert machine == {"x86_64": 62, "sparc64": 43, "armv6": 40}[arch], (p, machine)


def disassemble(arch: str, binary: Path, function: str) -> list[str]:
    objdump = build.ARCHES[arch].objdump
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", f"--disassemble={function}", str(binary)],
                         capture_output=True, text=True, check=True).stdout
    # instruction lines look like "  401a2c:\tlock addq $0x1,(%rax)"
    return [l.split("\t", 1)[1] for l in out.splitlines() if re.match(r"^\s+[0-9a-f]+:\t", l)]


@pytest.mark.parametrize("kernel, case", _disasm_cases())
def test_intended_instruction_is_emitted(builds, kernel, case):
    binary = builds[case["arch"]] / kernel / case["binary"]
    insns = disassemble(case["arch"], binary, case["function"])
    assert insns, f"{case['function']} not found in {binary.name} ({case['arch']})"
    for rx in case.get("must", []):
        assert any(re.search(rx, i) for i in insns), \
            f"{case['arch']} {case['function']}: no instruction matches {rx!r} ({case.get('why', '')})\n" + "\n".join(insns)
    for rx in case.get("must_not", []):
        bad = [i for i in insns if re.search(rx, i)]
        assert not bad, f"{case['arch']} {case['function']}: {rx!r} must not appear: {bad}"


def test_disasm_checks_cover_the_architecture_specific_variants():
    cases = [c.values[1] for c in _disasm_cases()]
    have = {(c.values[0], c.values[1]["arch"]) for c in _disasm_cases()}
    for need in [("x86-split-lock", "x86_64"), ("sparc-misalign-trap", "sparc64"), ("armv6-unaligned", "armv6"),
                 ("sparc-strong-prefetch", "sparc64"), ("sparc-spill-fill", "sparc64")]:
        assert need in have, need
    assert len(cases) >= 10


def test_disassembler_sees_a_missing_instruction(builds):
    """The check can fail: plain_sweep has no lock prefix."""
    insns = disassemble("x86_64", builds["x86_64"] / "x86-split-lock" / "split-lock", "plain_sweep")
    assert insns and not any(re.search(r"\block\b", i) for i in insns)


def test_kernels_reject_unknown_keys(builds):
    for d in KERNEL_DIRS:
        for name in experiment.kernel_binaries(d.name):
            p = builds["x86_64"] / d.name / name
            r = subprocess.run([str(p), "bogus_key=1"], capture_output=True, text=True, timeout=30, cwd=p.parent)
            assert r.returncode == 2, (d.name, name, r.stdout, r.stderr)
            assert "bogus_key" in r.stderr and "valid keys" in r.stderr, r.stderr


def _help_args(binary: Path) -> list[tuple[str, str, str]]:
    """(key, default, help) as the binary's --help prints them ("  key  default D  [spec] help")."""
    r = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30, cwd=binary.parent)
    assert r.returncode == 0, (binary, r.stderr)
    rows = []
    for line in r.stdout.split("keys:\n", 1)[1].splitlines():
        m = re.match(r"^  (\S+)\s+default (.*?)\s*(\[.*)$", line)
        assert m, (binary, line)
        rows.append(m.groups())
    return rows


def test_declared_args_equal_every_binarys_help():
    """The harness reads the keys from the C source; every built binary must print the same."""
    out = build.build("x86_64")
    for d in KERNEL_DIRS:
        declared = [(a.key, a.default, a.full_help) for a in kernelargs.declared(d).values()]
        assert declared, d.name
        for name in experiment.kernel_binaries(d.name):
            assert _help_args(out / d.name / name) == declared, (d.name, name)


def test_every_kernel_key_has_a_spec_its_default_meets():
    for d in KERNEL_DIRS:
        for a in kernelargs.declared(d).values():
            assert a.problem(a.default) is None, (d.name, a)
            if a.kind == "choice":
                assert a.default in a.choices and a.problem("no-such-choice"), (d.name, a)
            else:
                lo, hi = a.bounds
                assert a.problem(str(lo)) is None and a.problem(str(hi)) is None, (d.name, a)
                assert a.problem("abc") and a.problem(" ") and a.problem("1e30"), (d.name, a)
                if a.kind != "float":
                    assert a.problem(str(lo - 1)) and a.problem(str(hi + 1)), (d.name, a)


def test_every_experiments_own_args_are_valid_under_their_specs():
    for e in experiment.load_all().values():
        keys = kernelargs.declared(e.folder)
        for pname, p in e.platforms.items():
            for i, r in enumerate(p.get("runs", [])):
                for sec in ("args", "quick"):
                    assert kernelargs.problems(r.get(sec) or {}, keys, f"{e.id} {pname}[{i}].{sec}.") == []


def test_kernel_arg_spec_messages_name_key_value_and_what_is_valid():
    loop = kernelargs.declared(experiment.kernels_dir() / "loop-order")
    assert loop["rows"].problem("-5") == "rows: -5 is not valid; an integer from 1 to 1048576"
    assert loop["rows"].problem(0x400) is None and loop["rows"].problem("0x400") is None
    split = kernelargs.declared(experiment.kernels_dir() / "x86-split-lock")
    assert split["offsets"].problem("63-0") and split["offsets"].problem("0-63") is None
    assert split["offsets"].problem("48") is None and split["offsets"].problem("-1")
    assert "locked" in split["variant"].problem("nope")
    spill = kernelargs.declared(experiment.kernels_dir() / "sparc-spill-fill")
    assert spill["depths"].problem("") is None and spill["depths"].problem("10,100") is None
    assert spill["depths"].problem("10,0") and spill["depths"].problem("10,,100")
    assert kernelargs.problems({"bogus": 1}, loop, "x.")[0].startswith("x.bogus: not a key")


def test_kernel_build_is_reproducible(tmp_path):
    for out in ("a", "b"):
        subprocess.run(["make", "-s", "-C", str(experiment.kernels_dir()), *build.make_vars("x86_64"), f"O={tmp_path / out}", "-j2",
                        "all"], check=True, capture_output=True)
    a, b = build.binary_hashes(tmp_path / "a"), build.binary_hashes(tmp_path / "b")
    assert a and a == b
