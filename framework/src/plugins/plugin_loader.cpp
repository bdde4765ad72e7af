#include "plugins/plugin_loader.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>

#include "common/shared_library.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {

std::string abi_string(std::uint32_t major, std::uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

bool blank(const char* text) { return text == nullptr || *text == '\0'; }

const std::string kRebuildHint = std::string("rebuild the plugin against mixt ") +
                                 MIXT_VERSION_STRING + " (" + MIXT_BUILD_FINGERPRINT +
                                 ") with mixt_add_plugin()";

void check_descriptor(const PluginDescriptor* d, const std::string& file) {
  if (d == nullptr) throw plugin_error("mixt_plugin_info() returned no descriptor", file);
  const std::string host_abi = abi_string(MIXT_ABI_MAJOR, MIXT_ABI_MINOR);
  const std::string plugin_abi = abi_string(d->abi_major, d->abi_minor);
  if (d->abi_major != MIXT_ABI_MAJOR || d->abi_minor > MIXT_ABI_MINOR) {
    std::string built_with = "plugin ABI " + plugin_abi;
    if (d->abi_major == MIXT_ABI_MAJOR && d->struct_size >= sizeof(PluginDescriptor) && !blank(d->mixt_version)) {
      built_with += " (mixt " + std::string(d->mixt_version) + ")";
    }
    throw plugin_error("incompatible plugin: built for " + built_with + ", this mixt " +
                           MIXT_VERSION_STRING + " supports plugin ABI " + host_abi,
                       file, kRebuildHint);
  }
  if (d->struct_size < sizeof(PluginDescriptor)) {
    throw plugin_error("incompatible plugin: descriptor of " + std::to_string(d->struct_size) +
                           " bytes, expected " + std::to_string(sizeof(PluginDescriptor)),
                       file, kRebuildHint);
  }
  if (blank(d->name) || blank(d->version) || blank(d->mixt_version) || blank(d->build_fingerprint) ||
      d->register_components == nullptr) {
    throw plugin_error("the plugin descriptor has an empty field (name, version, mixt version, "
                       "build fingerprint or register function)",
                       file, "declare the plugin with MIXT_PLUGIN(\"name\", \"version\", register_fn)");
  }
  if (std::strcmp(d->build_fingerprint, MIXT_BUILD_FINGERPRINT) != 0) {
    throw plugin_error(std::string("incompatible plugin '") + d->name + "': built with [" +
                           d->build_fingerprint + "], this mixt with [" + MIXT_BUILD_FINGERPRINT + "]",
                       file, kRebuildHint);
  }
}

std::string demangled(const std::string& symbol) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && name ? std::string(name.get()) : symbol;
}

// Whether the library was compiled with the pre-C++11 std::string: it then names that
// string's members, `std::basic_string<char>` abbreviated `Ss` in the Itanium mangling
// (the C++11 one is `std::__cxx11::basic_string`), among the symbols it imports.
bool uses_pre_cxx11_string(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes.find("_ZNSs") != std::string::npos || bytes.find("_ZNKSs") != std::string::npos;
}

// What to do about a library the dynamic loader refused, from its reason: an undefined
// symbol is named (demangled), and a plugin built with -D_GLIBCXX_USE_CXX11_ABI=0 is called
// that, since its symbols cannot resolve against mixt's and the fingerprint check is never
// reached.
std::string unloadable_library_hint(const std::string& reason, const fs::path& path) {
  const std::string marker = "undefined symbol: ";
  const auto at = reason.find(marker);
  if (at == std::string::npos) {
    return "check that it is a .so built for this machine and that its dependencies are on the "
           "library path (ldd " + path.string() + ")";
  }
  const std::string symbol = reason.substr(at + marker.size());
  const std::string name = demangled(symbol);
  if (uses_pre_cxx11_string(path)) {
    return "the plugin was compiled with the pre-C++11 std::string (-D_GLIBCXX_USE_CXX11_ABI=0), and mixt and "
           "LibTorch with the C++11 one, so " + name + " cannot be found; build it without that define, with "
           "mixt_add_plugin() (docs/plugins.md)";
  }
  return "no loaded library defines " + name + ": link the library that does, or " + kRebuildHint;
}

SharedLibrary open_library(const fs::path& canonical, const std::string& file) {
  try {
    return SharedLibrary(canonical);
  } catch (const SharedLibraryError& e) {
    throw plugin_error("not a loadable shared library (" + e.reason() + ")", file,
                       unloadable_library_hint(e.reason(), canonical));
  }
}

}  // namespace

void PluginLoader::load(const fs::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw plugin_error("plugin file not found", file);
  if (fs::is_directory(path, ec)) {
    throw plugin_error("expected a plugin library, got a directory", file,
                       "name the .so file, or put the directory in MIXT_PLUGIN_PATH");
  }
  // A FIFO would block the loader until a writer came; a device is no library.
  if (!fs::is_regular_file(path, ec)) throw plugin_error("not a regular file, so not a plugin library", file);
  const fs::path canonical = fs::canonical(path, ec);
  const bool seen = std::any_of(loaded_.begin(), loaded_.end(),
                                [&](const LoadedPlugin& p) { return p.file == canonical.string(); });
  if (seen) return;

  // Until the plugin has registered, any failure closes the library again.
  SharedLibrary library = open_library(canonical, file);
  void* entry = library.find(MIXT_PLUGIN_ENTRY_SYMBOL);
  if (entry == nullptr) {
    throw plugin_error("not a mixt plugin: no entry point '" MIXT_PLUGIN_ENTRY_SYMBOL "'", file,
                       "a plugin declares itself with MIXT_PLUGIN(...) from <mixt/plugin.h>");
  }
  const PluginDescriptor* descriptor = reinterpret_cast<const PluginDescriptor* (*)()>(entry)();
  check_descriptor(descriptor, file);

  // A registration that fails part-way takes back what it added before `library` goes:
  // the registry destroying a factory whose code was unloaded would crash.
  registry_.begin_plugin({canonical.string(), descriptor->name, descriptor->version});
  try {
    descriptor->register_components(registry_);
  } catch (const Error&) {
    registry_.discard_plugin();
    throw;
  } catch (const std::exception& e) {
    registry_.discard_plugin();
    throw plugin_error(std::string("plugin '") + descriptor->name + "' failed to register: " + e.what(), file);
  }
  if (registry_.end_plugin() == 0) {
    throw plugin_error(std::string("plugin '") + descriptor->name + "' registered no components", file,
                       "its register function must call the registrar's add_model, add_optimizer, add_scheduler, "
                       "add_precision, add_dataset or add_callback (docs/plugins.md)");
  }
  loaded_.push_back({canonical.string(), descriptor->name, descriptor->version});
  // For the life of the process, whichever loader (or registry) asked for it: its
  // components point into its code.
  library.keep_resident();
}

void PluginLoader::load_directory(const fs::path& directory,
                                  const std::function<void(const std::string&)>& warn) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) return;
  std::vector<fs::path> files;
  for (const auto& item : fs::directory_iterator(directory, ec)) {
    const std::string name = item.path().filename().string();
    if (item.is_regular_file() && name.rfind("lib", 0) == 0 && item.path().extension() == ".so") {
      files.push_back(item.path());
    }
  }
  std::sort(files.begin(), files.end());  // a stable order: the same run, the same messages
  for (const auto& file : files) {
    try {
      load(file);
    } catch (const Error& e) {
      // A duplicate too: the copy loaded first stays, and the message names both files.
      warn("skipping " + file.string() + ": " + e.message());
    }
  }
}

std::vector<fs::path> default_plugin_locations() {
  std::vector<fs::path> locations;
  // libmixt lives in <prefix>/lib; its plugins in <prefix>/lib/mixt/plugins.
  const fs::path library = library_containing(reinterpret_cast<const void*>(&default_plugin_locations));
  if (!library.empty()) locations.push_back(library.parent_path() / "mixt" / "plugins");
  if (const char* path = std::getenv("MIXT_PLUGIN_PATH")) {
    std::string text = path;
    std::size_t start = 0;
    while (start <= text.size()) {
      const auto colon = text.find(':', start);
      const std::string item = text.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!item.empty()) locations.emplace_back(item);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  return locations;
}

void load_plugins(PluginLoader& loader, const std::vector<fs::path>& required,
                  const std::function<void(const std::string&)>& warn) {
  for (const auto& location : default_plugin_locations()) {
    std::error_code ec;
    if (fs::is_directory(location, ec)) {
      loader.load_directory(location, warn);
    } else if (fs::exists(location, ec)) {
      loader.load(location);
    } else {
      warn("plugin location does not exist: " + location.string());
    }
  }
  for (const auto& file : required) loader.load(file);
}

}  // namespace mixt
