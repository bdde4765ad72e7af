#!/usr/bin/env python3
"""What transformers' generate draws from a transformers folder, for `mixt generate` to match (no downloads).

  make_generation_golden.py golden OUT_DIR
      OUT_DIR/greedy/, OUT_DIR/sampled/   the same small seeded LlamaForCausalLM (save_pretrained),
                                          a byte-level BPE tokenizer.json trained here, and a
                                          generation_config.json: greedy, or sampling with a
                                          temperature, top_k, top_p and a repetition penalty;
                                          each with an eos_token_id that the continuation reaches
                                          before max_new_tokens
      OUT_DIR/cases.json                  per folder: the prompt, max_new_tokens, seed, the new
                                          tokens transformers' generate draws (ending at the eos
                                          token) and tokenizers' decode of prompt + new tokens
                                          (U+FFFD where the sampled tokens leave a character
                                          unfinished: the sampled case is chosen to have some);
                                          the same without the eos token (unstopped, decoded_unstopped)
      Generated once per generator and torch/transformers version (OUT_DIR/stamp).
"""
import json
import shutil
import sys
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from golden_stamp import Stamp  # tests/golden/golden_stamp.py

PROMPT = "Ünïcödé text: "
MAX_NEW_TOKENS = 40
TEXT = ["Grüße aus Köln, naïve café — ünïcödé text", "日本語のテキストと English words", "Ελληνικά και ρωσικий",
        "emoji 🙂🚀 and symbols ∑ ∫ ≈ €"] * 20
SAMPLING = {"do_sample": True, "temperature": 0.9, "top_k": 40, "top_p": 0.95, "repetition_penalty": 1.3}


def tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tok.train_from_iterator(TEXT, trainer)
    return tok


def draw(model, prompt, config, seed):
    torch.manual_seed(seed)
    out = model.generate(prompt, generation_config=config, max_new_tokens=MAX_NEW_TOKENS, pad_token_id=0)
    return out[0, prompt.size(1):].tolist()


def eos_within(tokens):
    """A token of the continuation, the later the better (from its 16th, else its 3rd), that
    none before it is: the stop."""
    for first in (15, 2):
        for at in range(first, len(tokens)):
            if tokens[at] not in tokens[:at]:
                return tokens[at]
    return tokens[0]


def golden(out_dir):
    out_dir = Path(out_dir)
    stamp = Stamp(out_dir, __file__)
    if stamp.current():
        return
    tok = tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # wider logits than the init's (near-uniform): fewer near ties
        model.lm_head.weight.mul_(4)
    prompt = torch.tensor([tok.encode(PROMPT).ids])
    cases = {}
    for name, settings in (("greedy", {"do_sample": False}), ("sampled", SAMPLING)):
        folder = out_dir / name
        model.save_pretrained(folder, safe_serialization=True)
        tok.save(str(folder / "tokenizer.json"))
        seeds = range(1) if name == "greedy" else range(50)
        for seed in seeds:
            free = draw(model, prompt, GenerationConfig(**settings), seed)
            eos = eos_within(free)
            generation = GenerationConfig(eos_token_id=eos, **settings)
            tokens = draw(model, prompt, generation, seed)
            assert tokens == free[:free.index(eos) + 1], (tokens, free)
            decoded = tok.decode(prompt[0].tolist() + tokens, skip_special_tokens=False)
            if name == "greedy" or "\ufffd" in decoded:
                break
        else:
            sys.exit("no seed leaves a character unfinished")
        generation.save_pretrained(folder)
        cases[name] = {"prompt": PROMPT, "max_new_tokens": MAX_NEW_TOKENS, "seed": seed, "eos": eos,
                       "tokens": tokens, "decoded": decoded, "unstopped": free,
                       "decoded_unstopped": tok.decode(prompt[0].tolist() + free, skip_special_tokens=False)}
    (out_dir / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")
    stamp.write()


if __name__ == "__main__":
    torch.set_num_threads(2)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        golden(sys.argv[2])
    else:
        sys.exit(__doc__)
