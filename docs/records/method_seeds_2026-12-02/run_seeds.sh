#!/bin/bash
# #65 point 6: the method at three training seeds to 3M env steps (stand-in labels, three levers, release timing).
# seed 2 resumes the 30-minute run of 1f25d50 (checkpoint at 2.33M); seeds 1 and 3 from 0. Resumable: same command.
set -u
cd /work/runs/wt_seeds
R=/work/runs/learn/skill_rewards
RD="['$R/llama3_discoverer_default', '$R/llama3_descender_default', '$R/llama3_ascender_default', '$R/llama3_worshipper_default', '$R/llama3_merchant_default']"
for seed in 2 1 3; do
  if grep -q "seed$seed rc=0" /work/runs/seeds/status.log 2>/dev/null; then continue; fi
  /work/main/venv/bin/python -m scripts.main --algo APPO --device cpu --num_workers 2 --num_envs_per_worker 16 --batch_size 512 --worker_num_splits 1 --rollout 32 --precision auto --discoverer_turns 100 --reward_scale 0.1 --obs_scale 255.0 --max_episode_steps 10000 --seed $seed --code_seed 42 --reward_dir "$RD" --extrinsic_reward 0.0 --llm_reward 0.1 --train_dir /work/runs/seeds/train --experiment seed$seed --save_best_after 100000 --save_best_every_sec 5 --stats_avg 4 --experiment_summaries_interval 5 --gamma 0.998 --travel_actions True --policy_heads per_skill --train_for_env_steps 3000000 >> /work/runs/seeds/seed$seed.log 2>&1
  rc=$?
  echo "seed$seed rc=$rc $(date -u +%H:%M)" >> /work/runs/seeds/status.log
  [ $rc -eq 0 ] || exit $rc
done
