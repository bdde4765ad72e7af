#!/usr/bin/env python3
"""The second reference of bench/tokenizer: OpenAI's tiktoken (Rust) encoding the same documents
with an Encoding built from the same tokenizer.json (each token's bytes ranked by its id, as a
BPE trainer assigns ids in merge order; GPT-2's pattern; <|endoftext|> special), on one thread
(encode_ordinary_batch with num_threads=1) or on THREADS. Prints the same JSON as
mixt_bench_tokenizer; the ids must agree with the others' (checksum).

    tiktoken_encode.py TOKENIZER DOCUMENTS.jsonl THREADS [REPEATS]
"""
import json
import sys
import time

import tiktoken

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def byte_decoder():
    """GPT-2's printable character -> byte map (the byte-level tokens' spelling, inverted)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def encoding(tokenizer_file):
    spec = json.load(open(tokenizer_file, encoding="utf-8"))
    to_byte = byte_decoder()
    special = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
    ranks = {bytes(to_byte[c] for c in token): i for token, i in spec["model"]["vocab"].items()
             if token not in special}
    return tiktoken.Encoding("bench", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=special)


enc = encoding(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    docs = [json.loads(line)["text"] for line in f]
threads = int(sys.argv[3])
repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 1
best = float("inf")
for _ in range(repeats):
    start = time.perf_counter()
    encoded = enc.encode_ordinary_batch(docs, num_threads=threads)
    best = min(best, time.perf_counter() - start)
tokens, checksum = 0, 0
for ids in encoded:
    tokens += len(ids)
    for i in ids:
        checksum = (checksum * 1000003 + i) % (1 << 64)
print(json.dumps({"bytes": sum(len(d.encode("utf-8")) for d in docs), "tokens": tokens, "seconds": best,
                  "checksum": checksum}))
