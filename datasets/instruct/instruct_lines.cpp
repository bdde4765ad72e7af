#include "instruct_lines.h"

#include <nlohmann/json.hpp>

namespace mixt::datasets::instruct {

namespace {

std::string string_field(const nlohmann::json& object, const std::string& key) {
  const auto found = object.find(key);
  if (found == object.end()) throw BadLine("has no \"" + key + "\"");
  if (!found->is_string()) throw BadLine("\"" + key + "\" is " + found->type_name() + ", not a string");
  return found->get<std::string>();
}

}  // namespace

std::vector<ChatMessage> messages_of_line(const std::string& text) {
  nlohmann::json sample;
  try {
    sample = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw BadLine("not valid JSON (byte " + std::to_string(e.byte) + " of the line)");
  } catch (const nlohmann::json::out_of_range&) {
    // What nlohmann throws, not parse_error, for a number beyond a double's range (1e400).
    throw BadLine("not valid JSON (a number beyond a double's range)");
  }
  if (!sample.is_object()) throw BadLine("is a JSON " + std::string(sample.type_name()) + ", not an object");
  std::vector<ChatMessage> messages;
  if (const auto list = sample.find("messages"); list != sample.end()) {
    if (!list->is_array() || list->empty()) throw BadLine("\"messages\" is not a non-empty list");
    for (const auto& m : *list) {
      if (!m.is_object()) throw BadLine("a message is not an object with \"role\" and \"content\"");
      ChatMessage message{string_field(m, "role"), string_field(m, "content")};
      if (message.role != "system" && message.role != "user" && message.role != "assistant") {
        throw BadLine("a message has role \"" + message.role + "\"; the roles are system, user and assistant");
      }
      messages.push_back(std::move(message));
    }
  } else if (sample.contains("prompt") || sample.contains("response")) {
    if (sample.contains("system")) messages.push_back({"system", string_field(sample, "system")});
    messages.push_back({"user", string_field(sample, "prompt")});
    messages.push_back({"assistant", string_field(sample, "response")});
  } else if (sample.contains("instruction") || sample.contains("output")) {
    std::string user = string_field(sample, "instruction");
    if (sample.contains("input") && !sample["input"].is_null()) {
      const std::string input = string_field(sample, "input");
      if (!input.empty()) user += "\n\n" + input;
    }
    messages.push_back({"user", std::move(user)});
    messages.push_back({"assistant", string_field(sample, "output")});
  } else {
    std::string keys;
    for (const auto& item : sample.items()) keys += (keys.empty() ? "" : ", ") + item.key();
    throw BadLine("has none of \"messages\", \"prompt\"/\"response\", \"instruction\"/\"output\" (its keys: " +
                  (keys.empty() ? std::string("none") : keys) + ")");
  }
  bool answered = false;
  for (const auto& m : messages) answered = answered || m.role == "assistant";
  if (!answered) throw BadLine("has no assistant message: nothing of it would be trained");
  return messages;
}

}  // namespace mixt::datasets::instruct
