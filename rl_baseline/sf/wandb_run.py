"""Weights & Biases logging of a training run (``--wandb True``, or sample-factory's ``--with_wandb True``).

sample-factory 2.1.1's own integration passes wandb a setting newer wandb releases refuse, so the run
is started here instead, in the training process before sample-factory creates its tensorboard
writers: ``sync_tensorboard`` then mirrors every scalar (the skills', the online annotator's
``oni/...``) to the run. The run id is kept in ``{train_dir}/{experiment}/wandb_id`` so a resumed
training continues the same run. ``WANDB_MODE=offline`` works without a network (``wandb sync``
uploads later); ``WANDB_DIR`` says where wandb writes (default ``{train_dir}/wandb``).
"""
from __future__ import annotations

import logging
import os
import secrets
from typing import Any, Optional

logger = logging.getLogger(__name__)

ID_FILE = "wandb_id"


def _saved_id(cfg: Any) -> Optional[str]:
    if cfg.restart_behavior != "resume":
        return None
    try:
        with open(os.path.join(cfg.train_dir, cfg.experiment, ID_FILE)) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def start_wandb(cfg: Any) -> Any:
    """The wandb run of ``cfg`` (None when wandb logging is off)."""
    if not getattr(cfg, "with_wandb", False):
        return None
    import wandb

    run_id = _saved_id(cfg) or f"{cfg.experiment}-{secrets.token_hex(4)}"
    kwargs: dict[str, Any] = {}
    if not os.environ.get("WANDB_DIR"):
        kwargs["dir"] = os.path.join(cfg.train_dir, "wandb")
        os.makedirs(kwargs["dir"], exist_ok=True)
    config = {k: v for k, v in vars(cfg).items() if isinstance(v, (int, float, str, bool, type(None), list, tuple))}
    run = wandb.init(project=cfg.wandb_project, entity=cfg.wandb_user, name=cfg.experiment, id=run_id,
                     resume="allow", group=getattr(cfg, "wandb_group", None), tags=getattr(cfg, "wandb_tags", None),
                     config=config, sync_tensorboard=True, **kwargs)
    logger.info("Weights & Biases run %s (project %s)", run_id, cfg.wandb_project)
    return run


def remember_run(cfg: Any, run: Any) -> None:
    """Writes the run id next to the experiment (after sample-factory set the folder up)."""
    if run is None:
        return
    folder = os.path.join(cfg.train_dir, cfg.experiment)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, ID_FILE), "w") as fh:
        fh.write(run.id)


def finish_wandb(run: Any) -> None:
    if run is not None:
        run.finish()
