"""Phase 0: observation datasets, from rollouts of behaviour policies or from recorded games.

* :mod:`.config`: what is collected and how (:class:`~rl_baseline.collect.config.CollectConfig`),
  the flags the dataset builders share;
* :mod:`.rollouts`: workers that play ``NetHackScoreMonk-v1`` and keep a random subset of the
  steps as samples (:func:`~rl_baseline.collect.rollouts.collect_dataset`), the output file;
* :mod:`.policies`, :mod:`.explorer`, :mod:`.checkpoint_policy`: the behaviour policies
  (uniformly random, a scripted explorer, a trained skill policy);
* :mod:`.pathing`: the explorer's map reading and path finding;
* :mod:`.ttyrecs`: samples from recorded games (ttyrec files, through ``nle.dataset``).

Datasets are written in the format of :mod:`rlaif.dataset`, which annotation reads.
"""
