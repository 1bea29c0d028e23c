"""Online intrinsic rewards (ONI): an LLM annotates the messages the agent actually sees, while it trains.

How the parts talk, through files under ``{train_dir}/{experiment}/oni/`` (so that a restart of
either side loses nothing and re-queries nothing):

* every environment process appends the distinct messages it meets (with how often it met them)
  to its own spool file (:class:`~rl_baseline.baselines.oni.store.MessageSpool`);
* one annotator process (:mod:`.annotator`, started by training) tails the spools, sends new
  messages in batches to an OpenAI-compatible server through the project's one LLM client, and
  appends the answers to the label store (:class:`~rl_baseline.baselines.oni.store.LabelStore`), fsynced
  as they arrive; for the learned reward types it also trains the reward network on the labels
  and saves it (:mod:`.models`);
* the environments tail the label store and reload the network (:mod:`.rewards`): a message with
  no label yet is worth 0, so training never waits for the server.

Reward types (``--llm_reward_type``): ``online_cls`` (ONI-Retrieval: the label of the exact
message), ``online_cls_reward_model`` (ONI-Classification: a classifier trained online on the
labels), ``online_motif`` (ONI-Ranking: a Bradley-Terry model trained online on LLM preferences
between message pairs), ``cosine-bow`` (ELLM-BoW: bag-of-words cosine similarity between the
message and goals an LLM proposed), ``motif`` (an offline reward model, ``--reward_dir``) and
``none``. With the skill environment each skill gets its own labels, asked with its description.

ONI's root environments (the extended action set and ONI's macros) are :mod:`.env`. ONI is a baseline:
it lives in the baselines' wing (:mod:`rl_baseline.baselines`), and the method's modules never import it.
"""
