"""On-policy agreement of a skill's reward model with its annotator.

A skill's reward model is distilled from an annotator's preferences over an *offline*
dataset (:mod:`rl_baseline.collect`: scripted/random play). Its validation accuracy says how
well it matches the annotator there. The trained policy, however, visits its own states:
this package asks whether the reward model still agrees with the annotator on the data the
policy actually sees.

Steps (:func:`run_agreement`):

1. load the trained experiment ``{train_dir}/{experiment}`` (:mod:`rl_baseline.sf.policy`)
   and play ``episodes`` episodes in this process, in one of two collection modes:

   * ``skill``: the policy is held on the skill for the whole episode (the forced-skill
     evaluation's environment, ``--eval_skill``; the ascender starts on level 3);
   * ``exploration``: the training meta-policy composes the skills, as during training;
     only the steps where the skill was active are kept (all steps, said so in the
     results, when the skill was never active);

2. record every step as the annotators see it (one sample of :mod:`rlaif.dataset`: the
   message before and after the step, the stats before and after) plus the depth change
   the runtime fed the reward model (depth now minus depth when the skill started);
3. form ``num_pairs`` random pairs of distinct steps (seeded), laid out as the offline
   datasets are: a shuffled array of samples whose samples ``2k`` and ``2k+1`` are pair ``k``
   (``pair_sampling collector`` draws steps with the offline collector's keep
   probabilities instead of uniformly, so the mix of steps resembles the offline data's);
4. label the pairs with an annotator backend through the annotation pipeline itself
   (:func:`rlaif.annotate.annotate_chunk`: captions, prompt, parsing, retry); the
   ``heuristic`` backend is a rule-based stand-in for the LLM, and the results say so;
5. score both samples of each pair with the skill's reward model. Agreement is the share
   of pairs the annotator decided (first or second better) where the reward model gives
   the preferred sample the higher score: the rule of the reward training's validation
   accuracy (:func:`rlaif.train_reward.pair_accuracy_counts`; equal scores count as
   "first"). The headline scores a sample as training does (its current message and the
   one-step depth change); ``agreement_rl_input`` scores it with the depth change the
   runtime used during the episode;
6. the same on the reward model's offline validation split: the dataset and preference
   file, seed and validation fraction saved in its checkpoint give the split
   (:func:`rlaif.train_reward.split_pairs`); when those files cannot be read, the
   ``val_acc`` of the last row of ``{reward_dir}/reward_metrics/metrics.csv`` stands in, and
   the results say which was used. Optionally (``relabel_offline``) up to ``num_pairs``
   validation pairs are labelled again with the same backend, so that on-policy and offline
   are compared under one annotator.

Outputs, under ``{policy_dir}/reward_agreement/`` (``out_dir``)::

    {skill}_{backend}.json        everything above (see :func:`summary_dict`)
    {skill}_{backend}.md          the table printed at the end
    {skill}_{backend}_data/       the labelled on-policy pairs ({skill}.npz, preference/,
                                  annotation_logs/), to inspect or re-annotate

Bad input (unknown skill, no experiment or checkpoint, a skill the policy was not trained
with, no reward model, nothing collected) raises :class:`AgreementError` before anything is
written.

The package, one responsibility a module (all the names below are importable from the package):
:mod:`.config` (the flags, :class:`AgreementError`), :mod:`.experiment` (the trained experiment
and the reward model), :mod:`.rollouts` (playing and recording the steps), :mod:`.pairs`,
:mod:`.scoring` (scores and the agreement rule), :mod:`.offline` (the validation split or its
fallback), :mod:`.annotation` (labelling the pairs) and :mod:`.run` (the run and its outputs).
"""
from __future__ import annotations

from .annotation import annotate, backend_info
from .config import (
    COLLECT_MODES,
    LLM_BACKENDS,
    OUT_DIRNAME,
    PAIR_SAMPLINGS,
    AgreementConfig,
    AgreementError,
    AnnotatorSettings,
    check_config,
)
from .experiment import Experiment, check_trained_skill, load_experiment, load_reward, saved_num_skills, saved_setting
from .offline import REPO_ROOT, OfflineSplit, metrics_val_acc, offline_section, offline_split
from .pairs import form_pairs, sample_weights
from .rollouts import Rollouts, collect_rollouts, select_skill_steps
from .run import CollectedData, collect, markdown_table, on_policy_section, run_agreement, summary_dict
from .scoring import SCORE_BATCH, AgreementStats, agreement_stats, one_step_depth_change, pair_scores, score_samples

__all__ = [
    "AgreementConfig",
    "AgreementError",
    "AgreementStats",
    "AnnotatorSettings",
    "COLLECT_MODES",
    "CollectedData",
    "Experiment",
    "LLM_BACKENDS",
    "OUT_DIRNAME",
    "OfflineSplit",
    "PAIR_SAMPLINGS",
    "REPO_ROOT",
    "Rollouts",
    "SCORE_BATCH",
    "agreement_stats",
    "annotate",
    "backend_info",
    "check_config",
    "check_trained_skill",
    "collect",
    "collect_rollouts",
    "form_pairs",
    "load_experiment",
    "load_reward",
    "markdown_table",
    "metrics_val_acc",
    "offline_section",
    "offline_split",
    "on_policy_section",
    "one_step_depth_change",
    "pair_scores",
    "run_agreement",
    "sample_weights",
    "saved_num_skills",
    "saved_setting",
    "score_samples",
    "select_skill_steps",
    "summary_dict",
]
