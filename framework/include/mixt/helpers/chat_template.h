// mixt/helpers/chat_template.h — chat templates written in C++, one per family, as the
// checkpoints' Jinja templates render a conversation (tokenizer_config.json's
// `chat_template`; no Jinja engine is used). The instruct dataset formats its samples with
// them, `mixt generate --chat` its prompt (docs/instruct.md):
//
//   llama3  Meta-Llama-3-Instruct's: bos_token, then per message
//           <|start_header_id|>ROLE<|end_header_id|>\n\n CONTENT (trimmed) <|eot_id|>;
//           the generation prompt <|start_header_id|>assistant<|end_header_id|>\n\n
//   chatml  ChatML (SmolLM2, Qwen2.5 without tools): per message
//           <|im_start|>ROLE\n CONTENT <|im_end|>\n, after the template's default system
//           message when the first is not a system message; the generation prompt
//           <|im_start|>assistant\n
//   llama3.1  Llama 3.1's, 3.2's and 3.3's without tools: llama3's, but first always a system
//           header: "Cutting Knowledge Date: December 2023\nToday Date: DATE\n\n" and the
//           system message (trimmed; "" when none) <|eot_id|>. DATE: the template's date_string
//           literal ("26 Jul 2024", 3.1's), or today's as "%d %b %Y" when the template calls
//           strftime_now (3.2's: transformers defines it)
//   qwen3   Qwen3's without tools: ChatML without a default system message; an assistant
//           message's <think>...</think> is split off its content and written as
//           "<think>\nREASONING\n</think>\n\n" only after the last user message (the last
//           assistant message always, empty when it had none), dropped before it
//
// A rendered conversation is a list of segments, each trained or not: an assistant message's
// content and end of turn (what follows the generation prompt, up to the next message, as
// TRL's prompt-completion masking trains) is trained, everything else is the prompt.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "mixt/tokenizer.h"

namespace mixt {

// Since ABI 6.10: llama3_1 and qwen3 (appended: no value moved).
enum class ChatFamily { llama3, chatml, llama3_1, qwen3 };

const char* chat_family_name(ChatFamily family);
// The name `template:` takes: "llama3", "chatml", "llama3.1", "qwen3".
// The token that ends a turn: <|eot_id|> (llama3, llama3.1), <|im_end|> (chatml, qwen3).
const char* chat_end_of_turn(ChatFamily family);
// Every family with the models it covers, for messages.
std::string chat_families_supported();

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

struct ChatTemplate {
  ChatFamily family = ChatFamily::llama3;
  std::string bos_token;                      // llama3: written before the first message
  std::optional<std::string> default_system;  // chatml: the template's system message when none is given
  std::string date_string;                    // llama3.1: "Today Date: ..." (since ABI 6.10)
};

// A template that cannot be used; the message names the file and says why.
class ChatTemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The family of a chat_template's text, told by its markers, or nothing (with `why` set) for
// one this code does not render.
std::optional<ChatFamily> recognise_chat_template(const std::string& chat_template, std::string& why);
// A family by the name `template:` takes, or nothing.
std::optional<ChatFamily> chat_family_named(const std::string& name);

// Reads `tokenizer_config` (tokenizer_config.json): its chat_template (a string, or a list of
// {name, template} of which "default" is used) and bos_token. `family` given: that family,
// whatever the template (the file may then be absent: Llama 3's bos is assumed). Throws
// ChatTemplateError naming the file. llama3.1's date is read from the template (its
// date_string literal, or today's when it calls strftime_now); `family` given without a
// template: 3.1's "26 Jul 2024".
ChatTemplate read_chat_template(const std::filesystem::path& tokenizer_config, std::optional<ChatFamily> family);

struct ChatSegment {
  std::string text;
  bool trained = false;
};

// The conversation as the template renders it; with `add_generation_prompt`, the header of
// the assistant's next turn at its end (for generation).
std::vector<ChatSegment> render_chat(const ChatTemplate& chat, const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt = false);

struct ChatTokens {
  std::vector<TokenId> ids;
  std::vector<bool> trained;  // one per id
};

// The ids of the rendered text (encoded whole, special tokens matched, nothing added), each
// marked trained when its first byte lies in a trained segment. The byte offsets come from
// each id's decoded bytes; a tokenizer whose decoded bytes do not add up to the text
// (SentencePiece's spaces) has each segment encoded on its own instead.
ChatTokens tokenize_chat(const Tokenizer& tokenizer, const std::vector<ChatSegment>& segments);

}  // namespace mixt
