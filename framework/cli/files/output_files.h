// Files a command writes besides its report (`--json`, `--png`, `--csv`, `--confusion`):
// checked before the work, so a wrong directory costs nothing, and written whole or failed
// with the reason.
#pragma once

#include <filesystem>
#include <string>

namespace mixt::cli {

// A usage error naming `option` when `file`'s directory does not exist; nothing for "".
void check_writable(const std::string& option, const std::string& file);

// `text` into `file`; a runtime error with the system's reason when that fails.
void write_file(const std::filesystem::path& file, const std::string& text);

}  // namespace mixt::cli
