"""The architecture table (trapline/arch.py) is the one place an architecture
is described: the schema enums and the plugin's arch names agree with it, the
scripts and the kernels' Makefile keep no per-arch table of their own, and the
QEMU machine arguments boot.sh receives carry the table's NUMA layout."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from trapline import arch
from trapline.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent


def _enums(node, key="arch"):
    """Every enum under a property called key, anywhere in a schema."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, dict) and "enum" in v:
                yield v["enum"]
            yield from _enums(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _enums(v, key)


@pytest.mark.parametrize("schema", ["trapline/schema/experiment.schema.json", "gem5_configs/machine.schema.json"])
def test_schema_arch_enums_are_the_table(schema):
    enums = list(_enums(json.loads((ROOT / schema).read_text())))
    assert enums, f"{schema} has no arch enum"
    for e in enums:
        assert sorted(e) == sorted(arch.ARCHES), f"{schema}: arch enum {e} is not the table's {list(arch.ARCHES)}"


def test_plugin_arch_names_are_the_table():
    found = []
    for c in sorted((ROOT / "model" / "plugin").rglob("*.c")):
        m = re.search(r"arch_names\[\]\s*=\s*\{([^}]*)\}", c.read_text())
        if m:
            found.append(re.findall(r'"([^"]+)"', m.group(1)))
    assert found, "no arch_names[] in model/plugin"
    assert all(sorted(f) == sorted(arch.ARCHES) for f in found), found


def test_unknown_arch_names_the_valid_choices():
    with pytest.raises(UsageError, match=r"unknown arch 'mips'; valid choices: x86_64, sparc64, armv6"):
        arch.get("mips")
    r = subprocess.run(["python3", "-m", "trapline.arch", "build", "mips"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 2 and "valid choices: x86_64, sparc64, armv6" in r.stderr


def test_no_per_arch_tables_left_in_the_scripts_and_the_makefile():
    mk = (ROOT / "kernels" / "Makefile").read_text()
    assert not re.search(r"^(CC|OBJDUMP|ARCHFLAGS)_(x86_64|sparc64|armv6)\b", mk, re.M)
    for script in ("images/build.sh", "images/boot.sh", "images/lib/linux.sh"):
        text = (ROOT / script).read_text()
        assert not re.search(r"^\s*case \$ARCH in", text, re.M), f"{script} still switches on ARCH"
    for name in ("sparc64-linux-gnu-", "arm-linux-gnueabi-", "-mcpu=ultrasparc", "raspi0 -m"):
        for script in ("images/build.sh", "images/boot.sh", "images/lib/linux.sh", "images/lib/initramfs.sh",
                       "kernels/Makefile"):
            body = "\n".join(l for l in (ROOT / script).read_text().splitlines() if not l.lstrip().startswith("#"))
            assert name not in body or script == "kernels/Makefile" and "by hand" in body, f"{name} in {script}"


def test_numa_layout_reaches_qemu_as_the_table_says(tmp_path):
    x86 = arch.get("x86_64")
    args = x86.qemu_machine_args()
    assert args[args.index("-smp") + 1] == str(len(x86.numa.cpu_nodes))
    sizes = [int(re.search(r"size=(\d+)M", a).group(1)) for a in args if a.startswith("memory-backend-ram")]
    assert [s << 20 for s in sizes] == x86.numa.node_bytes == [256 << 20, 256 << 20]
    nodes = [a for a in args if a.startswith("node,")]
    assert nodes == ["node,nodeid=0,cpus=0,memdev=mem0", "node,nodeid=1,cpus=1,memdev=mem1"]
    # boot.sh passes exactly these arguments to QEMU (its dry run prints the command line)
    env = dict(os.environ, TRAPLINE_DRY_RUN="1", **x86.boot_env({}))
    (tmp_path / "k").write_text("")
    (tmp_path / "i").write_text("")
    r = subprocess.run(["bash", str(ROOT / "images" / "boot.sh"), "x86_64", str(tmp_path / "k"), str(tmp_path / "i")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "qemu-system-x86_64 " + " ".join(args) + " -nographic" in r.stderr
    # one-node guests get no -numa and keep the board's RAM
    assert "-numa" not in arch.get("sparc64").qemu_machine_args()
    assert arch.get("armv6").qemu_machine_args(mem_mib=1024) == ["-M", "raspi0", "-m", "512"]
    with pytest.raises(UsageError, match="TRAPLINE_MEM"):
        x86.boot_env({"TRAPLINE_MEM": "lots"})
