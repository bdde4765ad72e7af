#include "mixt/error.h"

namespace mixt {

std::string SourceLocation::str() const {
  if (file.empty()) return {};
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

namespace {
std::string compose(const std::string& message, const SourceLocation& where,
                    const std::string& key_path) {
  std::string text;
  if (where.known()) text += where.str() + ": ";
  if (!key_path.empty()) text += key_path + ": ";
  return text + message;
}
}  // namespace

Error::Error(ErrorKind kind, std::string message, SourceLocation where, std::string key_path,
             std::string hint)
    : std::runtime_error(compose(message, where, key_path)),
      kind_(kind),
      message_(std::move(message)),
      where_(std::move(where)),
      key_path_(std::move(key_path)),
      hint_(std::move(hint)) {}

int Error::exit_code() const {
  switch (kind_) {
    case ErrorKind::runtime: return 1;
    case ErrorKind::interrupted: return 130;
    case ErrorKind::usage:
    case ErrorKind::recipe:
    case ErrorKind::plugin: return 2;
  }
  return 1;
}

Error recipe_error(std::string message, SourceLocation where, std::string key_path,
                   std::string hint) {
  return Error(ErrorKind::recipe, std::move(message), std::move(where), std::move(key_path),
               std::move(hint));
}

Error plugin_error(std::string message, std::string plugin_file, std::string hint) {
  return Error(ErrorKind::plugin, std::move(message), SourceLocation{std::move(plugin_file)}, {},
               std::move(hint));
}

Error usage_error(std::string message, std::string hint) {
  return Error(ErrorKind::usage, std::move(message), {}, {}, std::move(hint));
}

Error runtime_error(std::string message, std::string hint) {
  return Error(ErrorKind::runtime, std::move(message), {}, {}, std::move(hint));
}

}  // namespace mixt
