#!/bin/bash
# The long runs' configuration at this tree (games stepped together: --num_envs_per_worker 1 --games_per_env 16),
# the stand-in's five reward models (the learn preset's phases 1 to 15, train_dir/long_config), no part timers.
# usage: run.sh SEED EXPERIMENT [extra flags]; resumable (the same command)
cd /work/main && source venv/bin/activate
R=train_dir/long_config/skill_rewards
SEED=$1; EXP=$2; shift 2
exec python -m scripts.main --algo APPO --device cpu --num_workers 2 --num_envs_per_worker 1 --batch_size 512 \
  --worker_num_splits 1 --games_per_env 16 --rollout 32 --precision auto --discoverer_turns 100 --reward_scale 0.1 \
  --obs_scale 255.0 --max_episode_steps 10000 --seed "$SEED" --code_seed 42 \
  --reward_dir "['$R/llama3_discoverer_default', '$R/llama3_descender_default', '$R/llama3_ascender_default', '$R/llama3_worshipper_default', '$R/llama3_merchant_default']" \
  --extrinsic_reward 0.0 --llm_reward 0.1 --train_dir /work/runs/speed --experiment "$EXP" --save_best_after 100000 \
  --save_best_every_sec 5 --stats_avg 4 --experiment_summaries_interval 5 --gamma 0.998 --travel_actions True \
  --policy_heads per_skill "$@"
