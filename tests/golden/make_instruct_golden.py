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
            ignore_index=-100) for the first batch of `batch` samples and over them all;
            "packed": the samples packed into rows (PACKED_CONTEXT), their positions, and
            LlamaForCausalLM's loss over them given position_ids and a 4-D block-diagonal mask;
  llama31/, llama32/, qwen3/  tokenizer folders with Llama 3.1's, Llama 3.2's and Qwen3's chat
            templates as published (qwen3 with three more conversations, with <think> blocks);
            their ids, labels and generation prompts in expected.json as for the others.
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
# Llama 3.1's (meta-llama/Llama-3.1-8B-Instruct's tokenizer_config.json chat_template, as
# published): a system header with the knowledge cutoff and date_string ("26 Jul 2024" when
# not given), tools in a user message or the system header.
LLAMA31_TEMPLATE = (
    "{{- bos_token }}\n{%- if custom_tools is defined %}\n    {%- set tools = custom_tools %}\n{%- endif %}\n"
    "{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n{%- endif %}\n"
    "{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n"
    "{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n\n"
    "{#- This block extracts the system message, so we can slot it into the right place. #}\n"
    "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n\n"
    "{#- System message + builtin tools #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{%- if builtin_tools is defined or tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n"
    "{%- if builtin_tools is defined %}\n"
    "    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") + \"\\n\\n\"}}\n"
    "{%- endif %}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
    "{%- if tools is not none and not tools_in_user_message %}\n"
    "    {{- \"You have access to the following functions. To call a function, please respond with JSON for a "
    "function call.\" }}\n"
    "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
    "value}.' }}\n"
    "    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n"
    "        {{- \"\\n\\n\" }}\n    {%- endfor %}\n{%- endif %}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n\n"
    "{#- Custom tools are passed in a user message with some extra guidance #}\n"
    "{%- if tools_in_user_message and not tools is none %}\n"
    "    {#- Extract the first user message so we can plug it in here #}\n    {%- if messages | length != 0 %}\n"
    "        {%- set first_user_message = messages[0]['content']|trim %}\n"
    "        {%- set messages = messages[1:] %}\n    {%- else %}\n"
    "        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user "
    "message!\") }}\n{%- endif %}\n"
    "    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
    "    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n"
    "    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n"
    "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
    "value}.' }}\n"
    "    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n"
    "        {{- \"\\n\\n\" }}\n    {%- endfor %}\n    {{- first_user_message + \"<|eot_id|>\"}}\n{%- endif %}\n\n"
    "{%- for message in messages %}\n"
    "    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n"
    "        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' }}\n"
    "    {%- elif 'tool_calls' in message %}\n        {%- if not message.tool_calls|length == 1 %}\n"
    "            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n"
    "        {%- endif %}\n        {%- set tool_call = message.tool_calls[0].function %}\n"
    "        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}\n"
    "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "            {{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}\n"
    "            {%- for arg_name, arg_val in tool_call.arguments | items %}\n"
    "                {{- arg_name + '=\"' + arg_val + '\"' }}\n                {%- if not loop.last %}\n"
    "                    {{- \", \" }}\n                {%- endif %}\n                {%- endfor %}\n"
    "            {{- \")\" }}\n        {%- else  %}\n"
    "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "            {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n            {{- '\"parameters\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n            {{- \"}\" }}\n        {%- endif %}\n"
    "        {%- if builtin_tools is defined %}\n            {#- This means we're in ipython mode #}\n"
    "            {{- \"<|eom_id|>\" }}\n        {%- else %}\n            {{- \"<|eot_id|>\" }}\n        {%- endif %}\n"
    "    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n"
    "        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n"
    "        {%- if message.content is mapping or message.content is iterable %}\n"
    "            {{- message.content | tojson }}\n        {%- else %}\n            {{- message.content }}\n"
    "        {%- endif %}\n        {{- \"<|eot_id|>\" }}\n    {%- endif %}\n{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"
)
# Llama 3.2's (meta-llama/Llama-3.2-1B-Instruct's, as published): 3.1's without builtin tools,
# and today's date from strftime_now when it is defined (transformers defines it), so the
# references pass date_string; tool calls written the same way.
LLAMA32_TEMPLATE = (
    LLAMA31_TEMPLATE
    .replace("{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n",
             "{%- if not date_string is defined %}\n    {%- if strftime_now is defined %}\n"
             "        {%- set date_string = strftime_now(\"%d %b %Y\") %}\n    {%- else %}\n"
             "        {%- set date_string = \"26 Jul 2024\" %}\n    {%- endif %}\n{%- endif %}\n")
    .replace("{#- System message + builtin tools #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
             "{%- if builtin_tools is defined or tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n"
             "{%- endif %}\n{%- if builtin_tools is defined %}\n"
             "    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") + "
             "\"\\n\\n\"}}\n{%- endif %}\n",
             "{#- System message #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
             "{%- if tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n")
    .replace("        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}\n"
             "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
             "            {{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}\n"
             "            {%- for arg_name, arg_val in tool_call.arguments | items %}\n"
             "                {{- arg_name + '=\"' + arg_val + '\"' }}\n                {%- if not loop.last %}\n"
             "                    {{- \", \" }}\n                {%- endif %}\n                {%- endfor %}\n"
             "            {{- \")\" }}\n        {%- else  %}\n"
             "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
             "            {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n            {{- '\"parameters\": ' }}\n"
             "            {{- tool_call.arguments | tojson }}\n            {{- \"}\" }}\n        {%- endif %}\n"
             "        {%- if builtin_tools is defined %}\n            {#- This means we're in ipython mode #}\n"
             "            {{- \"<|eom_id|>\" }}\n        {%- else %}\n            {{- \"<|eot_id|>\" }}\n"
             "        {%- endif %}\n",
             "        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
             "        {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n        {{- '\"parameters\": ' }}\n"
             "        {{- tool_call.arguments | tojson }}\n        {{- \"}\" }}\n        {{- \"<|eot_id|>\" }}\n")
)
assert "strftime_now" in LLAMA32_TEMPLATE and "builtin_tools" not in LLAMA32_TEMPLATE
# Qwen3's (Qwen/Qwen3-8B's tokenizer_config.json chat_template, as published): ChatML, no
# default system message, an assistant's <think>...</think> kept only after the last user query.
QWEN3_TEMPLATE = (
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0].role == 'system' %}\n"
    "        {{- messages[0].content + '\\n\\n' }}\n    {%- endif %}\n"
    "    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided "
    "with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == \"user\" and message.content is string and "
    "not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n"
    "        {%- set ns.multi_step_tool = false %}\n        {%- set ns.last_query_index = index %}\n"
    "    {%- endif %}\n{%- endfor %}\n{%- for message in messages %}\n    {%- if message.content is string %}\n"
    "        {%- set content = message.content %}\n    {%- else %}\n        {%- set content = '' %}\n    {%- endif %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n        {%- set reasoning_content = '' %}\n"
    "        {%- if message.reasoning_content is string %}\n"
    "            {%- set reasoning_content = message.reasoning_content %}\n        {%- else %}\n"
    "            {%- if '</think>' in content %}\n"
    "                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1]"
    ".lstrip('\\n') %}\n"
    "                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n            {%- endif %}\n"
    "        {%- endif %}\n        {%- if loop.index0 > ns.last_query_index %}\n"
    "            {%- if loop.last or (not loop.last and reasoning_content) %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + "
    "'\\n</think>\\n\\n' + content.lstrip('\\n') }}\n            {%- else %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n' + content }}\n            {%- endif %}\n"
    "        {%- else %}\n            {{- '<|im_start|>' + message.role + '\\n' + content }}\n        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if (loop.first and content) or (not loop.first) %}\n                    {{- '\\n' }}\n"
    "                {%- endif %}\n                {%- if tool_call.function %}\n"
    "                    {%- set tool_call = tool_call.function %}\n                {%- endif %}\n"
    "                {{- '<tool_call>\\n{\"name\": \"' }}\n                {{- tool_call.name }}\n"
    "                {{- '\", \"arguments\": ' }}\n                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n            {%- endfor %}\n        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- content }}\n        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"
)
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")

# Llama 3.2's template renders today's date (strftime_now): the references give one instead,
# which the test gives mixt's template too.
DATE = "07 Dec 2026"

FAMILIES = {
    "llama3": dict(template=LLAMA3_TEMPLATE, regex=LLAMA3_REGEX,
                   special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                            "<|eot_id|>"],
                   bos="<|begin_of_text|>", eos="<|eot_id|>"),
    "chatml": dict(template=CHATML_TEMPLATE, regex=QWEN2_REGEX,
                   special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None, eos="<|im_end|>"),
    "qwen": dict(template=QWEN_TEMPLATE, regex=QWEN2_REGEX,
                 special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None, eos="<|im_end|>"),
    "llama31": dict(template=LLAMA31_TEMPLATE, regex=LLAMA3_REGEX,
                    special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                             "<|eot_id|>"],
                    bos="<|begin_of_text|>", eos="<|eot_id|>"),
    "llama32": dict(template=LLAMA32_TEMPLATE, regex=LLAMA3_REGEX,
                    special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                             "<|eot_id|>"],
                    bos="<|begin_of_text|>", eos="<|eot_id|>", kwargs={"date_string": DATE}),
    "qwen3": dict(template=QWEN3_TEMPLATE, regex=QWEN2_REGEX,
                  special=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"], bos=None,
                  eos="<|im_end|>"),
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
# Conversations with reasoning, for Qwen3's template only (its <think> handling): a <think>
# block kept in the last turn, one dropped before the last user message, newlines around it.
THINKING = [
    {"messages": [{"role": "user", "content": "Is the GPL a licence?"},
                  {"role": "assistant", "content": "<think>\nThe title says so.\n</think>\n\nYes, a licence."}]},
    {"messages": [{"role": "system", "content": "Think first."},
                  {"role": "user", "content": "Which version?"},
                  {"role": "assistant", "content": "<think>Dated 2007.</think>Version 3."},
                  {"role": "user", "content": "Who wrote it?"},
                  {"role": "assistant", "content": "<think>\n\nThe FSF.\n\n</think>\n\n\nThe Free Software Foundation."}]},
    {"messages": [{"role": "user", "content": "One?"}, {"role": "assistant", "content": "One."},
                  {"role": "user", "content": "Two?"}, {"role": "assistant", "content": "Two."}]},
]
CONTEXT = 96
BATCH = 4
# Packing: the samples' (input, target) pairs in rows of PACKED_CONTEXT, greedily in order.
PACKED_CONTEXT = 128
PACKED_BATCH = 2


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
    out = tokenizer.apply_chat_template(messages, tokenize=True, **kwargs, **getattr(tokenizer, "mixt_kwargs", {}))
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


def span_labels(tokenizer, messages, header):
    """Labels from transformers' rendered text: each assistant turn's text after its `header`,
    through its end of turn, trained; a token is trained when its first character is. For
    Qwen3, whose rendering of messages[:i + 1] is no prefix of the whole conversation's (a
    <think> block kept in a last turn, dropped before a later user message), so TRL's way
    does not apply."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, **getattr(tokenizer, "mixt_kwargs", {}))
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    assert ids == ids_of(tokenizer, messages)
    spans, at = [], 0
    while (begin := text.find(header, at)) != -1:
        end = text.index("<|im_end|>\n", begin) + len("<|im_end|>\n")
        spans.append((begin + len(header), end))
        at = end
    labels = [i if any(b <= start < e for b, e in spans) else -100
              for i, (start, _) in zip(ids, encoded["offset_mapping"])]
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
    fast.mixt_kwargs = spec.get("kwargs", {})
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
    expected = {"context": CONTEXT, "batch": BATCH, "llama32_date": DATE}
    tokenizers = {}
    for family in FAMILIES:
        tokenizer, vocab = write_tokenizer(out / family, family)
        tokenizers[family] = tokenizer
        rows = []
        for sample in SAMPLES + (THINKING if family == "qwen3" else []):
            messages = messages_of(sample)
            if family == "qwen3":
                ids, labels = span_labels(tokenizer, messages, "<|im_start|>assistant\n")
                if sum(m["role"] == "assistant" for m in messages) == 1:  # TRL's way applies: the same
                    assert trl_labels(tokenizer, messages) == (ids, labels)
            else:
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

    # Packing: each sample's (input, target) pairs (cut to context + 1 tokens, none here) one
    # after another in rows of PACKED_CONTEXT, greedily in order; the padding's inputs 0, its
    # targets -100, its positions continuing the last sample's. transformers' Llama given the
    # positions and a 4-D block-diagonal causal mask (True: attend) keeps attention inside each
    # sample; the losses are over the same trained tokens as the unpacked ones above.
    rows, used = [], PACKED_CONTEXT
    for i, sample in enumerate(samples):
        if used + len(sample["ids"]) - 1 > PACKED_CONTEXT:
            rows.append([])
            used = 0
        rows[-1].append(i)
        used += len(sample["ids"]) - 1
    inputs = torch.zeros(len(rows), PACKED_CONTEXT, dtype=torch.long)
    packed_targets = torch.full((len(rows), PACKED_CONTEXT), -100)
    positions = torch.zeros(len(rows), PACKED_CONTEXT, dtype=torch.long)
    sequence = torch.zeros(len(rows), PACKED_CONTEXT, dtype=torch.long)
    for r, members in enumerate(rows):
        at = 0
        for k, i in enumerate(members):
            n = len(samples[i]["ids"]) - 1
            inputs[r, at:at + n] = torch.tensor(samples[i]["ids"][:-1])
            packed_targets[r, at:at + n] = torch.tensor(samples[i]["labels"][1:])
            positions[r, at:at + n] = torch.arange(n)
            sequence[r, at:at + n] = k
            at += n
        positions[r, at:] = n + torch.arange(PACKED_CONTEXT - at)
        sequence[r, at:] = len(members) - 1
    causal = torch.ones(PACKED_CONTEXT, PACKED_CONTEXT, dtype=torch.bool).tril()
    mask = (sequence[:, :, None] == sequence[:, None, :]) & causal
    with torch.no_grad():
        packed_logits = model(input_ids=inputs, position_ids=positions, attention_mask=mask[:, None]).logits.float()

    def packed_loss(count):
        return torch.nn.functional.cross_entropy(packed_logits[:count].reshape(-1, vocab),
                                                 packed_targets[:count].reshape(-1), ignore_index=-100).item()

    first = sorted(i for members in rows[:PACKED_BATCH] for i in members)
    expected["packed"] = {
        "context": PACKED_CONTEXT, "batch": PACKED_BATCH, "rows": rows,
        "positions": positions.tolist(),
        # transformers' loss over the packed rows, and PyTorch's over the same samples unpacked
        "loss_first_batch": packed_loss(PACKED_BATCH), "loss_all": packed_loss(len(rows)),
        "loss_first_batch_unpacked": loss(first), "first_batch_samples": first,
    }
    # The mask matters: without it the samples would see each other.
    with torch.no_grad():
        crossing = model(input_ids=inputs, position_ids=positions).logits.float()
    expected["packed"]["loss_all_attending_across"] = torch.nn.functional.cross_entropy(
        crossing.reshape(-1, vocab), packed_targets.reshape(-1), ignore_index=-100).item()

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
    # `--date`: Llama 3.2's template with date_string given (its mixt_kwargs), as decoded text.
    llama32 = tokenizers["llama32"]
    dated = ids_of(llama32, [{"role": "user", "content": prompt}], add_generation_prompt=True)
    expected["chat_generation"]["llama32_dated"] = {"date": DATE, "prompt_text": llama32.decode(dated)}
    (out / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1))
    stamp.write()
    print(out)


if __name__ == "__main__":
    main()
