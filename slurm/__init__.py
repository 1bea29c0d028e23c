"""The sbatch templates of the pipeline's jobs (edit them for your cluster), and ``python -m
slurm.render``, the entry point that fills them (:mod:`orchestration.slurm`)."""
