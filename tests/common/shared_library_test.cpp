// common/shared_library.h, the one way mixt opens a library: errors name the file and give
// the dynamic loader's reason; a library kept resident stays loaded, any other is closed
// with its object. On the fixture libraries (tests/fixtures/plugins).
#include "common/shared_library.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "common/closest_match.h"
#include "configured_paths.h"

namespace mixt {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const fs::path kFixtures = mixt::testing::configured::fixture_plugin_dir();
const fs::path kNoPlugin = kFixtures / "libfixture_not_a_plugin.so";  // exports some_other_function()

SharedLibraryError error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const SharedLibraryError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a SharedLibraryError";
  return SharedLibraryError("(none)", "(no error was thrown)");
}

bool loaded(const fs::path& file) {
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) ::dlclose(handle);
  return handle != nullptr;
}

TEST(SharedLibrary, AMissingFileNamesTheFileAndTheLoadersReason) {
  const fs::path missing = kFixtures / "libnothing_here.so";
  const SharedLibraryError e = error_of([&] { SharedLibrary library(missing); });
  EXPECT_EQ(e.file(), missing);
  EXPECT_EQ(e.reason(), "cannot open shared object file: No such file or directory");
  EXPECT_EQ(std::string(e.what()), missing.string() + ": " + e.reason());
}

TEST(SharedLibrary, AFileThatIsNoLibraryIsRefusedInTheLoadersWords) {
  const fs::path text = kFixtures / "libmixt_fixture_text.so";
  const SharedLibraryError e = error_of([&] { SharedLibrary library(text); });
  EXPECT_THAT(e.what(), StartsWith(text.string() + ": "));
  EXPECT_THAT(e.reason(), ::testing::AnyOf(HasSubstr("invalid ELF header"), HasSubstr("file too short")));
}

TEST(SharedLibrary, FindsItsSymbolsAndNamesAMissingOne) {
  SharedLibrary library(kNoPlugin);
  EXPECT_EQ(library.function<int()>("some_other_function")(), 42);
  EXPECT_EQ(library.find("mixt_plugin_info"), nullptr);
  const SharedLibraryError e = error_of([&] { library.symbol("mixt_plugin_info"); });
  EXPECT_EQ(e.file(), kNoPlugin);
  EXPECT_THAT(e.what(), StartsWith(kNoPlugin.string() + ": "));
  EXPECT_THAT(e.reason(), HasSubstr("undefined symbol: mixt_plugin_info"));
}

TEST(SharedLibrary, ClosesTheLibraryUnlessKeptResident) {
  ASSERT_FALSE(loaded(kNoPlugin)) << "another test left the fixture loaded";
  { SharedLibrary library(kNoPlugin, SymbolBinding::own_first); }
  EXPECT_FALSE(loaded(kNoPlugin));
  {
    SharedLibrary library(kNoPlugin);
    SharedLibrary moved(std::move(library));  // the moved-from object closes nothing
    moved.keep_resident();
  }
  EXPECT_TRUE(loaded(kNoPlugin));
}

TEST(SharedLibrary, AResidentSymbolIsFoundOnceAndItsFailureRepeated) {
  const fs::path plugin = kFixtures / "libmixt_fixture_good.so";  // kept loaded from here on
  void* first = resident_symbol(plugin, "mixt_plugin_info");
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(resident_symbol(plugin, "mixt_plugin_info"), first);
  EXPECT_TRUE(loaded(plugin));
  const fs::path missing = kFixtures / "libnothing_here.so";
  const std::string once = error_of([&] { resident_symbol(missing, "entry"); }).what();
  EXPECT_EQ(error_of([&] { resident_symbol(missing, "entry"); }).what(), once);
  EXPECT_THAT(once, StartsWith(missing.string() + ": cannot open shared object file"));
}

TEST(SharedLibrary, NamesTheLibraryThatHoldsAnAddress) {
  // edit_distance lives in libmixt.
  const fs::path libmixt = library_containing(reinterpret_cast<const void*>(&edit_distance));
  EXPECT_EQ(libmixt.filename(), "libmixt.so");
  int on_the_stack = 0;
  EXPECT_EQ(library_containing(&on_the_stack), fs::path());
}

}  // namespace
}  // namespace mixt
