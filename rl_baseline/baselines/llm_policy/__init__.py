"""The paper's LLM baselines: a language model acting in NetHack, or choosing MaestroMotif's skills.

* **LLM policy** (:mod:`.agent`, :mod:`.run`; ``python -m scripts.llm_policy``): the model picks
  every primitive action from the observation as text (:mod:`.render`), zero-shot with the task's
  goal or with all of MaestroMotif's prior knowledge ("equivalent prompting", :mod:`.prompts`).
* **Hierarchical LLM policy** (:mod:`.meta`; ``scripts.main --evaluation True --meta_policy llm``):
  the trained skill policy acts, and the model chooses the next skill at every skill termination
  instead of the generated policy over skills.

Both talk to the model through the project's one client (:mod:`common.llm`) wrapped by
:mod:`.client` (a disk cache of replies, token counts, transcripts), parse replies with a counted
fallback (:mod:`.parse`) and report what they cost (:mod:`.cost`). :mod:`.stand_in` is a
rule-based stand-in for the model (the ``stand_in`` backend) for CPU runs: not a language model.
"""
