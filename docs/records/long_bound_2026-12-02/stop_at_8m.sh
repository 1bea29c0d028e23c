#!/bin/bash
while true; do
  n=$(grep -o 'Total num frames: [0-9]*' /work/runs/long/bound.log | tail -1 | grep -o '[0-9]*$')
  if [ -n "$n" ] && [ "$n" -ge 8000000 ]; then
    echo "stopping at $n $(date -u +%H:%M:%S)" >> /work/runs/long/status.log
    pkill -TERM -f 'scripts.main.*--experiment bound --train_for_env_steps'; exit 0
  fi
  sleep 5
done
