#!/bin/bash
# #66: after the six-skill training: the fighter held alone (trained, untrained, random: 200 episodes of at most 1,000
# steps on the games of seed 2, NetHack's clock pinned), and goldenexit composed under the release's protocol at
# 300,000 env steps (16 games) by the six-skill agent (its policy calls the fighter) and the five-skill agent (seed2, 3M)
set -u
while ! grep -q "train rc=" /work/runs/six/status.log 2>/dev/null; do sleep 10; done
cd /work/runs/wt_six
PY=/work/main/venv/bin/python
S="--skills /work/runs/wt_six/skills /work/runs/wt_six/examples/skills/fighter.toml"
CLOCK="2026-11-18 12:00:00"
E=/work/runs/six/eval
mkdir -p $E
OMP_NUM_THREADS=1 $PY -m scripts.main --train_dir /work/runs/six/train --experiment six_seed2 --evaluation True \
  --eval_target goldenexit --eval_protocol release --eval_env_steps 300000 --eval_num_envs 16 \
  --game_clock "$CLOCK" --eval_dir $E/goldenexit_six $S > $E/goldenexit_six.log 2>&1 &
OMP_NUM_THREADS=1 $PY -m scripts.main --train_dir /work/runs/seeds/train --experiment seed2 --evaluation True \
  --eval_target goldenexit --eval_protocol release --eval_env_steps 300000 --eval_num_envs 16 \
  --game_clock "$CLOCK" --eval_dir $E/goldenexit_five > $E/goldenexit_five.log 2>&1 &
wait
echo "goldenexit done $(date -u +%H:%M)" >> /work/runs/six/status.log
OMP_NUM_THREADS=1 $PY -m scripts.skill_report --policy_dir /work/runs/six/train/six_seed2 --episodes 200 --num_envs 10 \
  --max_episode_steps 1000 --seed 2 --policies trained,untrained,random --skill_names fighter \
  --game_clock "$CLOCK" --out $E/fighter_alone --no_progress $S > $E/fighter_alone.log 2>&1
echo "alone rc=$? $(date -u +%H:%M)" >> /work/runs/six/status.log
