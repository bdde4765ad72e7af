// Files that appear whole or not at all: checkpoints and exported weights are written to a
// temporary file next to the target, made durable, then renamed over it.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

namespace mixt {

// Creates the parent directories, calls `write` with a binary stream on `file`.tmp, then
// fsyncs and renames it to `file` and fsyncs the directory, so a crash or a full disk
// leaves the old file or the new one, never half of one. When anything fails, the
// temporary file is removed (on a full disk it would keep the disk full) and a runtime
// error naming `file` is thrown; `file` itself is untouched. Errors `write` throws pass
// through after the same clean-up.
void write_file_atomically(const std::filesystem::path& file, const std::function<void(std::ostream&)>& write);

// What to tell the user about a write in `directory` that failed with `error` (an errno):
// a full disk, no free inodes (which also reads as ENOSPC), a quota, or no permission.
std::string storage_hint(int error, const std::filesystem::path& directory);

// Removes the *.tmp files (and links) a killed write left in `directory`; they are never
// read, so they would only pile up.
void remove_stale_temporaries(const std::filesystem::path& directory);

}  // namespace mixt
