"""The NetHack side of MaestroMotif: phase 0 (collecting observations), phase 4 (training and evaluating
the skills) and the paper's baselines, in floors that import down only (``.importlinter``):

* ``envs`` -- the Monk environment (NetHackScoreMonk-v1: options, overview, seeding);
* ``tasks`` (task detectors, skill measures, the release's evaluation protocol) and ``models`` (the
  release's CDGPT5 encoder and its per-skill-heads variant);
* ``skills`` (the skill runtime, intrinsic reward, meta-policy loader) and ``evaluation`` (the evaluation
  loop, its summaries and files, without sample-factory);
* ``baselines`` -- the baselines' wing: ONI, the LLM policies, the embedding and task rewards, Motif's
  task rewards, the baselines' flags; the method's modules import nothing from it;
* ``sf`` -- sample-factory: where the method and the baselines are put together (flags, training,
  evaluation entry points, checkpoints);
* ``collect`` -- phase 0: rollouts, the explorer, ttyrec import (its checkpoint policy plays a trained
  skill policy through ``sf``);
* ``meta_policies`` -- the policies over skills, written by code generation (phases 2-3).
"""
