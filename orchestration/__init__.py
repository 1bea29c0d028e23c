"""Orchestration, above every phase: the pipeline presets (:mod:`.pipeline`), slurm job
rendering (:mod:`.slurm`), the results report (:mod:`.report`, :mod:`.paper_results`),
the skill report (:mod:`.skill_report`), the reward-timing trace (:mod:`.reward_trace`: phase 0's
explorer played through sf's skill environment, so it sits above both) and the annotator-agreement
study on on-policy data (:mod:`.reward_agreement`)."""
