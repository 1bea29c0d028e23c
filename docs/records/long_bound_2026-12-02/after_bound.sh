#!/bin/bash
# #65: the long bound again with kept records. Waits for 10M env steps, stops the training with SIGTERM (its
# checkpoint is saved), then: every skill held alone (200 episodes, pinned clock, untrained and random on the same
# games), gnomish composed at the release's budget (3M env steps, 64 games: two processes of 1.5M, merged), delphi
# and minetown at 300,000 env steps. Resumable: a step whose output exists is skipped.
set -u
PY=/work/main/venv/bin/python
T=/work/runs/long
E=/work/runs/long/eval
K=/work/main/docs/records/long_bound_2026-12-02
CLOCK="2026-11-18 12:00:00"
STOP_AT=10000000
mkdir -p $E $K
log() { echo "$1 $(date -u +%H:%M:%S)" >> $T/status.log; }
while pgrep -f "scripts.main.*--experiment bound --train_for_env_steps" > /dev/null; do
  n=$(grep -o 'Total num frames: [0-9]*' $T/bound.log | tail -1 | grep -o '[0-9]*$')
  if [ -n "$n" ] && [ "$n" -ge $STOP_AT ]; then
    log "stopping at $n"; pkill -TERM -f 'scripts.main.*--experiment bound' ; sleep 60
  fi
  sleep 10
done
log "training ended"
cd /work/main
# two skill reports at a time, one per core
report() {
  out=$E/alone_$1
  if [ ! -f $out/skill_report.json ]; then
    rm -rf $out
    OMP_NUM_THREADS=1 $PY -m scripts.skill_report --policy_dir $T/bound --episodes 200 --num_envs 10 \
      --max_episode_steps 1000 --seed 2 --policies trained,untrained,random --skill_names $1 \
      --game_clock "$CLOCK" --out $out --no_progress > $E/alone_$1.log 2>&1
    log "alone $1 rc=$?"
  fi
  [ -f $out/skill_report.json ] && gzip -c $out/skill_report.json > $K/$1_alone_skill_report.json.gz \
    && cp $out/skill_report.md $K/$1_alone_skill_report.md
}
(report descender; report ascender; report merchant) &
(report discoverer; report worshipper) &
wait
cp $T/bound/config.json $K/config.json; cp $T/bound/skill_stats.json $K/skill_stats.json 2>/dev/null
$PY -m scripts.training_window --policy_dir $T/bound --window 500000 > $K/training_window.txt 2>&1
grep 'Fps is' $T/bound.log | sed 's/\x1b\[[0-9;]*m//g' | awk 'NR%12==0' > $K/fps_reports.txt
merged=$E/gnomish_3M/merged/gnomish_seed42.json
if [ ! -f $merged ]; then
  rm -rf $E/gnomish_3M
  for s in 1000 1001; do
    OMP_NUM_THREADS=1 $PY -m scripts.main --train_dir $T --experiment bound --evaluation True \
      --eval_target gnomish --eval_protocol release --eval_env_steps 1500000 --eval_num_envs 32 --seed $s \
      --game_clock "$CLOCK" --eval_dir $E/gnomish_3M/s$s > $E/gnomish_s$s.log 2>&1 &
  done
  wait
  $PY -m scripts.merge_evaluations --inputs $E/gnomish_3M/s*/gnomish_seed42.json --out $merged > $E/gnomish_merge.log 2>&1
  log "gnomish rc=$?"
fi
[ -f $merged ] && gzip -c $merged > $K/gnomish_3M_merged.json.gz
for task in delphi minetown; do
  out=$E/tasks_300k/$task
  if ! ls $out/${task}_seed*.json > /dev/null 2>&1; then
    OMP_NUM_THREADS=1 $PY -m scripts.main --train_dir $T --experiment bound --evaluation True \
      --eval_target $task --eval_protocol release --eval_env_steps 300000 --eval_num_envs 16 \
      --game_clock "$CLOCK" --eval_dir $out > $E/$task.log 2>&1 &
  fi
done
wait
for task in delphi minetown; do
  f=$(ls $E/tasks_300k/$task/${task}_seed*.json 2>/dev/null | head -1)
  [ -n "$f" ] && gzip -c $f > $K/${task}_300k.json.gz
done
log "after_bound done"
