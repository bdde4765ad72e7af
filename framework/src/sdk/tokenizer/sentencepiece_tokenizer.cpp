#include "sentencepiece_tokenizer.h"

#include <mixt/error.h>
#include <sentencepiece_processor.h>

#include "sentencepiece_charsmap.h"
#include "utf8.h"

namespace mixt::text {

namespace {

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(std::string file, std::unique_ptr<sentencepiece::SentencePieceProcessor> processor)
      : file_(std::move(file)), processor_(std::move(processor)) {}

  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens) const override {
    if (const auto bad = first_invalid_utf8(text)) {
      throw runtime_error("text to encode is not UTF-8: byte " + std::to_string(*bad) + " does not start a character");
    }
    std::vector<int> ids;
    const auto status = processor_->Encode(text, &ids);
    if (!status.ok()) throw runtime_error(file_ + ": SentencePiece could not encode: " + status.ToString());
    std::vector<TokenId> out;
    out.reserve(ids.size() + 1);
    if (add_special_tokens && processor_->bos_id() >= 0) out.push_back(processor_->bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    std::vector<int> kept;
    kept.reserve(ids.size());
    for (const TokenId id : ids) {
      if (id < 0 || id >= processor_->GetPieceSize()) continue;
      if (skip_special_tokens && processor_->IsControl(id)) continue;
      kept.push_back(id);
    }
    std::string text;
    const auto status = processor_->Decode(kept, &text);
    if (!status.ok()) throw runtime_error(file_ + ": SentencePiece could not decode: " + status.ToString());
    return text;
  }

  std::string decode_bytes(std::span<const TokenId> ids) const override { return decode(ids, false); }

  std::int64_t vocab_size() const override { return processor_->GetPieceSize(); }

  std::optional<TokenId> token_id(std::string_view token) const override {
    const int id = processor_->PieceToId(token);
    if (id < 0 || processor_->IdToPiece(id) != token) return std::nullopt;
    return id;
  }

  std::optional<TokenId> end_of_text() const override {
    if (processor_->eos_id() < 0) return std::nullopt;
    return processor_->eos_id();
  }

  std::string describe() const override {
    return "SentencePiece, " + std::to_string(vocab_size()) + " tokens (" + file_ + ")";
  }

 private:
  std::string file_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace
}  // namespace mixt::text

// The module's one entry (sentencepiece_tokenizer.h), found by dlsym.
extern "C" __attribute__((visibility("default"))) void mixt_read_sentencepiece_model(
    const std::string& file, std::string_view content, std::unique_ptr<mixt::Tokenizer>* out, std::string* failure) {
  if (const auto problem = mixt::text::model_charsmap_problem(content)) {
    *failure = *problem;  // libsentencepiece would read outside the model with it
    return;
  }
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(content);
  if (!status.ok()) {
    *failure = status.ToString();
    return;
  }
  *out = std::make_unique<mixt::text::SentencePieceTokenizer>(file, std::move(processor));
}
