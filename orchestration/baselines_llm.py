"""The paper's LLM baselines as pipeline phases (``scripts.pipeline --baselines ...``).

* ``llm_policy``: a language model picks every primitive action from the observation as text,
  zero-shot with the task's goal (``python -m scripts.llm_policy``);
* ``llm_policy_equivalent``: the same with all of MaestroMotif's prior knowledge in the prompt;
* ``hierarchical_llm``: MaestroMotif's trained skill policy, with the language model choosing the
  next skill at each skill termination instead of the generated code
  (``python -m scripts.main --evaluation True --meta_policy llm``).

Results go to ``{out_dir}/baselines/{name}/eval/{task}_seed{N}.json`` (the JSON of MaestroMotif's
evaluation, plus ``method``, ``label``, ``llm`` and ``cost``) and ``{out_dir}/baselines/{name}/cost.json``.

Paper plan (``--preset paper``): one slurm array job per baseline, a task per evaluation target;
each array task serves the model on its node with ``vllm serve`` (:data:`PAPER_SERVER`) and asks it
through the OpenAI-compatible API (``slurm/baseline_llm.sbatch``). Small presets (smoke, learn,
ci): one phase per target on CPU with the ``stand_in`` backend, a RULE-BASED STAND-IN for the model
(no language model), each phase and result labelled so; the step cap is the preset's episode limit,
the same as MaestroMotif's evaluation.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.llm import CODER_MODEL, CODER_MODEL_FP8
from orchestration.baseline_registry import BASELINES_DIR, register
from orchestration.phases import Phase, PipelineConfig, skill_training_args

STAND_IN_NOTE = ("stand_in backend: a RULE-BASED STAND-IN for the language model (no LLM is called); the numbers "
                 "are not an LLM's")


@dataclass(frozen=True)
class ServerSpec:
    """The model the paper plan serves for the LLM baselines, and how."""

    model: str = CODER_MODEL  # the name clients ask for (--served-model-name)
    # Meta's FP8 release of the same model (common.llm.CODER_MODEL_FP8): fits one node of 8 x 80 GB GPUs
    weights: str = CODER_MODEL_FP8
    gpus: int = 8
    port: int = 8000

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def slurm(self) -> dict[str, str]:
        return {"template": "baseline_llm.sbatch", "gpus": str(self.gpus), "model": self.model,
                "weights": self.weights, "port": str(self.port)}


PAPER_SERVER = ServerSpec()
#: the LLM policy at paper scale: episodes per task, games in flight (one batch of questions), step cap
PAPER_LLM_POLICY_EPISODES = 20
PAPER_LLM_POLICY_ENVS = 20
PAPER_LLM_POLICY_STEP_CAP = 5_000
EVAL_TARGET_OF_ARRAY = "${EVAL_TARGETS[$SLURM_ARRAY_TASK_ID]}"


def method_dir(cfg: PipelineConfig, name: str) -> Path:
    return cfg.out / BASELINES_DIR / name


def _llm_policy_phases(cfg: PipelineConfig, name: str, prompt: str) -> list[Phase]:
    out = method_dir(cfg, name)
    common = ["--prompt", prompt, "--method", name, "--seed", str(cfg.seed), "--out_dir", str(out),
              "--cache_dir", str(out / "llm_cache"), "--no_progress"]
    if cfg.preset == "paper":
        s = PAPER_SERVER
        targets = tuple(cfg.eval_targets)
        return [Phase(
            f"{BASELINES_DIR}/{name}/eval", "baseline_llm", "scripts.llm_policy",
            ["--eval_target", EVAL_TARGET_OF_ARRAY, "--backend", "openai", "--base_url", s.base_url,
             "--model", s.model, "--server_gpus", str(s.gpus), "--eval_protocol", "project",
             "--eval_episodes", str(PAPER_LLM_POLICY_EPISODES), "--eval_num_envs", str(PAPER_LLM_POLICY_ENVS),
             "--max_episode_steps", str(PAPER_LLM_POLICY_STEP_CAP), *common],
            array=f"0-{len(targets) - 1}", array_values=targets, slurm=s.slurm(),
            note=f"{name}: one array task per evaluation target, {s.model} served by vllm on the task's node "
                 f"({s.gpus} GPUs); {PAPER_LLM_POLICY_EPISODES} episodes of at most {PAPER_LLM_POLICY_STEP_CAP} "
                 "steps per task",
        )]
    return [Phase(
        f"{BASELINES_DIR}/{name}/eval/{task}", "baseline_llm", "scripts.llm_policy",
        ["--eval_target", task, "--backend", "stand_in", "--eval_protocol", "project",
         "--eval_episodes", str(cfg.eval_episodes), "--eval_num_envs", str(cfg.eval_num_envs),
         "--max_episode_steps", str(cfg.max_episode_steps), *common],
        outputs=[str(out / "eval" / f"{task}_seed{cfg.seed}.json"), str(out / "cost.json")],
        note=f"{name}: {STAND_IN_NOTE}",
    ) for task in cfg.eval_targets]


@register("llm_policy", "LLM policy: a language model picks every action from the observation as text, zero-shot")
def llm_policy(cfg: PipelineConfig) -> list[Phase]:
    return _llm_policy_phases(cfg, "llm_policy", "zero_shot")


@register("llm_policy_equivalent",
          "LLM policy (equivalent prompting): the same with MaestroMotif's prior knowledge in the prompt")
def llm_policy_equivalent(cfg: PipelineConfig) -> list[Phase]:
    return _llm_policy_phases(cfg, "llm_policy_equivalent", "equivalent")


@register("hierarchical_llm",
          "Hierarchical LLM policy: MaestroMotif's trained skills, a language model choosing the next skill")
def hierarchical_llm(cfg: PipelineConfig) -> list[Phase]:
    name = "hierarchical_llm"
    out = method_dir(cfg, name)
    train_args = skill_training_args(cfg)  # the skill policy the pipeline trains, as its own evaluation reads it
    common = ["--evaluation", "True", "--meta_policy", "llm", "--meta_llm_method", name,
              "--eval_dir", str(out / "eval"), "--meta_llm_cache_dir", str(out / "llm_cache")]
    if cfg.preset == "paper":
        s = PAPER_SERVER
        targets = tuple(cfg.eval_targets)
        # the skill functions come from the tasks' modules, which code generation writes
        after = ("train/skills",) + tuple(f"generate/{t}" for t in (cfg.code_tasks or ()) if t in targets)
        return [Phase(
            f"{BASELINES_DIR}/{name}/eval", "baseline_llm", "scripts.main",
            train_args + ["--eval_target", EVAL_TARGET_OF_ARRAY, *common, "--meta_llm_backend", "openai",
                          "--meta_llm_base_url", s.base_url, "--meta_llm_model", s.model,
                          "--meta_llm_server_gpus", str(s.gpus)],
            array=f"0-{len(targets) - 1}", array_values=targets, slurm=s.slurm(), after=after,
            note=f"{name}: one array task per evaluation target, the release's evaluation protocol with {s.model} "
                 f"served by vllm on the task's node choosing each next skill",
        )]
    exp = Path(cfg.policy_train_dir) / cfg.experiment
    return [Phase(
        f"{BASELINES_DIR}/{name}/eval/{task}", "baseline_llm", "scripts.main",
        train_args + ["--eval_target", task, "--eval_protocol", "project", "--eval_episodes", str(cfg.eval_episodes),
                      "--eval_num_envs", str(cfg.eval_num_envs), *common, "--meta_llm_backend", "stand_in"],
        outputs=[str(out / "eval" / f"{task}_seed{cfg.code_seed}.json"), str(out / "cost.json")],
        after=("train/skills",),
        note=f"{name}: the skill policy of {exp}; {STAND_IN_NOTE}",
    ) for task in cfg.eval_targets]
