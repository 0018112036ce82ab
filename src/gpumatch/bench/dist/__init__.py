"""Multi-process benchmarks through torch.distributed (issue 17): a :class:`~gpumatch.bench.dist.spec.DistSpec`,
the launcher (:mod:`gpumatch.bench.dist.launch`; torchrun's command line in :mod:`gpumatch.bench.dist.torchrun`,
another launcher such as Slurm's ``srun`` goes beside it) and the per-rank worker (:mod:`gpumatch.bench.dist.worker`,
the only module here that imports torch at its top; it runs in torchrun's children)."""
