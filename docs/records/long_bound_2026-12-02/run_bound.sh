#!/bin/bash
# #65: the long bound again, with kept records (the learn preset's settings: 16 games per worker in one request).
# Resumable: the same command after SIGTERM.
set -u
cd /work/main
exec /work/main/venv/bin/python -m scripts.main --algo APPO --device cpu --num_workers 2 --num_envs_per_worker 16 \
  --batch_size 512 --worker_num_splits 1 --rollout 32 --precision auto --discoverer_turns 100 --reward_scale 0.1 \
  --obs_scale 255.0 --max_episode_steps 10000 --seed 2 --code_seed 42 \
  --skill_reward progress --progress_scale "[1, 100, 100, 1, 1]" --progress_stairs_reward 0.5 \
  --extrinsic_reward 0.0 --llm_reward 0.1 --stats_avg 4 --experiment_summaries_interval 5 \
  --gamma 0.998 --travel_actions True --policy_heads per_skill \
  --train_dir /work/runs/long --experiment bound --train_for_env_steps 15000000 >> /work/runs/long/bound.log 2>&1
