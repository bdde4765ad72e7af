// Shared by the model-zoo plugins (header only, compiled into each plugin): the one-line
// summary `mixt list model` shows, and the options every zoo model reads the same way.
#pragma once

#include <mixt/model.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace mixt::models {

// Published by torchvision in its weights' meta ("num_params", "_ops" in GFLOPs at the
// default input size); tests/models/model_zoo_test.cpp checks both against the built
// model and tests/golden/model_zoo.json.
struct ZooFacts {
  std::int64_t params;
  double gflops;
  std::int64_t input_size;  // square, 3 channels
};

inline std::string with_thousands(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

inline std::string zoo_summary(const std::string& title, const ZooFacts& f) {
  char gflops[32];
  std::snprintf(gflops, sizeof(gflops), "%.3f", f.gflops);
  return title + ": " + with_thousands(f.params) + " params, " + gflops + " GFLOPs at 3x" +
         std::to_string(f.input_size) + "x" + std::to_string(f.input_size) + " (torchvision meta)";
}

// What every zoo model reads the same way: `.include(&MyOptions::zoo, kZooOptions)` first in
// its options (weights and strict are read by mixt itself; `mixt describe` adds them to
// every model).
struct ZooOptions {
  std::optional<std::int64_t> num_classes;  // empty when not given: see classes()
  RecipeSection where;                      // the model's section, for errors found from the context

  // The recipe's num_classes, else the dataset's, else ImageNet's 1000.
  std::int64_t classes(const ModelContext& context) const {
    return num_classes.value_or(context.num_classes > 0 ? context.num_classes : 1000);
  }
};
inline const OptionsOf<ZooOptions> kZooOptions =
    OptionsOf<ZooOptions>()
        .contextual(&ZooOptions::num_classes, "num_classes", "the dataset's, else 1000", "output classes", at_least(1))
        .recipe_section(&ZooOptions::where);

// A drop probability: in [0, 1).
inline Bounds probability() { return at_least(0) && below(1); }

// Zoo models take RGB images: say so at the recipe rather than deep inside a convolution.
inline void require_rgb_images(const ZooOptions& o, const ModelContext& context) {
  const auto& s = context.sample_shape;
  if (!s.empty() && (s.size() != 3 || s[0] != 3)) {
    std::string shape;
    for (auto d : s) shape.append(shape.empty() ? "" : "x").append(std::to_string(d));  // gcc 12 misreads a + chain
    o.where.fail("name", "this model takes 3-channel images (3 x H x W), but the data delivers samples of shape " + shape,
                 "use an RGB dataset, or a model made for this input such as simple_cnn");
  }
}

}  // namespace mixt::models
