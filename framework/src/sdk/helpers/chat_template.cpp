#include "mixt/helpers/chat_template.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace mixt {

namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, std::string_view marker) { return text.find(marker) != std::string::npos; }

// Jinja's `trim` (Python's str.strip()) for the ASCII whitespace.
std::string trim(const std::string& text) {
  constexpr const char* kSpace = " \t\n\r\v\f";
  const auto begin = text.find_first_not_of(kSpace);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

// The system message a ChatML template writes when the conversation starts without one: the
// first string literal '<|im_start|>system\n...<|im_end|>' in it (SmolLM2's, Qwen2.5's).
std::optional<std::string> default_system_of(const std::string& chat_template) {
  const std::string start = "<|im_start|>system";
  for (std::size_t at = chat_template.find(start); at != std::string::npos; at = chat_template.find(start, at + 1)) {
    if (at == 0 || (chat_template[at - 1] != '\'' && chat_template[at - 1] != '"')) continue;
    const char quote = chat_template[at - 1];
    std::size_t text = at + start.size();
    if (chat_template.compare(text, 2, "\\n") == 0) {
      text += 2;
    } else if (chat_template.compare(text, 1, "\n") == 0) {
      text += 1;
    } else {
      continue;
    }
    const std::size_t end = chat_template.find("<|im_end|>", text);
    const std::size_t closed = chat_template.find(quote, text);
    if (end == std::string::npos || closed < end) continue;
    std::string system;
    const std::string literal = chat_template.substr(text, end - text);
    for (std::size_t i = 0; i < literal.size(); ++i) {
      if (literal[i] == '\\' && i + 1 < literal.size()) {
        const char next = literal[++i];
        system += next == 'n' ? '\n' : next == 't' ? '\t' : next;
      } else {
        system += literal[i];
      }
    }
    return system;
  }
  return std::nullopt;
}

std::string token_text(const nlohmann::json& token) {
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string()) {
    return token["content"].get<std::string>();
  }
  return "";
}

}  // namespace

const char* chat_family_name(ChatFamily family) { return family == ChatFamily::llama3 ? "llama3" : "chatml"; }

const char* chat_end_of_turn(ChatFamily family) { return family == ChatFamily::llama3 ? "<|eot_id|>" : "<|im_end|>"; }

std::string chat_families_supported() {
  return "llama3 (Meta-Llama-3-Instruct's: <|start_header_id|> ... <|eot_id|>) and chatml (<|im_start|> ... "
         "<|im_end|>: SmolLM2, Qwen2.5)";
}

std::optional<ChatFamily> recognise_chat_template(const std::string& chat_template, std::string& why) {
  if (has(chat_template, "<|start_header_id|>") && has(chat_template, "<|end_header_id|>") &&
      has(chat_template, "<|eot_id|>")) {
    if (has(chat_template, "Cutting Knowledge Date")) {
      why =
          "it is Llama 3.1's or 3.2's (a system header with the knowledge cutoff and today's date, tools), which "
          "is not written here";
      return std::nullopt;
    }
    return ChatFamily::llama3;
  }
  if (has(chat_template, "<|im_start|>") && has(chat_template, "<|im_end|>")) {
    if (has(chat_template, "<think>")) {
      why = "it is a ChatML template with reasoning blocks (<think>, Qwen3's), which is not written here";
      return std::nullopt;
    }
    return ChatFamily::chatml;
  }
  why =
      "it has neither Llama 3's markers (<|start_header_id|>, <|end_header_id|>, <|eot_id|>) nor ChatML's "
      "(<|im_start|>, <|im_end|>)";
  return std::nullopt;
}

ChatTemplate read_chat_template(const fs::path& tokenizer_config, std::optional<ChatFamily> family) {
  const std::string file = tokenizer_config.string();
  ChatTemplate chat;
  std::error_code ec;
  if (!fs::is_regular_file(tokenizer_config, ec)) {
    if (!family) {
      throw ChatTemplateError("no " + file +
                              ", where the chat template is read from (tokenizer_config.json's "
                              "chat_template)");
    }
    chat.family = *family;
    if (*family == ChatFamily::llama3) chat.bos_token = "<|begin_of_text|>";
    return chat;
  }
  std::ifstream in(tokenizer_config);
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) throw ChatTemplateError(file + " is not a JSON object");
  std::string text;
  if (const auto found = config.find("chat_template"); found != config.end()) {
    if (found->is_string()) {
      text = found->get<std::string>();
    } else if (found->is_array()) {  // named templates: the default one
      for (const auto& named : *found) {
        if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
            named["template"].is_string()) {
          text = named["template"].get<std::string>();
        }
      }
    }
  }
  if (const auto bos = config.find("bos_token"); bos != config.end()) chat.bos_token = token_text(*bos);
  if (family) {
    chat.family = *family;
    if (*family == ChatFamily::llama3 && chat.bos_token.empty()) chat.bos_token = "<|begin_of_text|>";
  } else {
    if (text.empty()) throw ChatTemplateError(file + " has no chat_template");
    std::string why;
    const std::optional<ChatFamily> found = recognise_chat_template(text, why);
    if (!found) throw ChatTemplateError(file + ": its chat_template cannot be rendered: " + why);
    chat.family = *found;
  }
  if (chat.family == ChatFamily::chatml) chat.default_system = default_system_of(text);
  return chat;
}

std::vector<ChatSegment> render_chat(const ChatTemplate& chat, const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt) {
  std::vector<ChatSegment> segments;
  auto prompt = [&](std::string text) {
    if (!segments.empty() && !segments.back().trained) {
      segments.back().text += text;
    } else {
      segments.push_back({std::move(text), false});
    }
  };
  if (chat.family == ChatFamily::llama3) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      prompt((i == 0 ? chat.bos_token : "") + "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
      std::string content = trim(m.content) + "<|eot_id|>";
      if (m.role == "assistant") {
        segments.push_back({std::move(content), true});
      } else {
        prompt(std::move(content));
      }
    }
    if (add_generation_prompt) prompt("<|start_header_id|>assistant<|end_header_id|>\n\n");
  } else {
    if (chat.default_system && (messages.empty() || messages.front().role != "system")) {
      prompt("<|im_start|>system\n" + *chat.default_system + "<|im_end|>\n");
    }
    for (const ChatMessage& m : messages) {
      prompt("<|im_start|>" + m.role + "\n");
      std::string content = m.content + "<|im_end|>\n";
      if (m.role == "assistant") {
        segments.push_back({std::move(content), true});
      } else {
        prompt(std::move(content));
      }
    }
    if (add_generation_prompt) prompt("<|im_start|>assistant\n");
  }
  return segments;
}

ChatTokens tokenize_chat(const Tokenizer& tokenizer, const std::vector<ChatSegment>& segments) {
  std::string text;
  std::vector<std::size_t> ends;  // each segment's end in `text`
  for (const ChatSegment& s : segments) {
    text += s.text;
    ends.push_back(text.size());
  }
  ChatTokens out;
  out.ids = tokenizer.encode(text, /*add_special_tokens=*/false);
  out.trained.reserve(out.ids.size());
  std::size_t offset = 0;
  std::size_t segment = 0;
  for (const TokenId id : out.ids) {
    while (segment < ends.size() && offset >= ends[segment]) ++segment;
    out.trained.push_back(segment < segments.size() && segments[segment].trained);
    offset += tokenizer.decode_bytes(std::span<const TokenId>(&id, 1)).size();
  }
  if (offset == text.size()) return out;
  // The decoded bytes are not the text's: each segment on its own.
  out = {};
  for (const ChatSegment& s : segments) {
    const std::vector<TokenId> ids = tokenizer.encode(s.text, false);
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.trained.insert(out.trained.end(), ids.size(), s.trained);
  }
  return out;
}

}  // namespace mixt
