"""Views of a plan for the CLI: the request from a file and flags, table sections and flat CSV rows.

The views compute nothing new: they select and format fields of ``Plan.to_dict()``. Rendering the aligned text
is the report layer's (``gpumatch.report.render``); this module returns rows and titles.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpumatch.plan.inputs import PlanRequest, from_workload, with_options

GIB = 2.0**30
EXAMPLES_PER_REASON = 6


def plan_request(workload: str | None, model: str | None, **options: Any) -> PlanRequest:
    """The request of a workload file (if any) with the CLI options on top; GPU names resolved in the catalog."""
    from gpumatch.catalog import load_catalog
    from gpumatch.models import resolve_model
    from gpumatch.workload import load_workload

    base = from_workload(load_workload(workload)) if workload else None
    arch = resolve_model(model) if model else None
    for key in ("gpus_allow", "gpus_deny"):
        names: Sequence[str] | None = options.get(key)
        if names:
            catalog = load_catalog()
            options[key] = tuple(catalog.get(n).name for n in names)
        else:
            options[key] = None
    return with_options(base, arch, **options)


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def shortlist_rows(entries: list[dict[str, Any]], training: bool) -> list[dict[str, Any]]:
    """One row per shortlisted entry: rank, GPU × count, layout, mitigations, key metrics, score."""
    rows = []
    for k, e in enumerate(entries):
        est = e["estimate"]
        row: dict[str, Any] = {"rank": k + 1, "gpu": f"{e['gpu']} ×{e['count']}", "layout": e["layout_text"],
                               "mitigations": ", ".join(e["mitigations"]) or "-"}
        row["tokens/s"] = _num(est["tokens_per_s"], ",.0f")
        if training:
            row["step"] = _num(est["step_s"], ".3g") + " s"
            row["MFU"] = _num(est["mfu"], ".0%")
        else:
            row["TPOT"] = _num(None if est["tpot_s"] is None else est["tpot_s"] * 1e3, ".1f") + " ms"
            row["TTFT"] = _num(None if est["ttft_p50_s"] is None else est["ttft_p50_s"] * 1e3, ".0f") + " ms"
        row["$/1M tok"] = _num(est["usd_per_million_tokens"], ".3g")
        row["GiB/GPU"] = f"{est['total_bytes'] / GIB:.1f}/{est['capacity_bytes'] / GIB:.0f}"
        row["bound"] = e["bound"]
        row["score"] = f"{e['score']:.1f}"
        rows.append(row)
    return rows


def entry_notes(entries: list[dict[str, Any]]) -> list[str]:
    """The explanation lines under a role's table (the experiment plan for the first entry only; JSON has all)."""
    lines = []
    for k, e in enumerate(entries):
        lines.append(f"  {k + 1}. {e['gpu']} ×{e['count']}: {e['why']}")
        lines.append(f"     cost: {e['cost']}")
        lines.append(f"     flip: {e['flip']}")
        if k == 0:
            lines.extend(f"     verify: {x}" for x in e["experiments"])
    return lines


def as_requested_line(d: dict[str, Any], role: str) -> str | None:
    """The role's best candidate in the precision as requested, when every shown pick changes the numerics."""
    if role not in d.get("as_requested", {}):
        return None
    r = d["request"]
    what = r["precision"] + (f", KV {r['kv_precision']}" if r.get("kv_precision") else "")
    alt = d["as_requested"][role]
    if alt is None:
        return f"  best as requested ({what}): none feasible in this role; every pick above changes the numerics"
    top = d["shortlist"][role][0]
    extra = f" + {', '.join(alt['mitigations'])}" if alt["mitigations"] else ""
    return (f"  best as requested ({what}): {alt['gpu']} ×{alt['count']} {alt['layout_text']}{extra}, score "
            f"{alt['score']:.1f} (#1 {top['score']:.1f} with {', '.join(top['mitigations'])})\n"
            f"     {alt['why']}\n     cost: {alt['cost']}")


def rejected_sections(rejected: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Rejected groups by rule ("failed configurations"): a title with counts and a few example rows each.

    Examples: one per GPU model, its configuration closest to passing (smallest ``miss_fraction``: the smallest
    memory shortfall, usually at the largest count; the latency or tokens/s nearest the target), closest first
    (the most informative: "even this one is short"); for yes/no rules (precision, power, ...) the smallest
    count. At most ``EXAMPLES_PER_REASON``.
    """
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for r in rejected:
        by_rule.setdefault(r["rule"], []).append(r)
    out = []
    excluded = by_rule.pop("excluded", [])
    for rows in by_rule.values():
        configs = sum(r["configurations"] for r in rows)
        gpus = len({r["gpu"] for r in rows})
        title = f"Failed: {rows[0]['rule_title']} — {plural(configs, 'configuration')}, {plural(gpus, 'GPU model')}"
        seen: set[str] = set()
        examples = []
        def closeness(r: dict[str, Any]) -> tuple[float, int]:
            miss = r.get("miss_fraction")
            return (math.inf if miss is None else miss, r["count"] or 0)

        for r in sorted(rows, key=closeness):
            if r["gpu"] in seen:
                continue
            seen.add(r["gpu"])
            examples.append({"gpu": r["gpu"] + (f" ×{r['count']}" if r["count"] else ""),
                             "precision": r["precision"], "tried": r["example"] or "-", "reason": r["reason"]})
            if len(examples) >= EXAMPLES_PER_REASON:
                break
        out.append((title, examples))
    if excluded:
        out.append((_not_considered(excluded), []))
    return out


def _not_considered(rows: list[dict[str, Any]]) -> str:
    """One line for the GPUs the request left out, by reason: "30 GPU models not selected (--gpu L4)"."""
    by_reason: dict[str, list[str]] = {}
    for r in rows:
        by_reason.setdefault(r["reason"], []).append(r["gpu"])
    parts = [f"{plural(len(gpus), 'GPU model')} {reason}" if reason.startswith("not selected")
             else f"{', '.join(gpus)} {reason}" for reason, gpus in by_reason.items()]
    return "Not considered: " + "; ".join(parts)


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """ "1 GPU model", "2 GPU models" (``nouns`` for irregular plurals)."""
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"


def header(d: dict[str, Any]) -> str:
    r = d["request"]
    what = (f"{r['model']} {('dev' if r['dev'] else r['task'])}, {r['precision']}"
            + (f", batch {r['batch']} × {r['seq']} tokens" if r["task"] in ("train", "finetune", "lora", "qlora")
               else f", {r['batch']} in flight, {r['prompt']}+{r['gen']} tokens"))
    return (f"Plan '{r['name']}': {what}; up to {plural(r['max_gpus'], 'GPU')}, {r['gpus_per_node']} per node. "
            f"{d['candidates_evaluated']:,} candidates, {d['candidates_estimated']:,} estimated, {d['feasible']:,} "
            f"feasible, in {d['elapsed_s']:.2f} s (basis: {d['basis']}).")


def csv_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Flat rows: every shortlist entry, the as-requested alternatives, then every rejected group."""
    training = d["request"]["task"] in ("train", "finetune", "lora", "qlora")
    rows: list[dict[str, Any]] = []
    for role, entries in d["shortlist"].items():
        for k, e in enumerate(entries):
            est = e["estimate"]
            rows.append({"kind": "shortlist", "role": role, "rank": k + 1, "gpu": e["gpu"], "count": e["count"],
                         "layout": e["layout_text"], "mitigations": "; ".join(e["mitigations"]), "score": e["score"],
                         "tokens_per_s": est["tokens_per_s"], "tpot_s": None if training else est["tpot_s"],
                         "step_s": est["step_s"] if training else None,
                         "usd_per_million_tokens": est["usd_per_million_tokens"], "total_bytes": est["total_bytes"],
                         "bound": e["bound"], "rule": "", "reason": e["why"]})
    for role, e in d.get("as_requested", {}).items():
        if e is None:
            continue
        est = e["estimate"]
        rows.append({"kind": "as-requested", "role": role, "rank": "", "gpu": e["gpu"], "count": e["count"],
                     "layout": e["layout_text"], "mitigations": "; ".join(e["mitigations"]), "score": e["score"],
                     "tokens_per_s": est["tokens_per_s"], "tpot_s": None if training else est["tpot_s"],
                     "step_s": est["step_s"] if training else None,
                     "usd_per_million_tokens": est["usd_per_million_tokens"], "total_bytes": est["total_bytes"],
                     "bound": e["bound"], "rule": "", "reason": e["why"]})
    for r in d["rejected"]:
        rows.append({"kind": "rejected", "role": "", "rank": "", "gpu": r["gpu"], "count": r["count"],
                     "layout": r["example"], "mitigations": r["precision"], "score": "", "tokens_per_s": "",
                     "tpot_s": "", "step_s": "", "usd_per_million_tokens": "", "total_bytes": "", "bound": "",
                     "rule": r["rule"], "reason": r["reason"]})
    return rows
