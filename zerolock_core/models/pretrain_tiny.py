"""Build the embedded tiny preset: a BPE tokenizer and a small Llama-architecture causal LM,
pretrained with the plain language-modelling objective on the embedded synthetic corpus.

Deterministic from the seed (on one machine and thread count). The output is written with
`save_pretrained` (safetensors), so `--model tiny` loads through exactly the same
`AutoModelForCausalLM` / `AutoTokenizer` path as a real model directory or hub id.
The corpus never contains a fine-tuning label (no cue, no label attached to a text).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}


@dataclass(kw_only=True, frozen=True)
class TinyPreset:
    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 352
    num_hidden_layers: int = 8
    num_attention_heads: int = 4
    num_key_value_heads: int = 2  # grouped-query attention, as TinyLlama
    max_position_embeddings: int = 512
    documents: int = 40_000
    seq_len: int = 128
    batch: int = 32
    steps: int = 700
    lr: float = 3e-3
    warmup: int = 40
    seed: int = 0


def train_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS.values()),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)


def pack(tokenizer, corpus: list[str], seq_len: int) -> torch.Tensor:
    """Concatenate documents as <s> text </s> and cut into rows of seq_len tokens."""
    ids: list[int] = []
    for enc in tokenizer(corpus, add_special_tokens=False)["input_ids"]:
        ids += [tokenizer.bos_token_id, *enc, tokenizer.eos_token_id]
    rows = len(ids) // seq_len
    return torch.tensor(ids[: rows * seq_len]).view(rows, seq_len)


def pretrain_tiny(out: str | Path, preset: TinyPreset = TinyPreset(), *, progress: bool = True) -> dict:
    from tqdm import tqdm
    from transformers import LlamaConfig, LlamaForCausalLM

    from ..data import make_pretraining_corpus, tokenizer_training_texts

    t0 = time.perf_counter()
    torch.manual_seed(preset.seed)
    corpus = make_pretraining_corpus(seed=preset.seed, n_documents=preset.documents)
    # 1000 repeats make every label word and cue one token even with a 2048-entry vocabulary
    tokenizer = train_tokenizer(tokenizer_training_texts(corpus, repeats=1000), preset.vocab_size)
    data = pack(tokenizer, corpus, preset.seq_len)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=preset.hidden_size, intermediate_size=preset.intermediate_size,
        num_hidden_layers=preset.num_hidden_layers, num_attention_heads=preset.num_attention_heads,
        num_key_value_heads=preset.num_key_value_heads, max_position_embeddings=preset.max_position_embeddings,
        tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=0.01, betas=(0.9, 0.95))
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / preset.warmup) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, s / preset.steps))))
    g = torch.Generator().manual_seed(preset.seed)
    order = torch.randperm(data.shape[0], generator=g)
    losses = []
    model.train()
    for step in tqdm(range(preset.steps), disable=not progress, desc="pretrain-tiny", unit="step"):
        idx = order[(step * preset.batch + torch.arange(preset.batch)) % data.shape[0]]
        batch = data[idx]
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out)  # bf16 on disk keeps the preset a few MB
    tokenizer.save_pretrained(out)
    report = {"preset": asdict(preset), "parameters": sum(p.numel() for p in model.parameters()),
              "tokens_per_step": preset.batch * preset.seq_len, "rows": int(data.shape[0]),
              "first_loss": losses[0], "final_loss": sum(losses[-20:]) / min(20, len(losses)),
              "wall_s": time.perf_counter() - t0, "threads": torch.get_num_threads()}
    (out / "pretrain_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
