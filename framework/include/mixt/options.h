// mixt/options.h — a component's options, each declared once: name, default, help, check.
//
//   const mixt::Required<double> kLr{"lr", "learning rate", mixt::at_least(0)};
//   const mixt::Option<double> kMomentum{"momentum", 0.0, "momentum factor", mixt::at_least(0)};
//   registrar.add_optimizer("sgd", {"SGD", {kLr, kMomentum}}, [](const mixt::Config& c, const auto& ctx) {
//     const double momentum = kMomentum.read(c);  // c.number("momentum", 0.0), then the check
//     ...
//
// The factory reads through the declaration and ComponentInfo lists it, so `mixt describe`
// shows exactly the default the reader uses (written by format_yaml, which reads back as the
// same value). A failed check is a recipe error at the value: "r.yaml:3:14: optimizer.momentum:
// must not be negative". Checks that relate two options stay in the factory.
//
// Options that fill a struct are bound to its fields with OptionsOf<S> (below): the field's
// initialiser is then the one default, read, checked and documented from that one place.
//
// Header-only templates over Config and OptionDoc: no SDK class layout changes, so this
// header needs no ABI bump. OptionDoc may still be written by hand.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mixt/config.h"
#include "mixt/plugin.h"

namespace mixt {

// --- format_yaml: a value as YAML that Config reads back as the same value -------------

// Shortest text that reads back as the same double, with ".0" on integral values: 0.0, 0.1,
// 1e-08, 65536.0, -0.0.
inline std::string format_yaml(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  char text[64];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
  std::string out(text, end);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}
inline std::string format_yaml(std::int64_t value) { return std::to_string(value); }
inline std::string format_yaml(bool value) { return value ? "true" : "false"; }
// Plain when YAML would read the plain text back as this string (auto, runs/, steps.csv);
// double-quoted otherwise ("", "true", "1.0", "null", "a b").
inline std::string format_yaml(const std::string& value) {
  const auto plain_char = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '.' || ch == '/' || ch == '-';
  };
  bool plain = !value.empty() && value.front() != '-' && value.front() != '.';
  for (const char ch : value) plain = plain && plain_char(ch);
  if (plain) {
    std::string lower;
    for (const char ch : value) lower += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    for (const char* word : {"null", "true", "false", "yes", "no", "on", "off", "y", "n", "inf", "nan"}) {
      plain = plain && lower != word;
    }
    char* end = nullptr;
    (void)std::strtod(value.c_str(), &end);  // a number would read back as one
    plain = plain && end != value.c_str() + value.size();
  }
  if (plain) return value;
  std::string out = "\"";
  for (const char ch : value) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          const char* hex = "0123456789ABCDEF";
          out += std::string("\\x") + hex[(ch >> 4) & 0xF] + hex[ch & 0xF];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}
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

  std::optional<std::string> failure(double value) const {
    const bool low_ok = !low_ || (low_open_ ? value > *low_ : value >= *low_);
    const bool high_ok = !high_ || (high_open_ ? value < *high_ : value <= *high_);
    if (low_ok && high_ok) return std::nullopt;
    if (low_ && high_) {
      return "must be in " + std::string(low_open_ ? "(" : "[") + number(*low_) + ", " + number(*high_) +
             (high_open_ ? ")" : "]");
    }
    if (low_) {
      if (*low_ == 0) return low_open_ ? "must be positive" : "must not be negative";
      return (low_open_ ? "must be greater than " : "must be at least ") + number(*low_);
    }
    return (high_open_ ? "must be less than " : "must be at most ") + number(*high_);
  }

  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>>>
  operator Check<T>() const {  // implicit: a Bounds is given where a Check is asked for
    const Bounds bounds = *this;
    return Check<T>([bounds](const T& value) { return bounds.failure(static_cast<double>(value)); });
  }

 private:
  static std::string number(double value) {
    char text[64];
    return std::string(text, std::to_chars(text, text + sizeof(text), value).ptr);
  }

  std::optional<double> low_, high_;
  bool low_open_ = false, high_open_ = false;
};

inline Bounds at_least(double low) { return {low, false, std::nullopt, false}; }
inline Bounds above(double low) { return {low, true, std::nullopt, false}; }  // strictly
inline Bounds at_most(double high) { return {std::nullopt, false, high, false}; }
inline Bounds below(double high) { return {std::nullopt, false, high, true}; }  // strictly
inline Bounds between(double low, double high) { return at_least(low) && at_most(high); }  // both included

// One of a few words: `expected skip or fail, got "x"`; the choices appear in the help.
inline Check<std::string> one_of(std::vector<std::string> choices) {
  std::string words, listed;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    words += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    listed += (i ? ", " : "") + choices[i];
  }
  return Check<std::string>(
      [choices, words](const std::string& value) -> std::optional<std::string> {
        for (const auto& choice : choices) {
          if (value == choice) return std::nullopt;
        }
        return "expected " + words + ", got \"" + value + "\"";
      },
      "one of: " + listed);
}

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
    return this->checked(c, option_detail::read_required<T>(c, this->name()));
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
}  // namespace option_detail

// Options bound to the fields of a struct: each field's initialiser is its default, so the
// struct holds the only one; read() fills a struct from a Config, docs() lists them in order.
//
//   struct SgdOptions { double momentum = 0.0; bool nesterov = false; };
//   const auto kOptions = mixt::OptionsOf<SgdOptions>()
//       .add(&SgdOptions::momentum, "momentum", "momentum factor", mixt::at_least(0))
//       .add(&SgdOptions::nesterov, "nesterov", "Nesterov momentum");
//   SgdOptions o = kOptions.read(c);       // ComponentInfo{"SGD", kOptions.docs()}
//
// A field that needs more than one option's reading (an enum, two keys checked together)
// is set by the factory after read(), with its OptionDoc added to docs() by hand.
template <class S>
class OptionsOf {
 public:
  template <class F, class T = option_detail::read_as_t<F>>
  OptionsOf add(F S::*field, std::string name, std::string help,
                typename option_detail::identity<Check<T>>::type check = {}) const {
    OptionsOf more = *this;
    const Option<T> option(std::move(name), static_cast<T>(S{}.*field), std::move(help), std::move(check));
    more.docs_.push_back(option.doc());
    more.readers_.push_back([option, field](const Config& c, S& into) { into.*field = static_cast<F>(option.read(c)); });
    return more;
  }

  // A struct with the defaults, each bound field read (in the order they were added).
  S read(const Config& c) const {
    S out{};
    for (const auto& read_into : readers_) read_into(c, out);
    return out;
  }
  const std::vector<OptionDoc>& docs() const { return docs_; }

 private:
  std::vector<OptionDoc> docs_;
  std::vector<std::function<void(const Config&, S&)>> readers_;
};

}  // namespace mixt
