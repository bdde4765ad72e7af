#!/usr/bin/env python3
"""Token files for tests/datasets/tokens_test.cpp, written as nanoGPT and llm.c write theirs.

  make_token_files.py OUT_DIR

From one known sequence, ids[i] = (7919 * i + 13) % 50257 for i < 4099 (distinct ids, so a
token's value says where it came from; many above 32767, so a signed read would show):
  OUT_DIR/tokens.nanogpt.bin   nanoGPT's prepare.py: np.array(ids, dtype=np.uint16).tofile(f)
  OUT_DIR/tokens.llmc.bin      llm.c's dev/data/data_common.py write_datafile(f, ids)
  OUT_DIR/shard_0.bin, shard_1.bin   write_datafile of ids[:1500] and ids[1500:]
Needs numpy only.
"""
import os
import sys

import numpy as np

COUNT = 4099
SHARD_SPLIT = 1500


def known_ids():
    return [(7919 * i + 13) % 50257 for i in range(COUNT)]


def write_datafile(filename, toks):
    """llm.c's write_datafile for model_desc="gpt-2": 256 int32 of header, then uint16 ids."""
    assert len(toks) < 2**31, "token count too large"
    header = np.zeros(256, dtype=np.int32)
    header[0] = 20240520  # magic
    header[1] = 1  # version: uint16 tokens
    header[2] = len(toks)  # number of tokens after the 256*4 bytes of header
    toks_np = np.array(toks, dtype=np.uint16)
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(toks_np.tobytes())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    ids = known_ids()
    np.array(ids, dtype=np.uint16).tofile(os.path.join(out, "tokens.nanogpt.bin"))
    write_datafile(os.path.join(out, "tokens.llmc.bin"), ids)
    write_datafile(os.path.join(out, "shard_0.bin"), ids[:SHARD_SPLIT])
    write_datafile(os.path.join(out, "shard_1.bin"), ids[SHARD_SPLIT:])


if __name__ == "__main__":
    main()
