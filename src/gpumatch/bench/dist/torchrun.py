"""The torchrun command line of a distributed benchmark (https://pytorch.org/docs/stable/elastic/run.html).

:func:`gpumatch.bench.dist.launch.launch` runs it with the environment, device and rank files it prepares; a
launcher of another kind (Slurm's ``srun``, one task per node) is a module like this one beside it.
"""

from __future__ import annotations

import sys

from gpumatch.bench.dist.launch import WORKER_MODULE
from gpumatch.errors import InputError


def torchrun_command(nprocs: int, nnodes: int, rdzv_endpoint: str | None, args: list[str],
                     module: str = WORKER_MODULE, rdzv_id: str = "gpumatch") -> list[str]:
    """The torchrun command line: ``--standalone`` on one node without an endpoint, else the c10d rendezvous."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nprocs),
           "--nnodes", str(nnodes), "--max-restarts", "0"]
    if rdzv_endpoint is None:
        if nnodes != 1:
            raise InputError(f"{nnodes} nodes need a rendezvous endpoint", "give rdzv_endpoint host:port")
        cmd.append("--standalone")
    else:
        cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint, "--rdzv-id", rdzv_id]
    return [*cmd, "--module", module, *args]
