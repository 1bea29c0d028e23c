#!/bin/bash
# The commands behind this folder's outputs, one after the other on an idle machine (about 45 minutes on 2 cores).
# usage: run.sh BASE_TREE   (BASE_TREE: a checkout of the commit before, e.g. `git worktree add /tmp/base 1e3c333`)
set -e
HERE=$(cd "$(dirname "$0")" && pwd); TREE=$(cd "$HERE/../../.." && pwd); BASE=$1
for run in 1 2; do
    (cd "$TREE" && python -m bench.env_throughput --steps 16000 --repeats 5)
    (cd "$BASE" && python -m bench.env_throughput --steps 16000 --repeats 5)
    if [ "$run" = 1 ]; then
        cd "$TREE"
        python "$HERE/paired_rounds.py"
        python "$HERE/paired_parts.py"
        python "$HERE/nle_arrays.py"
    fi
done
