#include "common/shared_library.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <utility>

namespace mixt {

namespace fs = std::filesystem;

namespace {

// dlerror()'s text for the last failure on this thread, without the "<file>: " it begins
// with when it is about the file itself (not about one of its dependencies); `otherwise`
// when the loader gave none.
std::string loader_reason(const fs::path& file, const std::string& otherwise) {
  const char* text = ::dlerror();
  if (text == nullptr) return otherwise;
  std::string reason = text;
  const std::string prefix = file.string() + ": ";
  if (reason.rfind(prefix, 0) == 0) reason.erase(0, prefix.size());
  return reason;
}

int dlopen_flags(SymbolBinding binding) {
  const int flags = RTLD_NOW | RTLD_LOCAL;
  return binding == SymbolBinding::own_first ? flags | RTLD_DEEPBIND : flags;
}

}  // namespace

SharedLibraryError::SharedLibraryError(const fs::path& file, const std::string& reason)
    : std::runtime_error(file.string() + ": " + reason), file_(file), reason_(reason) {}

SharedLibrary::SharedLibrary(const fs::path& file, SymbolBinding binding) : file_(file) {
  ::dlerror();
  handle_ = ::dlopen(file_.c_str(), dlopen_flags(binding));
  if (handle_ == nullptr) throw SharedLibraryError(file_, loader_reason(file_, "cannot be opened"));
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr && !resident_) ::dlclose(handle_);
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : file_(std::move(other.file_)), handle_(std::exchange(other.handle_, nullptr)), resident_(other.resident_) {}

void* SharedLibrary::find(const char* name) const { return ::dlsym(handle_, name); }

void* SharedLibrary::symbol(const char* name) const {
  ::dlerror();
  void* address = ::dlsym(handle_, name);
  if (address == nullptr) throw SharedLibraryError(file_, loader_reason(file_, std::string("no ") + name));
  return address;
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
  Dl_info info{};
  if (::dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
  return info.dli_fname;
}

}  // namespace mixt
