// A trained model ready to answer, for `mixt evaluate`, `mixt predict` and `mixt export`: the
// one place a model is loaded from a ModelPlan (experiment/model_source.h: a checkpoint's
// weights or their ema average, or model.weights), put in eval mode on its device, and fed
// as training fed it (trainer.channels_last: a 4-D batch NHWC).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "assembly/components.h"
#include "assembly/run_facts.h"
#include "experiment/model_source.h"
#include "mixt/adapter.h"
#include "plugins/registry.h"
#include "recipe/recipe_loader.h"

namespace mixt {

// What the recipe's trainer section says about running its model, read once (the trainer's
// own defaults where it says nothing), without reading the rest of the section.
struct InferenceSettings {
  at::Device device = at::kCPU;  // trainer.device, resolved
  bool channels_last = false;    // trainer.channels_last
  std::uint64_t seed = 0;        // trainer.seed: datasets built for their decoders take it
  // `device`: where the model runs regardless of trainer.device (mixt export traces on the CPU).
  static InferenceSettings read(const Recipe& recipe, std::optional<at::Device> device = std::nullopt);
};

// Where the sample shape a model is built for came from, for errors: "data.val's transforms",
// "--input-shape", a tensor file; `note` follows the shape ("(its first dimension ... )").
struct ShapeSource {
  std::string what;
  std::string note;
};

class Inference {
 public:
  // `mixt predict`, `mixt export`: the recipe's model alone (no datasets, no policy), for
  // samples of `sample_shape`, with the plan's weights. `classes`: the class count when the
  // model leaves it to the data (0: the model's own default). `command` ("predict") names the
  // command in errors.
  Inference(const ModelPlan& plan, const Registry& registry, const InferenceSettings& settings,
            const std::vector<std::int64_t>& sample_shape, std::int64_t classes, const ShapeSource& shape_source,
            bool ema, const std::string& command);
  // `mixt evaluate`: the model a prepared experiment built (for its data, under its precision
  // policy), the plan's weights loaded into it, on the experiment's device and layout
  // (`facts`). `seed`: trainer.seed, which made the weights when the plan names none.
  Inference(Components& components, const RunFacts& facts, const ModelPlan& plan, bool ema, std::uint64_t seed);

  Model& model() const { return *model_; }
  // The recipe's adapter, applied to the model (null without an `adapter:` section).
  Adapter* adapter() const { return adapter_.get(); }
  const std::shared_ptr<Model>& shared_model() const { return model_; }
  at::Device device() const { return device_; }
  bool channels_last() const { return channels_last_; }

  // One batch in, the model's outputs out: no gradients, float32 on the model's device,
  // NHWC for a 4-D batch under channels_last.
  at::Tensor forward(const at::Tensor& batch) const;

 private:
  std::shared_ptr<Model> model_;
  std::unique_ptr<Adapter> adapter_;
  at::Device device_ = at::kCPU;
  bool channels_last_ = false;
};

}  // namespace mixt
