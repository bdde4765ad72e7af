#!/usr/bin/env python3
"""References for the instruct dataset (datasets/instruct) and its masked loss (no downloads).

  make_instruct_golden.py OUT_DIR

Writes, under OUT_DIR:
  llama3/   a transformers folder: a byte-level BPE tokenizer trained here on the GPL-3 (the
            Llama 3 pre-tokenizer regex and special tokens), tokenizer_config.json with Llama 3
            Instruct's chat template (its text as published), and a small random
            LlamaForCausalLM (config.json, model.safetensors) of that vocabulary;
  chatml/   the same with Qwen2's pre-tokenizer and ChatML's special tokens, and SmolLM2-Instruct's
            chat template (ChatML with a default system message);
  qwen/     the same with Qwen2.5-Instruct's template logic without tools (another default system
            message, written with Jinja escapes);
  train.jsonl   conversations in the three forms the dataset reads (messages; prompt/response;
            Alpaca's instruction/input/output);
  expected.json per family and per sample: the ids of transformers' apply_chat_template(messages,
            tokenize=True), the labels built the TRL way (each assistant turn's tokens after the
            generation prompt, up to the next message; every other token -100), and the ids of
            apply_chat_template(messages[:-1], add_generation_prompt=True);
            and the reference losses of LlamaForCausalLM on llama3/ over the samples padded to
            the context: torch.nn.functional.cross_entropy(logits[:, :-1], labels[:, 1:],
            ignore_index=-100) for the first batch of `batch` samples and over them all.
"""
import json
import sys
from pathlib import Path

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_stamp import Stamp  # noqa: E402

# Meta-Llama-3-8B-Instruct's tokenizer_config.json chat_template, as published.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
# SmolLM2-135M-Instruct's, as published (ChatML; a default system message when none is given).
CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Qwen2.5-Instruct's logic without tools, as its template writes it: Jinja escapes (\n) in the
# string literals, a default system message in the else branch.
QWEN_TEMPLATE = (
    r"{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}"
    r"{%- else %}{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    r"<|im_end|>\n' }}{%- endif %}{%- for message in messages %}{%- if message.role != 'system' or not loop.first %}"
    r"{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endif %}{%- endfor %}"
    r"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")

FAMILIES = {
    "llama3": dict(template=LLAMA3_TEMPLATE, regex=LLAMA3_REGEX,
                   special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                            "<|eot_id|>"],
                   bos="<|begin_of_text|>", eos="<|eot_id|>"),
    "chatml": dict(template=CHATML_TEMPLATE, regex=QWEN2_REGEX,
                   special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None, eos="<|im_end|>"),
    "qwen": dict(template=QWEN_TEMPLATE, regex=QWEN2_REGEX,
                 special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None, eos="<|im_end|>"),
}

# The samples of train.jsonl: every form, a system message, several turns, text around which
# the template's whitespace matters (Llama 3 trims content; ChatML keeps it), non-ASCII.
SAMPLES = [
    {"messages": [{"role": "system", "content": "You are a terse assistant."},
                  {"role": "user", "content": "What does the GPL protect?"},
                  {"role": "assistant", "content": "The freedom to share and change software."}]},
    {"messages": [{"role": "user", "content": "Name a free software licence."},
                  {"role": "assistant", "content": "The GNU General Public License."},
                  {"role": "user", "content": "Which version?"},
                  {"role": "assistant", "content": "Version 3, from 29 June 2007."}]},
    {"prompt": "Who may copy the program?", "response": "Everyone may copy and distribute verbatim copies."},
    {"instruction": "Summarise the preamble.", "input": "", "output": "Free software stays free."},
    {"instruction": "Translate to French.", "input": "free software", "output": "logiciel libre"},
    {"messages": [{"role": "user", "content": "  Spaces around?  \n"},
                  {"role": "assistant", "content": "\nYes, and déjà vu: naïve café.  "}]},
    {"system": "Answer in one word.", "prompt": "Is the GPL a copyleft licence?", "response": "Yes."},
]
CONTEXT = 96
BATCH = 4


def messages_of(sample):
    """The conversation of a JSONL sample, as the dataset reads it (docs/instruct.md)."""
    if "messages" in sample:
        return sample["messages"]
    if "prompt" in sample:
        system = [{"role": "system", "content": sample["system"]}] if "system" in sample else []
        return system + [{"role": "user", "content": sample["prompt"]},
                         {"role": "assistant", "content": sample["response"]}]
    user = sample["instruction"] + ("\n\n" + sample["input"] if sample.get("input") else "")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": sample["output"]}]


def ids_of(tokenizer, messages, **kwargs):
    out = tokenizer.apply_chat_template(messages, tokenize=True, **kwargs)
    if isinstance(out, dict) or hasattr(out, "keys"):
        out = out["input_ids"]
    return list(out)


def trl_labels(tokenizer, messages):
    """Labels as TRL's prompt-completion masking gives them, turn by turn: for each assistant
    message i, the tokens after apply_chat_template(messages[:i], add_generation_prompt=True)
    up to the end of apply_chat_template(messages[:i + 1]) are trained; the rest is -100."""
    ids = ids_of(tokenizer, messages)
    labels = [-100] * len(ids)
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        begin = len(ids_of(tokenizer, messages[:i], add_generation_prompt=True))
        end = len(ids_of(tokenizer, messages[:i + 1]))
        assert ids_of(tokenizer, messages[:i + 1]) == ids[:end]
        labels[begin:end] = ids[begin:end]
    return ids, labels


def write_tokenizer(folder, family):
    spec = FAMILIES[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(spec["regex"]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=640, special_tokens=spec["special"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    corpus = Path("/usr/share/common-licenses/GPL-3").read_text().split("\n\n")
    tok.train_from_iterator(corpus, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": spec["template"],
              "eos_token": spec["eos"], "model_max_length": 4096}
    if spec["bos"]:
        config["bos_token"] = spec["bos"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    fast = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), bos_token=spec["bos"],
                                   eos_token=spec["eos"])
    fast.chat_template = spec["template"]
    return fast, tok.get_vocab_size()


def padded(rows, value):
    return torch.tensor([row[:CONTEXT + 1] + [value] * (CONTEXT + 1 - len(row[:CONTEXT + 1])) for row in rows])


def main():
    out = Path(sys.argv[1])
    stamp = Stamp(out, __file__)
    if stamp.current():
        return
    transformers.utils.logging.set_verbosity_error()
    with open(out / "train.jsonl", "w") as f:
        for sample in SAMPLES:
            f.write(json.dumps(sample, ensure_ascii=False) + "\n")
    expected = {"context": CONTEXT, "batch": BATCH}
    tokenizers = {}
    for family in FAMILIES:
        tokenizer, vocab = write_tokenizer(out / family, family)
        tokenizers[family] = tokenizer
        rows = []
        for sample in SAMPLES:
            messages = messages_of(sample)
            ids, labels = trl_labels(tokenizer, messages)
            rows.append({"messages": messages, "ids": ids, "labels": labels,
                         "generation_prompt": ids_of(tokenizer, messages[:-1], add_generation_prompt=True)})
        expected[family] = {"vocab": vocab, "samples": rows}

    # The model on llama3/, and the masked loss over the samples as the dataset lays them out:
    # each row cut to context + 1 tokens; inputs padded (the pad never reaches a trained
    # position: attention is causal), labels padded with -100.
    torch.manual_seed(0)
    vocab = expected["llama3"]["vocab"]
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                         pad_token_id=None)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(out / "llama3", safe_serialization=True)
    samples = expected["llama3"]["samples"]
    ids = padded([s["ids"] for s in samples], 0)
    labels = padded([s["labels"] for s in samples], -100)
    with torch.no_grad():
        logits = model(input_ids=ids[:, :-1]).logits.float()
    targets = labels[:, 1:]

    def loss(rows):
        return torch.nn.functional.cross_entropy(logits[rows].reshape(-1, vocab), targets[rows].reshape(-1),
                                                 ignore_index=-100).item()

    expected["loss_first_batch"] = loss(slice(0, BATCH))
    # The same batch unmasked (every next token of a sample a target, the padding not), which
    # the masked loss must not be.
    unmasked = padded([s["ids"] for s in samples], -100)[:BATCH, 1:]
    expected["loss_first_batch_unmasked"] = torch.nn.functional.cross_entropy(
        logits[:BATCH].reshape(-1, vocab), unmasked.reshape(-1), ignore_index=-100).item()
    expected["loss_all"] = loss(slice(0, len(samples)))
    expected["trained_tokens"] = int((targets != -100).sum())

    # `mixt generate --chat`: the prompt as a user turn with the generation prompt, greedy,
    # stopping at <|eot_id|>; what it prints is the decoded prompt and continuation.
    tokenizer = tokenizers["llama3"]
    prompt = "Who may copy the program?"
    chat_ids = ids_of(tokenizer, [{"role": "user", "content": prompt}], add_generation_prompt=True)
    eot = tokenizer.convert_tokens_to_ids("<|eot_id|>")
    with torch.no_grad():
        generated = model.generate(torch.tensor([chat_ids]), max_new_tokens=8, do_sample=False, eos_token_id=eot,
                                   pad_token_id=eot, attention_mask=torch.ones(1, len(chat_ids), dtype=torch.long))
    ids_out = generated[0].tolist()
    expected["chat_generation"] = {"prompt": prompt, "max_new_tokens": 8, "prompt_ids": chat_ids, "ids": ids_out,
                                   "eot": eot, "text": tokenizer.decode(ids_out)}
    (out / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1))
    stamp.write()
    print(out)


if __name__ == "__main__":
    main()
