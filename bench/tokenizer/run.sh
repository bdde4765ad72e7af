#!/usr/bin/env bash
# Tokenizer benchmark: encode throughput (MB/s of UTF-8 text, tokens/s) of mixt's tokenizer
# (mixt/tokenizer.h) against Hugging Face tokenizers and OpenAI's tiktoken (both Rust, their
# Python packages) on the same documents and the same vocabulary, on one thread and on every
# core. The documents (prose, code and text in many scripts) and a GPT-2-style tokenizer
# (vocabulary 50,257) are made from what Debian holds (make_corpus.py). Each figure is the best
# of REPEATS; the ids of all three must agree (checksum).
#
# usage: bench/tokenizer/run.sh [BUILD_DIR=build] [MB=20] [REPEATS=3]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
megabytes="${2:-20}"
repeats="${3:-3}"
exe="$build/bin/mixt_bench_tokenizer"
[ -x "$exe" ] || { echo "build first: cmake --build $build --target mixt_bench_tokenizer" >&2; exit 2; }
work="$build/bench/tokenizer"
# The corpus and its tokenizer (minutes to train) are made again only when MB or the script changed.
stamp="$megabytes $(sha256sum "$here/make_corpus.py" | cut -c1-16)"
if [ "$(cat "$work/stamp" 2>/dev/null)" != "$stamp" ]; then
  python3 "$here/make_corpus.py" "$work" "$megabytes"
  echo "$stamp" > "$work/stamp"
fi
cores="$(nproc)"
rows=()
for threads in 1 "$cores"; do
  rows+=("$threads" "$("$exe" "$work/tokenizer.json" "$work/documents.jsonl" "$threads" "$repeats")"
         "$(python3 "$here/hf_encode.py" "$work/tokenizer.json" "$work/documents.jsonl" "$threads" "$repeats")"
         "$(python3 "$here/tiktoken_encode.py" "$work/tokenizer.json" "$work/documents.jsonl" "$threads" "$repeats")")
done
python3 - "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" "$cores" "${rows[@]}" <<'PY'
import json, sys
cpu, cores, rows = sys.argv[1].strip(), sys.argv[2], sys.argv[3:]
print(f"tokenizer encode: GPT-2-style byte-level BPE (vocabulary 50,257), prose, code and many scripts, "
      f"{cpu}, {cores} cores")
print(f"{'threads':>7}  {'encoder':<28}{'MB':>7}{'tokens':>11}{'seconds':>9}{'MB/s':>8}{'tokens/s':>12}")
for i in range(0, len(rows), 4):
    threads, m, h, t = rows[i], json.loads(rows[i + 1]), json.loads(rows[i + 2]), json.loads(rows[i + 3])
    for name, r in (("mixt", m), ("HF tokenizers (Rust)", h), ("tiktoken (Rust)", t)):
        print(f"{threads:>7}  {name:<28}{r['bytes'] / 1e6:>7.1f}{r['tokens']:>11}{r['seconds']:>9.3f}"
              f"{r['bytes'] / 1e6 / r['seconds']:>8.2f}{r['tokens'] / r['seconds']:>12.0f}")
    for name, r in (("HF", h), ("tiktoken", t)):
        same = "same ids" if (m["tokens"], m["checksum"]) == (r["tokens"], r["checksum"]) else "IDS DIFFER"
        print(f"{threads:>7}  {'ratio mixt / ' + name:<28}{'':>7}{'':>11}{'':>9}{r['seconds'] / m['seconds']:>7.2f}x"
              f"{'':>12}  {same}")
PY
