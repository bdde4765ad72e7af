// `mixt describe` is the documentation plugin users read: every option a shipped component
// reads must be listed in its ComponentInfo (a key read but not listed is settable, yet
// invisible), and the default it shows must be the one the component reads. Each component
// is built from `{name: X}` (plus its data where it needs some); the keys it asked for are
// compared with the ones it lists, and the defaults it fell back on with the ones the list
// shows. Keys read only on some paths are not all seen; the direction checked is the one
// that hides options.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "data_support.h"
#include "doc_tables.h"
#include "plugins/option_table.h"
#include "mixt/options.h"
#include "recipe/recipe_loader.h"
#include "recipe/recipe_node.h"
#include "assembly/trainer_options.h"

namespace mixt {
namespace {

std::string as_yaml(const FallbackValue& value) {
  return std::visit([](const auto& v) { return format_yaml(v); }, value);
}

// Each documented default against the fallback the reader used for that key, from an empty
// section. A default in parentheses ("(the dataset's, else 1000)") comes from the context
// and is said in words; "" is required; a key the test wrote is not read with a default.
// Returns how many were compared.
int expect_documented_defaults_read(const std::string& component, const std::vector<OptionDoc>& docs,
                                    const RecipeNode& section) {
  int compared = 0;
  for (const OptionDoc& doc : docs) {
    if (doc.default_value.empty() || doc.default_value.front() == '(' || section.find(doc.name)) continue;
    const auto used = section.fallbacks_used.find(doc.name);
    if (used == section.fallbacks_used.end()) {
      ADD_FAILURE() << component << ": '" << doc.name << "' shows the default " << doc.default_value
                    << ", but building from an empty section never read it with a default";
      continue;
    }
    EXPECT_EQ(doc.default_value, as_yaml(used->second))
        << component << ": mixt describe shows " << doc.name << ": " << doc.default_value
        << ", but the component reads " << as_yaml(used->second) << " when it is absent";
    ++compared;
  }
  return compared;
}

// The image trees are the ones the dataset suites share (data_support.h), only read here.
struct DataTrees {
  TempDir dir;
  DataTrees() {
    fs::create_directory_symlink(testing::fixture_tree("make_cifar10.py"), dir.path() / "cifar");
    fs::create_directory_symlink(testing::fixture_tree("make_image_folder.py"), dir.path() / "images");
    fs::create_directory_symlink(testing::fixture_tree("make_segmentation_folder.py"), dir.path() / "voc");
    dir.write("tokens.bin", std::string(2 * 1025, '\0'));  // one window of the default context, 1024
    dir.write("chat.jsonl", "{\"prompt\": \"Who wrote the GPL?\", \"response\": \"The FSF.\"}\n");
  }
};

TEST(ComponentDocs, EveryOptionAShippedComponentReadsIsDescribed) {
  testing::BuiltPlugins plugins;
  DataTrees trees;
  // What a dataset needs beyond its name to build (the text dataset reads the GPL-3 by default).
  const std::map<std::string, std::string> data = {
      {"cifar10", "root: " + (trees.dir.path() / "cifar").string()},
      {"image_folder", "root: " + (trees.dir.path() / "images").string()},
      {"segmentation_folder", "root: " + (trees.dir.path() / "voc").string()},
      {"tokens", "files: " + (trees.dir.path() / "tokens.bin").string()},
      {"instruct", "file: " + (trees.dir.path() / "chat.jsonl").string() + ", tokenizer: " +
                       testing::configured::source_dir() + "/recipes/llama/gpl3_bpe512.json, template: llama3"}};
  // One small model and optimizer for the schedulers, which need an optimizer to schedule.
  OptimizerContext parameters;
  parameters.named_parameters.emplace_back("w", at::zeros({2}, at::TensorOptions().requires_grad(true)));
  RecipeNodePtr last_built;  // the section of the last build, with its known keys and fallbacks
  // Builds `yaml` as a component of `kind`; returns the keys it asked for (without name).
  const auto build = [&](ComponentKind kind, const std::string& yaml) {
    const RecipeNodePtr root = parse_yaml("c: " + yaml, "t");
    const Config section = Config(root, "").section("c");
    switch (kind) {
      case ComponentKind::model:
        // Language models (those that read transformers checkpoints) take token sequences;
        // the others images.
        plugins.registry.make_model(section,
                                    ModelContext{at::kCPU,
                                                 plugins.registry.find(kind, section.string("name"))->transformers
                                                     ? std::vector<std::int64_t>{16}
                                                     : std::vector<std::int64_t>{3, 224, 224},
                                                 10});
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
      case ComponentKind::task:
        plugins.registry.make_task(section, TaskContext{at::kCPU, 10});
        break;
      case ComponentKind::adapter:
        plugins.registry.make_adapter(section, AdapterContext{});
        break;
    }
    last_built = root->find("c")->value;
    std::set<std::string> keys(last_built->known_keys.begin(), last_built->known_keys.end());
    keys.erase("name");
    return keys;
  };
  int checked = 0, defaults_compared = 0;
  for (const ComponentKind kind :
       {ComponentKind::model, ComponentKind::optimizer, ComponentKind::scheduler, ComponentKind::precision,
        ComponentKind::dataset, ComponentKind::callback, ComponentKind::task, ComponentKind::adapter}) {
    for (const std::string& name : plugins.registry.names(kind)) {
      std::string options = "name: " + name;
      if (data.count(name)) options += ", " + data.at(name);
      if (kind == ComponentKind::optimizer) options += ", lr: 0.1";
      if (kind == ComponentKind::adapter) options += ", targets: [q_proj]";
      // gpt2_xl's 48 blocks are 6 GB of float32 (the vocabulary is the context's 10).
      if (kind == ComponentKind::model && plugins.registry.find(kind, name)->transformers) options += ", num_layers: 1";
      std::set<std::string> read;
      try {
        read = build(kind, "{" + options + "}");
      } catch (const Error& e) {
        ADD_FAILURE() << name << " does not build from {" << options << "}: " << e.what();
        continue;
      }
      const std::vector<OptionDoc>& docs = plugins.registry.find(kind, name)->info.options;
      defaults_compared += expect_documented_defaults_read(name, docs, *last_built);
      std::set<std::string> described;
      for (const OptionDoc& option : docs) described.insert(option.name);
      for (const std::string& key : read) {
        if (described.count(key)) continue;
        // Asked for but not listed is fine only when setting it is an error (a key checked
        // to say why it does not apply, as amp_bf16 does for the loss scaler's options).
        try {
          build(kind, "{" + options + ", " + key + ": 1}");
          ADD_FAILURE() << name << " reads '" << key << "', which mixt describe does not list";
        } catch (const Error& e) {
          EXPECT_THAT(e.key_path(), HasSubstr(key)) << name << ": " << e.what();
        }
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);  // the zoo, both optimizers, three schedulers, five policies, six datasets
  std::printf("%d documented defaults compared with the ones read\n", defaults_compared);
  EXPECT_GE(defaults_compared, 100);
}

// The same for `mixt describe trainer`: its defaults are the ones TrainerOptions::read uses.
TEST(ComponentDocs, TheTrainerShowsTheDefaultsItReads) {
  const RecipeNodePtr root = parse_yaml("trainer: {distributed: {}}", "test");
  TrainerOptions::read(Config(root, "").section("trainer"));
  const RecipeNode& trainer = *root->find("trainer")->value;
  std::vector<OptionDoc> top, distributed;
  for (OptionDoc doc : trainer_option_docs()) {
    if (doc.name.rfind("distributed.", 0) == 0) {
      doc.name = doc.name.substr(std::string("distributed.").size());
      distributed.push_back(doc);
    } else {
      top.push_back(doc);
    }
  }
  EXPECT_EQ(expect_documented_defaults_read("trainer", top, trainer), 15);
  const RecipeNode& section = *trainer.find("distributed")->value;
  EXPECT_EQ(expect_documented_defaults_read("trainer.distributed", distributed, section), 7);
}

// docs/float8.md's option tables are the float8 policies' declarations written out: the
// layer choice all three share, then fp8_delayed's own.
TEST(ComponentDocs, TheFloat8TablesAreTheDeclarationsWrittenOut) {
  testing::BuiltPlugins plugins;
  const std::vector<OptionDoc>& delayed = plugins.registry.find(ComponentKind::precision, "fp8_delayed")->info.options;
  std::vector<OptionDoc> layers, own;
  for (const OptionDoc& option : delayed) {
    if (option.name == "fp8_modules" || option.name == "fp8_exclude" || option.name == "exclude_first_last") {
      layers.push_back(option);
    } else if (option.name != "fp32_modules") {  // mixt's own key, in precision.md
      own.push_back(option);
    }
  }
  ASSERT_EQ(layers.size(), 3u);
  for (const char* other : {"fp8_tensorwise", "fp8_rowwise"}) {
    const std::vector<OptionDoc>& options = plugins.registry.find(ComponentKind::precision, other)->info.options;
    EXPECT_EQ(option_table_rows({options.begin(), options.begin() + 3}), option_table_rows(layers)) << other;
  }
  EXPECT_EQ(testing::doc_table_rows("float8.md", "the same options:"), option_table_rows(layers))
      << "docs/float8.md's table should read:\n" << option_table_rows(layers);
  EXPECT_EQ(testing::doc_table_rows("float8.md", "## Delayed scaling: `fp8_delayed`"), option_table_rows(own))
      << "docs/float8.md's fp8_delayed table should read:\n" << option_table_rows(own);
}

}  // namespace
}  // namespace mixt
