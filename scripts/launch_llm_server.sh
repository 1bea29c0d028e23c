#!/usr/bin/env bash
# Starts an OpenAI-compatible LLM server for online intrinsic rewards (ONI), and waits until it serves.
#
#   ./scripts/launch_llm_server.sh MODEL_PATH [NUM_GPUS] [PORT]
#
# MODEL_PATH  a local model folder or hub id; the server names the model after its last path part
#             (what --llm_model must say, e.g. Meta-Llama-3.1-8B-Instruct)
# NUM_GPUS    tensor parallel size (default 1)
# PORT        default 9001, the port ONI's training expects
#
# LLM_SERVER=vllm (default) runs vLLM's own OpenAI server; LLM_SERVER=fastchat runs FastChat's
# controller, OpenAI API server and vLLM worker, as the ONI release did; LLM_SERVER_CMD="..." runs
# any other command that serves the OpenAI API on PORT. The script waits for GET /v1/models to list
# the model (LLM_SERVER_WAIT_S, default 1800 s), exits 1 if the server dies first, and then stays in
# the foreground with the server (Ctrl-C or scancel stops both). vLLM lives in the environment of
# requirements-vllm.txt (activate it first).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODEL_PATH="${1:?usage: $0 MODEL_PATH [NUM_GPUS] [PORT]}"
NUM_GPUS="${2:-1}"
PORT="${3:-9001}"
NAME="$(basename "${MODEL_PATH%/}")"
PYTHON="${PYTHON:-python}"
if curl -s "http://localhost:${PORT}/v1/models" >/dev/null 2>&1; then
    echo "error: something already answers on port ${PORT}; pass another port or stop it" >&2
    exit 1
fi
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM
case "${LLM_SERVER:-vllm}" in
    vllm)
        CMD=("$PYTHON" -m vllm.entrypoints.openai.api_server --model "$MODEL_PATH" --served-model-name "$NAME"
             --tensor-parallel-size "$NUM_GPUS" --host 0.0.0.0 --port "$PORT")
        ;;
    fastchat)
        "$PYTHON" -m fastchat.serve.controller & PIDS+=($!)
        "$PYTHON" -m fastchat.serve.openai_api_server --host 0.0.0.0 --port "$PORT" & PIDS+=($!)
        CMD=("$PYTHON" -m fastchat.serve.vllm_worker --model-path "$MODEL_PATH" --model-names "$NAME"
             --num-gpus "$NUM_GPUS")
        ;;
    *)
        echo "error: LLM_SERVER=${LLM_SERVER} is not one of vllm, fastchat" >&2
        exit 2
        ;;
esac
if [ -n "${LLM_SERVER_CMD:-}" ]; then
    read -r -a CMD <<< "$LLM_SERVER_CMD"
fi
"${CMD[@]}" & SERVER=$!
PIDS+=("$SERVER")
"$PYTHON" -m scripts.wait_llm_server --addr localhost --port "$PORT" --model "$NAME" \
    --timeout_s "${LLM_SERVER_WAIT_S:-1800}" --pid "$SERVER"
echo "LLM server ready on port ${PORT} (model ${NAME}); press Ctrl-C to stop it"
wait "$SERVER"
