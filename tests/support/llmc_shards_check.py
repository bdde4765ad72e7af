#!/usr/bin/env python3
"""Checks `mixt tokenize`'s shards against the references: each file read the way llm.c's
dataloader reads one (the 256-int32 header: magic 20240520 with version 1 and uint16 ids,
or 20240801 with version 7 and uint32 ids; the token count; the file size), and the
stream, train shards then val shards, equal to what Hugging Face `tokenizers` makes of the
same documents: the end-of-text token, then the document's ids, for each document in order.

    llmc_shards_check.py --tokenizer T --out DIR [--field text] [--separator TOKEN] INPUT...

Prints a JSON object: {"ok": bool, "problems": [...], "tokens": N, "width": 2|4, "val_tokens": N}.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np
from tokenizers import Tokenizer

FORMATS = {20240520: (1, np.uint16), 20240801: (7, np.uint32)}


def read_llmc(path, problems):
    header = np.fromfile(path, dtype=np.int32, count=256)
    if len(header) != 256:
        problems.append(f"{path}: shorter than llm.c's header")
        return None, None
    if int(header[0]) not in FORMATS:
        problems.append(f"{path}: magic {header[0]}")
        return None, None
    version, dtype = FORMATS[int(header[0])]
    if header[1] != version:
        problems.append(f"{path}: version {header[1]} with magic {header[0]}")
    count = int(header[2])
    expected = 256 * 4 + count * np.dtype(dtype).itemsize
    if os.path.getsize(path) != expected:
        problems.append(f"{path}: {os.path.getsize(path)} bytes, the header promises {expected}")
    return np.fromfile(path, dtype=dtype, offset=1024), np.dtype(dtype).itemsize


def documents(inputs, field):
    for path in inputs:
        if path.endswith(".jsonl"):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        yield json.loads(line)[field]
        else:
            with open(path, encoding="utf-8") as f:
                yield f.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--field", default="text")
    parser.add_argument("--separator", default="<|endoftext|>")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()

    tok = Tokenizer.from_file(args.tokenizer)
    separator = tok.token_to_id(args.separator)
    expected = []
    docs = list(documents(args.inputs, args.field))
    for encoding in tok.encode_batch(docs, add_special_tokens=False):
        expected.append(separator)
        expected.extend(encoding.ids)

    problems, got, widths = [], [], set()
    split_sizes = {}
    for split in ("train", "val"):
        split_sizes[split] = 0
        for path in sorted(glob.glob(os.path.join(args.out, f"{split}_*.bin"))):
            ids, width = read_llmc(path, problems)
            if ids is not None:
                got.extend(int(i) for i in ids)
                widths.add(width)
                split_sizes[split] += len(ids)
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        problems.append(f"the stream differs from tokenizers' at token {first} ({len(got)} vs {len(expected)} tokens)")
    want_width = 2 if tok.get_vocab_size(with_added_tokens=True) <= 65536 else 4
    if widths != {want_width}:
        problems.append(f"token widths {sorted(widths)}, expected {want_width} for a vocabulary of "
                        f"{tok.get_vocab_size(with_added_tokens=True)}")
    print(json.dumps({"ok": not problems, "problems": problems, "tokens": len(got), "width": want_width,
                      "val_tokens": split_sizes["val"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
