// Registers the mobilenet family: mobilenet_v2, mobilenet_v3_large, mobilenet_v3_small.
#include <mixt/plugin.h>

#include "../common/zoo.h"
#include "mobilenet.h"

namespace {

using mixt::models::ZooFacts;

const mixt::Option<double> kDropout = mixt::models::probability("dropout", 0.2, "dropout before the last linear layer");

std::vector<mixt::OptionDoc> options() {
  std::vector<mixt::OptionDoc> o = mixt::models::common_zoo_options();
  o.push_back(kDropout);
  return o;
}

double read_dropout(const mixt::Config& c) {
  return kDropout.read(c);
}

void register_components(mixt::Registrar& r) {
  r.add_model("mobilenet_v2", {mixt::models::zoo_summary("MobileNetV2", ZooFacts{3504872, 0.301, 224}), options()},
              [](const mixt::Config& c, const mixt::ModelContext& context) {
                mixt::models::require_rgb_images(c, context);
                return mixt::models::make_mobilenet_v2(mixt::models::read_num_classes(c, context), read_dropout(c));
              });
  for (const char* variant : {"large", "small"}) {
    const bool large = std::string(variant) == "large";
    const ZooFacts facts = large ? ZooFacts{5483032, 0.217, 224} : ZooFacts{2542856, 0.057, 224};
    r.add_model(std::string("mobilenet_v3_") + variant,
                {mixt::models::zoo_summary(large ? "MobileNetV3-Large" : "MobileNetV3-Small", facts), options()},
                [variant](const mixt::Config& c, const mixt::ModelContext& context) {
                  mixt::models::require_rgb_images(c, context);
                  return mixt::models::make_mobilenet_v3(variant, mixt::models::read_num_classes(c, context),
                                                         read_dropout(c));
                });
  }
}

}  // namespace

MIXT_PLUGIN("mobilenet", "1.0.0", register_components)
