// The modules beside the plugins that draw with OpenCV (lib/mixt/libmixt_<name>.so: the heat
// map of `mixt evaluate --confusion-png`, the curve of `mixt lr-find --png`), loaded on first
// use so that the mixt program itself needs no OpenCV at run time. A build without OpenCV has
// no modules, and the option that asks for one says so.
#pragma once

#include <filesystem>
#include <string>

namespace mixt::cli {

struct DrawingModule {
  const char* library;      // "mixt_confusion_heat_map": lib/mixt/libmixt_confusion_heat_map.so
  const char* entry;        // its extern "C" function
  const char* option;       // the command's option that asks for the file, for the error
  const char* what;         // "heat maps"
  const char* alternative;  // what to do instead, for the hint
};

// The module's entry point, loaded once and kept; a usage error naming `option file` when
// this mixt cannot draw (no module, or one without the entry).
void* drawing_entry(const DrawingModule& module, const std::filesystem::path& file);

}  // namespace mixt::cli
