// Registers the mobilenet family: mobilenet_v2, mobilenet_v3_large, mobilenet_v3_small.
#include <mixt/plugin.h>

#include "../common/zoo.h"
#include "mobilenet.h"

namespace {

using mixt::models::ZooFacts;

// The recipe's `model:` section, the same for the three.
struct MobileNetOptions {
  mixt::models::ZooOptions zoo;
  double dropout = 0.2;
};

using O = MobileNetOptions;
const auto kOptions = mixt::OptionsOf<O>()
                          .include(&O::zoo, mixt::models::kZooOptions)
                          .add(&O::dropout, "dropout", "dropout before the last linear layer",
                               mixt::models::probability());

void register_components(mixt::Registrar& r) {
  r.add_model("mobilenet_v2", mixt::models::zoo_summary("MobileNetV2", ZooFacts{3504872, 0.301, 224}), kOptions,
              [](const O& o, const mixt::ModelContext& context) {
                mixt::models::require_rgb_images(o.zoo, context);
                return mixt::models::make_mobilenet_v2(o.zoo.classes(context), o.dropout);
              });
  for (const char* variant : {"large", "small"}) {
    const bool large = std::string(variant) == "large";
    const ZooFacts facts = large ? ZooFacts{5483032, 0.217, 224} : ZooFacts{2542856, 0.057, 224};
    r.add_model(std::string("mobilenet_v3_") + variant,
                mixt::models::zoo_summary(large ? "MobileNetV3-Large" : "MobileNetV3-Small", facts), kOptions,
                [variant](const O& o, const mixt::ModelContext& context) {
                  mixt::models::require_rgb_images(o.zoo, context);
                  return mixt::models::make_mobilenet_v3(variant, o.zoo.classes(context), o.dropout);
                });
  }
}

}  // namespace

MIXT_PLUGIN("mobilenet", "1.0.0", register_components)
