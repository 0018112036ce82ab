"""The data of ``gpumatch report``: a plan and/or stored runs, assembled for the renderers (no drawing here).

:func:`build_report` returns plain JSON-ready data:

- ``plan``: the plan (:func:`gpumatch.usecases.plan.plan_calibrated`, so a card's stored calibration applies as
  in ``gpumatch plan``) and, per shortlisted card (``picks``: the first pick of each role, at most
  :data:`MAX_PICKS` distinct cards), its roofline with the workload's operators
  (:func:`gpumatch.estimate.operators.operator_points`), its memory growth over batch and sequence with the card's
  capacity (:func:`gpumatch.estimate.memory_curve`), the experiment plan and the procurement re-check list.
- ``runs``: per stored bench run, its results (measured, predicted, ratio), its telemetry over time with the
  throttle reasons decoded, and the decode load ladder (tokens/s and J/token over batch).
- ``serving``: the serve runs among them (gpumatch ``bench serve`` and imported vLLM/GuideLLM/AIPerf files) as
  load levels with predictions and the SLO (:func:`gpumatch.usecases.report_serving.serving_section`); None without one.
- ``side_by_side``: with two bench runs or more (serve runs left out), the runs side by side against the first
  (:func:`gpumatch.usecases.report_sidebyside.side_by_side`); None otherwise.

Planning needs no GPU, no torch and no store: a report of a plan alone reads nothing but the catalog.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.telemetry.types import REASON_GROUPS
from gpumatch.vocab import TRAINING_TASKS

MAX_PICKS = 4
THROTTLE_LABELS = {"power_cap_frac": "power cap", "hw_slowdown_frac": "HW slowdown", "thermal_frac": "thermal"}
"""The page's name of each clock-event reason group of :data:`gpumatch.telemetry.types.REASON_GROUPS` (the one table
of their bits: SW power cap; HW slowdown and HW power brake; SW and HW thermal slowdown)."""
MAX_SAMPLES = 4000
"""Telemetry samples per run drawn (evenly thinned beyond it, to keep the page small)."""
GIB = 1024.0**3


@dataclass(frozen=True)
class ReportQuery:
    """What to report: a plan (``plan``, a :class:`gpumatch.plan.query.PlanQuery`) and/or stored bench runs."""

    plan: Any = None
    run_ids: tuple[int, ...] = ()
    store: Path | None = None
    use_store: bool = True
    title: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    """The SLO the serving part marks levels against (p99, ms); None: the runs' settings, else the defaults of
    :mod:`gpumatch.usecases.report_serving`."""


def build_report(query: ReportQuery) -> dict[str, Any]:
    """The report's data (module docstring); an :class:`InputError` when it has neither a plan nor runs."""
    if query.plan is None and not query.run_ids:
        raise InputError("nothing to report", "give a workload file or plan flags, and/or --run N")
    out: dict[str, Any] = {"generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                           "plan": None, "runs": []}
    if query.plan is not None:
        out["plan"] = plan_section(query)
    out["runs"] = [run_section(query.store, r) for r in query.run_ids]
    from gpumatch.usecases.report_serving import is_serve_run, serving_section

    out["serving"] = serving_section(query.store, out["runs"], query.slo_ttft_ms, query.slo_tpot_ms)
    out["side_by_side"] = None
    if len(query.run_ids) >= 2 and all(r["run"].get("kind") == "bench" and not is_serve_run(r)
                                       for r in out["runs"]):
        from gpumatch.usecases.report_sidebyside import side_by_side

        out["side_by_side"] = side_by_side(query.store, query.run_ids)
    name = (out["plan"] or {}).get("request", {}).get("name") or ""
    out["title"] = query.title or (f"gpumatch report: {name}" if name else "gpumatch report")
    return out


def plan_section(query: ReportQuery) -> dict[str, Any]:
    """The plan as a dict with ``picks``: per distinct first-pick card, its roofline, memory curve and lists."""
    from gpumatch.usecases.plan import plan_calibrated

    run = plan_calibrated(query.plan, None, query.store, use_store=query.use_store)
    d = run.plan.to_dict()
    d["notes"] = [*d.get("notes", []), *run.notes]
    model = d["request"]["model"]
    picks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for role, entries in d["shortlist"].items():
        for e in entries[:1]:
            if e["gpu"] in seen or len(picks) >= MAX_PICKS:
                continue
            seen.add(e["gpu"])
            picks.append(pick_section(model, role, d["roles"].get(role, role), e, d["request"]))
    d["picks"] = picks
    d["rejected_groups"] = rejected_groups(d.get("rejected") or [])
    return d


def rejected_groups(rejected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failed configurations by rule: the cards (with the GPU counts tried), one reason as an example, and
    the number of configurations."""
    groups: dict[str, dict[str, Any]] = {}
    for r in rejected:
        g = groups.setdefault(r["rule_title"], {"rule": r["rule_title"], "cards": {}, "example": r["reason"],
                                                "configurations": 0})
        g["cards"].setdefault(r["gpu"], []).append(r["count"])
        g["configurations"] += int(r.get("configurations") or 0)
    out = []
    for g in groups.values():
        cards = "; ".join(f"{gpu} ({', '.join(str(c) for c in sorted(set(cs)))} GPUs)"
                          for gpu, cs in g["cards"].items())
        out.append({**g, "cards": cards})
    return sorted(out, key=lambda g: -g["configurations"])


def pick_section(model: str, role: str, role_title: str, entry: dict[str, Any],
                 request: dict[str, Any]) -> dict[str, Any]:
    """One shortlisted card: the entry, its roofline, memory curve, experiments and procurement re-checks."""
    from gpumatch.catalog import get_gpu
    from gpumatch.estimate import Request, memory_curve
    from gpumatch.estimate.operators import operator_points

    req = Request(**entry["estimate_options"])
    count = req.count
    spec = get_gpu(entry["gpu"])
    train = request.get("task") in TRAINING_TASKS
    seqs = (512, 1024, 2048, 4096, 8192, 16384, 32768)
    curve = memory_curve(model, spec.name, req, batches=(1, 2, 4, 8, 16, 32, 64, 128), seqs=seqs)
    capacity = float(entry["estimate"]["capacity_bytes"])
    length = int((req.seq if train else req.prompt) or 0)
    here = {"batch": req.seqs_per_replica, "seq": length,
            "total_bytes": float(entry["estimate"]["total_bytes"])} if length else None
    return {"role": role, "role_title": role_title, "entry": entry, "gpu": spec.name, "count": count,
            "roofline": operator_points(model, spec.name, req),
            "memory_curve": curve, "capacity_bytes": capacity, "here": here,
            "x_label": "sequence" if train else "prompt",
            "procurement": procurement_checks(spec, count, entry, request)}


def procurement_checks(spec: Any, count: int, entry: dict[str, Any], request: dict[str, Any]) -> list[str]:
    """What to re-check before ordering (seed: 正式采购前重新核对当期规格、供货、保修、服务器兼容列表和机房条件):
    the current specification, supply, warranty, the server vendor's compatibility list, power and cooling."""
    gpu_w = count * float(spec.tdp_w)
    link = f", {spec.scale_up}" if spec.scale_up not in ("", "none") else ", no scale-up link"
    budget = request.get("w_per_node")
    power = f"{count} × {spec.tdp_w:.0f} W = {gpu_w:,.0f} W of GPU power"
    power += f" against the {budget:,.0f} W per node given" if budget else " (no power limit given)"
    return [
        f"Specification: the vendor's current datasheet still says {spec.memory_bytes / 1e9:.0f} GB, "
        f"{spec.tdp_w:.0f} W, {spec.form_factor}{link} (revisions change memory, clocks and TDP)",
        f"Supply: lead time and allocation of {count} × {spec.name} from two vendors; the price assumed here: "
        f"{entry.get('price_text') or entry.get('cost') or 'none'}",
        f"Warranty: term, RMA turnaround, and whether the card keeps it in this server ({spec.form_factor}; "
        "workstation and consumer cards in servers often do not)",
        f"Compatibility: the server model is on the vendor's qualified list for {count} × {spec.name} "
        f"(PCIe Gen{spec.pcie_gen} x{spec.pcie_lanes}{link}), with the BIOS and driver it names",
        f"Power and cooling: {power}; the chassis's PSU rating with headroom; card cooling {spec.cooling}, site "
        f"cooling {request.get('cooling') or 'not given'}: the chassis's airflow at the room's inlet temperature, "
        "the rack's power and cooling",
    ]


def _thin(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(samples) <= MAX_SAMPLES:
        return samples
    step = len(samples) / MAX_SAMPLES
    return [samples[int(i * step)] for i in range(MAX_SAMPLES)]


def telemetry_series(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Time series (t from the first sample, s) of power, SM clock and temperature of GPU 0, and per throttle
    reason the sampled periods it was active, as [start, end] pairs."""
    rows = _thin(sorted((s for s in samples if (s.get("gpu_index") or 0) == 0), key=lambda s: s["t_s"]))
    if not rows:
        return {}
    t0 = rows[0]["t_s"]
    t = [r["t_s"] - t0 for r in rows]
    periods: dict[str, list[list[float]]] = {}
    for group, bits in REASON_GROUPS.items():
        name = THROTTLE_LABELS[group]
        spans: list[list[float]] = []
        for i, r in enumerate(rows):
            on = bool((r.get("clock_event_reasons") or 0) & bits)
            end = t[i + 1] if i + 1 < len(t) else t[i]
            if on and spans and spans[-1][1] >= t[i] - 1e-9:
                spans[-1][1] = end
            elif on:
                spans.append([t[i], end])
        periods[name] = spans
    return {"t_s": t, "power_w": [r.get("power_instant_w") for r in rows],
            "sm_clock_mhz": [r.get("sm_clock_mhz") for r in rows], "gpu_temp_c": [r.get("gpu_temp_c") for r in rows],
            "throttle": periods}


def _ladder(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decode over batch: tokens/s and J/token per batch, per context and variant."""
    by: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in results:
        cfg = r.get("config") or {}
        if r["metric"] in ("decode_tokens_per_s", "decode_energy_j_per_token") and "batch" in cfg:
            key = (cfg.get("variant"), cfg.get("context"), cfg["batch"])
            by.setdefault(key, {"variant": key[0], "context": key[1], "batch": key[2]})[r["metric"]] = r["measured"]
    return sorted(by.values(), key=lambda x: (str(x["variant"]), x["context"] or 0, x["batch"]))


def _any_run(store: Path | None, run_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A stored run of any kind in the shape of :func:`gpumatch.usecases.stored_bench.load_run`, and its samples."""
    from gpumatch.store import open_existing_store
    from gpumatch.usecases.stored_bench import load_run, result_row

    with open_existing_store(store) as st:
        raw = st.export_run(run_id)
        samples = st.samples(run_id)
    if raw["run"].get("kind") == "bench":
        return load_run(store, run_id), samples
    from gpumatch.telemetry.manifest import from_stored

    manifest = from_stored(raw["run"].get("manifest")).to_dict()  # a monitor run's older nested shape too
    data = {"run": {k: v for k, v in raw["run"].items() if k != "manifest"}, "manifest": manifest, "cases": [],
            "results": [result_row(r) for r in raw["results"]],
            "failures": [{"case": (f.get("config") or {}).get("case"), "error_class": f["error_class"],
                          "message": f["message"], "config": f.get("config")} for f in raw["failures"]]}
    return data, samples


def run_section(store: Path | None, run_id: int) -> dict[str, Any]:
    """One stored run (bench, monitor, ...): record, manifest, results, failures, telemetry and the load ladder."""
    data, samples = _any_run(store, run_id)
    compared = [r for r in data["results"] if r.get("ratio") is not None]
    scale = None
    if data["run"].get("kind") == "scale":
        from gpumatch.usecases.stored_scale import load_scale_run

        scale = load_scale_run(store, run_id)
    scaling = [r for r in data["results"] if "scaling" in r["metric"]] if scale is None else []
    from gpumatch.usecases.report_serving import card_of, is_serve_run, run_facts

    serve = is_serve_run(data)
    return {**data, "telemetry": telemetry_series(samples), "compared": compared, "ladder": _ladder(data["results"]),
            "scaling": scaling, "scale": scale, "n_samples": len(samples), "card": card_of(data),
            "serve": serve, "serve_facts": run_facts(data, []) if serve else None}
