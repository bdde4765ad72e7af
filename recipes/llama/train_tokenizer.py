#!/usr/bin/env python3
"""Trains gpl3_bpe512.json, the byte-level BPE tokenizer of recipes/llama/gpl3.yaml.

  python3 recipes/llama/train_tokenizer.py [TEXT] [OUT]

GPT-2's scheme (byte-level pre-tokenizer with GPT-2's regex, no normalizer) with a
vocabulary of 512: the 256 bytes, an end-of-text token and 255 merges learnt from the GNU
GPL v3 (/usr/share/common-licenses/GPL-3). Hugging Face `tokenizers` trains it (a reference
tool, used once: the file is committed, and mixt reads it with its own C++ tokenizer).
"""
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

text = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/common-licenses/GPL-3"
out = sys.argv[2] if len(sys.argv) > 2 else "recipes/llama/gpl3_bpe512.json"
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tokenizer.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|endoftext|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tokenizer.train([text], trainer)
tokenizer.save(out)
ids = tokenizer.encode(open(text, encoding="utf-8").read()).ids
print(f"{out}: vocabulary {tokenizer.get_vocab_size()}, {len(ids)} tokens of {text}")
