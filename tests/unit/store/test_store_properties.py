"""Properties: manifest hashes ignore key order and nothing else; samples survive a round trip."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumatch.store import SAMPLE_FIELDS, Store, manifest_sha256, open_store
from gpumatch.telemetry.types import INT_FIELDS as INTEGER_SAMPLE_FIELDS

_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=8)
_json = st.recursive(_leaf, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids,
                                                                                      max_size=3), max_leaves=8)
_manifest = st.dictionaries(st.text(max_size=8), _json, max_size=6)


def _shuffled(v: Any, rng: random.Random) -> Any:
    if isinstance(v, dict):
        items = list(v.items())
        rng.shuffle(items)
        return {k: _shuffled(x, rng) for k, x in items}
    if isinstance(v, list):
        return [_shuffled(x, rng) for x in v]
    return v


@settings(max_examples=25, deadline=None)
@given(_manifest, st.integers(0, 2**32))
def test_hash_ignores_key_order(m: dict[str, Any], seed: int) -> None:
    assert manifest_sha256(_shuffled(m, random.Random(seed))) == manifest_sha256(m)


@settings(max_examples=25, deadline=None)
@given(_manifest, st.text(min_size=1, max_size=8))
def test_hash_sees_every_change(m: dict[str, Any], key: str) -> None:
    changed = dict(m)
    changed[key] = ["changed", m.get(key)]
    assert manifest_sha256(changed) != manifest_sha256(m)


_value = st.none() | st.floats(allow_nan=True, allow_infinity=True, width=64)
_int = st.none() | st.integers(0, 2**63 - 1)
_sample = st.fixed_dictionaries(
    {"t_s": st.floats(0, 1e6)},
    optional={k: (_int if k in INTEGER_SAMPLE_FIELDS else _value) for k in SAMPLE_FIELDS if k != "t_s"},
)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with open_store(tmp_path_factory.mktemp("prop") / "s.sqlite") as s:
        yield s


@settings(max_examples=25, deadline=None)
@given(samples=st.lists(_sample, min_size=1, max_size=20))
def test_samples_round_trip(shared_store: Store, samples: list[dict[str, Any]]) -> None:
    run_id = shared_store.begin_run("monitor", "prop", {}, {})
    shared_store.add_samples(run_id, samples)
    got = shared_store.samples(run_id)
    assert len(got) == len(samples)
    for want, have in zip(samples, got, strict=True):
        for k in SAMPLE_FIELDS:
            v = want.get(k)
            expect = None if isinstance(v, float) and not math.isfinite(v) else v
            if k == "gpu_index" and v is None:
                expect = 0  # documented default
            assert have[k] == expect, k
