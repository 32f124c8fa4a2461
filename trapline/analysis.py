"""From a kernel's parsed output to figures and a status.

samples -> groups (variant + parameters) -> robust statistics per group
        -> metrics (headline and figures) through selectors
        -> checks (functional values) -> status

Status is one of STATUSES. The rules are in judge(); they never look at the
claimed figure except to report the ratio between claimed and reproduced.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from trapline.kernelio import KernelOutput, group_key

STATUSES = ("reproduced", "differs", "not-applicable", "failed")
# what each status says (the report's legend)
STATUS_MEANING = {"reproduced": "meets the experiment's criterion on this platform",
                  "differs": "ran, and misses the criterion (the note says by how much and why)",
                  "not-applicable": "this platform cannot show the effect: the figure is for contrast, or the reason",
                  "failed": "did not run to a figure, or a functional check failed"}
# A sample shorter than this many timer ticks is too short to trust.
MIN_TICKS_PER_SAMPLE = 1000
MIN_REPS = 5


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Group:
    variant: str
    params: dict[str, Any]
    ns_per_op: list[float]
    user_ns_per_op: list[float] = field(default_factory=list)
    sys_ns_per_op: list[float] = field(default_factory=list)
    sample_ns: list[int] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)

    def stat(self, name: str = "ns_per_op") -> float:
        xs = getattr(self, name)
        if not xs:
            raise KeyError(name)
        return statistics.median(xs)

    @property
    def key(self) -> tuple:
        """The group's key, as kernelio.group_key gives it for its samples (and count lines)."""
        return (self.variant,) + tuple(sorted(self.params.items()))

    def summary(self, counts_per_op: dict[str, float] | None = None) -> dict:
        """Its statistics; counts_per_op: a platform's counts per operation for it (counts_per_op())."""
        xs = self.ns_per_op
        med = statistics.median(xs)
        q1, q3 = _quantile(xs, 0.25), _quantile(xs, 0.75)
        out = {
            "variant": self.variant, **self.params, "n": len(xs),
            "median_ns_per_op": med, "min_ns_per_op": min(xs), "max_ns_per_op": max(xs),
            "q1_ns_per_op": q1, "q3_ns_per_op": q3,
            "iqr_percent": (q3 - q1) / med * 100 if med else 0.0,
            "ops_per_sample": statistics.median(self.ops),
            "median_sample_ns": statistics.median(self.sample_ns),
        }
        if self.user_ns_per_op:
            out["median_user_ns_per_op"] = statistics.median(self.user_ns_per_op)
            out["median_sys_ns_per_op"] = statistics.median(self.sys_ns_per_op)
        if counts_per_op:
            out["counts_per_op"] = counts_per_op
        return out


def groups(out: KernelOutput) -> list[Group]:
    by: dict[tuple, Group] = {}
    for s in out.samples:
        key = group_key(s)
        g = by.get(key)
        if g is None:
            g = by[key] = Group(variant=s.get("variant", ""), params=dict(key[1:]), ns_per_op=[])
        g.ns_per_op.append(s["ns"] / s["ops"])
        g.sample_ns.append(s["ns"])
        g.ops.append(s["ops"])
        if "user_ns" in s and "sys_ns" in s:
            g.user_ns_per_op.append(s["user_ns"] / s["ops"])
            g.sys_ns_per_op.append(s["sys_ns"] / s["ops"])
    return list(by.values())


def counts_per_op(out: KernelOutput, prefix: str) -> dict[tuple, dict[str, float]]:
    """A platform's counts (named <prefix>_<suffix>: its Platform.counters) per operation, by
    sample group (Group.key) and suffix: each count line (one per sample, with the sample's
    variant, parameters and ops) gives value / ops, and a group's figure is the median over
    its repetitions; suffixes in the order the platform reports them. The sample's own
    operations (<prefix>_ops) are left out (1 per op)."""
    head = prefix + "_"
    by: dict[tuple, dict[str, list[float]]] = {}
    for c in out.counts:
        name, value, ops = c.get("name", ""), c.get("value"), c.get("ops")
        if not name.startswith(head) or name == head + "ops" or not isinstance(value, (int, float)) \
                or isinstance(value, bool) or not isinstance(ops, (int, float)) or not ops:
            continue
        key = group_key({k: v for k, v in c.items() if k not in ("name", "value")})
        by.setdefault(key, {}).setdefault(name[len(head):], []).append(value / ops)
    return {k: {s: statistics.median(v) for s, v in d.items()} for k, d in by.items()}


def _matches(params: dict, variant: str, sel: dict) -> bool:
    if "variant" in sel and sel["variant"] != variant:
        return False
    for k, v in sel.get("where", {}).items():
        if str(params.get(k)) != str(v):
            return False
    return True


def describe_selector(sel: dict) -> str:
    parts = []
    if "variant" in sel:
        parts.append(f"variant={sel['variant']}")
    parts += [f"{k}={v}" for k, v in sel.get("where", {}).items()]
    what = f"count {sel['count']}" if "count" in sel else sel.get("stat", "ns_per_op")
    return f"{what} of {' '.join(parts) or 'all'}"


class MetricError(Exception):
    pass


def select(out: KernelOutput, gs: list[Group], sel: dict) -> float:
    if "count" in sel:
        # Repeated lines with identical parameters (one per repetition) count
        # once, by their median; lines with different parameters add up.
        by: dict[tuple, list[float]] = {}
        for c in out.counts:
            if c.get("name") == sel["count"] and _matches(c, c.get("variant", ""), sel) \
                    and isinstance(c.get("value"), (int, float)):
                key = tuple(sorted((k, str(v)) for k, v in c.items() if k not in ("value", "rep")))
                by.setdefault(key, []).append(c["value"])
        if not by:
            raise MetricError(f"no counter matches {describe_selector(sel)}")
        return float(sum(statistics.median(v) for v in by.values()))
    stat = sel.get("stat", "ns_per_op")
    vals = []
    for g in gs:
        if _matches(g.params, g.variant, sel):
            try:
                vals.append(g.stat(stat))
            except KeyError:
                raise MetricError(f"samples of {describe_selector(sel)} carry no {stat}") from None
    if not vals:
        raise MetricError(f"no samples match {describe_selector(sel)}")
    return statistics.median(vals)


def metric_value(out: KernelOutput, gs: list[Group], m: dict) -> float:
    if "ratio" in m:
        num = select(out, gs, m["ratio"]["num"])
        den = select(out, gs, m["ratio"]["den"])
        if den == 0:
            raise MetricError(f"{m['name']}: denominator ({describe_selector(m['ratio']['den'])}) is zero")
        return num / den
    return select(out, gs, m["value"])


def _count_lines(out: KernelOutput, name: str, c: dict) -> list[dict]:
    return [x for x in out.counts if x.get("name") == name
            and ("variant" not in c or x.get("variant") == c["variant"])
            and all(str(x.get(k)) == str(v) for k, v in c.get("where", {}).items())]


def _same_params(a: dict, b: dict) -> bool:
    skip = {"name", "value"}
    return {k: v for k, v in a.items() if k not in skip} == {k: v for k, v in b.items() if k not in skip}


def run_checks(out: KernelOutput, checks: list[dict]) -> list[dict]:
    """Functional checks: computed values (kind=check) or counters (kind=count)
    that must equal a constant, each other, or another counter exactly."""
    results = []
    for c in checks:
        if "count" in c:
            lines = _count_lines(out, c["count"], c)
            if not lines:
                results.append({"name": c["name"], "ok": False, "detail": f"the kernel printed no counter {c['count']}"})
                continue
            if "equals_count" in c:
                pairs = []
                for x in lines:
                    other = [y for y in out.counts if y.get("name") == c["equals_count"] and _same_params(x, y)]
                    pairs.append((x["value"], other[0]["value"] if other else None))
                ok = all(b is not None and a == b for a, b in pairs)
                detail = f"{c['count']} vs {c['equals_count']}: " + ", ".join(f"{a} vs {b}" for a, b in pairs[:6])
            else:
                vals = [x["value"] for x in lines]
                ok = all(str(v) == str(c.get("equals")) for v in vals)
                detail = f"{c['count']} = {sorted(set(map(str, vals)))}, expected {c.get('equals')}"
            results.append({"name": c["name"], "ok": ok, "detail": detail})
            continue
        vals = [x.get("value") for x in out.checks if ("variant" not in c or x.get("variant") == c["variant"])
                and all(str(x.get(k)) == str(v) for k, v in c.get("where", {}).items())]
        if not vals:
            results.append({"name": c["name"], "ok": False, "detail": "the kernel printed no check value"})
            continue
        if "equals" in c:
            ok = all(str(v) == str(c["equals"]) for v in vals)
            detail = f"values {sorted(set(map(str, vals)))} expected {c['equals']}"
        else:
            ok = len(set(map(str, vals))) == 1
            detail = f"values {sorted(set(map(str, vals)))} must all be equal"
        results.append({"name": c["name"], "ok": ok, "detail": detail})
    return results


def timer_warnings(out: KernelOutput, gs: list[Group]) -> list[str]:
    warn = []
    tick = max(out.timer.get("res_ns", 1) or 1, out.timer.get("min_delta_ns", 1) or 1)
    # modelled times (cycles / clock) have no timer to be short against
    short = [g for g in gs if min(g.sample_ns) < MIN_TICKS_PER_SAMPLE * tick] if not out.timer.get("modelled") else []
    if short:
        warn.append(f"{len(short)} group(s) have samples shorter than {MIN_TICKS_PER_SAMPLE} timer ticks "
                    f"({MIN_TICKS_PER_SAMPLE * tick} ns)")
    few = [g for g in gs if len(g.ns_per_op) < MIN_REPS]
    if few:
        warn.append(f"{len(few)} group(s) have fewer than {MIN_REPS} repetitions")
    if not out.timer and gs:
        warn.append("the kernel printed no timer check")
    return warn


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3g}"
    return f"{v:.2g}"


def judge(spec: dict, headline: dict, out: KernelOutput | None, error: str | None,
          contrast: str | None = None, counts_prefix: str | None = None) -> dict:
    """Turn one platform's output into a summary entry (without id/platform). contrast: why
    this run's figure cannot show the claimed effect, found at run time (a host whose Linux
    traps split locks: trapline/hostfacts.py); like the experiment's own `contrast`, the
    figure is then shown beside the claim and the status is not-applicable. counts_prefix:
    the platform's counters' prefix (its name, for a platform with counters): each sample
    group then carries its counts per operation (counts_per_op), and the entry the prefix."""
    name = spec.get("headline", {}).get("name", headline["name"])
    claimed = spec.get("headline", {}).get("claimed", headline.get("claimed"))
    unit = spec.get("headline", {}).get("unit", headline["unit"])
    entry: dict[str, Any] = {"metric": name, "unit": unit, "claimed": claimed, "reproduced": None,
                             "status": "failed", "note": "", "figures": [], "checks": [], "groups": [],
                             "warnings": []}
    if "not_applicable" in spec:
        entry.update(status="not-applicable", note=" ".join(spec["not_applicable"].split()))
        return entry
    if error:
        entry.update(status="failed", note=error)
        return entry
    assert out is not None
    gs = groups(out)
    per_op = counts_per_op(out, counts_prefix) if counts_prefix else {}
    entry["groups"] = [g.summary(per_op.get(g.key)) for g in gs]
    if per_op:
        entry["counts_prefix"] = counts_prefix
    entry["warnings"] = timer_warnings(out, gs)
    if not gs and out.skips:
        reasons = sorted({s.get("reason", "?") for s in out.skips})
        entry.update(status="not-applicable",
                     note="not applicable on this host: the kernel skipped every variant ("
                          + ", ".join(r.replace("_", " ") for r in reasons) + ")")
        return entry
    try:
        value = metric_value(out, gs, spec["headline"])
    except MetricError as e:
        entry.update(status="failed", note=f"headline not computable: {e}")
        return entry
    entry["reproduced"] = value
    if claimed:
        entry["ratio_to_claim"] = value / claimed
    for f in spec.get("figures", []):
        try:
            fv = metric_value(out, gs, f)
        except MetricError as e:
            fv, err = None, str(e)
        else:
            err = None
        entry["figures"].append({"name": f["name"], "value": fv, "unit": f.get("unit", "x" if "ratio" in f else "ns"),
                                 "claimed": f.get("claimed"), **({"error": err} if err else {})})
    entry["checks"] = run_checks(out, spec.get("checks", []))
    bad = [c for c in entry["checks"] if not c["ok"]]
    if bad:
        entry.update(status="failed", note="functional check failed: " + "; ".join(f"{c['name']}: {c['detail']}" for c in bad))
        return entry
    contrast = spec.get("contrast") or contrast
    if contrast:
        entry.update(status="not-applicable", note="contrast only: " + " ".join(contrast.split()))
        return entry
    rif = spec["reproduced_if"]
    ok = ("min" not in rif or value >= rif["min"]) and ("max" not in rif or value <= rif["max"])
    bounds = " and ".join(([f">= {rif['min']}"] if "min" in rif else []) + ([f"<= {rif['max']}"] if "max" in rif else []))
    if ok:
        entry.update(status="reproduced", note=f"{fmt(value)}{unit if unit == 'x' else ' ' + unit} meets the criterion "
                                                f"({bounds}): {' '.join(spec['criterion'].split())}")
    else:
        entry.update(status="differs", note=f"{fmt(value)}{unit if unit == 'x' else ' ' + unit} misses the criterion "
                                             f"({bounds}): {' '.join(spec['criterion'].split())}")
    return entry
