#include "files/text_documents.h"

#include <mixt/error.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sdk/tokenizer/utf8.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {

bool is_jsonl(const std::string& path) { return path.ends_with(".jsonl"); }

}  // namespace

TextDocuments::TextDocuments(std::vector<std::string> inputs, std::string json_field)
    : inputs_(std::move(inputs)), json_field_(std::move(json_field)) {
  for (const std::string& input : inputs_) {
    std::error_code ec;
    if (!fs::is_regular_file(input, ec)) {
      throw usage_error(input + (fs::exists(input, ec) ? " is not a file" : ": no such file"),
                        "give text files (each one document) or .jsonl files (a document per line)");
    }
    if (!std::ifstream(input)) throw usage_error("cannot read " + input);
    total_bytes_ += fs::file_size(input, ec);
  }
}

bool TextDocuments::open_next_input() {
  if (next_input_ >= inputs_.size()) return false;
  jsonl_path_ = inputs_[next_input_++];
  jsonl_line_ = 0;
  return true;
}

bool TextDocuments::next(std::vector<TextDocument>& into, std::size_t max_documents, std::size_t max_bytes) {
  std::size_t bytes = 0;
  while (into.size() < max_documents && bytes < max_bytes) {
    if (!jsonl_.is_open()) {
      if (!open_next_input()) return !into.empty();
      if (!is_jsonl(jsonl_path_)) {
        std::ifstream in(jsonl_path_, std::ios::binary);
        std::ostringstream text;
        text << in.rdbuf();
        if (!in && !in.eof()) throw runtime_error("cannot read " + jsonl_path_);
        into.push_back({std::move(text).str(), jsonl_path_});
        bytes += into.back().text.size();
        bytes_read_ += into.back().text.size();
        continue;
      }
      jsonl_.open(jsonl_path_, std::ios::binary);
    }
    std::string line;
    if (!std::getline(jsonl_, line)) {
      jsonl_.close();
      continue;
    }
    ++jsonl_line_;
    bytes_read_ += line.size() + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines hold no record
    const std::string where = jsonl_path_ + ":" + std::to_string(jsonl_line_);
    if (const auto invalid = text::first_invalid_utf8(line)) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(line[*invalid]));
      throw runtime_error(where + ":" + std::to_string(*invalid + 1) + ": not UTF-8 (byte " + byte + ")",
                          "JSON text is UTF-8: convert the file (iconv -f LATIN1 -t UTF-8, say)");
    }
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // nlohmann's words after its "[json.exception...] parse error at line 1, ": the column and why.
      const std::string what = e.what();
      const std::size_t at = what.find("column ");
      throw runtime_error(where + ": not a JSON record" +
                          (at == std::string::npos ? std::string() : " (" + what.substr(at) + ")"));
    } catch (const nlohmann::json::out_of_range&) {
      // What nlohmann throws, not parse_error, for a number beyond a double's range (1e400).
      throw runtime_error(where + ": not a JSON record (a number beyond a double's range)");
    }
    const auto field = record.is_object() ? record.find(json_field_) : record.end();
    if (!record.is_object() || field == record.end() || !field->is_string()) {
      throw runtime_error(jsonl_path_ + ":" + std::to_string(jsonl_line_) + ": no string field '" + json_field_ + "'",
                          "name the field that holds the text with --field");
    }
    into.push_back({field->get<std::string>(), jsonl_path_ + ":" + std::to_string(jsonl_line_)});
    bytes += into.back().text.size();
  }
  return true;
}

}  // namespace mixt::cli
