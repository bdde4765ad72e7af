#include "tokenizer_json.h"

#include <mixt/error.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "hf_tokenizer.h"

namespace mixt::text {

namespace {

using nlohmann::json;

// Errors at a key of the file: "tokenizer.json: model.merges[3]: ...".
struct Reader {
  std::string file;

  [[noreturn]] void fail(const std::string& key, const std::string& message, const std::string& hint = {}) const {
    throw recipe_error(message, SourceLocation{file}, key, hint);
  }

  const json& member(const json& object, const std::string& key, const std::string& name) const {
    const auto found = object.find(name);
    if (found == object.end()) fail(key, "missing key '" + name + "'");
    return *found;
  }

  std::string string_of(const json& value, const std::string& key) const {
    if (!value.is_string()) fail(key, "expected a string, found " + std::string(value.type_name()));
    const auto& text = value.get_ref<const std::string&>();
    if (text.size() > kMaxTokenBytes) {
      fail(key, "a string of " + std::to_string(text.size()) + " bytes; tokens are at most " +
                    std::to_string(kMaxTokenBytes) + " bytes");
    }
    return text;
  }

  bool flag(const json& object, const std::string& key, const std::string& name, bool fallback) const {
    const auto found = object.find(name);
    if (found == object.end() || found->is_null()) return fallback;
    if (!found->is_boolean()) fail(key + "." + name, "expected true or false, found " + found->dump());
    return found->get<bool>();
  }

  std::string type_of(const json& object, const std::string& key) const {
    if (!object.is_object()) fail(key, "expected an object, found " + std::string(object.type_name()));
    return string_of(member(object, key, "type"), key + ".type");
  }

  TokenId id_of(const json& value, const std::string& key) const {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::int64_t>() > std::numeric_limits<TokenId>::max()) {
      fail(key, "expected a token id (an integer from 0 to 2^31 - 1), found " + value.dump());
    }
    return static_cast<TokenId>(value.get<std::int64_t>());
  }
};

std::string json_key(const std::string& token) { return "['" + token + "']"; }

Vocabulary read_vocabulary(const Reader& r, const json& model) {
  const json& vocab = r.member(model, "model", "vocab");
  if (!vocab.is_object()) r.fail("model.vocab", "expected an object of token: id");
  Vocabulary vocabulary;
  vocabulary.reserve(vocab.size());
  std::unordered_map<TokenId, std::string> seen;
  for (const auto& [token, id] : vocab.items()) {
    const std::string key = "model.vocab" + json_key(token.size() > 64 ? token.substr(0, 64) + "..." : token);
    if (token.size() > kMaxTokenBytes) {
      r.fail(key, "a token of " + std::to_string(token.size()) + " bytes; tokens are at most " +
                      std::to_string(kMaxTokenBytes) + " bytes");
    }
    const TokenId value = r.id_of(id, key);
    if (const auto [other, inserted] = seen.emplace(value, token); !inserted) {
      r.fail(key, "id " + std::to_string(value) + " is also the id of '" + other->second + "'");
    }
    vocabulary.emplace(token, value);
  }
  return vocabulary;
}

std::vector<Merge> read_merges(const Reader& r, const json& model) {
  const json& merges = r.member(model, "model", "merges");
  if (!merges.is_array()) r.fail("model.merges", "expected a list of merges");
  std::vector<Merge> out;
  out.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    const json& merge = merges[i];
    if (merge.is_string()) {  // "a b", the older form
      const std::string text = r.string_of(merge, key);
      const std::size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        r.fail(key, "'" + text + "' is not two tokens separated by one space");
      }
      out.push_back({text.substr(0, space), text.substr(space + 1)});
    } else if (merge.is_array() && merge.size() == 2) {
      out.push_back({r.string_of(merge[0], key + "[0]"), r.string_of(merge[1], key + "[1]")});
    } else {
      r.fail(key, "expected \"left right\" or [\"left\", \"right\"], found " + merge.dump());
    }
  }
  return out;
}

std::unique_ptr<BpeModel> read_model(const Reader& r, const json& root) {
  const json& model = r.member(root, "", "model");
  if (!model.is_object()) r.fail("model", "expected an object");
  const auto type = model.find("type");
  const std::string kind = type == model.end() ? "BPE" : r.string_of(*type, "model.type");
  if (kind != "BPE") {
    r.fail("model.type", "model type '" + kind + "' is not supported: mixt reads BPE tokenizers",
           "a SentencePiece model is read from its tokenizer.model file");
  }
  if (const auto dropout = model.find("dropout");
      dropout != model.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0)) {
    r.fail("model.dropout", "BPE dropout is for training tokenizers; mixt encodes without it", "set it to null");
  }
  BpeOptions options;
  const auto optional_string = [&](const char* name) -> std::optional<std::string> {
    const auto found = model.find(name);
    if (found == model.end() || found->is_null()) return std::nullopt;
    return r.string_of(*found, std::string("model.") + name);
  };
  options.unk_token = optional_string("unk_token");
  options.continuing_subword_prefix = optional_string("continuing_subword_prefix").value_or("");
  options.end_of_word_suffix = optional_string("end_of_word_suffix").value_or("");
  options.fuse_unk = r.flag(model, "model", "fuse_unk", false);
  options.byte_fallback = r.flag(model, "model", "byte_fallback", false);
  options.ignore_merges = r.flag(model, "model", "ignore_merges", false);
  Vocabulary vocabulary = read_vocabulary(r, model);
  const std::vector<Merge> merges = read_merges(r, model);
  try {
    return std::make_unique<BpeModel>(std::move(vocabulary), merges, std::move(options));
  } catch (const std::invalid_argument& e) {
    r.fail("model.merges", e.what());
  }
}

AddedTokens read_added_tokens(const Reader& r, const json& root) {
  const auto found = root.find("added_tokens");
  if (found == root.end() || found->is_null()) return {};
  if (!found->is_array()) r.fail("added_tokens", "expected a list");
  std::vector<AddedToken> tokens;
  for (std::size_t i = 0; i < found->size(); ++i) {
    const std::string key = "added_tokens[" + std::to_string(i) + "]";
    const json& entry = (*found)[i];
    if (!entry.is_object()) r.fail(key, "expected an object");
    AddedToken token;
    token.id = r.id_of(r.member(entry, key, "id"), key + ".id");
    token.content = r.string_of(r.member(entry, key, "content"), key + ".content");
    if (token.content.empty()) r.fail(key + ".content", "an added token cannot be empty");
    token.special = r.flag(entry, key, "special", false);
    token.single_word = r.flag(entry, key, "single_word", false);
    token.lstrip = r.flag(entry, key, "lstrip", false);
    token.rstrip = r.flag(entry, key, "rstrip", false);
    tokens.push_back(std::move(token));
  }
  return AddedTokens(std::move(tokens));
}

// A Split/Replace `pattern`: {"Regex": ...} as it is, {"String": ...} escaped.
std::string pattern_regex(const Reader& r, const json& node, const std::string& key) {
  const json& pattern = r.member(node, key, "pattern");
  if (pattern.is_object() && pattern.contains("Regex")) return r.string_of(pattern["Regex"], key + ".pattern.Regex");
  if (pattern.is_object() && pattern.contains("String")) {
    return escaped_regex(r.string_of(pattern["String"], key + ".pattern.String"));
  }
  r.fail(key + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
}

template <class Made, class... Args>
std::unique_ptr<Made> with_regex(const Reader& r, const std::string& key, Args&&... args) {
  try {
    return std::make_unique<Made>(std::forward<Args>(args)...);
  } catch (const std::invalid_argument& e) {
    r.fail(key + ".pattern", std::string("the regex does not compile: ") + e.what());
  }
}

std::unique_ptr<Normalizer> read_normalizer(const Reader& r, const json& node, const std::string& key) {
  const std::string type = r.type_of(node, key);
  if (type == "NFC") return std::make_unique<UnicodeFormNormalizer>(UnicodeForm::nfc);
  if (type == "NFD") return std::make_unique<UnicodeFormNormalizer>(UnicodeForm::nfd);
  if (type == "NFKC") return std::make_unique<UnicodeFormNormalizer>(UnicodeForm::nfkc);
  if (type == "NFKD") return std::make_unique<UnicodeFormNormalizer>(UnicodeForm::nfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(r.string_of(r.member(node, key, "prepend"), key));
  if (type == "Replace") {
    return with_regex<ReplaceNormalizer>(r, key, pattern_regex(r, node, key),
                                         r.string_of(r.member(node, key, "content"), key + ".content"));
  }
  if (type == "Sequence") {
    const json& steps = r.member(node, key, "normalizers");
    if (!steps.is_array()) r.fail(key + ".normalizers", "expected a list");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      parts.push_back(read_normalizer(r, steps[i], key + ".normalizers[" + std::to_string(i) + "]"));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  r.fail(key + ".type",
         "normalizer '" + type +
             "' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Sequence)");
}

PrependScheme prepend_scheme(const Reader& r, const json& node, const std::string& key) {
  const auto found = node.find("prepend_scheme");
  if (found == node.end()) {  // files before tokenizers 0.19 say add_prefix_space
    return r.flag(node, key, "add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;
  }
  const std::string scheme = r.string_of(*found, key + ".prepend_scheme");
  if (scheme == "always") return PrependScheme::always;
  if (scheme == "first") return PrependScheme::first;
  if (scheme == "never") return PrependScheme::never;
  r.fail(key + ".prepend_scheme", "unknown prepend_scheme '" + scheme + "' (known: always, first, never)");
}

SplitBehavior split_behavior(const Reader& r, const std::string& text, const std::string& key) {
  if (text == "Removed") return SplitBehavior::removed;
  if (text == "Isolated") return SplitBehavior::isolated;
  if (text == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (text == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (text == "Contiguous") return SplitBehavior::contiguous;
  r.fail(key, "unknown split behavior '" + text +
                  "' (known: Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                  "Contiguous)");
}

std::unique_ptr<PreTokenizer> read_pre_tokenizer(const Reader& r, const json& node, const std::string& key) {
  const std::string type = r.type_of(node, key);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(r.flag(node, key, "add_prefix_space", true),
                                                   r.flag(node, key, "use_regex", true));
  }
  if (type == "Split") {
    const SplitBehavior behavior =
        split_behavior(r, r.string_of(r.member(node, key, "behavior"), key + ".behavior"), key + ".behavior");
    return with_regex<SplitPreTokenizer>(r, key, pattern_regex(r, node, key), behavior,
                                         r.flag(node, key, "invert", false));
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspacePreTokenizer>(
        r.string_of(r.member(node, key, "replacement"), key + ".replacement"), prepend_scheme(r, node, key),
        r.flag(node, key, "split", true));
  }
  if (type == "Sequence") {
    const json& steps = r.member(node, key, "pretokenizers");
    if (!steps.is_array()) r.fail(key + ".pretokenizers", "expected a list");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      parts.push_back(read_pre_tokenizer(r, steps[i], key + ".pretokenizers[" + std::to_string(i) + "]"));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  r.fail(key + ".type",
         "pre-tokenizer '" + type + "' is not supported (supported: ByteLevel, Split, Metaspace, Sequence)");
}

std::unique_ptr<DecoderStep> read_decoder(const Reader& r, const json& node, const std::string& key) {
  const std::string type = r.type_of(node, key);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    return with_regex<ReplaceDecoder>(r, key, pattern_regex(r, node, key),
                                      r.string_of(r.member(node, key, "content"), key + ".content"));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const auto count = [&](const char* name) {
      return static_cast<std::size_t>(r.id_of(r.member(node, key, name), key + "." + name));
    };
    return std::make_unique<StripDecoder>(r.string_of(r.member(node, key, "content"), key + ".content"), count("start"),
                                          count("stop"));
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspaceDecoder>(r.string_of(r.member(node, key, "replacement"), key + ".replacement"),
                                              prepend_scheme(r, node, key) != PrependScheme::never);
  }
  if (type == "Sequence") {
    const json& steps = r.member(node, key, "decoders");
    if (!steps.is_array()) r.fail(key + ".decoders", "expected a list");
    std::vector<std::unique_ptr<DecoderStep>> parts;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      parts.push_back(read_decoder(r, steps[i], key + ".decoders[" + std::to_string(i) + "]"));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  r.fail(key + ".type", "decoder '" + type +
                            "' is not supported (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, "
                            "Sequence)");
}

// TemplateProcessing's `single`, or nothing for post-processors that add no ids (ByteLevel).
void read_post_processor(const Reader& r, const json& node, const std::string& key, HfTokenizerParts& parts) {
  if (node.is_null()) return;
  const std::string type = r.type_of(node, key);
  if (type == "ByteLevel") return;  // it adjusts offsets only
  if (type == "Sequence") {
    const json& steps = r.member(node, key, "processors");
    if (!steps.is_array()) r.fail(key + ".processors", "expected a list");
    for (std::size_t i = 0; i < steps.size(); ++i) {
      read_post_processor(r, steps[i], key + ".processors[" + std::to_string(i) + "]", parts);
    }
    return;
  }
  if (type != "TemplateProcessing") {
    r.fail(key + ".type",
           "post-processor '" + type + "' is not supported (supported: TemplateProcessing, ByteLevel, Sequence)");
  }
  const json& single = r.member(node, key, "single");
  const json& specials = r.member(node, key, "special_tokens");
  if (!single.is_array()) r.fail(key + ".single", "expected a list");
  parts.template_single.clear();
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string item_key = key + ".single[" + std::to_string(i) + "]";
    TemplatePart part;
    if (single[i].contains("Sequence")) {
      part.is_text = true;
    } else if (single[i].contains("SpecialToken")) {
      const std::string name = r.string_of(r.member(single[i]["SpecialToken"], item_key, "id"), item_key + ".id");
      const json& special = r.member(specials, key + ".special_tokens", name);
      for (const json& id : r.member(special, key + ".special_tokens" + json_key(name), "ids")) {
        part.ids.push_back(r.id_of(id, key + ".special_tokens" + json_key(name) + ".ids"));
      }
    } else {
      r.fail(item_key, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    parts.template_single.push_back(std::move(part));
  }
}

}  // namespace

std::unique_ptr<Tokenizer> read_tokenizer_json(const std::string& file, std::string_view content) {
  const Reader r{file};
  json root;
  try {
    root = json::parse(content);
  } catch (const json::parse_error& e) {
    // nlohmann gives the byte; people and editors want the line and column.
    const std::size_t byte = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, content.size());
    int line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < byte; ++i) {
      if (content[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    const std::string what = e.what();
    const std::size_t colon = what.find(": ", what.find("parse error"));
    throw recipe_error("not valid JSON" + (colon == std::string::npos ? std::string() : what.substr(colon)),
                       SourceLocation{file, line, static_cast<int>(byte - line_start) + 1}, {},
                       "a tokenizer.json as tokenizers' save() writes it");
  } catch (const json::out_of_range& e) {
    // nlohmann refuses a number beyond a double's range (1e400) as out_of_range, not parse_error.
    throw recipe_error("not valid JSON: " + std::string(e.what()), SourceLocation{file}, {},
                       "a tokenizer.json as tokenizers' save() writes it");
  }
  if (!root.is_object()) r.fail("", "expected a JSON object (tokenizers' tokenizer.json)");
  HfTokenizerParts parts;
  parts.file = file;
  if (const auto normalizer = root.find("normalizer"); normalizer != root.end() && !normalizer->is_null()) {
    parts.normalizer = read_normalizer(r, *normalizer, "normalizer");
  }
  parts.added = read_added_tokens(r, root);
  if (const auto pre = root.find("pre_tokenizer"); pre != root.end() && !pre->is_null()) {
    parts.pre_tokenizer = read_pre_tokenizer(r, *pre, "pre_tokenizer");
  }
  parts.model = read_model(r, root);
  if (const auto decoder = root.find("decoder"); decoder != root.end() && !decoder->is_null()) {
    parts.decoder = read_decoder(r, *decoder, "decoder");
    parts.byte_level_decoder = r.type_of(*decoder, "decoder") == "ByteLevel";
  }
  if (const auto post = root.find("post_processor"); post != root.end()) {
    read_post_processor(r, *post, "post_processor", parts);
  }
  return std::make_unique<HfTokenizer>(std::move(parts));
}

}  // namespace mixt::text
