// tokenizer.json's normalizers: what a stretch of text becomes before it is pre-tokenized
// (Unicode normalization forms through utf8proc, lower case, Llama 2's U+2581 for spaces).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "unicode_regex.h"

namespace mixt::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

enum class UnicodeForm { nfc, nfd, nfkc, nfkd };

class UnicodeFormNormalizer : public Normalizer {
 public:
  explicit UnicodeFormNormalizer(UnicodeForm form) : form_(form) {}
  std::string normalize(std::string text) const override;

 private:
  UnicodeForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  std::string normalize(std::string text) const override;
};

// Prepend: `prefix` before any text that is not empty.
class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override;

 private:
  std::string prefix_;
};

// Replace: every match of a regex (or of a literal string) by `content`.
class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(const std::string& regex, std::string content) : regex_(regex), content_(std::move(content)) {}
  std::string normalize(std::string text) const override;

 private:
  UnicodeRegex regex_;
  std::string content_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string text) const override;

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Each match of `regex` in `text` replaced by `content` (Replace normalizers and decoders).
std::string replace_all(const UnicodeRegex& regex, const std::string& text, const std::string& content);

}  // namespace mixt::text
