#!/bin/bash
# #66: the fighter at the learn preset's scale: its stand-in labels and reward model (the learn preset's phases for
# it), the policies over six skills, then six skills trained for 3M env steps (seed 2, the three levers, the release's
# timing; the five-skill run to compare is /work/runs/seeds/train/seed2). Resumable: the same command.
set -eu
cd /work/runs/wt_six
PY=/work/main/venv/bin/python
S="--skills /work/runs/wt_six/skills /work/runs/wt_six/examples/skills/fighter.toml"
L=/work/runs/learn
M=/work/runs/six/meta_policies
step() { if ! grep -qx "$1" /work/runs/six/done 2>/dev/null; then shift; "$@"; echo "$1" >> /dev/null; fi; }
if ! grep -qx data /work/runs/six/done 2>/dev/null; then
  $PY -m scripts.collect_dataset --skill fighter --num_pairs 2000 --policy explorer --out $L/og_dataset --num_workers 1 --seed 5 --no_progress $S
  $PY -m scripts.annotate_pairs --goal_key fighter --backend heuristic --directory $L/og_dataset --preference_dir $L/preference --logdir $L/annotation_logs --no_progress $S
  $PY -m scripts.train_reward --experiment llama3_fighter_default --dataset_dir $L/og_dataset --preference_dir $L/preference --train_dir $L/skill_rewards --batch_size 64 --num_workers 0 --reward_lr 0.001 --num_epochs 10 --seed 777 --device cpu --no_progress $S
  echo data >> /work/runs/six/done
fi
if ! grep -qx policies /work/runs/six/done 2>/dev/null; then
  for t in exploration goldenexit; do
    $PY -m scripts.combine --task $t --seed 42 --gen_dir examples/policies/six_skills --out_root $M --force $S
  done
  for t in gnomish delphi minetown transactions price buc levelupsell discoveryhunger; do
    $PY -m scripts.combine --task $t --seed 42 --reference --out_root $M --force $S
  done
  $PY -m scripts.pipeline --check_meta_policies --code_seed 42 --meta_policy_root $M $S
  echo policies >> /work/runs/six/done
fi
RD="['$L/skill_rewards/llama3_discoverer_default', '$L/skill_rewards/llama3_descender_default', '$L/skill_rewards/llama3_ascender_default', '$L/skill_rewards/llama3_worshipper_default', '$L/skill_rewards/llama3_merchant_default', '$L/skill_rewards/llama3_fighter_default']"
$PY -m scripts.main --algo APPO --device cpu --num_workers 2 --num_envs_per_worker 16 --batch_size 512 --worker_num_splits 1 --rollout 32 --precision auto --discoverer_turns 100 --reward_scale 0.1 --obs_scale 255.0 --max_episode_steps 10000 --seed 2 --code_seed 42 --reward_dir "$RD" --extrinsic_reward 0.0 --llm_reward 0.1 --train_dir /work/runs/six/train --experiment six_seed2 --save_best_after 100000 --save_best_every_sec 5 --stats_avg 4 --experiment_summaries_interval 5 --gamma 0.998 --travel_actions True --policy_heads per_skill --meta_policy_root $M --train_for_env_steps 3000000 $S
echo "train rc=$? $(date -u +%H:%M)" >> /work/runs/six/status.log
