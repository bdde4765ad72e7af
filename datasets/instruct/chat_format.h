// Chat templates written in C++, one per family, as the checkpoints' Jinja templates render
// a conversation (tokenizer_config.json's `chat_template`; no Jinja engine is used):
//
//   llama3  Meta-Llama-3-Instruct's: bos_token, then per message
//           <|start_header_id|>ROLE<|end_header_id|>\n\n CONTENT (trimmed) <|eot_id|>;
//           the generation prompt <|start_header_id|>assistant<|end_header_id|>\n\n
//   chatml  ChatML (SmolLM2, Qwen2.5 without tools): per message
//           <|im_start|>ROLE\n CONTENT <|im_end|>\n, after the template's default system
//           message when the first is not a system message; the generation prompt
//           <|im_start|>assistant\n
//
// A rendered conversation is a list of segments, each trained or not: an assistant message's
// content and end of turn (what follows the generation prompt, up to the next message, as
// TRL's prompt-completion masking trains) is trained, everything else is the prompt.
#pragma once

#include <mixt/tokenizer.h>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace instruct {

enum class Family { llama3, chatml };

const char* family_name(Family family);
// "llama3 (Llama 3 Instruct) and chatml (ChatML: SmolLM2, Qwen2.5)", for messages.
std::string families_supported();

struct Message {
  std::string role;  // system, user or assistant
  std::string content;
};

struct ChatTemplate {
  Family family = Family::llama3;
  std::string bos_token;                      // llama3: written before the first message
  std::optional<std::string> default_system;  // chatml: the template's system message when none is given
};

// A template that cannot be used; the message names the file and says why.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The family of a chat_template's text, told by its markers, or nothing (with `why` set) for
// one this code does not render.
std::optional<Family> recognise(const std::string& chat_template, std::string& why);

// Reads `tokenizer_config` (tokenizer_config.json): its chat_template (a string, or a list of
// {name, template} of which "default" is used) and bos_token. `family` given: that family,
// whatever the template (the file may then be absent: Llama 3's bos is assumed). Throws
// TemplateError naming the file.
ChatTemplate read_chat_template(const std::filesystem::path& tokenizer_config, std::optional<Family> family);

struct Segment {
  std::string text;
  bool trained = false;
};

// The conversation as the template renders it; with `add_generation_prompt`, the header of
// the assistant's next turn at its end (for generation).
std::vector<Segment> render(const ChatTemplate& chat, const std::vector<Message>& messages,
                            bool add_generation_prompt = false);

struct ChatTokens {
  std::vector<mixt::TokenId> ids;
  std::vector<bool> trained;  // one per id
};

// The ids of the rendered text (encoded whole, special tokens matched, nothing added), each
// marked trained when its first byte lies in a trained segment. The byte offsets come from
// each id's decoded bytes; a tokenizer whose decoded bytes do not add up to the text
// (SentencePiece's spaces) has each segment encoded on its own instead.
ChatTokens tokenize(const mixt::Tokenizer& tokenizer, const std::vector<Segment>& segments);

}  // namespace instruct
