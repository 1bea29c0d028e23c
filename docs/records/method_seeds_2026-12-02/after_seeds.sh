#!/bin/bash
# #65 point 6 after the training: each seed's descender held alone (200 episodes, pinned clock, random on the same
# games), then gnomish composed at the release's budget (3M env steps, 64 games: two processes of 1.5M, merged).
# The held-alone games are seed 2's for every training seed (the spread is then the training's alone). Resumable: a step whose output exists is skipped. Code: the seed runs' worktree (3f94365).
set -u
while pgrep -f run_seeds.sh > /dev/null; do sleep 10; done
PY=/work/main/venv/bin/python
T=/work/runs/seeds/train
E=/work/runs/seeds/eval
K=/work/main/docs/records/method_seeds_2026-12-02
CLOCK="2026-11-18 12:00:00"
cd /work/runs/wt_seeds
log() { echo "$1 $(date -u +%H:%M)" >> /work/runs/seeds/status.log; }
for seed in 1 3; do
  out=$E/seed${seed}_descender_alone
  if [ ! -f $out/skill_report.json ]; then
    rm -rf $out
    OMP_NUM_THREADS=1 $PY -m scripts.skill_report --policy_dir $T/seed$seed --episodes 200 --num_envs 10 \
      --max_episode_steps 1000 --seed 2 --policies trained,random --skill_names descender \
      --game_clock "$CLOCK" --out $out > $E/seed${seed}_alone.log 2>&1
    log "seed$seed alone rc=$?"
  fi
  mkdir -p $K/seed$seed
  cp $T/seed$seed/config.json $T/seed$seed/skill_stats.json $K/seed$seed/ 2>/dev/null
  [ -f $out/skill_report.json ] && gzip -c $out/skill_report.json > $K/seed$seed/descender_alone_skill_report.json.gz \
    && cp $out/skill_report.md $K/seed$seed/descender_alone_skill_report.md
done
for seed in 2 1 3; do
  merged=$E/seed${seed}_gnomish_3M/merged/gnomish_seed42.json
  if [ ! -f $merged ]; then
    rm -rf $E/seed${seed}_gnomish_3M
    for s in 1000 1001; do
      OMP_NUM_THREADS=1 $PY -m scripts.main --train_dir $T --experiment seed$seed --evaluation True \
        --eval_target gnomish --eval_protocol release --eval_env_steps 1500000 --eval_num_envs 32 --seed $s \
        --game_clock "$CLOCK" --eval_dir $E/seed${seed}_gnomish_3M/s$s > $E/seed${seed}_gnomish_s$s.log 2>&1 &
    done
    wait
    $PY -m scripts.merge_evaluations --inputs $E/seed${seed}_gnomish_3M/s*/gnomish_seed42.json --out $merged \
      > $E/seed${seed}_gnomish_merge.log 2>&1
    log "seed$seed gnomish rc=$?"
  fi
  mkdir -p $K/seed$seed
  [ -f $merged ] && gzip -c $merged > $K/seed$seed/gnomish_3M_merged.json.gz
done
log "after_seeds done"
