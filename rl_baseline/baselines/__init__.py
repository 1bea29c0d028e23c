"""The baselines' wing: the paper's baselines and ablations, next to the method and never under it.

* :mod:`.oni` -- ONI (online intrinsic rewards: an LLM labels the messages the agent meets while it
  trains), with ONI's own environments (:mod:`.oni.env`);
* :mod:`.llm_policy` -- the LLM policy (a language model picks every action) and the hierarchical LLM
  policy (a language model picks the next trained skill);
* :mod:`.embedding_reward` -- the embedding-similarity reward;
* :mod:`.task_reward` -- the task's success detector as a sparse reward on top of the score;
* :mod:`.motif_tasks` and :mod:`.motif_eval` -- Motif's root environments' task rewards and their
  evaluation loop;
* :mod:`.flags` -- the flags of the RL baselines and ablations (read by :mod:`rl_baseline.sf.cfg`).

The floors: the method's modules (:mod:`rl_baseline.envs`, :mod:`rl_baseline.models`,
:mod:`rl_baseline.tasks`, :mod:`rl_baseline.skills`, :mod:`rl_baseline.collect`) import nothing from
here; the wing builds on them and on the evaluation loop (:mod:`rl_baseline.evaluation`); and
:mod:`rl_baseline.sf` is where the method and the baselines are put together (it imports down into
both). What a baseline needs from sample-factory stays in ``sf``: the isolated-skills ablation's
per-skill networks (:mod:`rl_baseline.sf.multi_policy`) and the entry point of Motif's evaluation
(:func:`rl_baseline.sf.evaluate.evaluate_root_env`). ``.importlinter`` checks these floors.
"""
