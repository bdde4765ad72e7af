// read_sentencepiece_model in libmixt: opens lib/mixt/libmixt_sentencepiece.so beside libmixt
// once (sentencepiece_tokenizer.h says why it is a module) and hands it the model.
#include <mixt/error.h>

#include <filesystem>

#include "common/shared_library.h"
#include "sentencepiece_tokenizer.h"

namespace mixt::text {

namespace {

std::filesystem::path module_path() {
  const std::filesystem::path libmixt = library_containing(reinterpret_cast<const void*>(&read_sentencepiece_model));
  return libmixt.parent_path() / "mixt" / "libmixt_sentencepiece.so";
}

// Kept loaded: the tokenizers it makes live there. Its own symbols first (RTLD_DEEPBIND):
// its protobuf calls bind to the copy it carries. `file`, the model, names the error.
ReadSentencePieceModel sentencepiece_entry(const std::string& file) {
  try {
    return reinterpret_cast<ReadSentencePieceModel>(
        resident_symbol(module_path(), kSentencePieceEntry, SymbolBinding::own_first));
  } catch (const SharedLibraryError& e) {
    throw runtime_error(file + ": this mixt cannot read SentencePiece models (" + e.what() + ")",
                        "build mixt where libsentencepiece-dev is installed (scripts/setup installs it)");
  }
}

}  // namespace

std::unique_ptr<Tokenizer> read_sentencepiece_model(const std::string& file, std::string_view content) {
  const ReadSentencePieceModel entry = sentencepiece_entry(file);
  std::unique_ptr<Tokenizer> tokenizer;
  std::string failure;
  entry(file, content, &tokenizer, &failure);
  if (!tokenizer) {
    throw recipe_error("not a tokenizer.json and not a SentencePiece model (" + failure + ")", SourceLocation{file}, {},
                       "give a Hugging Face tokenizer.json or a SentencePiece tokenizer.model");
  }
  return tokenizer;
}

}  // namespace mixt::text
