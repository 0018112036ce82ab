"""What one distributed benchmark runs: :class:`DistSpec`, plain values, JSON round trip, validated.

No torch here (the launcher's parent process reads it). Units: bytes, sequences, tokens, counts; times are
never part of a spec. ``sizes_bytes`` follow nccl-tests' "size" (bytes of the whole buffer ``S`` its bandwidth
formulas use, https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): all-reduce the buffer,
all-gather the gathered output, reduce-scatter the input before scattering, all-to-all each rank's send buffer,
sendrecv the bytes each rank sends.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpumatch.bench.dtypes import STORAGE_PRECISIONS
from gpumatch.bench.shapes import PRESETS, LlamaShape
from gpumatch.errors import InputError

WORKLOADS = ("collectives", "ddp", "fsdp", "tp-decode")
"""Workloads the worker runs (:mod:`gpumatch.bench.dist.worker`)."""

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv")
"""Collectives the microbenchmark knows, named as nccl-tests' ``*_perf`` binaries are."""

DTYPES = STORAGE_PRECISIONS

DEFAULT_SIZES_BYTES: tuple[int, ...] = tuple(1 << k for k in range(10, 27, 2))
"""The sweep when ``sizes_bytes`` is empty: 1 KiB to 64 MiB by factors of 4 (nccl-tests ``-b 1K -e 64M -f 4``)."""

MAX_SIZE_BYTES = 1 << 34
"""16 GiB: larger buffers than any GPU here holds twice are refused as input errors."""


def _shape_error(model: dict[str, Any]) -> str | None:
    try:
        s = LlamaShape.from_dict(model)
    except (ValueError, TypeError) as exc:
        return str(exc)
    if min(s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim, s.ffn, s.vocab) < 1:
        return "every dimension must be >= 1"
    if s.heads % s.kv_heads:
        return f"heads ({s.heads}) must be a multiple of kv_heads ({s.kv_heads})"
    return None


@dataclass(frozen=True)
class DistSpec:
    """One distributed benchmark (interface of issue 17, helpers/i17-interface.md).

    ``model`` is a bench shape dict (:class:`gpumatch.bench.shapes.LlamaShape` names: layers, hidden, heads,
    kv_heads, ffn, vocab, optionally head_dim, tied, name); :meth:`from_json` also takes a preset name of
    :data:`gpumatch.bench.shapes.PRESETS`. ``batch_per_rank``: sequences per rank per step (weak scaling), the
    decode batch for ``tp-decode``; ``seq_len``: training sequence or decode context (tokens). ``steps`` timed
    after ``warmup_steps`` discarded; ``iters`` timed iterations per collective size (after ``warmup_steps``).
    """

    workload: str
    model: dict[str, Any] = field(default_factory=dict)
    batch_per_rank: int = 1
    seq_len: int = 128
    steps: int = 10
    warmup_steps: int = 3
    sizes_bytes: tuple[int, ...] = ()
    ops: tuple[str, ...] = OPS
    dtype: str = "bf16"
    iters: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`~gpumatch.errors.InputError` naming the first bad field."""
        if self.workload not in WORKLOADS:
            raise InputError(f"unknown distributed workload {self.workload!r}", f"one of {', '.join(WORKLOADS)}")
        for name in ("batch_per_rank", "seq_len", "steps", "iters"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be >= 1, not {getattr(self, name)}", "give a positive count")
        if self.warmup_steps < 0:
            raise InputError(f"warmup_steps must be >= 0, not {self.warmup_steps}", "give 0 or more")
        if self.dtype not in DTYPES:
            raise InputError(f"unknown dtype {self.dtype!r}", f"one of {', '.join(DTYPES)}")
        bad_ops = [o for o in self.ops if o not in OPS]
        if bad_ops or not self.ops:
            raise InputError(f"unknown collective(s) {', '.join(bad_ops) or '(none given)'}", f"of {', '.join(OPS)}")
        bad_sizes = [s for s in self.sizes_bytes if not 1 <= s <= MAX_SIZE_BYTES]
        if bad_sizes:
            raise InputError(f"message size {bad_sizes[0]} B out of range", f"1 B to {MAX_SIZE_BYTES} B")
        if self.workload != "collectives":
            if not self.model:
                raise InputError(f"workload {self.workload} needs a model shape", "give model= a shape or a preset")
            err = _shape_error(self.model)
            if err:
                raise InputError(f"bad model shape: {err}", "layers, hidden, heads, kv_heads, ffn, vocab")

    def check_world(self, world: int) -> None:
        """Raise InputError when this spec cannot run on ``world`` ranks (tp-decode: heads, kv_heads and ffn must
        divide by the tensor-parallel size, Megatron-style sharding in :mod:`gpumatch.bench.dist.tp`)."""
        if world < 1:
            raise InputError(f"world size must be >= 1, not {world}", "give the number of ranks")
        if self.workload != "tp-decode":
            return
        s = self.shape()
        bad = [f"{k} {v}" for k, v in (("heads", s.heads), ("kv_heads", s.kv_heads), ("ffn", s.ffn)) if v % world]
        if bad:
            raise InputError(f"tensor parallel over {world} ranks: {', '.join(bad)} not divisible by {world}",
                             "pick a rank count that divides the KV heads")

    def sizes(self) -> tuple[int, ...]:
        """The message sizes to sweep (bytes): ``sizes_bytes`` or :data:`DEFAULT_SIZES_BYTES`."""
        return self.sizes_bytes or DEFAULT_SIZES_BYTES

    def shape(self) -> LlamaShape:
        """The model as a :class:`~gpumatch.bench.shapes.LlamaShape`."""
        return LlamaShape.from_dict(self.model)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples as lists); :meth:`from_json` reads it back to an equal spec."""
        d = asdict(self)
        d["sizes_bytes"] = list(self.sizes_bytes)
        d["ops"] = list(self.ops)
        d["model"] = dict(self.model)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DistSpec:
        """Build from :meth:`to_json`'s dict; unknown keys and wrong types are input errors."""
        if not isinstance(d, dict):
            raise InputError("a distributed spec must be a JSON object", "see DistSpec.to_json")
        known = set(cls.__dataclass_fields__)
        extra = sorted(set(d) - known)
        if extra:
            raise InputError(f"unknown spec field(s) {', '.join(extra)}", f"fields: {', '.join(sorted(known))}")
        if "workload" not in d:
            raise InputError("spec lacks workload", f"one of {', '.join(WORKLOADS)}")
        v = dict(d)
        model = v.get("model", {})
        if isinstance(model, str):
            if model not in PRESETS:
                raise InputError(f"unknown model preset {model!r}", f"one of {', '.join(sorted(PRESETS))}")
            model = dict(PRESETS[model])
        if not isinstance(model, dict):
            raise InputError("model must be a shape object or a preset name", "e.g. {\"layers\": 2, ...}")
        v["model"] = model
        try:
            for name in ("batch_per_rank", "seq_len", "steps", "warmup_steps", "iters", "seed"):
                if name in v:
                    v[name] = _int(name, v[name])
            v["sizes_bytes"] = tuple(_int("sizes_bytes", s) for s in v.get("sizes_bytes", ()))
            v["ops"] = tuple(str(o) for o in v.get("ops", OPS))
        except TypeError as exc:
            raise InputError(f"bad spec field: {exc}", "sizes_bytes and ops are lists") from exc
        return cls(**v)


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be an integer, not {value!r}", "give a whole number")
    return value
