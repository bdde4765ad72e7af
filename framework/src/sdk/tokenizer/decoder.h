// tokenizer.json's decoders: the tokens of some ids back to text. Each step turns a list of
// token strings into another, as tokenizers' decode_chain does; the text is the last list
// joined. ByteLevel alone keeps the raw bytes (for streaming, decode_bytes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "unicode_regex.h"

namespace mixt::text {

class DecoderStep {
 public:
  virtual ~DecoderStep() = default;
  virtual std::vector<std::string> decode(std::vector<std::string> tokens) const = 0;
};

// The byte alphabet back to bytes; one string of raw bytes (lossy=false) or of their UTF-8
// repair (lossy=true, what tokenizers gives).
class ByteLevelDecoder : public DecoderStep {
 public:
  explicit ByteLevelDecoder(bool lossy = true) : lossy_(lossy) {}
  std::vector<std::string> decode(std::vector<std::string> tokens) const override;

 private:
  bool lossy_;
};

class ReplaceDecoder : public DecoderStep {
 public:
  ReplaceDecoder(const std::string& regex, std::string content) : regex_(regex), content_(std::move(content)) {}
  std::vector<std::string> decode(std::vector<std::string> tokens) const override;

 private:
  UnicodeRegex regex_;
  std::string content_;
};

// Runs of <0xAB> tokens become the text of their bytes (U+FFFD for each when not UTF-8).
class ByteFallbackDecoder : public DecoderStep {
 public:
  std::vector<std::string> decode(std::vector<std::string> tokens) const override;
};

class FuseDecoder : public DecoderStep {
 public:
  std::vector<std::string> decode(std::vector<std::string> tokens) const override;
};

// Up to `start` leading and `stop` trailing `content` characters off each token.
class StripDecoder : public DecoderStep {
 public:
  StripDecoder(std::string content, std::size_t start, std::size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> decode(std::vector<std::string> tokens) const override;

 private:
  std::string content_;  // one character, UTF-8
  std::size_t start_;
  std::size_t stop_;
};

// `replacement` (U+2581) back to spaces; in the first token none is kept unless the
// pre-tokenizer never prepends one.
class MetaspaceDecoder : public DecoderStep {
 public:
  MetaspaceDecoder(std::string replacement, bool prepends)
      : replacement_(std::move(replacement)), prepends_(prepends) {}
  std::vector<std::string> decode(std::vector<std::string> tokens) const override;

 private:
  std::string replacement_;
  bool prepends_;
};

class SequenceDecoder : public DecoderStep {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<DecoderStep>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> decode(std::vector<std::string> tokens) const override;

 private:
  std::vector<std::unique_ptr<DecoderStep>> steps_;
};

}  // namespace mixt::text
