"""Kernels: every one builds for x86_64, sparc64 and armv6 with Debian's GNU
toolchains, contains the instruction its variant is about (disasm.yaml), and
rejects unknown keys."""

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from trapline import build, experiment

KERNEL_DIRS = sorted(p.parent for p in experiment.KERNELS_DIR.glob("*/kernel.mk"))


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
    objdump = build.ARCHES[arch][1]
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


def test_kernel_build_is_reproducible(tmp_path):
    for out in ("a", "b"):
        subprocess.run(["make", "-s", "-C", str(experiment.KERNELS_DIR), "ARCH=x86_64", f"O={tmp_path / out}", "-j2",
                        "all"], check=True, capture_output=True)
    a, b = build.binary_hashes(tmp_path / "a"), build.binary_hashes(tmp_path / "b")
    assert a and a == b
