"""Renders the sbatch templates of ``slurm/`` into one job file per pipeline phase.

The commands come from the pipeline plan (:func:`orchestration.pipeline.build_plan`), so
the jobs run exactly what ``python -m scripts.pipeline --preset paper`` prints. Templates
hold ``{{name}}`` slots; a slot without a value (or a value without a slot) is an error.

Files written by :func:`write_slurm`:

* ``collect_{skill}.sbatch``            phase 0 (optional at paper scale: the released datasets)
* ``annotate_{skill}.sbatch``           phase 1a, array over chunks, offline vLLM over the node's GPUs
* ``annotate_server_{skill}.sbatch``    phase 1a alternative: heterogeneous job, ``vllm serve`` + clients
* ``merge_{skill}.sbatch``              after the array: merge the chunk files
* ``reward_{skill}.sbatch``             phase 1b
* ``generate_{task}.sbatch``            phases 2-3 (generate + combine) for each task
* ``train_skills.sbatch``               phase 4, requeued on preemption / near the time limit
* ``evaluate.sbatch``                   array over the evaluation targets
* ``baseline_{name}_{step}.sbatch``     a phase of an RL baseline or ablation (``--baselines``): from
  ``baseline_job.sbatch`` (``baseline_train.sbatch``, requeued, for training), each appending its wall
  time to the phase's marker for the baseline's ``cost.json``
* ``{name}_{item}.sbatch``              a phase with its own template (``Phase.slurm["template"]``, its
  other entries filling the template's extra slots: the LLM baselines, a model server per job), or of
  no stage of ours (``job.sbatch``, one command on one node)
* ``report.sbatch`` and ``submit_all.sh`` (submits everything with the right dependencies; a
  baseline's job waits for the phases in its ``Phase.after``, the report for every baseline job)

Example: ``python -m slurm.render --out slurm_jobs`` (the same as
``python -m scripts.pipeline --preset paper --write_slurm slurm_jobs``).
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from common.skill_files import add_skills_flag
from orchestration.baseline_registry import baseline_gpus
from orchestration.phases import Phase, PipelineConfig, flag_value, shell_quote
from orchestration.pipeline import build_plan, make_config

logger = logging.getLogger(__name__)

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "slurm"  # the templates users edit
SLOT = re.compile(r"\{\{(\w+)\}\}")

STAGE_TEMPLATE = {
    "collect": "collect.sbatch",
    "annotate": "annotate_array.sbatch",
    "merge": "annotate_merge.sbatch",
    "reward": "train_reward.sbatch",
    "generate": "generate_code.sbatch",
    "train": "train_skills.sbatch",
    "eval": "evaluate.sbatch",
    "report": "report.sbatch",
}


class SlurmError(ValueError):
    """A template slot without a value, or a value without a slot."""


@dataclass
class SlurmSettings:
    """Cluster-specific parts of the job files."""

    workdir: str = field(default_factory=os.getcwd)  # the repository checkout on the cluster
    setup: str = "source venv/bin/activate"  # environment of the main stack
    vllm_setup: str = "source venv-vllm/bin/activate"  # environment with vLLM (requirements-vllm.txt)
    log_dir: str = "slurm_logs"  # relative to workdir (submit_all.sh creates it)
    sbatch_extra: tuple[str, ...] = ()  # e.g. ("--partition=gpu", "--account=myproject")
    port: int = 8000
    times: dict[str, str] = field(default_factory=lambda: {
        "collect": "24:00:00", "annotate": "48:00:00", "reward": "12:00:00", "generate": "06:00:00",
        "train": "48:00:00", "eval": "24:00:00", "baseline_llm": "48:00:00", "cost": "00:30:00",
    })
    cpus: dict[str, int] = field(default_factory=lambda: {
        "collect": 16, "annotate": 16, "reward": 40, "train": 32, "eval": 16, "baseline_llm": 16, "cost": 1,
    })


def fill_template(text: str, values: dict[str, str], name: str = "template") -> str:
    """Replaces every ``{{slot}}``; raises :class:`SlurmError` for missing or unused values."""
    slots = set(SLOT.findall(text))
    missing = sorted(slots - set(values))
    unused = sorted(set(values) - slots)
    if missing:
        raise SlurmError(f"{name}: no value for slot(s) {', '.join(missing)}")
    if unused:
        raise SlurmError(f"{name}: value(s) for slot(s) it does not have: {', '.join(unused)}")
    return SLOT.sub(lambda m: values[m.group(1)], text)


def render_template(template: str, values: dict[str, str]) -> str:
    path = TEMPLATE_DIR / template
    if not path.is_file():
        raise SlurmError(f"no template {path}")
    return fill_template(path.read_text(), values, template)


def format_command(argv: Sequence[str], indent: str = "") -> str:
    """A command over several lines (``\\`` continuations), one flag and its value per line."""
    words = [shell_quote(a) for a in argv]
    head = words[:3]  # python -m scripts.X
    lines = [" ".join(head)]
    rest = words[3:]
    i = 0
    while i < len(rest):
        if rest[i].startswith("--") and i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            lines.append(rest[i] + " " + rest[i + 1])
            i += 2
        else:
            lines.append(rest[i])
            i += 1
    return (" \\\n" + indent + "    ").join(lines)


def server_variant(phase: Phase, port: int) -> Phase:
    """The annotation phase as a client of ``vllm serve`` on ``$SERVER_HOST`` (chunk = ``$SLURM_PROCID``)."""
    args = list(phase.args)
    out: list[str] = []
    i = 0
    while i < len(args):
        key = args[i]
        if key in ("--backend", "--num_gpus"):
            i += 2
            continue
        if key == "--chunk_number":
            out += [key, "$SLURM_PROCID"]
            i += 2
            continue
        out.append(key)
        i += 1
    out = ["--backend", "openai", "--base_url", f"http://$SERVER_HOST:{port}/v1", "--concurrency", "64"] + out
    return Phase(phase.name.replace("annotate/", "annotate_server/"), "annotate_server", phase.module, out,
                 phase.outputs, None, (), "client of a vllm serve node")


BASELINE_PREFIX = "baseline"  # the stages of the baselines' phases: baseline_{data,annotate,reward,train,eval,cost}
#: the main stage whose time/cpus a baseline stage takes
_BASELINE_KIND = {"baseline_data": "collect", "baseline_annotate": "annotate", "baseline_reward": "reward",
                  "baseline_train": "train", "baseline_eval": "eval", "baseline_cost": "cost"}


def is_baseline(phase: Phase) -> bool:
    return phase.stage.startswith(BASELINE_PREFIX)


def baseline_file(phase: Phase) -> str:
    """``baselines/motif_task/train/gnomish`` -> ``baseline_motif_task_train_gnomish.sbatch``."""
    return "baseline_" + phase.name.split("/", 1)[1].replace("/", "_") + ".sbatch"


def render_baseline(phase: Phase, cfg: PipelineConfig, common: dict[str, str], s: SlurmSettings) -> str:
    """The job file of one baseline phase."""
    kind = _BASELINE_KIND.get(phase.stage)
    if kind is None:
        raise SlurmError(f"phase {phase.name}: unknown baseline stage {phase.stage!r}")
    gpus = baseline_gpus(phase)
    resources = [f"#SBATCH --gpus-per-node={gpus}"] if gpus else []
    if phase.array:
        resources.append(f"#SBATCH --array={phase.array}")
    marker = Path(cfg.out_dir) / ".pipeline" / (phase.name.replace("/", "__") + ".slurm.jsonl")
    values = dict(common, job_name="mm-" + phase.name.split("/", 1)[1].replace("/", "-"),
                  command=format_command(phase.argv("python")), time=s.times[kind], cpus=str(s.cpus[kind]),
                  resources="\n".join(resources), marker=shlex.quote(str(marker)),
                  prelude=f"EVAL_TARGETS=({' '.join(phase.array_values)})" if phase.array_values else "")
    if flag_value(phase, "--backend") == "vllm":
        values["setup"] = s.vllm_setup
    template = "baseline_train.sbatch" if phase.stage == "baseline_train" else "baseline_job.sbatch"
    return render_template(template, values)


def _model_of(phase: Phase) -> str:
    return phase.args[phase.args.index("--model") + 1] if "--model" in phase.args else ""


def _n_chunks(phase: Phase) -> str:
    return phase.args[phase.args.index("--n_chunks") + 1] if "--n_chunks" in phase.args else "1"


def render_jobs(plan: Sequence[Phase], cfg: PipelineConfig,
                settings: Optional[SlurmSettings] = None) -> dict[str, str]:
    """File name -> text of every job file and ``submit_all.sh``."""
    s = settings or SlurmSettings()
    if not s.workdir or any(c.isspace() for c in s.workdir):
        raise SlurmError(f"workdir {s.workdir!r}: #SBATCH lines cannot hold a path with spaces; use another folder")
    common = {
        "workdir": shlex.quote(s.workdir),
        "log_dir": str(Path(s.workdir) / s.log_dir),  # sbatch resolves --output against the submit folder
        "sbatch_extra": "\n".join(f"#SBATCH {x}" for x in s.sbatch_extra),
        "setup": s.setup,
    }
    files: dict[str, str] = {}
    jobs: list[tuple[str, Phase]] = []  # (file, phase) in plan order for submit_all.sh
    by_name = {p.name: p for p in plan}
    for phase in plan:
        stage = phase.stage
        if stage == "combine" or stage == "check":
            continue  # combine runs in the generate job; the check is part of the smoke run only
        if phase.slurm or (stage not in STAGE_TEMPLATE and stage not in _BASELINE_KIND):
            # a phase with its own template (the LLM baselines: a model server per job) or none of ours
            fname, text = _own_job(phase, common, s)
            files[fname] = text
            jobs.append((fname, phase))
            continue
        if is_baseline(phase):
            fname = baseline_file(phase)
            files[fname] = render_baseline(phase, cfg, common, s)
            jobs.append((fname, phase))
            continue
        kind, _, item = phase.name.partition("/")
        fname = f"{kind}_{item}.sbatch" if item and stage not in ("train", "eval") else \
            {"train": "train_skills.sbatch", "eval": "evaluate.sbatch", "report": "report.sbatch"}.get(stage, "")
        if stage == "report":
            fname = "report.sbatch"
        values = dict(common, job_name=f"mm-{kind}-{item}" if item else f"mm-{kind}",
                      command=format_command(phase.argv("python")))
        template = STAGE_TEMPLATE[stage]
        if stage in ("collect", "reward", "generate", "train", "eval", "annotate"):
            values["time"] = s.times[stage]
        if stage in ("collect", "reward", "train", "eval", "annotate"):
            values["cpus"] = str(s.cpus[stage])
        if stage in ("annotate", "merge"):
            values["vllm_setup"] = s.vllm_setup
            values.pop("setup")
        if stage == "annotate":
            values["array"] = phase.array or "0"
            values["gpus"] = str(cfg.annotate_gpus)
        if stage == "eval":
            values["array"] = phase.array or "0"
            values["array_values"] = " ".join(phase.array_values)
        if stage == "generate":
            combine = by_name.get(phase.name.replace("generate/", "combine/"))
            cmds = [format_command(phase.argv("python"))]
            if combine is not None:
                cmds.append(format_command(combine.argv("python")))
            values["command"] = "\n".join(cmds)
        files[fname] = render_template(template, values)
        jobs.append((fname, phase))
        if stage == "annotate":
            client = server_variant(phase, s.port)
            sv = dict(common, job_name=f"mm-annotate-server-{item}", time=s.times["annotate"],
                      cpus=str(s.cpus["annotate"]), gpus=str(cfg.annotate_gpus), n_chunks=_n_chunks(phase),
                      model=shlex.quote(_model_of(phase) or cfg.annotate_model), port=str(s.port),
                      vllm_setup=s.vllm_setup,
                      command=format_command(client.argv("python"), indent="    "))
            files[f"annotate_server_{item}.sbatch"] = render_template("annotate_server.sbatch", sv)
    files["submit_all.sh"] = submit_script(jobs, s)
    return files


GENERIC_TEMPLATE = "job.sbatch"


def _own_job(phase: Phase, common: dict[str, str], s: SlurmSettings) -> tuple[str, str]:
    """The job of a phase with its own template (``Phase.slurm``) or none of the pipeline's stages:
    the template's slots are filled from the common values, the phase's ``slurm`` entries and the
    settings; a slot left without a value is an error (:func:`fill_template`)."""
    kind, _, item = phase.name.partition("/")
    if is_baseline(phase):
        fname = baseline_file(phase)
    else:
        fname = f"{kind}_{item}.sbatch".replace("/", "_") if item else f"{kind}.sbatch"
    template = phase.slurm.get("template", GENERIC_TEMPLATE)
    path = TEMPLATE_DIR / template
    if not path.is_file():
        raise SlurmError(f"phase {phase.name}: no template {path}")
    text = path.read_text()
    slots = set(SLOT.findall(text))
    candidates = dict(common, job_name=f"mm-{kind}-{item}" if item else f"mm-{kind}",
                      command=format_command(phase.argv("python")), setup=s.setup, vllm_setup=s.vllm_setup,
                      time=s.times.get(phase.stage, s.times.get("eval", "24:00:00")),
                      cpus=str(s.cpus.get(phase.stage, s.cpus.get("eval", 16))),
                      array=phase.array or "0", array_values=" ".join(phase.array_values))
    candidates.update({k: v for k, v in phase.slurm.items() if k != "template"})
    return fname, fill_template(text, {k: v for k, v in candidates.items() if k in slots}, template)


def submit_script(jobs: Sequence[tuple[str, Phase]], settings: SlurmSettings) -> str:
    """Bash script submitting every job with ``--dependency=afterok`` on what it reads."""
    lines = [
        "#!/bin/bash",
        "# Submits the whole MaestroMotif plan with dependencies between the jobs.",
        "#   SKIP_COLLECT=1  use the datasets already in og_dataset/ (e.g. the authors' released ones)",
        "#   ANNOTATION=server  annotate through a `vllm serve` node (annotate_server_*.sbatch)",
        "set -euo pipefail",
        'HERE="$(cd "$(dirname "$0")" && pwd)"',
        f"mkdir -p {shlex.quote(settings.workdir)}/{settings.log_dir}",
        'submit() { sbatch --parsable "$@"; }',
        'after() { local ids; ids=$(echo "$*" | xargs | tr " " ":"); [ -n "$ids" ] && echo "--dependency=afterok:$ids" || true; }',
        "",
    ]
    var: dict[str, str] = {}
    rewards: list[str] = []
    generated: dict[str, str] = {}
    baselines: list[str] = []  # the baselines' jobs: the report waits for them too
    for fname, phase in jobs:
        kind, _, item = phase.name.partition("/")
        v = re.sub(r"\W", "_", f"{kind}_{item}" if item else kind).upper()
        if phase.slurm or phase.stage not in STAGE_TEMPLATE:
            # its dependencies: the phases it names in `after` that have a job (MaestroMotif's or its own)
            deps = [var[name] for name in phase.after if name in var]
            lines.append(f'{v}=$(submit $(after {" ".join("${" + d + "}" for d in deps)}) "$HERE/{fname}")' if deps
                         else f'{v}=$(submit "$HERE/{fname}")')
            baselines.append(v)
            var[phase.name] = v
            continue
        if phase.stage == "collect":
            lines.append(f'{v}=""; [ "${{SKIP_COLLECT:-0}}" = 1 ] || {v}=$(submit "$HERE/{fname}")')
        elif phase.stage == "annotate":
            dep = var.get(f"collect/{item}", "")
            lines.append('if [ "${ANNOTATION:-array}" = server ]; then')
            lines.append(f'    {v}=$(submit $(after ${dep and "{" + dep + "}"}) "$HERE/annotate_server_{item}.sbatch")'
                         if dep else f'    {v}=$(submit "$HERE/annotate_server_{item}.sbatch")')
            lines.append("else")
            lines.append(f'    {v}=$(submit $(after ${{{dep}}}) "$HERE/{fname}")' if dep
                         else f'    {v}=$(submit "$HERE/{fname}")')
            lines.append("fi")
        elif phase.stage == "merge":
            lines.append(f'{v}=$(submit $(after ${{{var[f"annotate/{item}"]}}}) "$HERE/{fname}")')
        elif phase.stage == "reward":
            dep = var.get(f"merge/{item}")
            lines.append(f'{v}=$(submit $(after ${{{dep}}}) "$HERE/{fname}")' if dep else f'{v}=$(submit "$HERE/{fname}")')
            rewards.append(v)
        elif phase.stage == "generate":
            # evaluation tasks are shown the training (exploration) policy: generate it first
            dep = generated.get("exploration") if item != "exploration" else None
            lines.append(f'{v}=$(submit $(after ${{{dep}}}) "$HERE/{fname}")' if dep else f'{v}=$(submit "$HERE/{fname}")')
            generated[item] = v
        elif phase.stage == "train":
            deps = rewards + ([generated["exploration"]] if "exploration" in generated else [])
            lines.append(f'{v}=$(submit $(after {" ".join("${" + d + "}" for d in deps)}) "$HERE/{fname}")')
        elif phase.stage == "eval":
            deps = [var["train/skills"]] + [g for t, g in generated.items() if t != "exploration"]
            lines.append(f'{v}=$(submit $(after {" ".join("${" + d + "}" for d in deps)}) "$HERE/{fname}")')
        elif phase.stage == "report":
            # after the evaluations and every baseline's jobs, whether they succeeded or not
            deps = ([var["eval/targets"]] if "eval/targets" in var else []) + baselines
            dep = ":".join("${" + d + "}" for d in deps)
            lines.append(f'{v}=$(sbatch --parsable {"--dependency=afterany:" + dep + " " if dep else ""}"$HERE/{fname}")')
        var[phase.name] = v
    lines += ["", 'echo "submitted; follow them with: squeue --me"', ""]
    return "\n".join(lines)


def write_slurm(plan: Sequence[Phase], out_dir: str | Path, cfg: PipelineConfig,
                settings: Optional[SlurmSettings] = None) -> list[Path]:
    """Writes :func:`render_jobs` to ``out_dir``; refuses to overwrite a file that differs."""
    out = Path(out_dir)
    files = render_jobs(plan, cfg, settings)
    clashes = [n for n, text in files.items() if (out / n).exists() and (out / n).read_text() != text]
    if clashes:
        raise SlurmError(f"{out} already holds different {', '.join(sorted(clashes)[:5])}"
                         f"{' ...' if len(clashes) > 5 else ''}; remove them or choose another folder")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m slurm.render",
                                description="Write the sbatch jobs of the paper-scale plan.")
    p.add_argument("--out", required=True, help="folder for the job files and submit_all.sh")
    p.add_argument("--preset", default="paper", help="pipeline preset whose commands the jobs run")
    p.add_argument("--workdir", default=None, help="repository checkout on the cluster (default: current folder)")
    p.add_argument("--setup", default=None, help="shell line activating the main environment")
    p.add_argument("--vllm_setup", default=None, help="shell line activating the vLLM environment")
    p.add_argument("--sbatch", action="append", default=[],
                   help="extra #SBATCH option for every job, e.g. --sbatch=--partition=gpu (repeatable)")
    add_skills_flag(p)  # read by slurm/render.py before this module is imported; every job's command gets it
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    settings = SlurmSettings(sbatch_extra=tuple(args.sbatch))
    if args.workdir:
        settings.workdir = args.workdir
    if args.setup:
        settings.setup = args.setup
    if args.vllm_setup:
        settings.vllm_setup = args.vllm_setup
    try:
        cfg = make_config(args.preset)
        written = write_slurm(build_plan(cfg), args.out, cfg, settings)
    except (SlurmError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files to {args.out}; submit with: bash {Path(args.out) / 'submit_all.sh'}")
    return 0
