// The registry: names per kind, duplicates, unknown names with suggestions, wildcards,
// and factory failures reported with the component and its plugin.
#include "plugins/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "expect_error.h"

#include "recipe/recipe_loader.h"

using ::testing::HasSubstr;

namespace mixt {
namespace {

PrecisionFactory no_op_policy() {
  return [](const Config&, const PrecisionContext&) { return std::make_unique<PrecisionPolicy>(); };
}

Config section(const std::string& yaml, RecipeNodePtr& root) {
  root = parse_yaml(yaml, "r.yaml");
  return Config(root, "").section("precision");
}

TEST(Registry, FindsRegisteredComponentsByKindAndName) {
  Registry registry;
  registry.begin_plugin({"/p/libmixt_a.so", "a", "1.0"});
  registry.register_precision("fp32", {"full", {}}, no_op_policy());
  registry.end_plugin();
  ASSERT_NE(registry.find(ComponentKind::precision, "fp32"), nullptr);
  EXPECT_EQ(registry.find(ComponentKind::precision, "fp32")->origin.file, "/p/libmixt_a.so");
  EXPECT_EQ(registry.find(ComponentKind::model, "fp32"), nullptr);  // kinds are separate namespaces
  RecipeNodePtr root;
  EXPECT_NE(registry.make_precision(section("precision: {name: fp32}", root), {}), nullptr);
}

TEST(Registry, DuplicateNameNamesBothPluginFiles) {
  Registry registry;
  registry.begin_plugin({"/p/libmixt_a.so", "a", "1.0"});
  registry.register_precision("fp32", {}, no_op_policy());
  registry.begin_plugin({"/p/libmixt_b.so", "b", "1.0"});
  const Error e = testing::thrown_error([&] {
    registry.register_precision("fp32", {}, no_op_policy());
  });
  const std::string what = e.what();
  EXPECT_THAT(what, HasSubstr("/p/libmixt_a.so"));
  EXPECT_THAT(what, HasSubstr("/p/libmixt_b.so"));
}

TEST(Registry, UnknownNameSuggestsTheClosestAtTheRecipeLocation) {
  Registry registry;
  registry.register_precision("amp_fp16", {}, no_op_policy());
  registry.register_precision("amp_bf16", {}, no_op_policy());
  registry.register_precision("fp32", {}, no_op_policy());
  RecipeNodePtr root;
  const Config config = section("trainer: {}\nprecision: {name: amp_fp61}\n", root);
  const Error e = testing::thrown_error([&] {
    registry.make_precision(config, {});
  });
  EXPECT_STREQ(e.what(), "r.yaml:2:19: precision.name: unknown precision 'amp_fp61'");
  EXPECT_THAT(e.hint(), HasSubstr("did you mean 'amp_fp16'?"));
  EXPECT_THAT(e.hint(), HasSubstr("amp_bf16, amp_fp16, fp32"));
}

TEST(Registry, FactoryExceptionsNameTheComponentAndPlugin) {
  Registry registry;
  registry.begin_plugin({"/p/libmixt_boom.so", "boom", "1.0"});
  registry.register_precision("boom", {}, [](const Config&, const PrecisionContext&) -> std::unique_ptr<PrecisionPolicy> {
    throw std::logic_error("kaput");
  });
  registry.end_plugin();
  RecipeNodePtr root;
  const Error e = testing::thrown_error([&] {
    registry.make_precision(section("precision: {name: boom}", root), {});
  });
  EXPECT_EQ(e.kind(), ErrorKind::plugin);
  EXPECT_STREQ(e.what(), "/p/libmixt_boom.so: precision 'boom' (plugin 'boom') failed to build: kaput");
}

TEST(Registry, ListFiltersByKindAndWildcard) {
  Registry registry;
  registry.register_precision("amp_fp16", {}, no_op_policy());
  registry.register_precision("amp_bf16", {}, no_op_policy());
  registry.register_precision("fp32", {}, no_op_policy());
  EXPECT_EQ(registry.list(ComponentKind::precision, "amp_*").size(), 2u);
  EXPECT_EQ(registry.list(std::nullopt, "*").size(), 3u);
  EXPECT_EQ(registry.list(ComponentKind::model).size(), 0u);
  EXPECT_TRUE(glob_match("resnet*", "resnet50"));
  EXPECT_TRUE(glob_match("res?et50", "resnet50"));
  EXPECT_FALSE(glob_match("resnet*", "wide_resnet50_2"));
}

TEST(Registry, UnknownKindListsTheKinds) {
  const Error e = testing::thrown_error([&] {
    parse_kind("modle");
  });
  EXPECT_THAT(e.hint(), HasSubstr("did you mean 'model'?"));
}

}  // namespace
}  // namespace mixt
