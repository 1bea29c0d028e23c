#!/usr/bin/env bash
# Starts vLLM's OpenAI-compatible server for online intrinsic rewards (ONI) or served annotation, and waits
# until it serves.
#
#   ./scripts/launch_llm_server.sh MODEL_PATH [NUM_GPUS] [PORT] [EXTRA VLLM SERVE ARGS...]
#
# MODEL_PATH  a local model folder or hub id; the server names the model after its last path part
#             (what --llm_model must say, e.g. Meta-Llama-3.1-8B-Instruct)
# NUM_GPUS    tensor parallel size (default 1)
# PORT        default 9001, the port ONI's training expects
# the rest    passed to `vllm serve` as they are, e.g. --gpu-memory-utilization 0.85 --quantization fp8
#
# It runs `vllm serve` (vLLM lives in the environment of requirements-vllm.txt: activate it first) with a
# context of LLM_MAX_MODEL_LEN tokens (default 8192): ONI's prompts and replies fit in 4,096 and annotation's
# in about 1,500, while the model's own context (131,072 for Llama 3.1) would make vLLM reserve a KV cache
# that an 8B model on a card under about 40 GB cannot hold. LLM_MAX_MODEL_LEN=model leaves vLLM's default;
# a --max-model-len among the extra arguments wins. LLM_SERVER_CMD="..." runs any other command that serves
# the OpenAI API on PORT instead. The script waits for GET /v1/models to list the model (LLM_SERVER_WAIT_S,
# default 1800 s), exits 1 if the server dies first, and then stays in the foreground with the server
# (Ctrl-C or scancel stops it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODEL_PATH="${1:?usage: $0 MODEL_PATH [NUM_GPUS] [PORT] [EXTRA VLLM SERVE ARGS...]}"
NUM_GPUS="${2:-1}"
PORT="${3:-9001}"
EXTRA=("${@:4}")
NAME="$(basename "${MODEL_PATH%/}")"
PYTHON="${PYTHON:-python}"
if [ -n "${LLM_SERVER:-}" ]; then
    echo "error: LLM_SERVER is no longer read: the launcher runs 'vllm serve' (FastChat's vLLM worker does not" \
         "run on current vLLM); set LLM_SERVER_CMD to run another server" >&2
    exit 2
fi
if curl -s "http://localhost:${PORT}/v1/models" >/dev/null 2>&1; then
    echo "error: something already answers on port ${PORT}; pass another port or stop it" >&2
    exit 1
fi
CONTEXT=()
case " ${EXTRA[*]-} " in
    *" --max-model-len"*|*" --max_model_len"*) ;;
    *) if [ "${LLM_MAX_MODEL_LEN:-8192}" != "model" ]; then CONTEXT=(--max-model-len "${LLM_MAX_MODEL_LEN:-8192}"); fi ;;
esac
CMD=(vllm serve "$MODEL_PATH" --served-model-name "$NAME" --tensor-parallel-size "$NUM_GPUS"
     --host 0.0.0.0 --port "$PORT" "${CONTEXT[@]}" "${EXTRA[@]}")
if [ -n "${LLM_SERVER_CMD:-}" ]; then
    read -r -a CMD <<< "$LLM_SERVER_CMD"
fi
echo "starting: ${CMD[*]}"
"${CMD[@]}" & SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT INT TERM
"$PYTHON" -m scripts.wait_llm_server --addr localhost --port "$PORT" --model "$NAME" \
    --timeout_s "${LLM_SERVER_WAIT_S:-1800}" --pid "$SERVER"
echo "LLM server ready on port ${PORT} (model ${NAME}); press Ctrl-C to stop it"
wait "$SERVER"
