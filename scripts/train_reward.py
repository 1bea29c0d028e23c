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
"""
from __future__ import annotations

import argparse
import logging
import sys

from common.vocabulary import SKILLS
from rlaif.dataset import DatasetError
from rlaif.preferences import PreferenceError
from rlaif.reward_arch import ARCHS, DEFAULT_TRAIN_ARCH
from rlaif.reward_model import RewardModelConfig
from rlaif.train_reward import RewardTrainingConfig, RewardTrainingError, train_reward


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.replace("[", "").replace("]", "").split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    defaults = RewardTrainingConfig()
    model = RewardModelConfig()
    p = argparse.ArgumentParser(
        prog="python -m scripts.train_reward",
        description="Fit a char-CNN skill reward model to LLM preferences with the Bradley-Terry loss.",
    )
    p.add_argument("--experiment", default=defaults.experiment,
                   help="run name; outputs go to {train_dir}/{experiment}; the skill is read from it "
                        "(llama3_{skill}_...) unless --skill is given (default: %(default)s)")
    p.add_argument("--skill", choices=SKILLS, default=None,
                   help="skill to train (default: read from --experiment)")
    p.add_argument("--dataset_dir", default=defaults.dataset_dir,
                   help="folder with {skill}.npz or {skill}.pkl (default: %(default)s)")
    p.add_argument("--dataset", default=None,
                   help="explicit dataset file; overrides --dataset_dir")
    p.add_argument("--preference_dir", default=defaults.preference_dir,
                   help="folder with the preference file {annotator}.npy (default: %(default)s)")
    p.add_argument("--annotator", default=None,
                   help="annotator string naming the preference file (default: the experiment name)")
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
    p.add_argument("--val_fraction", type=float, default=defaults.val_fraction,
                   help="share of pairs held out for validation (default: %(default)s)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=defaults.device,
                   help="where to train; auto picks cuda when available (default: %(default)s)")
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
                        f"architecture (default: {DEFAULT_TRAIN_ARCH}, or small when a size flag is given)")
    p.add_argument("--embed_dim", type=int, default=None,
                   help=f"small model: byte embedding size (default: {model.embed_dim})")
    p.add_argument("--conv_channels", type=_int_list, default=None,
                   help="small model: channels of the convolution layers, comma separated (default: "
                        + ",".join(str(c) for c in model.conv_channels) + ")")
    p.add_argument("--hidden_dim", type=int, default=None,
                   help=f"small model: width of the MLP after the convolutions (default: {model.hidden_dim})")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    return p


SIZE_FLAGS = ("embed_dim", "conv_channels", "hidden_dim")


def resolve_arch(args: argparse.Namespace) -> str:
    """The architecture asked for: ``--reward_arch``, else small when a size flag is given, else the default.

    Raises ValueError when ``--reward_arch release`` comes with small-model size flags."""
    sized = [f"--{name}" for name in SIZE_FLAGS if getattr(args, name, None) is not None]
    if args.reward_arch is None:
        return "small" if sized else DEFAULT_TRAIN_ARCH
    if args.reward_arch == "release" and sized:
        raise ValueError(f"the size flag(s) {', '.join(sized)} apply only to --reward_arch small (the release "
                         "architecture has fixed sizes)")
    return args.reward_arch


def config_from_args(args: argparse.Namespace) -> RewardTrainingConfig:
    base = RewardModelConfig()
    arch = resolve_arch(args)
    if arch == "release":
        model = RewardModelConfig(arch="release")
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
        num_epochs=args.num_epochs, seed=args.seed, val_fraction=args.val_fraction, device=args.device,
        save_every=args.save_every, keep_checkpoints=args.keep_checkpoints, model=model,
        progress=not args.no_progress,
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
        result = train_reward(cfg)
    except (RewardTrainingError, DatasetError, PreferenceError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if result.get("already_finished"):
        print(f"{cfg.experiment}: already trained ({result['num_iters']} iterations), nothing to do; "
              f"checkpoint {result['checkpoint']}")
    else:
        print(f"{cfg.experiment}: {result['num_iters']} iterations, train acc {result.get('train_acc', float('nan')):.3f}, "
              f"val acc {result.get('val_acc', float('nan')):.3f} on {result.get('val_pairs', 0)} non-tie pairs; "
              f"checkpoint {result['checkpoint']}")
    return result


if __name__ == "__main__":
    main()
