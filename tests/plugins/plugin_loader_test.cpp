// The plugin loader against the fixture plugins in tests/fixtures/plugins/ (broken on
// purpose) and the real in-tree plugins.
#include "plugins/plugin_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "expect_error.h"
#include "test_support.h"

namespace mixt {
namespace {

const std::string kFixtures = testing::configured::fixture_plugin_dir();

std::string load_error(const std::string& file) {
  Registry registry;
  PluginLoader loader(registry);
  try {
    loader.load(file);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return std::string(e.what()) + "\nhint: " + e.hint();
  }
  return "no error";
}

TEST(PluginLoader, LoadsAGoodPluginAndRegistersItsComponents) {
  Registry registry;
  PluginLoader loader(registry);
  loader.load(kFixtures + "/libmixt_fixture_good.so");
  ASSERT_EQ(loader.loaded().size(), 1u);
  EXPECT_EQ(loader.loaded()[0].name, "fixture_good");
  EXPECT_EQ(loader.loaded()[0].version, "0.0.1");
  ASSERT_NE(registry.find(ComponentKind::precision, "fixture_policy"), nullptr);
  loader.load(kFixtures + "/libmixt_fixture_good.so");  // a second load is a no-op
  EXPECT_EQ(loader.loaded().size(), 1u);
}

TEST(PluginLoader, MissingFile) {
  const std::string error = load_error(kFixtures + "/libmixt_nothing_here.so");
  EXPECT_THAT(error, HasSubstr("libmixt_nothing_here.so: plugin file not found"));
}

TEST(PluginLoader, FileThatIsNotASharedLibrary) {
  const std::string error = load_error(kFixtures + "/libmixt_fixture_text.so");
  EXPECT_THAT(error, HasSubstr("libmixt_fixture_text.so: not a loadable shared library"));
}

TEST(PluginLoader, FileThatIsNotASharedLibraryGivesTheDynamicLoadersReason) {
  const std::string error = load_error(kFixtures + "/libmixt_fixture_text.so");
  EXPECT_THAT(error, HasSubstr("not a loadable shared library (file too short)")) << error;
}

// A plugin built with -D_GLIBCXX_USE_CXX11_ABI=0 used to get only "not a loadable shared
// library" and an ldd hint that finds nothing wrong: the symbol the loader could not find
// (which of them depends on what the plugin calls first) and the define are named.
TEST(PluginLoader, OldCxxAbiPluginNamesTheUndefinedSymbolAndTheAbi) {
  const std::string error = load_error(kFixtures + "/libmixt_fixture_old_cxx_abi.so");
  EXPECT_THAT(error, HasSubstr("not a loadable shared library (undefined symbol: _ZN")) << error;
  EXPECT_THAT(error, HasSubstr("compiled with the pre-C++11 std::string (-D_GLIBCXX_USE_CXX11_ABI=0)"));
  EXPECT_THAT(error, HasSubstr("build it without that define"));
  // The good fixture, compiled with the C++11 ABI, is no such plugin.
  EXPECT_THAT(load_error(kFixtures + "/libmixt_fixture_good.so"), Not(HasSubstr("CXX11_ABI")));
}

TEST(PluginLoader, SharedLibraryWithoutEntryPoint) {
  const std::string error = load_error(kFixtures + "/libfixture_not_a_plugin.so");
  EXPECT_THAT(error, HasSubstr("not a mixt plugin: no entry point 'mixt_plugin_info'"));
}

TEST(PluginLoader, WrongAbiNamesBothVersionsAndTheFix) {
  const std::string error = load_error(kFixtures + "/libmixt_fixture_wrong_abi.so");
  const std::string plugin_abi = std::to_string(MIXT_ABI_MAJOR + 1) + ".0";
  const std::string host_abi = std::to_string(MIXT_ABI_MAJOR) + "." + std::to_string(MIXT_ABI_MINOR);
  EXPECT_THAT(error, HasSubstr("libmixt_fixture_wrong_abi.so: incompatible plugin: built for plugin ABI " + plugin_abi))
      << error;
  EXPECT_THAT(error, HasSubstr("supports plugin ABI " + host_abi));
  EXPECT_THAT(error, HasSubstr("rebuild the plugin against mixt"));
}

// A plugin of an older major ABI (the last 4.x SDK, whose factories read the recipe
// themselves): refused, not called through a Registrar whose functions it does not know.
TEST(PluginLoader, APluginOfThePreviousMajorAbiIsRefusedNamingBothVersions) {
  const std::string error = load_error(kFixtures + "/libmixt_fixture_previous_abi.so");
  EXPECT_THAT(error, HasSubstr("libmixt_fixture_previous_abi.so: incompatible plugin: built for plugin ABI 4.4"))
      << error;
  std::string host = "supports plugin ABI ";  // appended, not a + chain: gcc 12 misreads one as out of bounds
  host.append(std::to_string(MIXT_ABI_MAJOR)).append(".");
  EXPECT_THAT(error, HasSubstr(host));
  EXPECT_THAT(error, HasSubstr("rebuild the plugin against mixt"));
}

TEST(PluginLoader, WrongBuildFingerprintNamesBoth) {
  const std::string error = load_error(kFixtures + "/libmixt_fixture_wrong_fingerprint.so");
  EXPECT_THAT(error, HasSubstr("built with [torch 1.13.1; cxx11abi 0; cuda 0; gcc 9]"));
  EXPECT_THAT(error, HasSubstr(std::string("this mixt with [") + build_fingerprint() + "]"));
}

TEST(PluginLoader, EmptyDescriptorFieldIsRejected) {
  const std::string error = load_error(kFixtures + "/libmixt_fixture_empty_field.so");
  EXPECT_THAT(error, HasSubstr("descriptor has an empty field"));
}

TEST(PluginLoader, DuplicateComponentNamesBothFiles) {
  Registry registry;
  PluginLoader loader(registry);
  loader.load(testing::configured::plugin_dir() + "/libmixt_optimizer_sgd.so");
  const Error e = testing::thrown_error([&] {
    loader.load(kFixtures + "/libmixt_fixture_duplicate.so");
  });
  const std::string what = e.what();
  EXPECT_THAT(what, HasSubstr("optimizer 'sgd' is registered twice"));
  EXPECT_THAT(what, HasSubstr("libmixt_optimizer_sgd.so"));
  EXPECT_THAT(what, HasSubstr("libmixt_fixture_duplicate.so"));
  // What it registered before the duplicate went with it (ARegistrationThatFailsPartWay...).
  EXPECT_EQ(registry.find(ComponentKind::precision, "fixture_before_the_duplicate"), nullptr);
  EXPECT_NE(registry.find(ComponentKind::optimizer, "sgd"), nullptr);
}

// Found by a directory scan, a duplicate is a warning naming both files, and the copy found
// first stays; named by a recipe (load), it is an error (DuplicateComponentNamesBothFiles).
TEST(PluginLoader, ADuplicateFoundByADirectoryScanIsSkippedNamingBothFiles) {
  testing::TempDir dir;
  std::filesystem::copy_file(kFixtures + "/libmixt_fixture_good.so", dir.path() / "libmixt_a_good.so");
  std::filesystem::copy_file(kFixtures + "/libmixt_fixture_good.so", dir.path() / "libmixt_b_copy.so");
  Registry registry;
  PluginLoader loader(registry);
  std::vector<std::string> warnings;
  loader.load_directory(dir.path(), [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("skipping " + (dir.path() / "libmixt_b_copy.so").string()))
      << warnings[0];
  EXPECT_THAT(warnings[0], HasSubstr("is registered twice"));
  EXPECT_THAT(warnings[0], HasSubstr("libmixt_a_good.so"));
  ASSERT_EQ(loader.loaded().size(), 1u);
  EXPECT_THAT(loader.loaded()[0].file, HasSubstr("libmixt_a_good.so"));
}

// A registration that fails after adding a component leaves nothing of it behind: the
// registry held the component's factory past the library's unload, and destroying it (at
// exit, even of `mixt list` after a directory scan had skipped the plugin) crashed.
TEST(PluginLoader, ARegistrationThatFailsPartWayLeavesNothingBehind) {
  testing::TempDir dir;
  std::filesystem::copy_file(kFixtures + "/libmixt_fixture_partial_registration.so", dir.path() / "libmixt_partial.so");
  std::filesystem::copy_file(kFixtures + "/libmixt_fixture_good.so", dir.path() / "libmixt_good.so");
  {
    Registry registry;
    PluginLoader loader(registry);
    std::vector<std::string> warnings;
    loader.load_directory(dir.path(), [&](const std::string& w) { warnings.push_back(w); });
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("plugin 'fixture_partial_registration' failed to register: no licence"))
        << warnings[0];
    EXPECT_EQ(registry.find(ComponentKind::precision, "fixture_partial"), nullptr);
    EXPECT_NE(registry.find(ComponentKind::precision, "fixture_policy"), nullptr);
    EXPECT_EQ(loader.loaded().size(), 1u);
  }  // the registry is destroyed here: with the factory of an unloaded library, a crash
}

TEST(PluginLoader, APluginThatRegistersNothingIsAnError) {
  const std::string error = load_error(kFixtures + "/libmixt_fixture_registers_nothing.so");
  EXPECT_THAT(error, HasSubstr("libmixt_fixture_registers_nothing.so: plugin 'fixture_registers_nothing' registered no "
                       "components"))
      << error;
  EXPECT_THAT(error, HasSubstr("hint: its register function must call the registrar's add_model"))
      << error;
}

TEST(PluginLoader, DirectoryScanWarnsAndSkipsBadFiles) {
  testing::TempDir dir;
  std::filesystem::copy_file(kFixtures + "/libmixt_fixture_good.so", dir.path() / "libmixt_good.so");
  std::filesystem::copy_file(kFixtures + "/libmixt_fixture_text.so", dir.path() / "libmixt_text.so");
  std::filesystem::copy_file(kFixtures + "/libmixt_fixture_wrong_abi.so", dir.path() / "libmixt_wrong_abi.so");
  Registry registry;
  PluginLoader loader(registry);
  std::vector<std::string> warnings;
  loader.load_directory(dir.path(), [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(loader.loaded().size(), 1u);
  EXPECT_EQ(warnings.size(), 2u);
}

TEST(PluginLoader, TheInTreePluginsAllLoad) {
  Registry registry;
  PluginLoader loader(registry);
  std::vector<std::string> warnings;
  loader.load_directory(testing::configured::plugin_dir(), [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  for (const auto& [kind, name] : std::vector<std::pair<ComponentKind, std::string>>{
           {ComponentKind::precision, "fp32"},
           {ComponentKind::optimizer, "sgd"},
           {ComponentKind::optimizer, "adamw"},
           {ComponentKind::model, "simple_cnn"},
           {ComponentKind::dataset, "fashion_mnist"}}) {
    EXPECT_NE(registry.find(kind, name), nullptr) << name;
  }
}

}  // namespace
}  // namespace mixt
