"""Orchestration, above every phase: the pipeline presets (:mod:`.pipeline`), slurm job
rendering (:mod:`.slurm`), the results report (:mod:`.report`, :mod:`.paper_results`),
the skill report (:mod:`.skill_report`) and the annotator-agreement study on on-policy
data (:mod:`.reward_agreement`)."""
