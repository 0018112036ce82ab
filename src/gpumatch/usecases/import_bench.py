"""``gpumatch bench import FILE``: a ``bench export`` JSON file back into a results store.

A run measured on another machine (the device of a GPU pool, a colleague's box) travels as the JSON that
``gpumatch bench export`` writes (schema ``gpumatch.bench.run/1``: run, manifest, cases, results, failures).
Importing it writes a new bench run with the same manifest (so its SHA-256 is the same key), the run's config
with an ``imported`` block (file name, original run id, original start time), one result per exported row
(``extra`` keeps ``n``, the percentiles, ``predicted`` / ``datasheet`` / ``ratio`` and, when the export has
them, the raw timings ``raw_s``), the failures and one ``case`` event per case, and closes it with the
original status. Telemetry samples are not part of an export and are not invented.

The run is written whole in one transaction (:class:`gpumatch.store.newrun.NewRun`): an importer killed at any
instant leaves the store without any part of it, and the next import goes through. Importing the same export
twice into one store is refused (same manifest and original start time): the run's global id is a UUIDv5 of
its kind, manifest SHA-256 and original start time, and the store's UNIQUE ``run_uuid`` keeps one copy even when
several processes import the file at once.

A ``gpumatch bench serve --out`` file (schema ``gpumatch.bench.serve/1``: manifest, config, one flat vLLM-style
object per load level with its raw requests and the estimator's prediction) is imported as a ``serve`` run the way
``bench serve`` records one (:func:`gpumatch.loadgen.bench.run_serve_bench`): one ``request`` event per raw
record, one result per stored figure of each level (``predicted`` / ``ratio`` in ``extra``) and one ``level``
event with the level's summary, so ``gpumatch bench show`` and ``gpumatch calibrate`` read it like a run measured
here (:func:`import_file` picks the importer by schema).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpumatch.errors import InputError
from gpumatch.files import parse_json_object, read_text

if TYPE_CHECKING:
    from gpumatch.store.newrun import NewRun

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


def _already(store: Any, kind: str, manifest_sha: str, started_at: str) -> int | None:
    """A ``kind`` run imported before global import ids (a random ``run_uuid``) from the same export: same
    manifest, same original start time, and finished by the importer (its summary names the file; a run left
    behind by an importer killed before this version has no such summary and does not count)."""
    for run in store.runs(kind, limit=10_000):
        if (run.manifest_sha256 == manifest_sha and (run.config.get("imported") or {}).get("started_at") == started_at
                and "imported_from" in (run.summary or {})):
            return int(run.run_id)
    return None


def _write(path: Path, store_path: Path | str | None, run: NewRun, status: str, summary: dict[str, Any],
           started: str) -> int:
    """Write ``run`` (a :class:`~gpumatch.store.newrun.NewRun`) whole, in one transaction; its run id. Already
    imported (the same global id, or an import made before global ids): InputError naming that run."""
    from gpumatch.store import open_store
    from gpumatch.store.locate import locate_store, store_url

    kind = run.kind
    target: Path | str = store_url(store_path) or locate_store(store_path)[0]
    with open_store(target, mode="write") as st:
        dup = _already(st, kind, run.manifest_sha256, started)
        run_id = st.add_whole_run(run, status, summary) if dup is None else None
        if run_id is None:
            dup = dup if dup is not None else st.run_id_of(run.run_uuid)
            raise InputError(f"{path.name} is already in {target} as {kind} run {dup}",
                             f"'gpumatch bench show {dup}' shows it")
    return run_id


def _serve_results(run: NewRun, lv: dict[str, Any]) -> None:
    """One result per stored figure of level ``lv``, as ``bench serve`` records them."""
    import math

    from gpumatch.loadgen.bench import stored_figures

    keys = ("level", "mode", "phase", "label", "max_concurrency", "request_rate", "arrival", "burstiness")
    cfg: dict[str, Any] = {k: lv[k] for k in keys if k in lv}
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
        run.add_result(metric, float(value) * scale, unit, config=cfg, extra=extra)


def import_serve_run(path: Path, store_path: Path | str | None = None) -> int:
    """Write the ``bench serve`` file at ``path`` into the store as a new serve run (module docstring), in one
    transaction; its run id. The same file twice (same manifest and start time) is an :class:`InputError`
    naming the run it became."""
    from gpumatch.store.newrun import NewRun, import_uuid

    data = read_serve(path)
    manifest = data["manifest"]
    started = str(manifest.get("started_utc") or data.get("date") or "")
    config = {**data["config"], "imported": {"file": path.name, "run_id": data.get("run_id"),
                                             "started_at": started}}
    run = NewRun("serve", f"{data['config'].get('model')} {data.get('endpoint') or ''}".strip(), manifest, config,
                 run_uuid=import_uuid("serve", manifest, started))
    base = 0.0
    for lv in data["levels"]:
        records = [r for r in lv.get("requests") or [] if isinstance(r, dict)]
        run.add_events((base + _seconds(r.get("scheduled_s")), "request", {**r, "level": lv["level"]})
                       for r in records)
        _serve_results(run, lv)
        run.add_event(base, "level", {k: v for k, v in lv.items() if k != "requests"})
        base += _seconds(lv.get("duration"))
    summary = {"levels": len(data["levels"]), "server_gone": data.get("server_gone"),
               "max_rate_meeting_slo": data.get("max_rate_meeting_slo"), "search_note": data.get("search_note"),
               "imported_from": path.name}
    return _write(path, store_path, run, _END.get(str(data.get("status")), "completed"), summary, started)


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


def import_run(path: Path, store_path: Path | str | None = None) -> int:
    """Write the export at ``path`` into the store (created when missing) as a new bench run, in one transaction
    (all of it or nothing); its run id.

    An export already imported into this store (same manifest, same original start time) is an
    :class:`InputError` naming the run it became."""
    from gpumatch.store.newrun import NewRun, import_uuid

    data = read_export(path)
    src, manifest = data["run"], data["manifest"]
    started = str(src.get("started_at") or "")
    config = {**(src.get("config") or {}), "imported": {"file": path.name, "run_id": src.get("run_id"),
                                                         "started_at": started}}
    run = NewRun("bench", str(src.get("name") or path.stem), manifest, config,
                 run_uuid=import_uuid("bench", manifest, started))
    for row in data["results"]:
        run.add_result(row["metric"], float(row["measured"]), str(row.get("unit") or "1"),
                       config=row.get("config") or {"case": row.get("case")}, extra=_extra(row))
    for f in data["failures"]:
        run.add_failure(f.get("config") or {"case": f.get("case")}, str(f.get("error_class") or "error"),
                        str(f.get("message") or ""), str(f.get("log_tail") or ""))
    for i, case in enumerate(data["cases"]):
        window = case.get("window_s") if isinstance(case, dict) else None
        t_s = float(window[0]) if isinstance(window, list) and window else float(i)
        run.add_event(t_s, "case", case if isinstance(case, dict) else {"case": case})
    summary = {**(src.get("summary") or {}), "imported_from": path.name}
    return _write(path, store_path, run, _END.get(str(src.get("status")), "completed"), summary, started)
