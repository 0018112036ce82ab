"""The torchrun entry of a distributed benchmark: ``python -m torch.distributed.run ... --module
gpumatch.bench.dist.worker SPEC_JSON OUT_DIR DEVICE BACKEND`` (:func:`gpumatch.bench.dist.launch.launch` builds
that line).

Each rank reads RANK, WORLD_SIZE and LOCAL_RANK from torchrun's environment, takes GPU LOCAL_RANK on CUDA
(``torch.cuda.set_device``), joins the process group (nccl or gloo), runs the spec's workload, writes
``OUT_DIR/rank-{RANK}.json`` (written to a temporary name, then renamed) and leaves the group. The JSON's
fields are those of helpers/i17-interface.md: SI units (seconds, bytes, bytes/s, tokens/s), every raw timing.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gpumatch.bench.dist.common import Rank
from gpumatch.bench.dist.spec import DistSpec


def rank_from_env(device: str, backend: str) -> Rank:
    """This process's :class:`Rank` from torchrun's variables; on CUDA sets the current device."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    return Rank(rank=rank, world=world, local_rank=local, device=dev, backend=backend)


def _device_info(rank: Rank) -> dict[str, Any]:
    if not rank.cuda:
        return {"device_name": "cpu", "device_uuid": None}
    props = torch.cuda.get_device_properties(rank.device)
    uuid = getattr(props, "uuid", None)
    return {"device_name": props.name, "device_uuid": None if uuid is None else f"GPU-{uuid}"}


def _nccl_version(rank: Rank) -> str | None:
    if rank.backend != "nccl":
        return None
    v = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def run_workload(rank: Rank, spec: DistSpec) -> dict[str, Any]:
    """The workload's part of the rank JSON: ``{"collectives": [...]}`` or ``{"steps": {...}}``."""
    if spec.workload == "collectives":
        from gpumatch.bench.dist.collectives import run_collectives

        return {"collectives": run_collectives(rank, spec)}
    if spec.workload in ("ddp", "fsdp"):
        from gpumatch.bench.dist.training import run_training

        return {"steps": run_training(rank, spec)}
    from gpumatch.bench.dist.tp import run_tp_decode

    return {"steps": run_tp_decode(rank, spec)}


def rank_record(rank: Rank, spec: DistSpec, result: dict[str, Any]) -> dict[str, Any]:
    """The whole ``rank-{r}.json`` object."""
    return {"rank": rank.rank, "world_size": rank.world, "local_rank": rank.local_rank,
            "hostname": socket.gethostname(), "backend": rank.backend, "device": rank.device.type,
            **_device_info(rank), "torch": torch.__version__, "nccl": _nccl_version(rank),
            "workload": spec.workload, "spec": spec.to_json(), **result}


def write_record(out_dir: Path, record: dict[str, Any]) -> Path:
    path = out_dir / f"rank-{record['rank']}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return path


def main(argv: list[str]) -> int:
    """Run one rank (module docstring); returns the exit status."""
    if len(argv) != 4:
        print("usage: worker SPEC_JSON OUT_DIR DEVICE BACKEND (started by torchrun)", file=sys.stderr)
        return 2
    spec = DistSpec.from_json(json.loads(Path(argv[0]).read_text()))
    out_dir, device, backend = Path(argv[1]), argv[2], argv[3]
    rank = rank_from_env(device, backend)
    torch.manual_seed(spec.seed)
    dist.init_process_group(backend=backend)
    try:
        record = rank_record(rank, spec, run_workload(rank, spec))
        write_record(out_dir, record)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    status = main(sys.argv[1:])
    # The record is written and the process group destroyed. Leave without the interpreter's finalization: gloo's
    # worker threads can still hold work objects (DDP's) whose tensors need the GIL while the interpreter is torn
    # down, and the rank then aborts with "terminate called without an active exception" after it finished (seen
    # in CI on a loaded 2-core machine; the mechanism: pytorch/pytorch PR 179291). Nothing is left to clean up.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
