"""The views of a plan (``gpumatch plan``): the one-screen summary, the details on request, and flat CSV rows.

The input is :meth:`gpumatch.plan.Plan.to_dict` (the JSON contract); nothing here computes a new figure, it
selects and formats. The table view fits the output width (:func:`gpumatch.report.render.output_width`):

* summary (default): a header (workload, targets and limits, candidates, basis, price basis), per role a ranked
  table (rank, GPU × count, layout, mitigations, the key figures, score) with a one-line why under each pick and
  the best candidate as requested when every pick changes the numerics, then the failed configurations as one
  line per reason (configurations, the closest to passing); notes cut to two lines;
* ``verbose``: the same tables, then per pick the full why, cost, flip and the experiment plan, the best as
  requested with its why and cost, and per reason the table of each GPU model's closest-to-passing example.

JSON and CSV carry everything either way.
"""

from __future__ import annotations

import math
from typing import Any

from gpumatch.plan.roles import LOW_POWER_TDP_W
from gpumatch.report import human
from gpumatch.report.intervals import key_figure_text
from gpumatch.report.render import Column, cut, output_width, to_csv, to_json, to_table, wrap_block
from gpumatch.units import GIB
from gpumatch.vocab import TRAINING_TASKS

TRAINING = TRAINING_TASKS
EXAMPLES_PER_REASON = 6


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """ "1 GPU model", "2 GPU models" (``nouns`` for irregular plurals)."""
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"


def _training(d: dict[str, Any]) -> bool:
    return bool(d["request"]["task"] in TRAINING)


# --- header -------------------------------------------------------------------------------------------------

def _pair(p50: float | None, p99: float | None) -> tuple[str, bool] | None:
    """'500 ms/2 s' (p50/p99), 'p99 1 s' or None; and whether both were set."""
    if p50 is not None and p99 is not None:
        return f"{human.seconds(p50)}/{human.seconds(p99)}", True
    one = [f"{q} {human.seconds(v)}" for q, v in (("p50", p50), ("p99", p99)) if v is not None]
    return (one[0], False) if one else None


def _targets(r: dict[str, Any]) -> list[str]:
    """The request's targets that are set, in human units ("TTFT 500 ms/2 s (p50/p99)")."""
    out, both = [], False
    for name, p50, p99 in (("TTFT", "ttft_p50_s", "ttft_p99_s"), ("TPOT", "tpot_p50_s", "tpot_p99_s")):
        pair = _pair(r.get(p50), r.get(p99))
        if pair:
            out.append(f"{name} {pair[0]}")
            both = both or pair[1]
    if both:
        out[-1] += " (p50/p99)"
    if r.get("tokens_per_s"):
        out.append(f"≥ {human.count(r['tokens_per_s'])} tokens/s")
    if r.get("train_tokens"):
        out.append(f"{human.big_count(r['train_tokens'])} tokens")
    if r.get("deadline_s"):
        out.append(f"deadline {human.seconds(r['deadline_s'])}")
    return out


def _limits(r: dict[str, Any]) -> list[str]:
    out = []
    if r.get("budget_usd"):
        out.append(f"budget {human.usd(r['budget_usd'])}")
    if r.get("w_per_node"):
        out.append(f"{human.watts(r['w_per_node'])} per node")
    if r.get("psu_w"):
        out.append(f"PSU {human.watts(r['psu_w'])}")
    if r.get("cooling") and r["cooling"] != "air":
        out.append(f"{r['cooling']} cooling")
    return out


def _price_basis(d: dict[str, Any]) -> str | None:
    """The plan's price basis line (``price_basis`` as a name or an object with ``text``/``basis``)."""
    pb = d.get("price_basis")
    if isinstance(pb, dict):
        pb = pb.get("text") or pb.get("basis")
    parts = [f"prices: {pb}" if pb else None, d.get("price_note") or None]
    text = "; ".join(str(p) for p in parts if p)
    return text or None


def header(d: dict[str, Any]) -> str:
    """Two to four lines: the workload, its targets and limits, what was searched, the basis and prices."""
    r = d["request"]
    kv = f", KV {r['kv_precision']}" if r.get("kv_precision") else ""
    shape = (f"batch {r['global_batch']} × {r['seq']} tokens" if r["task"] in TRAINING
             else f"{r['concurrency']} in flight, {r['prompt']}+{r['gen']} tokens")
    lines = [f"Plan '{r['name']}': {r['model']} {'dev' if r['dev'] else r['task']}, {r['precision']}{kv}, {shape}"]
    wants = _targets(r)
    limits = _limits(r)
    if wants or limits:
        lines.append("  " + "; ".join(x for x in ("targets: " + ", ".join(wants) if wants else "",
                                                   "limits: " + ", ".join(limits) if limits else "") if x))
    searched = (f"{plural(d['candidates_evaluated'], 'candidate')} (≤ {plural(r['max_gpus'], 'GPU')}, "
                f"{r['gpus_per_node']} per node): {d['feasible']:,} feasible in {d['elapsed_s']:.2f} s")
    basis = f"basis {d['basis']}"
    one = f"  {searched}; {basis}"
    lines += [one] if len(one) <= 80 else [f"  {searched};", f"  {basis}"]  # a slow first run widens the time
    prices = _price_basis(d)
    if prices:
        lines.append("  " + prices)
    return "\n".join(lines)


# --- the shortlist --------------------------------------------------------------------------------------------

def short_layout(layout: dict[str, Any], training: bool) -> str:
    """The layout in a few characters: '2×TP4' (two replicas of TP4), 'TP2 PP8 DP4 ZeRO-1', '8 replicas'."""
    par = " ".join(f"{k}{layout[k.lower()]}" for k in ("TP", "PP") if layout.get(k.lower(), 1) > 1)
    if training:
        parts = [par] if par else []
        if layout.get("dp", 1) > 1:
            parts.append(f"DP{layout['dp']}")
        if layout.get("zero"):
            parts.append(f"ZeRO-{layout['zero']}")
        return " ".join(parts) or "1 GPU"
    reps = layout.get("replicas", 1)
    if not par:
        return f"{reps} replicas" if reps > 1 else "1 GPU"
    return f"{reps}×{par}" if reps > 1 else par


def _unpriced(e: dict[str, Any]) -> str | None:
    """The unpriced mark of an entry (``unpriced`` as a flag or its text, or a price object not priced)."""
    mark = e.get("unpriced")
    if isinstance(mark, str) and mark:
        return mark
    price = e.get("price")
    if mark or (isinstance(price, dict) and price.get("priced") is False):
        return "unpriced"
    return None if e["estimate"].get("usd_per_million_tokens") is not None else "unpriced"


def _short_flag(flag: str, mitigations: list[str]) -> str | None:
    """A flag's head ("ROCm", "TP=4 over PCIe (no NVLink)"); None for the quality note of a listed mitigation."""
    head = flag.split(":", 1)[0].strip()
    return None if head in mitigations else head


def why_line(e: dict[str, Any]) -> str:
    """One line: TTFT (serving) or the step time and MFU (training), the bound, memory per GPU, scaling, and the
    flags' heads (the full ``why`` is in --verbose)."""
    est = e["estimate"]
    parts = [f"TTFT p50 {human.seconds(est['ttft_p50_s'])}"] if est.get("ttft_p50_s") is not None else []
    if est.get("step_s") is not None:
        parts.append(f"step {human.seconds(est['step_s'])}, MFU {human.percent(est.get('mfu'))}")
    parts += [f"{e['bound']}-bound",
              f"{_gib_number(est['total_bytes'])}/{_gib_number(est['capacity_bytes'], 0)} GiB/GPU"]
    eff = est.get("scaling_efficiency")
    if e["count"] > 1 and eff is not None and math.isfinite(eff):
        parts.append(f"scaling {human.percent(eff)}")
    parts.extend(f for f in (_short_flag(x, e["mitigations"]) for x in e["flags"]) if f)
    mark = _unpriced(e)
    if mark and mark != "unpriced":
        parts.append(mark)
    return "; ".join(parts)


def _money(v: float | None, e: dict[str, Any]) -> str:
    return human.usd(v) if v is not None else ("unpriced" if _unpriced(e) else "-")


def shortlist_rows(entries: list[dict[str, Any]], training: bool, req: dict[str, Any] | None = None
                   ) -> list[dict[str, Any]]:
    """One row per shortlisted entry (the columns of :func:`shortlist_columns`) with its one-line why."""
    rows = []
    for k, e in enumerate(entries):
        est = e["estimate"]
        row: dict[str, Any] = {"rank": k + 1, "gpu": f"{e['gpu']} ×{e['count']}",
                               "layout": short_layout(e["layout"], training),
                               "mitigations": ", ".join(SHORT_MITIGATIONS.get(m, m) for m in e["mitigations"]) or "-",
                               "tokens": human.count(est["tokens_per_s"]),
                               "cost": _money(est["usd_per_million_tokens"], e),
                               "score": f"{e['score']:.1f}", "why": why_line(e)}
        if training:
            row["step"] = human.seconds(est["step_s"])
            tokens = (req or {}).get("train_tokens")
            if tokens and est["tokens_per_s"]:
                hours = tokens / est["tokens_per_s"] / 3600.0
                row["run"] = human.seconds(hours * 3600.0)
                usd_h = est.get("usd_per_hour")
                row["cost"] = human.usd(usd_h * hours) if usd_h is not None else _money(None, e)
        else:
            row["tpot"] = human.seconds(est["tpot_s"])
        rows.append(row)
    return rows


def _gib_number(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v / GIB:.{digits}f}"


def shortlist_columns(training: bool, per_run: bool = False) -> list[Column]:
    """Rank, GPU × count, layout, mitigations and the figures that decide (TTFT or the step time, the bound and
    memory are in the line under each row). Training with a token target: the run's time and $ per run, else
    the step time and $/1M tokens (the MFU is in the line under the row)."""
    if training:
        figures = [Column("run" if per_run else "step", align="right", wrap=False)]
        money = "$/run" if per_run else "$/1M tok"
    else:
        figures, money = [Column("tpot", "TPOT", align="right", wrap=False)], "$/1M tok"
    return [Column("rank", "#", align="right", wrap=False), Column("gpu", "GPU"), Column("layout"),
            Column("mitigations"), Column("tokens", "tok/s", align="right", wrap=False), *figures,
            Column("cost", money, align="right", wrap=False), Column("score", align="right", wrap=False)]


SHORT_MITIGATIONS = {"optimizer offload to CPU": "CPU offload"}
"""Shorter names in the table (the why, JSON and CSV keep the planner's)."""


def as_requested_line(d: dict[str, Any], role: str, verbose: bool = False) -> str | None:
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
    layout = alt["layout_text"] if verbose else short_layout(alt["layout"], _training(d))
    if not verbose:
        return f"  as requested ({what}): {alt['gpu']} ×{alt['count']} {layout}{extra}, score {alt['score']:.1f}"
    return (f"  best as requested ({what}): {alt['gpu']} ×{alt['count']} {layout}{extra}, score "
            f"{alt['score']:.1f} (#1 {top['score']:.1f} with {', '.join(top['mitigations'])})"
            f"\n     {alt['why']}\n     cost: {alt['cost']}")


def entry_notes(entries: list[dict[str, Any]]) -> list[str]:
    """The details under a role's table (the experiment plan for the first entry only; JSON has all)."""
    lines = []
    for k, e in enumerate(entries):
        lines.append(f"  {k + 1}. {e['gpu']} ×{e['count']} {e['layout_text']}: {e['why']}")
        lines.append(f"     cost: {e['cost']}")
        if e.get("price_text") and e.get("priced", True):
            lines.append(f"     price: {e['price_text']}")
        lines.append(f"     flip: {e['flip']}")
        spans = key_figure_text(e, {"tpot_s": human.seconds, "step_s": human.seconds, "total_bytes": human.gib})
        if spans:
            lines.append(f"     interval: {spans}")
        if k == 0:
            lines.extend(f"     verify: {x}" for x in e["experiments"])
    return lines


ROLE_SCOPE = {"dev": "of one GPU", "single-node-training": "within one node",
              "cluster-training": "over more than one node",
              "low-power-inference": f"on cards of at most {LOW_POWER_TDP_W:.0f} W board power"}
"""What each role admits (``gpumatch.plan.roles``), said where a role is empty."""


def none_feasible(d: dict[str, Any], role: str) -> str:
    """Why a role's shortlist is empty, pointing only at a section the view shows: the Failed table (a rule
    rejected candidates), else "Not considered" (all the others were left out by the request)."""
    scope = " ".join(("no candidate", ROLE_SCOPE.get(role, ""))).strip()
    if any(r["rule"] != "excluded" for r in d["rejected"]):
        return f"none feasible: {scope} passed every check (see Failed below)"
    if d["rejected"]:
        return "none feasible among the GPUs considered (see Not considered below)"
    return "none feasible within the role's limits"


def _role_block(d: dict[str, Any], role: str, width: int, verbose: bool) -> list[str]:
    entries = d["shortlist"][role]
    title = f"{d['roles'][role]} ({role})"
    if not entries:
        return [wrap_block(f"{title}: {none_feasible(d, role)}", width)]
    training = _training(d)
    rows = shortlist_rows(entries, training, d["request"])
    per_run = training and bool(d["request"].get("train_tokens"))
    out = [to_table(rows, shortlist_columns(training, per_run), title=title, width=width, detail_key="why",
                    detail_indent=5)]
    if verbose:
        out.append(wrap_block("\n".join(entry_notes(entries)), width))
    alt = as_requested_line(d, role, verbose)
    if alt:
        out.append(wrap_block(alt, width))
    return out


# --- failed configurations -------------------------------------------------------------------------------------

def _closeness(r: dict[str, Any]) -> tuple[float, int]:
    miss = r.get("miss_fraction")
    return (math.inf if miss is None else miss, r["count"] or 0)


def _by_rule(rejected: list[dict[str, Any]]) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for r in rejected:
        by_rule.setdefault(r["rule"], []).append(r)
    return by_rule, by_rule.pop("excluded", [])


def _label(r: dict[str, Any]) -> str:
    return str(r["gpu"]) + (f" ×{r['count']}" if r["count"] else "")


def rejected_sections(rejected: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Rejected groups by rule ("failed configurations"): a title with counts and a few example rows each.

    Examples: one per GPU model, its configuration closest to passing (smallest ``miss_fraction``: the smallest
    memory shortfall, usually at the largest count; the latency or tokens/s nearest the target), closest first
    (the most informative: "even this one is short"); for yes/no rules (precision, power, ...) the smallest
    count. At most ``EXAMPLES_PER_REASON``.
    """
    by_rule, excluded = _by_rule(rejected)
    out = []
    for rows in by_rule.values():
        configs = sum(r["configurations"] for r in rows)
        gpus = len({r["gpu"] for r in rows})
        title = f"Failed: {rows[0]['rule_title']} — {plural(configs, 'configuration')}, {plural(gpus, 'GPU model')}"
        seen: set[str] = set()
        examples = []
        for r in sorted(rows, key=_closeness):
            if r["gpu"] in seen:
                continue
            seen.add(r["gpu"])
            examples.append({"gpu": _label(r), "precision": r["precision"], "tried": r["example"] or "-",
                             "reason": r["reason"]})
            if len(examples) >= EXAMPLES_PER_REASON:
                break
        out.append((title, examples))
    if excluded:
        out.append((not_considered(excluded), []))
    return out


def not_considered(rows: list[dict[str, Any]]) -> str:
    """One line for the GPUs the request left out, by reason: "30 GPU models not selected (--gpu L4)"."""
    by_reason: dict[str, list[str]] = {}
    for r in rows:
        by_reason.setdefault(r["reason"], []).append(r["gpu"])
    parts = [f"{plural(len(gpus), 'GPU model')} {reason}" if reason.startswith("not selected")
             else f"{', '.join(gpus)} {reason}" for reason, gpus in by_reason.items()]
    return "Not considered: " + "; ".join(parts)


SHORT_RULES = {"memory": "does not fit in memory", "precision": "precision unsupported", "ttft": "TTFT target",
               "tpot": "TPOT target", "tokens_per_s": "tokens/s target", "consumer": "consumer card in this role",
               "power": "node power budget", "psu": "PSU under 1.5x the load", "budget": "over budget or unpriced",
               "cooling": "passive card, desk-side box", "deadline": "training deadline"}
"""Short reason names for the one-line failed summary; any other rule shows its title."""

FAILED_COLUMNS = [Column("configurations", "configs", align="right", wrap=False), Column("reason", max_lines=2),
                  Column("gpus", "GPUs", drop=1, align="right", wrap=False),
                  Column("closest", "closest to passing", max_lines=2)]


def _closest_text(r: dict[str, Any]) -> str:
    """The example and how far it is from passing, first: "A10 ×4 int8: short by 38 MiB", "... misses by 3%"."""
    label = _label(r) + (f" {r['precision']}" if r["precision"] != "any" else "")
    if r.get("shortfall_bytes"):
        return f"{label}: short by {human.gib(r['shortfall_bytes'])}"
    if r.get("miss_fraction") is not None:
        return f"{label}: misses by {human.percent(r['miss_fraction'])} ({r['reason']})"
    return f"{label}: {r['reason']}"


def failed_summary_rows(rejected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per rule, most configurations first: how many, the reason, and the closest-to-passing example."""
    by_rule, _ = _by_rule(rejected)
    rows = []
    for rule, group in by_rule.items():
        gpus = len({r["gpu"] for r in group})
        name = SHORT_RULES.get(rule, group[0]["rule_title"])
        rows.append({"n": sum(r["configurations"] for r in group), "reason": name, "gpus": gpus,
                     "closest": _closest_text(min(group, key=_closeness))})
    rows.sort(key=lambda r: -int(r["n"]))
    return [{**r, "configurations": f"{r['n']:,}"} for r in rows]


def _failed_block(d: dict[str, Any], width: int, verbose: bool) -> list[str]:
    if verbose:
        return [to_table(rows, [Column("gpu", "GPU"), Column("precision", wrap=False), Column("tried"),
                                Column("reason")], title=title, width=width) if rows else wrap_block(title, width)
                for title, rows in rejected_sections(d["rejected"])]
    rows = failed_summary_rows(d["rejected"])
    out = []
    if rows:
        total = sum(r["configurations"] for r in d["rejected"] if r["rule"] != "excluded")
        title = f"Failed: {plural(total, 'configuration')}, by reason (the closest to passing of each)"
        out.append(to_table(rows, FAILED_COLUMNS, title=title, width=width))
    _, excluded = _by_rule(d["rejected"])
    if excluded:
        out.append(wrap_block(not_considered(excluded), width))
    return out


# --- the whole view --------------------------------------------------------------------------------------------

MORE = "More: --verbose (cost, flip, verify plan, examples); --format json|csv"


def _two_lines(text: str, width: int) -> str:
    """A note in the summary: at most two lines, the rest cut with an ellipsis (--verbose has it whole)."""
    lines = wrap_block(text, width).split("\n")
    if len(lines) <= 2:
        return "\n".join(lines)
    return lines[0] + "\n" + cut(lines[1] + " " + " ".join(x.strip() for x in lines[2:]), width)


def plan_text(d: dict[str, Any], verbose: bool = False, width: int | None = None) -> str:
    """The readable view of ``Plan.to_dict()`` (module docstring): summary, or everything with ``verbose``."""
    width = output_width() if width is None else width
    blocks = [wrap_block(header(d), width)]
    for role in d["shortlist"]:
        blocks.append("\n".join(_role_block(d, role, width, verbose)))
    blocks.extend(_failed_block(d, width, verbose))
    empty = tuple(f"no feasible candidate for the {d['roles'][r]} role" for r, es in d["shortlist"].items()
                  if not es)
    notes = [wrap_block(f"note: {n}", width) if verbose else _two_lines(f"note: {n}", width)
             for n in d["notes"] if verbose or not n.startswith(empty or ("\0",))]
    if not verbose:
        notes.append(wrap_block(MORE, width))
    blocks.append("\n".join(notes))
    return "\n\n".join(b for b in blocks if b)


# --- CSV -------------------------------------------------------------------------------------------------------

def _entry_row(kind: str, role: str, rank: Any, e: dict[str, Any], training: bool) -> dict[str, Any]:
    est = e["estimate"]
    return {"kind": kind, "role": role, "rank": rank, "gpu": e["gpu"], "count": e["count"],
            "layout": e["layout_text"], "mitigations": "; ".join(e["mitigations"]), "score": e["score"],
            "tokens_per_s": est["tokens_per_s"], "tpot_s": None if training else est["tpot_s"],
            "step_s": est["step_s"] if training else None,
            "usd_per_million_tokens": est["usd_per_million_tokens"], "total_bytes": est["total_bytes"],
            "bound": e["bound"], "rule": "", "reason": e["why"]}


def csv_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Flat rows: every shortlist entry, the as-requested alternatives, then every rejected group."""
    training = _training(d)
    rows: list[dict[str, Any]] = []
    for role, entries in d["shortlist"].items():
        rows.extend(_entry_row("shortlist", role, k + 1, e, training) for k, e in enumerate(entries))
    for role, e in d.get("as_requested", {}).items():
        if e is not None:
            rows.append(_entry_row("as-requested", role, "", e, training))
    for r in d["rejected"]:
        rows.append({"kind": "rejected", "role": "", "rank": "", "gpu": r["gpu"], "count": r["count"],
                     "layout": r["example"], "mitigations": r["precision"], "score": "", "tokens_per_s": "",
                     "tpot_s": "", "step_s": "", "usd_per_million_tokens": "", "total_bytes": "", "bound": "",
                     "rule": r["rule"], "reason": r["reason"]})
    return rows


def plan_output(d: dict[str, Any], fmt: str, verbose: bool = False) -> str:
    """What ``gpumatch plan`` prints for ``fmt``: JSON in full, CSV rows (:func:`csv_rows`) or the text."""
    if fmt == "json":
        return to_json(d)
    return to_csv(csv_rows(d)) if fmt == "csv" else plan_text(d, verbose=verbose)
