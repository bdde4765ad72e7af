// One line of the instruct dataset's JSONL file as the conversation it holds: the reader,
// apart from the dataset, so that it can be tested and fuzzed alone (fuzz/jsonl_fuzz.cpp).
#pragma once

#include <mixt/helpers/chat_template.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace mixt::datasets::instruct {

// A line that is not a conversation; what() says why (the plugin makes it a recipe error at
// `file`, naming the line).
class BadLine : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The messages of one line, in one of its three forms:
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}
//   {"prompt": "...", "response": "..."}  (and an optional "system")
//   {"instruction": "...", "input": "...", "output": "..."}  (input may be empty or absent)
// At least one is the assistant's. Throws BadLine.
std::vector<ChatMessage> messages_of_line(const std::string& text);

}  // namespace mixt::datasets::instruct
