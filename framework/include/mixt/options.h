// mixt/options.h — a component's options, each declared once: name, default, help, check.
//
// A component's options are the fields of a struct; OptionsOf binds each field to its key,
// and the field's initialiser is the one default. The registrar reads and checks the
// struct before the factory runs, and `mixt describe` lists the same declarations:
//
//   struct SgdOptions { double lr = 0; double momentum = 0.0; bool nesterov = false; };
//   const auto kSgdOptions = mixt::OptionsOf<SgdOptions>()
//       .required(&SgdOptions::lr, "lr", "learning rate", mixt::at_least(0))
//       .add(&SgdOptions::momentum, "momentum", "momentum factor", mixt::at_least(0))
//       .add(&SgdOptions::nesterov, "nesterov", "Nesterov momentum")
//       .rule("nesterov", [](const SgdOptions& o) -> std::optional<std::string> {
//         if (o.nesterov && o.momentum <= 0) return "Nesterov momentum needs momentum > 0";
//         return std::nullopt;
//       });
//   registrar.add_optimizer("sgd", "SGD", kSgdOptions, [](const SgdOptions& o, const mixt::OptimizerContext& c) {...});
//
// A failed check is a recipe error at the value: "r.yaml:3:14: optimizer.momentum: must not
// be negative". The single-option declarations (Option, Required, ...) below are the
// building blocks; SDK helpers use them for options they share between components.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mixt/config.h"
#include "mixt/option_doc.h"

namespace mixt {

// --- format_yaml: a value as YAML that Config reads back as the same value -------------

// Shortest text that reads back as the same double, with ".0" on integral values: 0.0, 0.1,
// 1e-08, 65536.0, -0.0.
std::string format_yaml(double value);
std::string format_yaml(std::int64_t value);
std::string format_yaml(bool value);
// Plain when YAML would read the plain text back as this string (auto, runs/, steps.csv);
// double-quoted otherwise ("", "true", "1.0", "null", "a b").
std::string format_yaml(const std::string& value);
inline std::string format_yaml(const char* value) { return format_yaml(std::string(value)); }  // not the bool one
template <class T>
std::string format_yaml(const std::vector<T>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + format_yaml(values[i]);
  return out + "]";
}

// --- checks -----------------------------------------------------------------------------

// A check of one value: the failure message, or nothing when the value passes. `doc` (e.g.
// "one of: a, b") is added to the option's help in `mixt describe`.
template <class T>
struct Check {
  std::function<std::optional<std::string>(const T&)> test;
  std::string doc;

  Check() = default;
  template <class F, class = std::enable_if_t<std::is_invocable_r_v<std::optional<std::string>, F, const T&>>>
  Check(F f, std::string doc_text = {}) : test(std::move(f)), doc(std::move(doc_text)) {}
};

// A range for numbers: at_least(0), above(0), between(1, 10), at_least(0) && below(1).
class Bounds {
 public:
  Bounds(std::optional<double> low, bool low_open, std::optional<double> high, bool high_open)
      : low_(low), high_(high), low_open_(low_open), high_open_(high_open) {}

  // Both ranges at once: the message names the interval, "must be in [0, 1)".
  Bounds operator&&(const Bounds& other) const {
    Bounds both = *this;
    if (other.low_) both.low_ = other.low_, both.low_open_ = other.low_open_;
    if (other.high_) both.high_ = other.high_, both.high_open_ = other.high_open_;
    return both;
  }

  // The message for a value outside the range ("must be in [0, 1)"), or nothing.
  std::optional<std::string> failure(double value) const;

  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>>>
  operator Check<T>() const {  // implicit: a Bounds is given where a Check is asked for
    const Bounds bounds = *this;
    return Check<T>([bounds](const T& value) { return bounds.failure(static_cast<double>(value)); });
  }

 private:
  std::optional<double> low_, high_;
  bool low_open_ = false, high_open_ = false;
};

inline Bounds at_least(double low) { return {low, false, std::nullopt, false}; }
inline Bounds above(double low) { return {low, true, std::nullopt, false}; }  // strictly
inline Bounds at_most(double high) { return {std::nullopt, false, high, false}; }
inline Bounds below(double high) { return {std::nullopt, false, high, true}; }  // strictly
inline Bounds between(double low, double high) { return at_least(low) && at_most(high); }  // both included

// One of a few words: `expected skip or fail, got "x"`; the choices appear in the help.
Check<std::string> one_of(std::vector<std::string> choices);

// --- declarations -----------------------------------------------------------------------

namespace option_detail {
template <class T>
inline constexpr bool kSupported =
    std::is_same_v<T, double> || std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool> ||
    std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<double>> ||
    std::is_same_v<T, std::vector<std::int64_t>> || std::is_same_v<T, std::vector<std::string>>;

template <class T>
T read(const Config& c, const std::string& key, const T& fallback) {
  if constexpr (std::is_same_v<T, double>) return c.number(key, fallback);
  if constexpr (std::is_same_v<T, std::int64_t>) return c.integer(key, fallback);
  if constexpr (std::is_same_v<T, bool>) return c.boolean(key, fallback);
  if constexpr (std::is_same_v<T, std::string>) return c.string(key, fallback);
  if constexpr (std::is_same_v<T, std::vector<double>>) return c.numbers(key, fallback);
  if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) return c.integers(key, fallback);
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return c.strings(key, fallback);
}

template <class T>
T read_required(const Config& c, const std::string& key) {
  static_assert(std::is_same_v<T, double> || std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::string>,
                "Config has required getters for numbers, integers and strings");
  if constexpr (std::is_same_v<T, double>) return c.number(key);
  if constexpr (std::is_same_v<T, std::int64_t>) return c.integer(key);
  if constexpr (std::is_same_v<T, std::string>) return c.string(key);
}

// Name, help and check: what every kind of declaration has.
template <class T>
class Declared {
  static_assert(kSupported<T>, "an option is a double, std::int64_t, bool, std::string or a std::vector of those");

 public:
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  // The value passes the check, or a recipe error at the key names why.
  const T& checked(const Config& c, const T& value) const {
    if (check_.test) {
      if (auto message = check_.test(value)) c.fail(name_, *message);
    }
    return value;
  }

 protected:
  Declared(std::string name, std::string help, Check<T> check)
      : name_(std::move(name)), help_(std::move(help)), check_(std::move(check)) {}
  OptionDoc doc_with(std::string default_value) const {
    std::string help = help_;
    if (!check_.doc.empty()) help += (help.empty() ? "(" : " (") + check_.doc + ")";
    return {name_, std::move(default_value), std::move(help)};
  }

 private:
  std::string name_, help_;
  Check<T> check_;
};
}  // namespace option_detail

// An option with a default.
template <class T>
class Option : public option_detail::Declared<T> {
 public:
  Option(std::string name, T fallback, std::string help, Check<T> check = {})
      : option_detail::Declared<T>(std::move(name), std::move(help), std::move(check)),
        fallback_(std::move(fallback)) {}

  const T& fallback() const { return fallback_; }
  // The same option with another default (a dataset's own batch size).
  Option with_fallback(T fallback) const {
    Option copy = *this;
    copy.fallback_ = std::move(fallback);
    return copy;
  }

  T read(const Config& c) const { return this->checked(c, option_detail::read<T>(c, this->name(), fallback_)); }
  OptionDoc doc() const { return this->doc_with(format_yaml(fallback_)); }
  operator OptionDoc() const { return doc(); }  // implicit: ComponentInfo{summary, {kA, kB}}

 private:
  T fallback_;
};

// An option the recipe must give (`mixt describe` shows "(required)").
template <class T>
class Required : public option_detail::Declared<T> {
 public:
  Required(std::string name, std::string help, Check<T> check = {})
      : option_detail::Declared<T>(std::move(name), std::move(help), std::move(check)) {}

  T read(const Config& c) const { return this->checked(c, option_detail::read_required<T>(c, this->name())); }
  OptionDoc doc() const { return this->doc_with(""); }
  operator OptionDoc() const { return doc(); }
};

// An option whose default comes from the build context (the dataset's class count, the
// split): the factory passes it to read(), and the doc says it in words, in parentheses.
template <class T>
class Contextual : public option_detail::Declared<T> {
 public:
  Contextual(std::string name, std::string default_in_words, std::string help, Check<T> check = {})
      : option_detail::Declared<T>(std::move(name), std::move(help), std::move(check)),
        default_in_words_(std::move(default_in_words)) {}

  T read(const Config& c, const T& fallback) const {
    return this->checked(c, option_detail::read<T>(c, this->name(), fallback));
  }
  OptionDoc doc() const { return this->doc_with("(" + default_in_words_ + ")"); }
  operator OptionDoc() const { return doc(); }

 private:
  std::string default_in_words_;
};

// An option that may be left out, and means something only when given (a weights file):
// read() is empty then, and `mixt describe` shows "none".
template <class T>
class Optional : public option_detail::Declared<T> {
 public:
  Optional(std::string name, std::string help, Check<T> check = {})
      : option_detail::Declared<T>(std::move(name), std::move(help), std::move(check)) {}

  std::optional<T> read(const Config& c) const {
    if (!c.has(this->name())) return std::nullopt;
    return this->checked(c, option_detail::read<T>(c, this->name(), T{}));  // present: T{} is not used
  }
  OptionDoc doc() const { return this->doc_with("none"); }
  operator OptionDoc() const { return doc(); }
};

namespace option_detail {
// The type an option of a field of type F is read as: integers as std::int64_t, floating
// point as double (then converted back to the field's type).
template <class F>
using read_as_t = std::conditional_t<
    std::is_same_v<F, bool>, bool,
    std::conditional_t<std::is_integral_v<F>, std::int64_t, std::conditional_t<std::is_floating_point_v<F>, double, F>>>;
template <class T>
struct identity {  // std::type_identity (C++20): keeps a Check<T> argument out of deduction
  using type = T;
};
template <class T>
using check_of = typename identity<Check<T>>::type;
}  // namespace option_detail

// A key that takes one of a few words or a list of names, e.g.
// `activation_checkpointing: all` or `activation_checkpointing: [layer1, layer2]`.
struct WordOrList {
  std::string word;                // the word given (or the default); empty when a list was given
  std::vector<std::string> names;  // the list given; empty when a word was
};
// Reads such a key (OptionsOf::word_or_list).
WordOrList read_word_or_list(const Config& c, const std::string& key, const std::vector<std::string>& words,
                             const std::string& default_word, const std::string& names_are);

// Whether the recipe wrote `key` in the section, without making it one of the section's
// known keys (as Config::has does): for keys a component refuses.
bool written(const Config& section, std::string_view key);

// Where a component's section sits in the recipe, for the errors only its factory can find
// (a data root that does not exist): reported at the key's file:line:column like any recipe
// error. It reads nothing; a field bound with OptionsOf::recipe_section.
class RecipeSection {
 public:
  RecipeSection() = default;
  explicit RecipeSection(Config section) : section_(std::move(section)) {}
  [[noreturn]] void fail(std::string_view key, const std::string& message, const std::string& hint = {}) const {
    section_.fail(key, message, hint);
  }
  // Whether the recipe wrote `key` (even with its default value).
  bool given(std::string_view key) const { return written(section_, key); }
  // The error of a required option that is absent (naming a misspelt key if there is one),
  // for a key that is required only sometimes.
  [[noreturn]] void fail_missing(std::string_view key) const;
  SourceLocation location(std::string_view key = {}) const { return section_.location(key); }
  const std::string& path() const { return section_.path(); }  // "data.train"

 private:
  Config section_;
};

// A component's options: the fields of a struct S, each bound to its key once. read() fills
// an S from a recipe section, checking every value and then every rule; docs() lists the
// keys in the order they were added, for `mixt describe` and ComponentInfo.
template <class S>
class OptionsOf {
 public:
  // `defaults`: where the keys' defaults come from; S{} (the fields' initialisers) unless a
  // component shares a struct with other defaults (a dataset's own batch size).
  explicit OptionsOf(S defaults = S{}) : defaults_(std::move(defaults)) {}

  // A key with a default: the field's value in the defaults.
  template <class F, class T = option_detail::read_as_t<F>>
  OptionsOf add(F S::*field, std::string name, std::string help, option_detail::check_of<T> check = {}) const {
    const Option<T> option(std::move(name), static_cast<T>(defaults_.*field), std::move(help), std::move(check));
    return with(option.doc(), [option, field](const Config& c, S& into) { into.*field = static_cast<F>(option.read(c)); });
  }

  // A key the recipe must give (`mixt describe` shows "(required)").
  template <class F, class T = option_detail::read_as_t<F>>
  OptionsOf required(F S::*field, std::string name, std::string help, option_detail::check_of<T> check = {}) const {
    const Required<T> option(std::move(name), std::move(help), std::move(check));
    return with(option.doc(), [option, field](const Config& c, S& into) { into.*field = static_cast<F>(option.read(c)); });
  }

  // A key that means something only when given (a weights file): the field stays empty when
  // the key is absent, and `mixt describe` shows "none".
  template <class F, class T = option_detail::read_as_t<F>>
  OptionsOf optional(std::optional<F> S::*field, std::string name, std::string help,
                     option_detail::check_of<T> check = {}) const {
    const Optional<T> option(std::move(name), std::move(help), std::move(check));
    return with(option.doc(), [option, field](const Config& c, S& into) {
      if (auto value = option.read(c)) into.*field = static_cast<F>(*value);
    });
  }

  // A key whose default comes from what the component is built for (the dataset's class
  // count): the field stays empty when the key is absent, the factory fills it from its
  // context, and `mixt describe` shows `default_in_words` in parentheses.
  template <class F, class T = option_detail::read_as_t<F>>
  OptionsOf contextual(std::optional<F> S::*field, std::string name, std::string default_in_words, std::string help,
                       option_detail::check_of<T> check = {}) const {
    const Optional<T> option(name, help, check);
    const Contextual<T> doc(std::move(name), std::move(default_in_words), std::move(help), std::move(check));
    return with(doc.doc(), [option, field](const Config& c, S& into) {
      if (auto value = option.read(c)) into.*field = static_cast<F>(*value);
    });
  }

  // One of a few words, each standing for a value of the field (an enum): the default is the
  // word of the field's default value.
  template <class F>
  OptionsOf choice(F S::*field, std::string name, std::vector<std::pair<std::string, F>> words,
                   std::string help) const {
    std::string fallback;
    std::vector<std::string> names;
    for (const auto& [word, value] : words) {
      names.push_back(word);
      if (value == defaults_.*field && fallback.empty()) fallback = word;
    }
    const Option<std::string> option(std::move(name), fallback, std::move(help), one_of(names));
    return with(option.doc(), [option, field, words](const Config& c, S& into) {
      const std::string word = option.read(c);
      for (const auto& [known, value] : words) {
        if (known == word) into.*field = value;
      }
    });
  }

  // One of `words` or a list of names, `default_word` when absent; `names_are` says what the
  // names are ("submodule names") in the error for anything else. An empty name is an error.
  // `convert` turns what was given into the field's type (for a field that is no WordOrList).
  template <class F = WordOrList>
  OptionsOf word_or_list(
      F S::*field, std::string name, std::vector<std::string> words, std::string default_word, std::string names_are,
      std::string help, std::function<F(const WordOrList&)> convert = [](const WordOrList& given) { return given; })
      const {
    const OptionDoc doc{name, format_yaml(default_word), std::move(help)};
    return with(doc, [=](const Config& c, S& into) {
      into.*field = convert(read_word_or_list(c, name, words, default_word, names_are));
    });
  }

  // Another struct's options, read from the same section into a field (option groups that
  // several components share: the data loader's, a loss scaler's).
  template <class G>
  OptionsOf include(G S::*field, const OptionsOf<G>& group) const {
    OptionsOf more = *this;
    more.docs_.insert(more.docs_.end(), group.docs().begin(), group.docs().end());
    more.readers_.push_back([group, field](const Config& c, S& into) { into.*field = group.read(c); });
    return more;
  }

  // A rule relating several options, tested after every key is read: its message becomes
  // a recipe error at `key` ("nesterov: needs momentum > 0").
  OptionsOf rule(std::string key, std::function<std::optional<std::string>(const S&)> test) const {
    OptionsOf more = *this;
    more.rules_.push_back({std::move(key), std::move(test)});
    return more;
  }

  // Keys that are an error where written, when `applies` holds for the options read so far
  // (those added before this): keys of a mode not chosen, or ones other components take
  // (amp_bf16 has no loss scaler). They are not offered as known keys in hints.
  OptionsOf refuse(std::vector<std::string> keys, std::string message, std::string hint,
                   std::function<bool(const S&)> applies = [](const S&) { return true; }) const {
    OptionsOf more = *this;
    more.readers_.push_back([=](const Config& c, S& so_far) {
      if (!applies(so_far)) return;
      for (const std::string& key : keys) {
        if (written(c, key)) c.fail(key, message, hint);
      }
    });
    return more;
  }

  // The keys it reads, in order (for a list of keys another component refuses).
  std::vector<std::string> keys() const {
    std::vector<std::string> names;
    for (const OptionDoc& doc : docs_) names.push_back(doc.name);
    return names;
  }

  // The section itself, for errors at its keys (RecipeSection).
  OptionsOf recipe_section(RecipeSection S::*field) const {
    OptionsOf more = *this;
    more.readers_.push_back([field](const Config& c, S& into) { into.*field = RecipeSection(c); });
    return more;
  }

  // Keys that an SDK helper reads from the section itself (a transform pipeline), with the
  // docs that helper gives for them.
  OptionsOf read_with(std::vector<OptionDoc> docs, std::function<void(const Config&, S&)> read) const {
    OptionsOf more = *this;
    more.docs_.insert(more.docs_.end(), docs.begin(), docs.end());
    more.readers_.push_back(std::move(read));
    return more;
  }

  // A struct with the defaults, each bound key read (in the order added), then the rules.
  S read(const Config& c) const {
    S out = defaults_;
    for (const auto& read_into : readers_) read_into(c, out);
    for (const auto& [key, test] : rules_) {
      if (auto message = test(out)) c.fail(key, *message);
    }
    return out;
  }
  const std::vector<OptionDoc>& docs() const { return docs_; }

 private:
  OptionsOf with(OptionDoc doc, std::function<void(const Config&, S&)> read) const {
    OptionsOf more = *this;
    more.docs_.push_back(std::move(doc));
    more.readers_.push_back(std::move(read));
    return more;
  }

  S defaults_;
  std::vector<OptionDoc> docs_;
  std::vector<std::function<void(const Config&, S&)>> readers_;
  std::vector<std::pair<std::string, std::function<std::optional<std::string>(const S&)>>> rules_;
};

// For a component without options: `registrar.add_precision("fp32", "...", mixt::kNoOptions, ...)`.
struct NoOptions {};
inline const OptionsOf<NoOptions> kNoOptions = OptionsOf<NoOptions>();

}  // namespace mixt
