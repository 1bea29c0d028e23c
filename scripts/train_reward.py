"""Train a skill reward model from pairwise preferences (phase 1b).

Example (the paper's settings)::

    python -m scripts.train_reward --batch_size 1000 --num_workers 40 --reward_lr 1e-5 \\
        --num_epochs 20 --seed 777 --dataset_dir og_dataset \\
        --experiment llama3_descender_default --train_dir train_dir/skill_rewards

Reads ``{dataset_dir}/{skill}.npz`` (or ``.pkl``) and ``{preference_dir}/{experiment}.npy``;
writes ``{train_dir}/{experiment}/checkpoint_p0/`` and ``reward_metrics/``. Running the same
command again resumes from the latest checkpoint (a finished run does nothing).

``--reward_arch release`` (the default) trains the authors' network; ``--reward_arch small``
our smaller char-CNN, whose sizes ``--embed_dim``/``--conv_channels``/``--hidden_dim`` set
(giving one of them without ``--reward_arch`` also picks ``small``).

Motif's layout (``--dataset_dir`` holding ``data/``, e.g. Motif's released ``motif_dataset``) is
read in place; Motif's README command runs as written::

    python -m scripts.train_reward --batch_size 1024 --num_workers 40 --reward_lr 1e-5 --num_epochs 10 \\
        --seed 777 --dataset_dir motif_dataset --annotator llama70b_msg_defaultgoal_default \\
        --experiment standard_reward --train_dir train_dir/reward_saving_dir

The preferences are ``{dataset_dir}/preference/{annotator}.npy`` (unknown labels masked out), the
network is Motif's (``--reward_encoder nle_torchbeast_encoder``, the default on this layout: the
message alone) and 20% of the pairs are held out for validation, as Motif does.
"""
from __future__ import annotations

import argparse
import logging
import sys

from common.cli import ScriptParser
from common.estimates import MIN_VALIDATION_PAIRS, too_few_pairs
from common.flag_checks import output_folder, positive_finite
from common.interrupts import interrupted_exit, sigterm_raises
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS
from rlaif.dataset import DatasetError
from rlaif.motif_dataset import MotifLayoutError, is_motif_layout
from rlaif.preferences import PreferenceError
from rlaif.reward_arch import ARCHS, DEFAULT_TRAIN_ARCH, MOTIF_REWARD_ENCODER, REWARD_ENCODERS, arch_of_reward_encoder
from rlaif.reward_model import CHECKPOINT_DIRNAME, RewardModelConfig, list_checkpoints
from rlaif.train_reward import RewardTrainingConfig, RewardTrainingError, train_reward


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.replace("[", "").replace("]", "").split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    defaults = RewardTrainingConfig()
    model = RewardModelConfig()
    p = ScriptParser(
        prog="python -m scripts.train_reward",
        description="Fit a char-CNN skill reward model to LLM preferences with the Bradley-Terry loss.",
    )
    p.add_argument("--experiment", default=defaults.experiment,
                   help="run name; outputs go to {train_dir}/{experiment}; the skill is read from it "
                        "(llama3_{skill}_...) unless --skill is given (default: %(default)s)")
    p.add_argument("--skill", choices=SKILLS, default=None,
                   help="skill to train (default: read from --experiment)")
    p.add_argument("--dataset_dir", default=defaults.dataset_dir,
                   help="folder with {skill}.npz or {skill}.pkl, or a dataset in Motif's layout (data/, info/, "
                        "preference/; its preferences are read from its preference/ folder) (default: %(default)s)")
    p.add_argument("--dataset", default=None,
                   help="explicit dataset file; overrides --dataset_dir")
    p.add_argument("--preference_dir", default=defaults.preference_dir,
                   help="folder with the preference file {annotator}.npy (default: %(default)s; Motif's layout keeps "
                        "its own in {dataset_dir}/preference)")
    p.add_argument("--annotator", default=None,
                   help="annotator string naming the preference file, e.g. llama70b_msg_defaultgoal_default (default: "
                        "the experiment name)")
    p.add_argument("--train_dir", default=defaults.train_dir,
                   help="root folder of reward runs (default: %(default)s)")
    p.add_argument("--batch_size", type=int, default=defaults.batch_size,
                   help="pairs per gradient step (default: %(default)s)")
    p.add_argument("--num_workers", type=int, default=defaults.num_workers,
                   help="threads preparing batches ahead; capped at the CPU cores and the batches per epoch "
                        "(default: %(default)s = prepare in the training thread)")
    p.add_argument("--reward_lr", type=float, default=defaults.reward_lr,
                   help="Adam learning rate (default: %(default)s)")
    p.add_argument("--num_epochs", type=int, default=defaults.num_epochs,
                   help="passes over the training pairs (default: %(default)s)")
    p.add_argument("--seed", type=int, default=defaults.seed,
                   help="seed for initialization, validation split and shuffling (default: %(default)s)")
    p.add_argument("--val_fraction", type=float, default=None,
                   help=f"share of pairs held out for validation (default: {defaults.val_fraction}; 0.2 on Motif's "
                        "layout, as Motif splits 80/20)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda", "gpu"), default=defaults.device,
                   help="where to train; auto picks cuda when available; gpu is cuda (sample-factory's spelling) "
                        "(default: %(default)s)")
    p.add_argument("--save_every", type=int, default=defaults.save_every,
                   help="also save every N iterations (0: only at the end of each epoch; default: %(default)s)")
    p.add_argument("--keep_checkpoints", type=int, default=defaults.keep_checkpoints,
                   help="how many of the newest checkpoints to keep (default: %(default)s)")
    p.add_argument("--reward_arch", choices=ARCHS, default=None,
                   help="reward network: 'release' = the authors' architecture (message char-CNN with six "
                        "unpadded convolutions and a position-keeping flatten, an MLP over five stat changes of "
                        "which only the depth change is non-zero, a 256-512 trunk; about 357k parameters); "
                        "'small' = our smaller char-CNN with global max pooling and one depth input (sized by "
                        "--embed_dim/--conv_channels/--hidden_dim). A resumed run keeps its checkpoint's "
                        f"architecture (default: {DEFAULT_TRAIN_ARCH}, or small when a size flag is given; motif on "
                        "Motif's layout)")
    p.add_argument("--reward_encoder", choices=tuple(REWARD_ENCODERS), default=None,
                   help=f"Motif's name of the reward network: {MOTIF_REWARD_ENCODER} = Motif's (the release's message "
                        "branch and trunk, no stat input; --reward_arch motif), the default on Motif's layout; "
                        "release/small/motif name our architectures. Give it or --reward_arch, or both if they agree")
    p.add_argument("--embed_dim", type=int, default=None,
                   help=f"small model: byte embedding size (default: {model.embed_dim})")
    p.add_argument("--conv_channels", type=_int_list, default=None,
                   help="small model: channels of the convolution layers, comma separated (default: "
                        + ",".join(str(c) for c in model.conv_channels) + ")")
    p.add_argument("--hidden_dim", type=int, default=None,
                   help=f"small model: width of the MLP after the convolutions (default: {model.hidden_dim})")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    add_skills_flag(p)
    return p


SIZE_FLAGS = ("embed_dim", "conv_channels", "hidden_dim")
MOTIF_VAL_FRACTION = 0.2  # Motif's random_split(0.8, 0.2)


def _motif_layout(args: argparse.Namespace) -> bool:
    return getattr(args, "dataset", None) is None and is_motif_layout(getattr(args, "dataset_dir", ""))


def resolve_arch(args: argparse.Namespace) -> str:
    """The architecture asked for: ``--reward_arch`` / ``--reward_encoder``, else small when a size flag is
    given, else motif on Motif's layout, else the default.

    Raises ValueError when the two flags disagree or a fixed architecture comes with small-model size flags."""
    sized = [f"--{name}" for name in SIZE_FLAGS if getattr(args, name, None) is not None]
    asked = args.reward_arch
    encoder = getattr(args, "reward_encoder", None)
    if encoder is not None:
        by_encoder = arch_of_reward_encoder(encoder)
        if asked is not None and asked != by_encoder:
            raise ValueError(f"--reward_encoder {encoder} is the {by_encoder} architecture but --reward_arch says {asked}")
        asked = by_encoder
    if asked is None:
        if sized:
            return "small"
        return "motif" if _motif_layout(args) else DEFAULT_TRAIN_ARCH
    if asked != "small" and sized:
        raise ValueError(f"the size flag(s) {', '.join(sized)} apply only to --reward_arch small (the {asked} "
                         "architecture has fixed sizes)")
    return asked


def config_from_args(args: argparse.Namespace) -> RewardTrainingConfig:
    base = RewardModelConfig()
    arch = resolve_arch(args)
    if arch != "small":
        model = RewardModelConfig(arch=arch)
    else:
        channels = tuple(args.conv_channels) if args.conv_channels is not None else base.conv_channels
        kernels, pools = base.kernel_sizes, base.pool_sizes
        if len(channels) != len(kernels):
            # keep the default kernel and pooling pattern, cut or extended to the number of layers
            kernels = tuple((kernels + (3,) * len(channels))[: len(channels)])
            pools = tuple((pools[:-1] + (1,) * len(channels))[: len(channels) - 1]) + (1,)
        model = RewardModelConfig(
            embed_dim=args.embed_dim if args.embed_dim is not None else base.embed_dim, conv_channels=channels,
            kernel_sizes=kernels, pool_sizes=pools,
            hidden_dim=args.hidden_dim if args.hidden_dim is not None else base.hidden_dim, arch="small",
        )
    return RewardTrainingConfig(
        experiment=args.experiment, skill=args.skill, dataset_dir=args.dataset_dir, dataset_path=args.dataset,
        preference_dir=args.preference_dir, annotator=args.annotator, train_dir=args.train_dir,
        batch_size=args.batch_size, num_workers=args.num_workers, reward_lr=args.reward_lr,
        num_epochs=args.num_epochs, seed=args.seed, device="cuda" if args.device == "gpu" else args.device,
        val_fraction=args.val_fraction if args.val_fraction is not None else (
            MOTIF_VAL_FRACTION if _motif_layout(args) else RewardTrainingConfig().val_fraction),
        save_every=args.save_every, keep_checkpoints=args.keep_checkpoints, model=model,
        progress=not args.no_progress,
        asked_sizes=tuple(name for name in ("embed_dim", "hidden_dim", "conv_channels")
                          if arch == "small" and getattr(args, name, None) is not None),
    )


def main(argv: list[str] | None = None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        resolve_arch(args)
    except ValueError as exc:
        parser.error(str(exc))  # exits 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = config_from_args(args)
        positive_finite("reward_lr", cfg.reward_lr, "Adam's step size")
        output_folder("--train_dir", cfg.run_dir)  # before the data are read and the model trained
        with sigterm_raises():
            result = train_reward(cfg)
    except (RewardTrainingError, DatasetError, PreferenceError, MotifLayoutError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt as exc:
        newest = list_checkpoints(cfg.run_dir / CHECKPOINT_DIRNAME)
        kept = f"the newest checkpoint, {newest[-1][1]}, is kept" if newest else "no checkpoint was saved yet"
        raise SystemExit(interrupted_exit(exc, f"{kept} (one every --save_every iterations); run the same command "
                                          "again to resume from it")) from None
    if result.get("already_finished"):
        print(f"{cfg.experiment}: already trained ({result['num_iters']} iterations), nothing to do; "
              f"checkpoint {result['checkpoint']}")
    else:
        pairs = int(result.get("val_pairs", 0))
        flag = (f" (fewer than {MIN_VALIDATION_PAIRS}: too few to read as the model's accuracy)"
                if too_few_pairs(pairs) else "")
        print(f"{cfg.experiment}: {result['num_iters']} iterations, train acc {result.get('train_acc', float('nan')):.3f}, "
              f"val acc {result.get('val_acc', float('nan')):.3f} on {pairs} non-tie pairs{flag}; "
              f"checkpoint {result['checkpoint']}")
    return result


if __name__ == "__main__":
    main()
