#include "common/shared_library.h"

// std::filesystem and std::system_error in Boost.DLL's interface (libmixt's compile
// definitions set BOOST_DLL_USE_STD_FS), so nothing links Boost.Filesystem.
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <map>
#include <mutex>
#include <system_error>
#include <utility>
#include <vector>

namespace mixt {

namespace fs = std::filesystem;
namespace dll = boost::dll;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

// The dynamic loader's words in a Boost.DLL failure: its throwing calls write
// "<what failed> (dlerror system message: <dlerror()>): <error code's message>". Without
// the "<file>: " dlerror() begins with when it is about the file itself (not about one of
// its dependencies); `otherwise` when the loader gave none.
std::string loader_reason(const std::system_error& failure, const fs::path& file, const std::string& otherwise) {
  const std::string text = failure.what();
  const std::string marker = " (dlerror system message: ";
  const std::string ending = "): " + failure.code().message();
  const auto begin = text.find(marker);
  if (begin == std::string::npos || text.size() < ending.size() ||
      text.compare(text.size() - ending.size(), ending.size(), ending) != 0 ||
      text.size() - ending.size() < begin + marker.size()) {
    return otherwise;
  }
  std::string reason = text.substr(begin + marker.size(), text.size() - ending.size() - begin - marker.size());
  const std::string prefix = file.string() + ": ";
  if (reason.rfind(prefix, 0) == 0) reason.erase(0, prefix.size());
  return reason;
}

dll::load_mode::type load_mode(const fs::path& file, SymbolBinding binding) {
  auto mode = dll::load_mode::rtld_now | dll::load_mode::rtld_local;
  if (binding == SymbolBinding::own_first) mode = mode | dll::load_mode::rtld_deepbind;
  // A bare name is searched for as dlopen searches (Boost.DLL would look in "." only).
  if (!file.has_parent_path()) mode = mode | dll::load_mode::search_system_folders;
  return mode;
}

// Libraries kept resident live here until the process ends: reachable, never closed.
void keep_forever(std::unique_ptr<dll::shared_library> library) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::unique_ptr<dll::shared_library>>();
  std::lock_guard lock(mutex);
  kept->push_back(std::move(library));
}

}  // namespace

SharedLibraryError::SharedLibraryError(const fs::path& file, const std::string& reason)
    : std::runtime_error(file.string() + ": " + reason), file_(file), reason_(reason) {}

SharedLibrary::SharedLibrary(const fs::path& file, SymbolBinding binding) : file_(file) {
  // AddressSanitizer ends the process on a dlopen with RTLD_DEEPBIND (make sanitize): a reason instead.
  if (kUnderAddressSanitizer && binding == SymbolBinding::own_first) {
    throw SharedLibraryError(file_,
                             "needs RTLD_DEEPBIND, which AddressSanitizer does not allow (a make sanitize build)");
  }
  try {
    library_ = std::make_unique<dll::shared_library>(file_, load_mode(file_, binding));
  } catch (const std::system_error& e) {
    throw SharedLibraryError(file_, loader_reason(e, file_, "cannot be opened"));
  }
}

SharedLibrary::~SharedLibrary() {
  if (library_ != nullptr && resident_) keep_forever(std::move(library_));
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : file_(std::move(other.file_)), library_(std::move(other.library_)), resident_(other.resident_) {}

void* SharedLibrary::find(const char* name) const { return library_->has(name) ? &library_->get<char>(name) : nullptr; }

void* SharedLibrary::symbol(const char* name) const {
  try {
    return &library_->get<char>(name);
  } catch (const std::system_error& e) {
    throw SharedLibraryError(file_, loader_reason(e, file_, std::string("no ") + name));
  }
}

void* resident_symbol(const fs::path& file, const char* name, SymbolBinding binding) {
  struct Outcome {
    void* address = nullptr;
    std::string failure;  // the reason, when address is null
  };
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, Outcome> outcomes;
  std::lock_guard lock(mutex);
  auto [at, first] = outcomes.try_emplace({file.string(), name});
  Outcome& outcome = at->second;
  if (first) {
    try {
      SharedLibrary library(file, binding);
      outcome.address = library.symbol(name);
      library.keep_resident();
    } catch (const SharedLibraryError& e) {
      outcome.failure = e.reason();
    }
  }
  if (outcome.address == nullptr) throw SharedLibraryError(file, outcome.failure);
  return outcome.address;
}

fs::path library_containing(const void* address) {
  std::error_code failure;
  fs::path library = dll::symbol_location_ptr(address, failure);
  return failure ? fs::path() : library;
}

}  // namespace mixt
