// read_sentencepiece_model in libmixt: opens lib/mixt/libmixt_sentencepiece.so beside libmixt
// once (sentencepiece_tokenizer.h says why it is a module) and hands it the model.
#include <dlfcn.h>
#include <mixt/error.h>

#include <filesystem>
#include <mutex>

#include "sentencepiece_tokenizer.h"

namespace mixt::text {

namespace {

std::filesystem::path module_path() {
  Dl_info info{};
  ::dladdr(reinterpret_cast<const void*>(&read_sentencepiece_model), &info);
  const std::filesystem::path libmixt = info.dli_fname != nullptr ? info.dli_fname : "";
  return libmixt.parent_path() / "mixt" / "libmixt_sentencepiece.so";
}

struct Module {
  ReadSentencePieceModel entry = nullptr;
  std::string failure;
};

const Module& sentencepiece_module() {
  static Module module;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::filesystem::path library = module_path();
    // Kept loaded: the tokenizers it makes live there.
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle != nullptr)
      module.entry = reinterpret_cast<ReadSentencePieceModel>(::dlsym(handle, kSentencePieceEntry));
    if (module.entry == nullptr) {
      const char* why = ::dlerror();
      module.failure = why != nullptr ? why : library.string() + ": no " + kSentencePieceEntry;
    }
  });
  return module;
}

}  // namespace

std::unique_ptr<Tokenizer> read_sentencepiece_model(const std::string& file, std::string_view content) {
  const Module& module = sentencepiece_module();
  if (module.entry == nullptr) {
    throw runtime_error(file + ": this mixt cannot read SentencePiece models (" + module.failure + ")",
                        "build mixt where libsentencepiece-dev is installed (scripts/setup installs it)");
  }
  std::unique_ptr<Tokenizer> tokenizer;
  std::string failure;
  module.entry(file, content, &tokenizer, &failure);
  if (!tokenizer) {
    throw recipe_error("not a tokenizer.json and not a SentencePiece model (" + failure + ")", SourceLocation{file}, {},
                       "give a Hugging Face tokenizer.json or a SentencePiece tokenizer.model");
  }
  return tokenizer;
}

}  // namespace mixt::text
