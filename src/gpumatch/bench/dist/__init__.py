"""Multi-process benchmarks through torch.distributed (issue 17): a :class:`~gpumatch.bench.dist.spec.DistSpec`,
the torchrun launcher (:mod:`gpumatch.bench.dist.launch`) and the per-rank worker (:mod:`gpumatch.bench.dist.worker`,
the only module here that imports torch at its top; it runs in torchrun's children)."""
