#include "decoder.h"

#include <cctype>

#include "byte_level.h"
#include "normalizer.h"
#include "utf8.h"

namespace mixt::text {

std::vector<std::string> ByteLevelDecoder::decode(std::vector<std::string> tokens) const {
  std::string bytes;
  for (const std::string& token : tokens) append_byte_level_decoded(bytes, token);
  return {lossy_ ? repair_utf8(bytes) : bytes};
}

std::vector<std::string> ReplaceDecoder::decode(std::vector<std::string> tokens) const {
  for (std::string& token : tokens) token = replace_all(regex_, token, content_);
  return tokens;
}

std::vector<std::string> ByteFallbackDecoder::decode(std::vector<std::string> tokens) const {
  std::vector<std::string> out;
  std::string bytes;
  const auto flush = [&] {
    if (bytes.empty()) return;
    if (first_invalid_utf8(bytes)) {
      for (std::size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
    } else {
      out.push_back(bytes);
    }
    bytes.clear();
  };
  for (std::string& token : tokens) {
    const bool byte_token = token.size() == 6 && token.starts_with("<0x") && token.back() == '>' &&
                            std::isxdigit(static_cast<unsigned char>(token[3])) != 0 &&
                            std::isxdigit(static_cast<unsigned char>(token[4])) != 0;
    if (byte_token) {
      bytes.push_back(static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  return out;
}

std::vector<std::string> FuseDecoder::decode(std::vector<std::string> tokens) const {
  std::string joined;
  for (const std::string& token : tokens) joined += token;
  return {joined};
}

std::vector<std::string> StripDecoder::decode(std::vector<std::string> tokens) const {
  for (std::string& token : tokens) {
    std::size_t begin = 0;
    for (std::size_t n = 0; n < start_ && token.compare(begin, content_.size(), content_) == 0; ++n) {
      begin += content_.size();
    }
    std::size_t end = token.size();
    for (std::size_t n = 0; n < stop_ && end >= begin + content_.size() &&
                            token.compare(end - content_.size(), content_.size(), content_) == 0;
         ++n) {
      end -= content_.size();
    }
    token = token.substr(begin, end - begin);
  }
  return tokens;
}

std::vector<std::string> MetaspaceDecoder::decode(std::vector<std::string> tokens) const {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::string out;
    const std::string& token = tokens[i];
    for (std::size_t at = 0; at < token.size();) {
      if (token.compare(at, replacement_.size(), replacement_) == 0) {
        if (!(i == 0 && prepends_)) out.push_back(' ');
        at += replacement_.size();
      } else {
        out.push_back(token[at++]);
      }
    }
    tokens[i] = std::move(out);
  }
  return tokens;
}

std::vector<std::string> SequenceDecoder::decode(std::vector<std::string> tokens) const {
  for (const auto& step : steps_) tokens = step->decode(std::move(tokens));
  return tokens;
}

}  // namespace mixt::text
