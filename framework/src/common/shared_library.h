// The one way mixt opens a shared library at run time: plugins (plugins/plugin_loader.cpp),
// the SentencePiece module (sdk/tokenizer) and the OpenCV drawing modules (cli/reports).
// A library is opened with Boost.DLL (boost::dll::shared_library), its symbols found through
// it, and it is kept resident once code from it may run: mixt never unloads what it used. A
// failure names the file and gives the dynamic loader's reason (dlerror(), which Boost.DLL's
// throwing calls carry in their message).
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace boost::dll {
class shared_library;
}

namespace mixt {

// How a library's undefined symbols are resolved; both open with RTLD_NOW | RTLD_LOCAL
// (every symbol bound now, none added to the process's global scope).
enum class SymbolBinding {
  process_first,  // the process's libraries first, as usual
  own_first,      // RTLD_DEEPBIND: the library's own definitions first (libsentencepiece's protobuf)
};

// What() is "<file>: <reason>".
class SharedLibraryError : public std::runtime_error {
 public:
  SharedLibraryError(const std::filesystem::path& file, const std::string& reason);
  const std::filesystem::path& file() const { return file_; }
  // The dynamic loader's words, without the file name they usually start with.
  const std::string& reason() const { return reason_; }

 private:
  std::filesystem::path file_;
  std::string reason_;
};

class SharedLibrary {
 public:
  // Opens `file` (a path with a '/' is opened as is; dlopen searches for a bare name).
  // SharedLibraryError when the dynamic loader refuses it.
  explicit SharedLibrary(const std::filesystem::path& file, SymbolBinding binding = SymbolBinding::process_first);
  ~SharedLibrary();  // closes the library, unless it was kept resident (or moved from)
  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  SharedLibrary& operator=(SharedLibrary&&) = delete;

  // The address of `name`, or null when the library does not define it.
  void* find(const char* name) const;
  // The address of `name`; SharedLibraryError when the library does not define it.
  void* symbol(const char* name) const;
  // `name` as a pointer to a function of type F (the caller knows its signature).
  template <class F>
  F* function(const char* name) const {
    return reinterpret_cast<F*>(symbol(name));
  }

  // Never closed from now on, this object's end included: the code it holds (a plugin's
  // factories, a tokenizer's methods) may be called for as long as the process lives.
  void keep_resident() { resident_ = true; }

  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::unique_ptr<boost::dll::shared_library> library_;
  bool resident_ = false;
};

// `name` in `file`, which is opened on the first call and kept resident; later calls (from
// any thread) get the same address, or the first call's SharedLibraryError again. For a
// module mixt loads on first use and calls through one entry point.
void* resident_symbol(const std::filesystem::path& file, const char* name,
                      SymbolBinding binding = SymbolBinding::process_first);

// The loaded library (or executable) that holds `address`, as the dynamic loader named it
// (dladdr); empty when no loaded object holds it. Where a library finds the files beside it.
std::filesystem::path library_containing(const void* address);

}  // namespace mixt
