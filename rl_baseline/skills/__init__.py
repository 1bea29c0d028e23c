"""The skills at run time: the runtime of the policy over skills, its rewards and the loader of
generated policies. The choices of how skills are paid live here, pure Python, so that the flags
(:mod:`rl_baseline.sf.cfg`) name them without importing the runtime."""

#: which observation a step's skill reward scores (``--skill_reward_timing``):
#: ``release``, the authors' learner: the observation the action was chosen on (with the message the
#: previous action produced), by the model of the skill that observation carries; so at a switch the
#: arrival message is scored by the new skill's model. ``after_action``: the observation the action led
#: to, by the model of the skill that acted (this project's earlier rule).
REWARD_TIMINGS: tuple[str, ...] = ("release", "after_action")
#: what pays the skills (``--skill_reward``): ``llm``, the method (each skill's reward model); ``progress``,
#: a privileged diagnostic: each skill's own progress measure (:data:`PROGRESS_MEASURE`), an upper bound on
#: what the reward models could teach at the same budget, not the method
SKILL_REWARDS: tuple[str, ...] = ("llm", "progress")
#: the release's ``--msg_max_keys``: message counts of the count-based division are kept for the 20 most
#: recently seen messages; the one default of the flag, of ``SkillEnvConfig`` and of the reward classes
MSG_MAX_KEYS: int = 20
