#!/usr/bin/env python3
"""A transformers Llama checkpoint folder for recipes/llama/finetune.yaml's test (no downloads).

  llama_checkpoint.py TOKENIZER OUT_DIR

Writes OUT_DIR as save_pretrained writes a LlamaForCausalLM (config.json, model.safetensors)
with a copy of TOKENIZER (a tokenizer.json): a small randomly initialised model whose
vocabulary is the tokenizer's, grouped-query attention and a tied head, as SmolLM2's.
"""
import shutil
import sys
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

tokenizer, out = sys.argv[1], Path(sys.argv[2])
transformers.utils.logging.set_verbosity_error()
torch.manual_seed(0)
config = LlamaConfig(vocab_size=Tokenizer.from_file(tokenizer).get_vocab_size(), hidden_size=64, intermediate_size=160,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                     rope_theta=100000.0, tie_word_embeddings=True, bos_token_id=None, eos_token_id=None,
                     pad_token_id=None)
LlamaForCausalLM(config).save_pretrained(out, safe_serialization=True)
shutil.copy(tokenizer, out / "tokenizer.json")
print(out)
