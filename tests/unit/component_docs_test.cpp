// `mixt describe` is the documentation plugin users read: every option a shipped component
// reads must be listed in its ComponentInfo (a key read but not listed is settable, yet
// invisible). Each component is built from `{name: X}` (plus a data root where it needs
// one) and the keys it asked for are compared with the ones it lists. Keys read only on
// some paths are not all seen; the direction checked is the one that hides options.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data_support.h"
#include "recipe/recipe_node.h"

namespace mixt {
namespace {

using testing::TempDir;

struct DataTrees {
  TempDir dir;
  DataTrees() {
    testing::run_fixture_script("make_cifar10.py", testing::shell_quote((dir.path() / "cifar").string()));
    testing::run_fixture_script("make_image_folder.py", testing::shell_quote((dir.path() / "images").string()));
  }
};

TEST(ComponentDocs, EveryOptionAShippedComponentReadsIsDescribed) {
  testing::BuiltPlugins plugins;
  DataTrees trees;
  const std::map<std::string, std::string> roots = {{"cifar10", (trees.dir.path() / "cifar").string()},
                                                    {"image_folder", (trees.dir.path() / "images").string()}};
  // One small model and optimizer for the schedulers, which need an optimizer to schedule.
  OptimizerContext parameters;
  parameters.named_parameters.emplace_back("w", at::zeros({2}, at::TensorOptions().requires_grad(true)));
  // Builds `yaml` as a component of `kind`; returns the keys it asked for (without name).
  const auto build = [&](ComponentKind kind, const std::string& yaml) {
    const RecipeNodePtr root = parse_yaml("c: " + yaml, "t");
    const Config section = Config(root, "").section("c");
    switch (kind) {
      case ComponentKind::model:
        plugins.registry.make_model(section, ModelContext{at::kCPU, {3, 224, 224}, 10});
        break;
      case ComponentKind::optimizer:
        plugins.registry.make_optimizer(section, parameters);
        break;
      case ComponentKind::scheduler: {
        auto optimizer =
            plugins.registry.make_optimizer(Config(parse_yaml("{name: sgd, lr: 0.1}", "t"), "optimizer"), parameters);
        plugins.registry.make_scheduler(section, SchedulerContext{optimizer.get(), 10, 10});
        break;
      }
      case ComponentKind::precision:
        plugins.registry.make_precision(section, PrecisionContext{});
        break;
      case ComponentKind::dataset:
        plugins.registry.make_dataset(section, DatasetContext{"train", 0, 0, 1, at::kCPU});
        break;
      case ComponentKind::callback:
        plugins.registry.make_callback(section, CallbackContext{});
        break;
    }
    std::set<std::string> keys(root->find("c")->value->known_keys.begin(), root->find("c")->value->known_keys.end());
    keys.erase("name");
    return keys;
  };
  int checked = 0;
  for (const ComponentKind kind : {ComponentKind::model, ComponentKind::optimizer, ComponentKind::scheduler,
                                   ComponentKind::precision, ComponentKind::dataset, ComponentKind::callback}) {
    for (const std::string& name : plugins.registry.names(kind)) {
      std::string options = "name: " + name;
      if (roots.count(name)) options += ", root: " + roots.at(name);
      if (kind == ComponentKind::optimizer) options += ", lr: 0.1";
      std::set<std::string> read;
      try {
        read = build(kind, "{" + options + "}");
      } catch (const Error& e) {
        ADD_FAILURE() << name << " does not build from {" << options << "}: " << e.what();
        continue;
      }
      std::set<std::string> described;
      for (const OptionDoc& option : plugins.registry.find(kind, name)->info.options) described.insert(option.name);
      for (const std::string& key : read) {
        if (described.count(key)) continue;
        // Asked for but not listed is fine only when setting it is an error (a key checked
        // to say why it does not apply, as amp_bf16 does for the loss scaler's options).
        try {
          build(kind, "{" + options + ", " + key + ": 1}");
          ADD_FAILURE() << name << " reads '" << key << "', which mixt describe does not list";
        } catch (const Error& e) {
          EXPECT_NE(e.key_path().find(key), std::string::npos) << name << ": " << e.what();
        }
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);  // the zoo, both optimizers, three schedulers, five policies, four datasets
}

}  // namespace
}  // namespace mixt
