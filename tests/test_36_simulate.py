"""./run.sh simulate on every platform: one stats format, valid against
trapline/schema/simulate.schema.json on each; --compare; each bad input one line,
exit 2, before anything runs; a failing or hung program exit 1."""

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import NO_PREFETCH, ROOT, trapline
from trapline import arch as arch_table, simstats

SCHEMA = json.loads((ROOT / "trapline" / "schema" / "simulate.schema.json").read_text())
SERVER = ["--machine", "x86-2012-server"]

ROI_C = r"""
#include "trapline.h"
int main(int argc, char **argv)
{
	static volatile int a[4096];
	long s = 0;
	for (int r = 0; r < 2; r++) {
		TL_ROI_BEGIN();
		for (int i = 0; i < 4096; i++)
			s += a[i] + i;
		TL_ROI_END();
	}
	printf("sum %ld\n", s);
	if (argc > 1 && argv[1][0] == 's')
		for (;;)
			TL_USE(s);
	return argc > 1 ? atoi(argv[1]) : 0;
}
"""


def build(tmp: Path, arch: str = "x86_64", static: bool = True) -> Path:
    src = tmp / "roi.c"
    src.write_text(ROI_C)
    out = tmp / f"roi-{arch}{'' if static else '-dyn'}"
    cmd = [arch_table.get(arch).cc, "-O1", *(["-static"] if static else []), "-I", str(ROOT / "kernels" / "common"),
           *arch_table.get(arch).cflags.split(), "-o", str(out), str(src)]
    subprocess.run(cmd, check=True)
    return out


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    return build(tmp_path_factory.mktemp("prog"))


def valid(stats: dict) -> dict:
    jsonschema.validate(stats, SCHEMA)
    return stats


def test_schema_file_is_the_generated_one():
    assert SCHEMA == simstats.schema(), "python -m trapline.simstats --write-schema"


def test_docs_carry_the_figures_table():
    """docs/model.md defines each figure as the schema does (simstats.SCALARS: one table)."""
    assert simstats.markdown() in (ROOT / "docs" / "model.md").read_text(), \
        "docs/model.md's figures table is stale: python -m trapline.simstats --write-schema"


def test_model_user_mode_gives_regions_and_what_they_rest_on(prog):
    r = trapline("simulate", *SERVER, "--", str(prog))
    assert r.returncode == 0, r.stderr[-2000:]
    s = valid(json.loads(r.stdout))
    assert s["platform"] == "model" and s["mode"] == "user" and s["time_kind"] == "simulated"
    assert s["exit_status"] == 0 and s["arch"] == "x86_64" and "sum 16773120" in r.stderr
    assert len(s["regions"]) == 2
    for g in s["regions"]:
        assert g["instructions"] > 4096 and g["l1d_accesses"] >= 4096 and g["cycles"] > 0
        assert g["seconds"] == pytest.approx(g["cycles"] / 2.6e9, rel=0.01)  # x86-2012-server: 2.6 GHz
    assert s["total"]["instructions"] > sum(g["instructions"] for g in s["regions"])
    assert s["rests_on"]["cycles"] == "prediction" and s["rests_on"]["instructions"] == "counted"
    assert len(s["program_sha256"]) == 64
    # the platform's own stats stay under "stats"
    assert len([g for g in s["stats"]["regions"] if g.get("marked")]) == 2


def test_host_runs_it_natively_in_real_time(prog):
    r = trapline("simulate", *SERVER, "--platform", "host", "--", str(prog))
    assert r.returncode == 0, r.stderr[-2000:]
    s = valid(json.loads(r.stdout))
    assert s["platform"] == "host" and s["time_kind"] == "real" and s["total"]["seconds"] > 0
    assert set(s["rests_on"].values()) == {"measured"}
    assert "perf" in s["stats"]


def test_host_figures_are_loads_and_stores_or_absent():
    """perf's generic *-loads events count loads; a figure meaning loads and stores (simstats.SCALARS)
    is their sum with the *-stores event, and absent where the host cannot count one of them."""
    from trapline import perfstat
    csv = "\n".join(["# started on ...", "1000,,instructions:u,5,100.00,,", "2000,,cycles:u,5,100.00,,",
                     "300,,L1-dcache-loads:u,5,100.00,,", "100,,L1-dcache-stores:u,5,100.00,,",
                     "7,,L1-dcache-load-misses:u,5,100.00,,", "<not supported>,,L1-dcache-store-misses:u,0,100.00,,",
                     "5,,dTLB-load-misses:u,5,100.00,,", "2,,dTLB-store-misses:u,5,100.00,,"])
    got, missing = perfstat.parse(csv)
    assert got == {"instructions": 1000, "cycles": 2000, "l1d_accesses": 400, "dtlb_misses": 7}, got
    assert missing == ["L1-dcache-store-misses"]
    assert set(perfstat.FIGURES) <= set(dict(simstats.SCALARS))


def test_compare_prints_both_columns_and_their_ratio(prog):
    r = trapline("simulate", *SERVER, "--compare", "model,host", "--", str(prog))
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    for s in out["runs"]:
        valid(s)
    rows = {row["figure"]: row for row in out["compare"]["rows"]}
    sec = rows["seconds"]
    assert sec["ratios"][0] == pytest.approx(sec["values"][1] / sec["values"][0])
    assert rows["cycles"]["values"][1] is None  # the host has no cycles here unless perf counts them
    t = trapline("simulate", *SERVER, "--compare", "model,host", "--format", "table", "--", str(prog))
    assert t.returncode == 0 and "host (native) / model (user)" in t.stdout, t.stdout


def test_program_failure_and_hang_exit_1(prog):
    r = trapline("simulate", *SERVER, "--", str(prog), "3")
    assert r.returncode == 1 and valid(json.loads(r.stdout))["exit_status"] == 3
    r = trapline("simulate", *SERVER, "--platform", "host", "--timeout", "2", "--", str(prog), "spin")
    assert r.returncode == 1 and "did not end within 2 s" in r.stderr, r.stderr[-2000:]
    assert valid(json.loads(r.stdout))["exit_status"] is None


def test_bad_input_is_one_line_before_anything_runs(prog, tmp_path):
    text = tmp_path / "text"
    text.write_text("hello\n")
    text.chmod(0o755)
    dyn = build(tmp_path, static=False)
    arm = build(tmp_path, "armv6")
    cases = [
        (["--", "/nonexistent/prog"], ["does not exist"]),
        (["--", str(text)], ["not an ELF"]),
        (["--", str(dyn)], ["dynamically linked", "-static"]),
        (["--", str(arm)], ["built for armv6", "x86_64"]),
        (["--platform", "host", "--guest", "--", str(prog)], ["host", "guest", "platforms that run a program"]),
        (["--platform", "nope", "--", str(prog)], ["nope", "valid choices"]),
        (["--compare", "model", "--", str(prog)], ["--compare", "two or more"]),
        (["--arch", "sparc64", "--", str(prog)], ["x86_64", "sparc64"]),
        (["--format", "xml", "--", str(prog)], ["--format", "xml"]),
        (["--guest", "--", str(prog), "a b"], ["a b", "guest"]),
        (["--platform", "host", "--set", "caches.l1d.size=16kB", "--", str(prog)], ["--set", "host", "--platform model"]),
    ]
    for argv, words in cases:
        r = trapline("simulate", *SERVER, *argv, timeout=120)
        assert r.returncode == 2, (argv, r.returncode, r.stderr[-1000:])
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (argv, r.stderr)
        for w in words:
            assert w in r.stderr, (argv, w, r.stderr)


def test_gem5_result_in_the_common_format(prog, gem5_binary):
    from trapline import machine, program
    from trapline.context import RunContext
    from trapline.platforms.gem5 import Gem5Platform
    from trapline.platforms.gem5.engine import Gem5Engine

    gem5 = Gem5Platform(RunContext.make())  # (its engine's stats name the platform)

    m = machine.load("x86-2012-server")
    p = program.check(str(prog), m.arch)
    run = Gem5Engine(gem5, m, "se", cpu="timing", gem5=gem5_binary).simulate(p, [p.path], timeout=600)
    assert run.error is None, run.error
    s = valid(run.stats)
    assert s["mode"] == "se" and s["exit_status"] == 0 and "sum 16773120" in run.stdout
    # an ordinary build (markers are no-ops in gem5): one region, the whole run
    assert s["regions"] == [] and s["total"]["instructions"] > 2 * 4096 and s["total"]["seconds"] > 0
    assert s["rests_on"]["seconds"] == "prediction"


# ------------------------------------------------- in the guest (the x86_64 pc: two NUMA nodes)

MBIND_C = r"""
/* one region per node: a buffer bound to node 1 read once, then one bound to node 0, from
 * CPU 0 (node 0; pinned, as the lanes' kernels pin themselves: a region is one vCPU's) */
#include "trapline.h"
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SIZE (4UL << 20)
int main(int argc, char **argv)
{
	long s = 0;
	cpu_set_t cpus;
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	if (sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
		perror("sched_setaffinity");
		return 1;
	}
	for (int node = 1; node >= 0; node--) {
		volatile char *p = mmap(0, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		unsigned long mask = 1UL << node;
		if (syscall(SYS_mbind, p, SIZE, 2 /* MPOL_BIND */, &mask, 8 * sizeof mask, 0) != 0) {
			perror("mbind");
			return 1;
		}
		for (unsigned long i = 0; i < SIZE; i += 4096)
			p[i] = 1;
		TL_ROI_BEGIN();
		for (unsigned long i = 0; i < SIZE; i += 64)
			s += p[i];
		TL_ROI_END();
	}
	printf("pages %ld\n", s);
	if (argc > 1)
		for (;;)
			TL_USE(s);
	return 0;
}
"""


@pytest.fixture(scope="module")
def mbind_prog(tmp_path_factory):
    d = tmp_path_factory.mktemp("mbind")
    (d / "mbind.c").write_text(MBIND_C)
    subprocess.run(["gcc", "-O1", "-static", "-I", str(ROOT / "kernels" / "common"), "-o", str(d / "mbind"),
                    str(d / "mbind.c")], check=True)
    return d / "mbind"


def test_model_guest_reports_reads_by_node(mbind_prog):
    r = trapline("simulate", *SERVER, "--guest", "--", str(mbind_prog), timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    s = valid(json.loads(r.stdout))
    assert s["mode"] == "guest" and s["exit_status"] == 0 and "pages 2048" in r.stderr
    assert len(s["regions"]) == 2
    lines = (4 << 20) // 64
    on1, on0 = (g["memory_reads_by_node"] for g in s["regions"])
    # each region's reads reach the node its buffer was bound to (the first touch was outside the regions)
    assert on1.get("1", 0) > 0.9 * lines and on1.get("0", 0) < 0.1 * lines, on1
    assert on0.get("0", 0) > 0.9 * lines and on0.get("1", 0) < 0.1 * lines, on0


def test_qemu_guest_runs_it_and_a_hung_one_is_killed(mbind_prog):
    r = trapline("simulate", *SERVER, "--platform", "qemu", "--", str(mbind_prog), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    s = valid(json.loads(r.stdout))
    assert s["mode"] == "guest" and s["time_kind"] == "emulation" and s["exit_status"] == 0
    assert s["rests_on"] == {"seconds": "emulation"} and "pages 2048" in r.stderr
    r = trapline("simulate", *SERVER, "--platform", "qemu", "--timeout", "5", "--", str(mbind_prog), "spin",
                 timeout=900)
    assert r.returncode == 1 and "did not end within 5 s" in r.stderr and "console tail" in r.stderr, r.stderr[-3000:]
    assert valid(json.loads(r.stdout))["exit_status"] is None


def test_compare_model_and_gem5(prog, gem5_binary):
    """The gem5 platform's simulate (trapline/platforms/gem5/__init__.py) beside the model's, on the timing CPU."""
    r = trapline("simulate", *SERVER, "--set", "gem5.cpu=timing", "--compare", "model,gem5", "--gem5", str(gem5_binary),
                 "--", str(prog), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    model, gem5 = (valid(s) for s in out["runs"])
    assert gem5["mode"] == "se" and gem5["time_kind"] == "simulated"
    rows = {row["figure"]: row for row in out["compare"]["rows"]}
    # the same program: instruction counts within 10% (startup code differs a little), both nonzero
    assert rows["instructions"]["ratios"][0] == pytest.approx(1.0, abs=0.1)
    assert rows["cycles"]["values"][0] > 0 and rows["cycles"]["values"][1] > 0


# ------------------------------------------------- one meaning per figure: the model beside gem5 (O3)

STREAM_C = r"""
/* a streaming read, one load per 64 bytes of a buffer read once before (every page mapped, the
 * lines in the L3 and out of the L1D and L2): the region's figures mean the same on both simulators */
#include "trapline.h"
#define N (1u << 20)
static char buf[N];
int main(void)
{
	long s = 0;
	for (unsigned i = 0; i < N; i += 64)
		s += ((volatile char *)buf)[i];
	TL_ROI_BEGIN();
	for (unsigned i = 0; i < N; i += 64)
		s += ((volatile char *)buf)[i];
	TL_ROI_END();
	printf("sum %ld\n", s);
	return 0;
}
"""
# without the machine's hardware prefetchers: two LRU caches of one shape on the same accesses (the
# prefetchers' timing is the miss-overlap experiment's subject)
LINES_OF = {64: NO_PREFETCH, 128: NO_PREFETCH + [f"caches.{lv}.line=128B" for lv in ("l1i", "l1d", "l2", "l3")]}
# each figure of the region: (relative, absolute) tolerance between the model and gem5. The same code
# runs between the markers (instructions), the caches are LRU of one shape on the same accesses; O3
# reads a few more L1I lines at the region's edges (it refetches after the m5 op and a mispredicted exit).
AGREE = {"instructions": (0.01, 0), "l1d_accesses": (0.01, 0), "l1d_misses": (0.02, 0),
         "l1i_accesses": (0, 8), "l1i_misses": (0, 4), "l2_accesses": (0.02, 0), "l2_misses": (0.02, 0),
         "l3_accesses": (0.02, 0), "l3_misses": (0, 64), "dtlb_misses": (0.02, 2), "itlb_misses": (0, 2),
         "l1d_misses_in_flight": (0.02, 4)}
# and those only trapline's gem5 reports (its change overlap-stats): agreeing as the others when there
AGREE_WITH_CHANGES = {"l1d_misses_overlapped": (0.05, 8)}


@pytest.fixture(scope="module")
def stream_runs(tmp_path_factory, gem5_binary):
    """The stream's one region on the model (user mode) and on gem5 (O3, its m5-op build), with
    64- and 128-byte lines: {(line, "model" | "gem5"): region figures}."""
    from trapline import machine, program
    from trapline.context import RunContext
    from trapline.platforms.gem5 import Gem5Platform
    from trapline.platforms.gem5.engine import Gem5Engine

    gem5 = Gem5Platform(RunContext.make())

    d = tmp_path_factory.mktemp("stream")
    (d / "stream.c").write_text(STREAM_C)
    for name, flags in (("stream", []), ("stream-gem5", ["-DTL_GEM5"])):
        subprocess.run(["gcc", "-O1", "-static", *flags, "-I", str(ROOT / "kernels" / "common"), "-o",
                        str(d / name), str(d / "stream.c")], check=True)
    out = {}
    for line, sets in LINES_OF.items():
        r = trapline("simulate", *SERVER, *[a for s in sets for a in ("--set", s)], "--platform", "model",
                     "--format", "json", "--", str(d / "stream"), timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        s = valid(json.loads(r.stdout))
        assert len(s["regions"]) == 1, s["regions"]
        out[line, "model"] = s["regions"][0]
        m = machine.load("x86-2012-server", sets=[machine.pair(s) for s in sets])
        p = program.check(str(d / "stream-gem5"), m.arch)
        run = Gem5Engine(gem5, m, "se", cpu="o3", gem5=gem5_binary).simulate(p, [p.path], timeout=900)
        assert run.error is None, run.error
        s = valid(run.stats)
        assert len(s["regions"]) == 1, s["regions"]
        out[line, "gem5"] = s["regions"][0]
    return out


def test_each_figure_means_the_same_on_the_model_and_gem5(stream_runs):
    """simstats.SCALARS defines each figure once; on a program where the two simulators do the same
    work (a stream over pages and lines both have ready), every figure both report agrees within
    its tolerance (AGREE), and gem5 reports none the model lacks."""
    model, gem5 = stream_runs[64, "model"], stream_runs[64, "gem5"]
    both = set(model) & set(gem5) - {"seconds", "cycles"}
    assert both - set(AGREE_WITH_CHANGES) == set(AGREE), sorted(both ^ set(AGREE))
    agree = {**AGREE, **{k: v for k, v in AGREE_WITH_CHANGES.items() if k in both}}
    apart = [f"{k}: model {model[k]:,} gem5 {gem5[k]:,}" for k, (rel, tol) in agree.items()
             if abs(gem5[k] - model[k]) > max(rel * model[k], tol)]
    assert not apart, (apart, model, gem5)
    lines = (1 << 20) // 64
    assert model["l1d_misses"] == pytest.approx(lines, rel=0.01) and model["instructions"] > 3 * lines
    assert model["l1i_accesses"] < 16 < model["instructions"]  # the loop is one or two lines: read at a move
    # the model's out-of-order core has misses in flight as O3 has (none here: the lines are ready); its
    # prefetch and overlap figures need trapline's gem5 (prefetchers, overlap-stats), absent from a stock one
    assert "l1d_misses_in_flight" in model and set(gem5) - set(model) == set()
    assert set(model) - set(gem5) <= {"traps", "memory_reads_by_node", "hw_prefetches_issued", "hw_prefetches_useful",
                                      "l1d_misses_overlapped"}


def test_longer_lines_halve_l1d_misses_on_both(stream_runs):
    """128-byte lines: half the lines filled on both simulators. gem5's second load to each line finds
    it being filled (O3 has both in flight): l1d_misses_in_flight, which its overallMisses counted as a
    miss, so that the old figure did not halve."""
    for sim in ("model", "gem5"):
        short, long_ = stream_runs[64, sim], stream_runs[128, sim]
        assert long_["l1d_misses"] / short["l1d_misses"] == pytest.approx(0.5, rel=0.02), (sim, short, long_)
        assert long_["instructions"] == short["instructions"]
    g = stream_runs[128, "gem5"]
    assert g["l1d_misses"] + g["l1d_misses_in_flight"] == pytest.approx(stream_runs[64, "gem5"]["l1d_misses"],
                                                                         rel=0.05)
    assert "l1i_accesses" not in g  # O3 reads a 128-byte line in two 64-byte blocks: not this figure


REP_C = r"""
/* one rep stosb of argv[1] bytes in a region: one instruction however many iterations */
#include "trapline.h"
static char buf[1 << 16];
int main(int argc, char **argv)
{
	void *p = buf;
	unsigned long n = strtoul(argv[1], 0, 0);
	TL_ROI_BEGIN();
	__asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(1) : "memory");
	TL_ROI_END();
	printf("%d\n", buf[100]);
	return 0;
}
"""


def test_a_rep_string_instruction_is_one_instruction_on_both(tmp_path, gem5_binary):
    """QEMU executes rep stosb once per byte; the model counts it once, as gem5 does (and x86's
    retired-instruction counters): the region's instructions do not grow with the count."""
    from trapline import machine, program
    from trapline.context import RunContext
    from trapline.platforms.gem5 import Gem5Platform
    from trapline.platforms.gem5.engine import Gem5Engine

    gem5 = Gem5Platform(RunContext.make())

    (tmp_path / "rep.c").write_text(REP_C)
    for name, flags in (("rep", []), ("rep-gem5", ["-DTL_GEM5"])):
        subprocess.run(["gcc", "-O1", "-static", *flags, "-I", str(ROOT / "kernels" / "common"), "-o",
                        str(tmp_path / name), str(tmp_path / "rep.c")], check=True)
    m = machine.load("x86-2012-server")
    got = {}
    for n in (64, 65536):
        r = trapline("simulate", *SERVER, "--platform", "model", "--format", "json", "--",
                     str(tmp_path / "rep"), str(n), timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        s = valid(json.loads(r.stdout))
        got[n, "model"] = s["regions"][0]
        assert s["stats"]["regions"][0]["rep_repeats"] >= n - 1  # QEMU's executions after the first
        p = program.check(str(tmp_path / "rep-gem5"), m.arch)
        run = Gem5Engine(gem5, m, "se", cpu="timing", gem5=gem5_binary).simulate(p, [p.path, str(n)], timeout=900)
        assert run.error is None, run.error
        got[n, "gem5"] = valid(run.stats)["regions"][0]
    assert got[64, "model"]["instructions"] == got[65536, "model"]["instructions"] < 8, got
    assert got[64, "gem5"]["instructions"] == got[65536, "gem5"]["instructions"], got
    # gem5's region also holds the end marker's two argument registers (trapline.h TL_M5OP_X86)
    assert abs(got[64, "gem5"]["instructions"] - got[64, "model"]["instructions"]) <= 3, got
    # the stores are stores on both: one per byte
    assert got[65536, "model"]["l1d_accesses"] >= 65536 and got[65536, "gem5"]["l1d_accesses"] >= 65536


def test_gem5_platform_refuses_what_it_cannot_run(prog, gem5_binary):
    """gem5 runs a program in SE mode only, and on a machine whose ISA and CPU model its binary has:
    each refusal one line, exit 2, before gem5 starts."""
    g = ("--gem5", str(gem5_binary))
    r = trapline("simulate", *SERVER, "--platform", "gem5", "--guest", *g, "--", str(prog))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "only in se mode, not guest" in r.stderr, r.stderr
    r = trapline("simulate", "--machine", "ultrasparc-t1", "--platform", "gem5", "--set", "gem5.cpu=minor", *g,
                 "--", str(prog))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "gem5.cpu" in r.stderr, r.stderr
    r = trapline("simulate", *SERVER, "--platform", "gem5", "--gem5", "/nonexistent/gem5.opt", "--", str(prog))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "/nonexistent/gem5.opt" in r.stderr, r.stderr


def _per_op_ns(stats: dict, output: str) -> list[float]:
    from trapline import kernelio
    samples = kernelio.parse(output).samples
    assert len(samples) == len(stats["regions"]), (len(samples), len(stats["regions"]))
    return [g["seconds"] * 1e9 / s["ops"] for g, s in zip(stats["regions"], samples)]


def test_e1_trap_program_in_the_sun4u_guest_matches_the_lane(results_dir):
    """E1's kernel in trap mode, run as a user's static program
    with simulate --guest on ultrasparc-iv-plus, takes one misaligned-access trap per load
    (through Linux's trap table and the SIGBUS handler, as the lane) and its per-load time
    is within 10% of the sparc-misalign-trap model lane's."""
    import statistics
    from trapline import build as kbuild
    prog = kbuild.build("sparc64") / "sparc-misalign-trap" / "misalign"
    args = ["mode=trap", "align=unaligned", "fixup=sigbus", "outer=10", "reps=3"]
    r = trapline("simulate", "--machine", "ultrasparc-iv-plus", "--guest", "--", str(prog), *args, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    s = valid(json.loads(r.stdout))
    from trapline import kernelio
    ops = [x["ops"] for x in kernelio.parse(r.stderr).samples]
    for g, n in zip(s["regions"], ops):
        assert g["traps"]["trap_table.unaligned"] == n, (g["traps"], n)
    mine = statistics.median(_per_op_ns(s, r.stderr))
    lane = trapline("run", "sparc-misalign-trap", "--platform", "model", "--quick", timeout=1800)
    assert lane.returncode == 0, lane.stderr[-3000:]
    e = json.loads(((results_dir / "latest").resolve() / "entries" / "sparc-misalign-trap.model.json").read_text())
    theirs = next(g["median_ns_per_op"] for g in e["groups"] if g["variant"] == "trap" and g["align"] == "unaligned")
    assert mine == pytest.approx(theirs, rel=0.10), (mine, theirs)


def test_e2_ldrd_program_in_the_raspi0_guest_matches_the_lane(results_dir):
    """The same for E2: an unaligned LDRD program on arm1176-rpi1 --guest takes one data
    abort per LDRD, the kernel's DWord fixups come back in program_counts, and its per-load
    time is within 10% of the armv6-unaligned model lane's."""
    import statistics
    from trapline import build as kbuild
    prog = kbuild.build("armv6") / "armv6-unaligned" / "unaligned"
    r = trapline("simulate", "--machine", "arm1176-rpi1", "--guest", "--", str(prog), "width=64",
                 "variant=unaligned-ldrd", "iters=1000", timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    s = valid(json.loads(r.stdout))
    from trapline import kernelio
    samples = kernelio.parse(r.stderr).samples
    for g, x in zip(s["regions"], samples):
        assert g["traps"]["exception.data_abort"] == x["ops"], (g["traps"], x["ops"])
    assert s["program_counts"]["alignment_fixups_dword"] == sum(x["ops"] for x in samples) + 1000  # + the warm-up
    mine = statistics.median(_per_op_ns(s, r.stderr))
    lane = trapline("run", "armv6-unaligned", "--platform", "model", "--quick", timeout=1800)
    assert lane.returncode == 0, lane.stderr[-3000:]
    e = json.loads(((results_dir / "latest").resolve() / "entries" / "armv6-unaligned.model.json").read_text())
    theirs = next(g["median_ns_per_op"] for g in e["groups"] if g["variant"] == "unaligned-ldrd")
    assert mine == pytest.approx(theirs, rel=0.10), (mine, theirs)
