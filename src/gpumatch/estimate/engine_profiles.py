"""The serving engines' profiles (``data/engines.toml``) and the KV cache they give one replica.

A profile holds one engine's defaults, each with its source: schedule, token budget and sequence cap per card tier,
memory fraction, KV admission, host cost per pass, front-end cost per request, prefill dispatch cost. From it and
the memory model (:func:`gpumatch.estimate.engine.memory_items`) come the KV pool of a replica (its memory share less
weights, activations and overhead) and the sequences that pool admits.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpumatch.errors import InputError
from gpumatch.estimate import kernels, memory
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case, ModelNums
from gpumatch.estimate.engine import memory_items
from gpumatch.estimate.replay import CLIP_NEW_TOKENS, RATIO_MIN
from gpumatch.files import parse_toml, read_text
from gpumatch.units import GIB
from gpumatch.vocab import ENGINES


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    url: str = Field(min_length=1)
    says: str = Field(min_length=1)


class Tier(_Strict):
    """Defaults that depend on the card's memory (and, for vLLM, on the card being an A100)."""

    min_memory_gib: float = Field(ge=0)
    exclude: tuple[str, ...] = ()
    token_budget: int = Field(ge=0)
    max_seqs: int = Field(ge=0)


class EngineProfile(_Strict):
    """One engine's defaults (``data/engines.toml`` explains each field)."""

    description: str
    schedule: Literal["mixed", "alternate", "static"]
    memory_fraction: float = Field(gt=0, le=1)
    memory_fraction_of: Literal["total", "free"]
    kv_admission: Literal["on-demand", "reserve", "ratio"]
    host_pass_s: float = Field(ge=0, le=1)
    host_seq_s: float = Field(ge=0, le=1)
    kv_dtype: Literal["model", "checkpoint", "activations"]
    attention: Literal["engine", "sdpa"]
    prefix_cache: bool
    padded_decode: bool = False
    frontend_s: float = Field(default=0.0, ge=0, le=1)
    prefill_dispatch_s: float | None = Field(default=None, ge=0, le=1e-2)
    tiers: tuple[Tier, ...] = Field(min_length=1)
    sources: tuple[Source, ...] = Field(min_length=1)

    def tier(self, gpu_name: str, memory_bytes: float) -> Tier:
        """The first tier the card's memory reaches whose exclude list does not name the card."""
        for t in self.tiers:
            if memory_bytes >= t.min_memory_gib * GIB and not any(x.lower() in gpu_name.lower() for x in t.exclude):
                return t
        return self.tiers[-1]


class _EngineFile(_Strict):
    engines: dict[str, EngineProfile]


@lru_cache(maxsize=1)
def engine_profiles() -> dict[str, EngineProfile]:
    """The built-in engine profiles, validated (one per name of :data:`gpumatch.vocab.ENGINES`)."""
    path = resources.files("gpumatch.estimate") / "data" / "engines.toml"
    label = "built-in engine profiles engines.toml"
    doc = _EngineFile.model_validate(parse_toml(read_text(path, label), label))
    if set(doc.engines) != set(ENGINES):
        raise ValueError(f"{label}: engines {sorted(doc.engines)} != vocabulary {sorted(ENGINES)}")
    return dict(doc.engines)


def engine_profile(name: str) -> EngineProfile:
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r}", f"use one of {', '.join(ENGINES)}")
    return engine_profiles()[name]


def profile_under(engine: str, cal: Calibration, gpu_name: str) -> EngineProfile:
    """The engine's profile, with the per-pass costs of ``cal.serving`` when that calibration fitted them for this
    engine on this card (catalog name ``gpu_name`` in ``cal.fitted_on``); another card keeps the shipped profile."""
    profile = engine_profile(engine)
    fit = cal.serving
    if fit is None or fit.engine != engine or gpu_name not in cal.fitted_on:
        return profile
    return profile.model_copy(update={"host_pass_s": fit.host_pass_s, "host_seq_s": fit.host_seq_s})


def prefill_dispatch_s(m: ModelNums, c: Case, profile: EngineProfile) -> float:
    """CPU seconds the engine takes to dispatch one eager prefill forward (``layers × engine kernels per layer ×
    prefill_dispatch_s`` of the profile): a prefill pass waits for what of it the GPU work of the pass and of the
    pass before (behind which it is dispatched) does not cover; 0 where the profile states no dispatch cost of its
    own (the calibration's eager floor applies as for any pass)."""
    if profile.prefill_dispatch_s is None:
        return 0.0
    return float(m.layers * float(kernels.engine_kernels_per_layer(m, c))) * profile.prefill_dispatch_s


def pass_cost_source(engine: str, cal: Calibration, gpu_name: str) -> str:
    """Where :func:`profile_under`'s per-pass costs come from, in words."""
    if profile_under(engine, cal, gpu_name) is engine_profile(engine):
        return f"engine profile {engine} (engines.toml)"
    fit = cal.serving
    return f"fitted by the calibration ({fit.source})" if fit is not None and fit.source else (
        "fitted by the calibration")


def kv_pool(m: ModelNums, c: Case, cal: Calibration, profile: EngineProfile, budget: float) -> float:
    """KV bytes per GPU the engine keeps: its memory share minus weights, the activations of a ``budget``-token
    pass and the runtime overhead (``memory_fraction_of = "total"``), or its share of what those leave
    (``"free"``). The share is the profile's ``memory_fraction`` unless the request set its own
    (``c.engine_memory_fraction``: vLLM's ``--gpu-memory-utilization``, SGLang's ``--mem-fraction-static``,
    TensorRT-LLM's ``free_gpu_memory_fraction``)."""
    items = _memory_items(m, replace(c, seqs_per_replica=1.0, prefill_chunk=max(budget, 1.0)), cal)
    used = items["weights_bytes"] + items["activations_bytes"] + items["overhead_bytes"]
    cap = float(c.capacity_bytes)
    asked = float(c.engine_memory_fraction)
    share = asked if math.isfinite(asked) else profile.memory_fraction
    if profile.memory_fraction_of == "total":
        return max(share * cap - used, 0.0)
    return max(share * (cap - used), 0.0)


def _memory_items(m: ModelNums, c: Case, cal: Calibration) -> dict[str, float]:
    return {k: float(v) for k, v in memory_items("serve", m, c, cal).items()}


def kv_per_seq(m: ModelNums, c: Case, profile: EngineProfile, prompt: float, gen: float) -> float:
    """KV bytes per GPU of one admitted sequence: at prompt + output tokens (``reserve``), at the mean a running
    sequence holds, prompt + half its output (``on-demand``), or that plus the share of its output left that SGLang
    keeps reserved once its ratio has settled (``ratio``: :data:`gpumatch.estimate.replay.RATIO_MIN` of half the
    output, clipped as SGLang clips it), block-rounded."""
    if profile.kv_admission == "reserve":
        tokens = prompt + gen
    elif profile.kv_admission == "ratio":
        tokens = prompt + gen / 2.0 + RATIO_MIN * min(gen / 2.0, CLIP_NEW_TOKENS)
    else:
        tokens = prompt + gen / 2.0
    return float(memory.kv_cache_bytes(m, replace(c, seqs_per_replica=1.0), tokens))


def kv_slots(m: ModelNums, c: Case, profile: EngineProfile, pool: float, prompt: float, gen: float) -> float:
    """Sequences the KV pool holds (:func:`kv_per_seq` each)."""
    per_seq = kv_per_seq(m, c, profile, prompt, gen)
    return pool / per_seq if per_seq > 0 else math.inf
