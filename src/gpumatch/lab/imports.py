"""``gpumatch bench import FILE``: a ``bench export`` JSON file back into a results store.

A run measured on another machine (the device of a GPU pool, a colleague's box) travels as the JSON that
``gpumatch bench export`` writes (schema ``gpumatch.bench.run/1``: run, manifest, cases, results, failures).
Importing it writes a new bench run with the same manifest (so its SHA-256 is the same key), the run's config
with an ``imported`` block (file name, original run id, original start time), one result per exported row
(``extra`` keeps ``n``, the percentiles, ``predicted`` / ``datasheet`` / ``ratio`` and, when the export has
them, the raw timings ``raw_s``), the failures and one ``case`` event per case, and closes it with the
original status. Telemetry samples are not part of an export and are not invented.

Importing the same export twice into one store is refused (same manifest and original start time).

A ``gpumatch bench serve --out`` file (schema ``gpumatch.bench.serve/1``: manifest, config, one flat vLLM-style
object per load level with its raw requests and the estimator's prediction) is imported as a ``serve`` run the way
``bench serve`` records one (:func:`gpumatch.lab.loadgen.bench.run_serve_bench`): one ``request`` event per raw
record, one result per stored figure of each level (``predicted`` / ``ratio`` in ``extra``) and one ``level``
event with the level's summary, so ``gpumatch bench show`` and ``gpumatch calibrate`` read it like a run measured
here (:func:`import_file` picks the importer by schema).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.files import parse_json_object, read_text

SCHEMA = "gpumatch.bench.run/1"
MAX_EXPORT_BYTES = 200_000_000
_EXTRA_KEYS = ("n", "p50_s", "p90_s", "p99_s", "p50_flops_per_s", "p90_flops_per_s", "p99_flops_per_s",
               "predicted", "datasheet", "ratio", "predicted_by", "raw_s")
_END = {"completed": "completed", "failed": "failed", "interrupted": "interrupted"}


def read_export(path: Path) -> dict[str, Any]:
    """The export at ``path``, checked: schema, a manifest object and lists of results, cases and failures."""
    label = f"bench export {path}"
    data = parse_json_object(read_text(path, label, MAX_EXPORT_BYTES), label, "the JSON 'gpumatch bench export' "
                             "writes")
    if data.get("schema") != SCHEMA:
        raise InputError(f"{label}: schema is {data.get('schema')!r}, not {SCHEMA!r}",
                         "give a file written by 'gpumatch bench export'")
    for key, kind in (("run", dict), ("manifest", dict), ("results", list), ("cases", list), ("failures", list)):
        if not isinstance(data.get(key), kind):
            raise InputError(f"{label}: '{key}' is missing or not a{'n object' if kind is dict else ' list'}",
                             "give a file written by 'gpumatch bench export'")
    for i, row in enumerate(data["results"]):
        if not isinstance(row, dict) or not isinstance(row.get("metric"), str) or not isinstance(
                row.get("measured"), int | float) or isinstance(row.get("measured"), bool):
            raise InputError(f"{label}: results[{i}] needs a 'metric' and a numeric 'measured'")
    return data


SERVE_SCHEMA = "gpumatch.bench.serve/1"


def read_serve(path: Path) -> dict[str, Any]:
    """The ``bench serve`` file at ``path``, checked: schema, manifest and config objects, a list of levels each
    with a label and numeric summary figures."""
    label = f"bench serve file {path}"
    data = parse_json_object(read_text(path, label, MAX_EXPORT_BYTES), label, "the JSON 'gpumatch bench serve "
                             "--out' writes")
    if data.get("schema") != SERVE_SCHEMA:
        raise InputError(f"{label}: schema is {data.get('schema')!r}, not {SERVE_SCHEMA!r}",
                         "give a file written by 'gpumatch bench serve --out'")
    for key, kind in (("manifest", dict), ("config", dict), ("levels", list)):
        if not isinstance(data.get(key), kind):
            raise InputError(f"{label}: '{key}' is missing or not a{'n object' if kind is dict else ' list'}",
                             "give a file written by 'gpumatch bench serve --out'")
    for i, lv in enumerate(data["levels"]):
        if not isinstance(lv, dict) or not isinstance(lv.get("label"), str) or not isinstance(lv.get("level"), int):
            raise InputError(f"{label}: levels[{i}] needs a 'label' and a 'level' number")
        if not isinstance(lv.get("requests", []), list):
            raise InputError(f"{label}: levels[{i}].requests is not a list")
    return data


def _seconds(x: Any) -> float:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else 0.0


def _already_serve(store: Any, manifest_sha: str, started_at: str) -> int | None:
    for run in store.runs("serve", limit=10_000):
        if run.manifest_sha256 == manifest_sha and (run.config.get("imported") or {}).get("started_at") == started_at:
            return int(run.run_id)
    return None


def _serve_results(st: Any, run_id: int, lv: dict[str, Any]) -> None:
    """One result per stored figure of level ``lv``, as ``bench serve`` records them."""
    import math

    from gpumatch.lab.loadgen.bench import stored_figures

    cfg = {k: lv[k] for k in ("level", "mode", "phase", "label", "max_concurrency", "request_rate", "arrival",
                              "burstiness") if k in lv}
    predicted, ratio = lv.get("predicted") or {}, lv.get("ratio") or {}
    for key, metric, unit, scale in stored_figures():
        value = lv.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        name = key.split("_")[1] if key.endswith("_ms") else key
        extra: dict[str, Any] = {"vllm_key": key, "client_bound": lv.get("client_bound"),
                                 "n": lv.get(f"n_{name}", lv.get("completed"))}
        if isinstance(predicted.get(key), int | float):
            extra.update(predicted=float(predicted[key]) * scale, ratio=ratio.get(key))
        st.add_result(run_id, metric, float(value) * scale, unit, config=cfg, extra=extra)


def import_serve_run(path: Path, store_path: Path | str | None = None) -> int:
    """Write the ``bench serve`` file at ``path`` into the store as a new serve run (module docstring); its run
    id. The same file twice (same manifest and start time) is an :class:`InputError` naming the run it became."""
    from gpumatch.store import open_store
    from gpumatch.store.codec import manifest_sha256
    from gpumatch.store.locate import locate_store

    data = read_serve(path)
    manifest = data["manifest"]
    started = str(manifest.get("started_utc") or data.get("date") or "")
    config = {**data["config"], "imported": {"file": path.name, "run_id": data.get("run_id"),
                                             "started_at": started}}
    target, _ = locate_store(store_path)
    with open_store(target, mode="write") as st:
        dup = _already_serve(st, manifest_sha256(manifest), started)
        if dup is not None:
            raise InputError(f"{path.name} is already in {target} as serve run {dup}",
                             f"'gpumatch bench show {dup}' shows it")
        run_id = st.begin_run("serve", f"{data['config'].get('model')} {data.get('endpoint') or ''}".strip(),
                              manifest, config)
        base = 0.0
        for lv in data["levels"]:
            records = [r for r in lv.get("requests") or [] if isinstance(r, dict)]
            st.add_events(run_id, [(base + _seconds(r.get("scheduled_s")), "request", {**r, "level": lv["level"]})
                                   for r in records])
            _serve_results(st, run_id, lv)
            st.add_event(run_id, base, "level", {k: v for k, v in lv.items() if k != "requests"})
            base += _seconds(lv.get("duration"))
        summary = {"levels": len(data["levels"]), "server_gone": data.get("server_gone"),
                   "max_rate_meeting_slo": data.get("max_rate_meeting_slo"), "search_note": data.get("search_note"),
                   "imported_from": path.name}
        st.end_run(run_id, _END.get(str(data.get("status")), "completed"), summary=summary)
    return run_id


def import_file(path: Path, store_path: Path | str | None = None) -> tuple[str, int]:
    """(run kind, run id): a ``bench export`` file as a bench run (:func:`import_run`), a ``bench serve`` file as a
    serve run (:func:`import_serve_run`), by the file's schema."""
    label = f"file {path}"
    head = read_text(path, label, MAX_EXPORT_BYTES)[:4096]
    if f'"{SERVE_SCHEMA}"' in head:
        return "serve", import_serve_run(path, store_path)
    return "bench", import_run(path, store_path)


def _extra(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in _EXTRA_KEYS if row.get(k) is not None}


def _already(store: Any, manifest_sha: str, started_at: str) -> int | None:
    for run in store.runs("bench", limit=10_000):
        if run.manifest_sha256 == manifest_sha and (run.config.get("imported") or {}).get("started_at") == started_at:
            return int(run.run_id)
    return None


def import_run(path: Path, store_path: Path | str | None = None) -> int:
    """Write the export at ``path`` into the store (created when missing) as a new bench run; its run id.

    An export already imported into this store (same manifest, same original start time) is an
    :class:`InputError` naming the run it became."""
    from gpumatch.store import open_store
    from gpumatch.store.codec import manifest_sha256
    from gpumatch.store.locate import locate_store

    data = read_export(path)
    run, manifest = data["run"], data["manifest"]
    started = str(run.get("started_at") or "")
    config = {**(run.get("config") or {}), "imported": {"file": path.name, "run_id": run.get("run_id"),
                                                         "started_at": started}}
    target, _ = locate_store(store_path)
    with open_store(target, mode="write") as st:
        dup = _already(st, manifest_sha256(manifest), started)
        if dup is not None:
            raise InputError(f"{path.name} is already in {target} as bench run {dup}",
                             f"'gpumatch bench show {dup}' shows it")
        run_id = st.begin_run("bench", str(run.get("name") or path.stem), manifest, config)
        for row in data["results"]:
            st.add_result(run_id, row["metric"], float(row["measured"]), str(row.get("unit") or "1"),
                          config=row.get("config") or {"case": row.get("case")}, extra=_extra(row))
        for f in data["failures"]:
            st.add_failure(run_id, f.get("config") or {"case": f.get("case")}, str(f.get("error_class") or "error"),
                           str(f.get("message") or ""), str(f.get("log_tail") or ""))
        for i, case in enumerate(data["cases"]):
            window = case.get("window_s") if isinstance(case, dict) else None
            t_s = float(window[0]) if isinstance(window, list) and window else float(i)
            st.add_event(run_id, t_s, "case", case if isinstance(case, dict) else {"case": case})
        summary = {**(run.get("summary") or {}), "imported_from": path.name}
        st.end_run(run_id, _END.get(str(run.get("status")), "completed"), summary=summary)
    return run_id
