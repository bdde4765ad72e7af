// Fuzz target: JSONL documents, as the two readers of them read the same file:
//   - the instruct dataset, line by line (messages_of_line): each line accepted or refused
//     with a BadLine (the plugin's recipe error at `file`, naming the line); an accepted one
//     has an assistant message and only the roles system, user and assistant, and written
//     back as {"messages": [...]} it reads again as the same messages;
//   - `mixt tokenize` (TextDocuments, field "text"): the file read as .jsonl gives documents
//     or a mixt::Error, never more documents than lines, each valid UTF-8; read as a text
//     file it is one document, its bytes unchanged.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "files/text_documents.h"
#include "fuzz_check.h"
#include "instruct/instruct_lines.h"
#include "mixt/error.h"
#include "scratch_file.h"
#include "sdk/tokenizer/utf8.h"

namespace {

using mixt::datasets::instruct::BadLine;
using mixt::datasets::instruct::messages_of_line;

void check_instruct_line(const std::string& line) {
  std::vector<mixt::ChatMessage> messages;
  try {
    messages = messages_of_line(line);
  } catch (const BadLine&) {
    return;
  }
  bool answered = false;
  nlohmann::json written = nlohmann::json::array();
  for (const mixt::ChatMessage& m : messages) {
    MIXT_FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant", "a message of another role");
    answered = answered || m.role == "assistant";
    written.push_back({{"role", m.role}, {"content", m.content}});
  }
  MIXT_FUZZ_CHECK(answered, "a conversation without an assistant message");
  const std::vector<mixt::ChatMessage> again = messages_of_line(nlohmann::json{{"messages", written}}.dump());
  MIXT_FUZZ_CHECK(again.size() == messages.size(), "a message was lost written back");
  for (std::size_t i = 0; i < again.size(); ++i) {
    MIXT_FUZZ_CHECK(again[i].role == messages[i].role && again[i].content == messages[i].content,
                    "a message changed written back");
  }
}

// Every document of `reader`, read as `mixt tokenize` reads them: a few at a time.
std::vector<mixt::cli::TextDocument> read_all(mixt::cli::TextDocuments& reader) {
  std::vector<mixt::cli::TextDocument> documents, batch;
  while (reader.next(batch, 4, 1 << 20)) {
    documents.insert(documents.end(), batch.begin(), batch.end());
    batch.clear();
  }
  return documents;
}

void check_documents(const std::uint8_t* data, std::size_t size, std::size_t lines) {
  const ScratchFile jsonl("documents.jsonl", data, size);
  const ScratchFile text("document.txt", data, size);
  try {
    mixt::cli::TextDocuments reader({jsonl.path.string()}, "text");
    const std::vector<mixt::cli::TextDocument> documents = read_all(reader);
    MIXT_FUZZ_CHECK(documents.size() <= lines, "more documents than lines");
    for (const auto& document : documents) {
      MIXT_FUZZ_CHECK(!mixt::text::first_invalid_utf8(document.text), "a document of invalid UTF-8");
    }
  } catch (const mixt::Error&) {
  }
  mixt::cli::TextDocuments whole({text.path.string()}, "text");
  const std::vector<mixt::cli::TextDocument> documents = read_all(whole);
  MIXT_FUZZ_CHECK(documents.size() == 1, "a text file is not one document");
  MIXT_FUZZ_CHECK(documents[0].text == std::string_view(reinterpret_cast<const char*>(data), size),
                  "a text file's document is not its bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::size_t lines = 0;
  for (std::size_t start = 0; start < input.size(); ++lines) {
    const std::size_t end = std::min(input.find('\n', start), input.size());
    const std::string line(input.substr(start, end - start));
    if (line.find_first_not_of(" \t\r") != std::string::npos) check_instruct_line(line);
    start = end + 1;
  }
  check_documents(data, size, lines);
  return 0;
}
