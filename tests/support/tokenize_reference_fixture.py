#!/usr/bin/env python3
"""The references of test_tokenize_cli, made once per build tree rather than once per test
process (the GPT-2 that generate_reference.py trains takes minutes on two busy cores).

    tokenize_reference_fixture.py OUT_DIR

OUT_DIR gets what `tokenizer_reference.py --wide OUT_DIR` writes, then generate_reference.py's
model (OUT_DIR/hf, OUT_DIR/hf_sharded) and its output (OUT_DIR/generate.json) for the
gpt2_style tokenizer and the prompt below. Nothing is redone while OUT_DIR/stamp matches the
scripts, their inputs and the torch/transformers/tokenizers versions.
"""
import hashlib
import subprocess
import sys
from pathlib import Path

import tokenizers
import torch
import transformers

HERE = Path(__file__).resolve().parent
PROMPT = "You may convey verbatim copies of the"  # tokenize_cli_test.cpp's kPrompt
INPUTS = [HERE / "tokenizer_reference.py", HERE / "generate_reference.py", Path(__file__).resolve(),
          HERE.parent / "fixtures" / "text" / "tokenizer_corpus.txt", Path("/usr/share/common-licenses/GPL-3")]


def stamp():
    digest = hashlib.sha256()
    for path in INPUTS:
        digest.update(path.read_bytes())
    return (f"{digest.hexdigest()} torch {torch.__version__} transformers {transformers.__version__} "
            f"tokenizers {tokenizers.__version__}\n")


def main(out_dir):
    out_dir = Path(out_dir)
    stamp_file = out_dir / "stamp"
    if stamp_file.exists() and stamp_file.read_text() == stamp():
        print(f"{out_dir}: up to date")
        return 0
    stamp_file.unlink(missing_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(HERE / "tokenizer_reference.py"), "--wide", str(out_dir)], check=True)
    generated = subprocess.run(
        [sys.executable, str(HERE / "generate_reference.py"), "--tokenizer", str(out_dir / "gpt2_style" / "tokenizer.json"),
         "--out", str(out_dir / "hf"), "--sharded-out", str(out_dir / "hf_sharded"), "--prompt", PROMPT,
         "--max-new-tokens", "24"], check=True, capture_output=True, text=True)
    (out_dir / "generate.json").write_text(generated.stdout)
    stamp_file.write_text(stamp())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]) if len(sys.argv) == 2 else __doc__)
