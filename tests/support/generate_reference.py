#!/usr/bin/env python3
"""The reference for `mixt generate --prompt`: a small GPT-2 (transformers' GPT2LMHeadModel,
seeded) trained for a few seconds on the GPL-3 text through the given tokenizer.json, so that
greedy decoding writes text rather than one token again and again, saved with
save_pretrained; and what transformers' greedy generate makes of a prompt with it
(PreTrainedTokenizerFast: encoded with its special tokens, decoded whole).

    generate_reference.py --tokenizer T --out DIR --prompt TEXT [--max-new-tokens N] [--sharded-out DIR2]

Writes DIR as save_pretrained writes a checkpoint (config.json, model.safetensors,
generation_config.json, and the tokenizer's tokenizer.json), DIR2 the same with the weights
in shards of 100 kB and their index, and prints {"text": ..., "ids": [...]}.
"""
import argparse
import json

import torch
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--sharded-out")
    args = parser.parse_args()
    tok = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=64, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config)
    with open("/usr/share/common-licenses/GPL-3", encoding="utf-8") as f:
        stream = torch.tensor(tok(f.read()).input_ids)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(300):
        starts = torch.randint(0, len(stream) - 65, (16,))
        batch = torch.stack([stream[s:s + 65] for s in starts.tolist()])
        loss = model(batch[:, :-1], labels=batch[:, :-1]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    model.save_pretrained(args.out)
    tok.save_pretrained(args.out)
    if args.sharded_out:
        model.save_pretrained(args.sharded_out, max_shard_size="100KB")
        tok.save_pretrained(args.sharded_out)
    ids = tok(args.prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.max_new_tokens,
                             do_sample=False, pad_token_id=0)
    print(json.dumps({"text": tok.decode(out[0]), "ids": out[0].tolist()}, indent=1))


if __name__ == "__main__":
    main()
