// mixt/error.h — the one error family of mixt.
//
// Every error carries what went wrong, where (recipe file:line:column, or a plugin
// file), the recipe key path when there is one, and a hint saying what to do next.
// The CLI turns an Error into one clear message and an exit code; plugins throw these
// (usually through Config::fail) instead of raw library exceptions.
#pragma once

#include <stdexcept>
#include <string>

namespace mixt {

// A place in a recipe (or any text file). line and column are 1-based; 0 means unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  bool known() const { return !file.empty(); }
  // "file:line:column", "file" or "" depending on what is known.
  std::string str() const;
};

enum class ErrorKind {
  usage,        // bad command line                    -> exit 2
  recipe,       // bad recipe / option / data location -> exit 2
  plugin,       // a plugin that cannot be used         -> exit 2
  runtime,      // failure while running                -> exit 1
  interrupted,  // SIGINT/SIGTERM honoured              -> exit 130
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, SourceLocation where = {}, std::string key_path = {},
        std::string hint = {});

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  const SourceLocation& where() const { return where_; }
  const std::string& key_path() const { return key_path_; }
  const std::string& hint() const { return hint_; }
  int exit_code() const;

 private:
  ErrorKind kind_;
  std::string message_;
  SourceLocation where_;
  std::string key_path_;
  std::string hint_;
};

// Convenience constructors, one per kind.
Error recipe_error(std::string message, SourceLocation where = {}, std::string key_path = {},
                   std::string hint = {});
Error plugin_error(std::string message, std::string plugin_file, std::string hint = {});
Error usage_error(std::string message, std::string hint = {});
Error runtime_error(std::string message, std::string hint = {});

// A warning through mixt's one channel: "mixt: warning: MESSAGE" on stderr, and in the
// run's log.txt while a run is open. Safe to call from any thread.
void warn(const std::string& message);

}  // namespace mixt
