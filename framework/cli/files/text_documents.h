// The documents `mixt tokenize` reads, in order: a text file is one document; a .jsonl file
// holds one document per line, in a string field of each record.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace mixt::cli {

struct TextDocument {
  std::string text;
  std::string where;  // "a.txt" or "b.jsonl:12", for messages
};

class TextDocuments {
 public:
  // `json_field`: the key of each .jsonl record that holds its text. Every input is checked
  // to exist and be readable now, before any work is done; a usage error names the first that is not.
  TextDocuments(std::vector<std::string> inputs, std::string json_field);

  // Up to `max_documents` documents (and about `max_bytes`), appended to `into`; false once
  // every input is read. A record without the field, or not JSON, is a runtime error at
  // file:line.
  bool next(std::vector<TextDocument>& into, std::size_t max_documents, std::size_t max_bytes);

  std::uintmax_t total_bytes() const { return total_bytes_; }
  std::uintmax_t bytes_read() const { return bytes_read_; }

 private:
  bool open_next_input();

  std::vector<std::string> inputs_;
  std::string json_field_;
  std::uintmax_t total_bytes_ = 0;
  std::uintmax_t bytes_read_ = 0;
  std::size_t next_input_ = 0;
  std::ifstream jsonl_;  // open while a .jsonl input is being read
  std::string jsonl_path_;
  std::int64_t jsonl_line_ = 0;
};

}  // namespace mixt::cli
