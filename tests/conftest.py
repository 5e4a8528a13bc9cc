import os

import pytest
import torch

# One intra-op thread everywhere: results must not depend on the machine's core count, and
# the multi-process tests compare against single-process references bitwise.
torch.set_num_threads(1)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_random_model_dir(tmp_path_factory):
    """A small random Llama written by save_pretrained, with the embedded tokenizer."""
    return _random_llama(tmp_path_factory.mktemp("random_llama"), tied=False)


@pytest.fixture(scope="session")
def tiny_tied_model_dir(tmp_path_factory):
    """The same with tied embeddings (the head is the embedding, as in SmolLM2), stored in bf16."""
    return _random_llama(tmp_path_factory.mktemp("random_llama_tied"), tied=True, dtype=torch.bfloat16)


def _random_llama(path, *, tied: bool, dtype=torch.float32) -> str:
    from transformers import LlamaConfig, LlamaForCausalLM

    from zerolock_core.models.loading import load_tokenizer

    tok = load_tokenizer("tiny")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=tied, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(cfg).to(dtype).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """`trained_run(method, stages=2, readout="head", runtime="reference")`: the directory of a tiny run of a few
    steps, trained once per session (the export and generate tests share them)."""
    from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from zerolock_core.jobs.job import train
    from zerolock_core.train.reference_trainer import train_reference

    made: dict[tuple, str] = {}

    def make(method: str, *, stages: int = 2, readout: str = "head", runtime: str = "reference") -> str:
        key = (method, stages, readout, runtime)
        if key not in made:
            out = tmp_path_factory.mktemp(f"{runtime}-{method}-K{stages}-{readout.replace(':', '')}")
            cfg = RunConfig(model=ModelConfig(model="tiny", readout=readout), data=DataConfig(seq_len=32, eval_size=8),
                            train=TrainConfig(runtime=runtime, method=method, stages=stages, batch=4, microbatches=2,
                                              steps=3, lr=1e-2, threads=1), out=str(out))
            metrics = (train_reference if runtime == "reference" else train)(cfg, progress=False, overwrite=True)
            assert metrics.state == "finished", metrics.reason
            made[key] = str(out)
        return made[key]

    return make
