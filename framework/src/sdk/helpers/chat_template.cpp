#include "mixt/helpers/chat_template.h"

#include <ctime>
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

// The date a Llama 3.1 template sets when none is given: its `set date_string = "..."`.
std::optional<std::string> date_literal_of(const std::string& chat_template) {
  const std::string set = "set date_string = ";
  const std::size_t at = chat_template.find(set);
  if (at == std::string::npos) return std::nullopt;
  const std::size_t open = at + set.size();
  if (open >= chat_template.size() || (chat_template[open] != '"' && chat_template[open] != '\'')) return std::nullopt;
  const std::size_t close = chat_template.find(chat_template[open], open + 1);
  if (close == std::string::npos) return std::nullopt;
  return chat_template.substr(open + 1, close - open - 1);
}

// transformers' strftime_now("%d %b %Y"): today, local time, as Python's C locale writes it.
std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::string day = (local.tm_mday < 10 ? "0" : "") + std::to_string(local.tm_mday);
  return day + " " + kMonths[local.tm_mon] + " " + std::to_string(local.tm_year + 1900);
}

// Python's str.strip(chars), lstrip, rstrip for one character set.
std::string lstrip(const std::string& text, const char* chars) {
  const auto begin = text.find_first_not_of(chars);
  return begin == std::string::npos ? "" : text.substr(begin);
}
std::string rstrip(const std::string& text, const char* chars) {
  const auto end = text.find_last_not_of(chars);
  return end == std::string::npos ? "" : text.substr(0, end + 1);
}

// Qwen3's template without tools, its message loop: `prompt(text)` writes untrained text,
// `assistant(header, body)` an assistant message (the body trained).
template <typename Prompt, typename Assistant>
void render_qwen3(const std::vector<ChatMessage>& messages, Prompt&& prompt, Assistant&& assistant) {
  if (!messages.empty() && messages.front().role == "system") {
    prompt("<|im_start|>system\n" + messages.front().content + "<|im_end|>\n");
  }
  // The last user message that is not a tool's response: reasoning is kept only after it.
  std::size_t last_query = messages.empty() ? 0 : messages.size() - 1;
  for (std::size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (messages[i].role == "user" && !tool_response) {
      last_query = i;
      break;
    }
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      prompt("<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n");
    } else if (m.role == "assistant") {
      std::string content = m.content;
      std::string reasoning;
      const std::size_t end_think = content.find("</think>");
      if (end_think != std::string::npos) {
        // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        std::string before = rstrip(content.substr(0, end_think), "\n");
        const std::size_t open = before.rfind("<think>");
        if (open != std::string::npos) before = before.substr(open + 7);
        reasoning = lstrip(before, "\n");
        content = lstrip(content.substr(content.rfind("</think>") + 8), "\n");
      }
      const bool last = i + 1 == messages.size();
      std::string body = content;
      if (i > last_query && (last || !reasoning.empty())) {
        body = "<think>\n" + lstrip(rstrip(reasoning, "\n"), "\n") + "\n</think>\n\n" + lstrip(content, "\n");
      }
      assistant("<|im_start|>assistant\n", body + "<|im_end|>\n");
    }
  }
}

std::string token_text(const nlohmann::json& token) {
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string()) {
    return token["content"].get<std::string>();
  }
  return "";
}

}  // namespace

const char* chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::llama3:
      return "llama3";
    case ChatFamily::chatml:
      return "chatml";
    case ChatFamily::llama3_1:
      return "llama3.1";
    case ChatFamily::qwen3:
      return "qwen3";
  }
  return "?";
}

std::optional<ChatFamily> chat_family_named(const std::string& name) {
  for (const ChatFamily f : {ChatFamily::llama3, ChatFamily::chatml, ChatFamily::llama3_1, ChatFamily::qwen3}) {
    if (name == chat_family_name(f)) return f;
  }
  return std::nullopt;
}

const char* chat_end_of_turn(ChatFamily family) {
  return family == ChatFamily::llama3 || family == ChatFamily::llama3_1 ? "<|eot_id|>" : "<|im_end|>";
}

std::string chat_families_supported() {
  return "llama3 (Meta-Llama-3-Instruct's: <|start_header_id|> ... <|eot_id|>), llama3.1 (Llama 3.1's, 3.2's and "
         "3.3's: the same after a system header with the knowledge cutoff and today's date; no tools), chatml "
         "(<|im_start|> ... <|im_end|>: SmolLM2, Qwen2.5) and qwen3 (Qwen3's: ChatML with <think> blocks; no tools)";
}

std::optional<ChatFamily> recognise_chat_template(const std::string& chat_template, std::string& why) {
  if (has(chat_template, "<|start_header_id|>") && has(chat_template, "<|end_header_id|>") &&
      has(chat_template, "<|eot_id|>")) {
    if (has(chat_template, "Cutting Knowledge Date")) {
      if (!has(chat_template, "strftime_now") && !date_literal_of(chat_template)) {
        why =
            "it is Llama 3.1's kind (a system header with the knowledge cutoff and today's date) but sets its "
            "date neither from a date_string literal nor with strftime_now";
        return std::nullopt;
      }
      return ChatFamily::llama3_1;
    }
    return ChatFamily::llama3;
  }
  if (has(chat_template, "<|im_start|>") && has(chat_template, "<|im_end|>")) {
    if (has(chat_template, "<think>")) {
      // Qwen3's: reasoning kept only after the last user query (last_query_index), split from
      // the content or given as reasoning_content. Other <think> templates (QwQ's, Qwen3-2507
      // Thinking's, which open <think> in the generation prompt) place it otherwise.
      if (has(chat_template, "last_query_index") && has(chat_template, "reasoning_content") &&
          !has(chat_template, "'<|im_start|>assistant\\n<think>\\n' }}") &&
          !has(chat_template, "'<|im_start|>assistant\n<think>\n' }}")) {
        return ChatFamily::qwen3;
      }
      why =
          "it is a ChatML template with reasoning blocks (<think>) that is not Qwen3's (its last_query_index and "
          "reasoning_content, the generation prompt without <think>)";
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
    if (*family == ChatFamily::llama3 || *family == ChatFamily::llama3_1) chat.bos_token = "<|begin_of_text|>";
    if (*family == ChatFamily::llama3_1) chat.date_string = "26 Jul 2024";
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
    if ((*family == ChatFamily::llama3 || *family == ChatFamily::llama3_1) && chat.bos_token.empty()) {
      chat.bos_token = "<|begin_of_text|>";
    }
  } else {
    if (text.empty()) throw ChatTemplateError(file + " has no chat_template");
    std::string why;
    const std::optional<ChatFamily> found = recognise_chat_template(text, why);
    if (!found) throw ChatTemplateError(file + ": its chat_template cannot be rendered: " + why);
    chat.family = *found;
  }
  if (chat.family == ChatFamily::chatml) chat.default_system = default_system_of(text);
  if (chat.family == ChatFamily::llama3_1) {
    // Llama 3.2's template asks for today's date when strftime_now is defined (transformers
    // defines it), else takes its literal, as 3.1's always does.
    const std::optional<std::string> literal = date_literal_of(text);
    chat.date_string = has(text, "strftime_now") ? today() : literal.value_or("26 Jul 2024");
  }
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
  auto assistant = [&](std::string header, std::string content) {
    prompt(std::move(header));
    segments.push_back({std::move(content), true});
  };
  if (chat.family == ChatFamily::llama3 || chat.family == ChatFamily::llama3_1) {
    std::size_t first = 0;
    if (chat.family == ChatFamily::llama3_1) {
      // Always a system header: the cutoff, the date, then the system message if the first is one.
      const bool system = !messages.empty() && messages.front().role == "system";
      prompt(chat.bos_token + "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December " +
             "2023\nToday Date: " + chat.date_string + "\n\n" + (system ? trim(messages.front().content) : "") +
             "<|eot_id|>");
      first = system ? 1 : 0;
    }
    for (std::size_t i = first; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      const bool bos = i == 0 && chat.family == ChatFamily::llama3;  // llama3.1's went before its system header
      prompt((bos ? chat.bos_token : "") + "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
      std::string content = trim(m.content) + "<|eot_id|>";
      if (m.role == "assistant") {
        segments.push_back({std::move(content), true});
      } else {
        prompt(std::move(content));
      }
    }
    if (add_generation_prompt) prompt("<|start_header_id|>assistant<|end_header_id|>\n\n");
  } else if (chat.family == ChatFamily::qwen3) {
    render_qwen3(messages, prompt, assistant);
    if (add_generation_prompt) prompt("<|im_start|>assistant\n");
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
