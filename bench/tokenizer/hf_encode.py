#!/usr/bin/env python3
"""The reference side of bench/tokenizer: the same documents encoded by Hugging Face
`tokenizers` (Rust) with encode_batch, on one thread (TOKENIZERS_PARALLELISM=false) or on
its rayon pool (RAYON_NUM_THREADS threads). Prints the same JSON as mixt_bench_tokenizer.

    hf_encode.py TOKENIZER DOCUMENTS.jsonl THREADS [REPEATS]
"""
import json
import os
import sys
import time

threads = int(sys.argv[3])
if threads == 1:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
else:
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    os.environ["RAYON_NUM_THREADS"] = str(threads)
from tokenizers import Tokenizer  # noqa: E402  (after the environment it reads)

tok = Tokenizer.from_file(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    docs = [json.loads(line)["text"] for line in f]
repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 1
best = float("inf")
for _ in range(repeats):
    start = time.perf_counter()
    encodings = tok.encode_batch(docs, add_special_tokens=False)
    best = min(best, time.perf_counter() - start)
tokens, checksum = 0, 0
for e in encodings:
    tokens += len(e.ids)
    for i in e.ids:
        checksum = (checksum * 1000003 + i) % (1 << 64)
print(json.dumps({"bytes": sum(len(d.encode("utf-8")) for d in docs), "tokens": tokens, "seconds": best,
                  "checksum": checksum}))
