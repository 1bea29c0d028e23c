#!/usr/bin/env bash
# Verifies the NetHack side of the installation: NLE imports, the options file is valid and
# a Monk game starts with it. Changes nothing in site-packages; safe to run repeatedly.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PYTHON="${PYTHON:-python}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "FAILED: '$PYTHON' not found; activate the virtual environment first (or set PYTHON=...)" >&2
    exit 1
fi
"$PYTHON" -m rl_baseline.envs.check_setup
mkdir -p og_dataset preference train_dir
echo "NetHack set-up OK."
