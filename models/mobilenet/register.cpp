// Registers the mobilenet family: mobilenet_v2, mobilenet_v3_large, mobilenet_v3_small, and
// the segmentation model on its dilated large network, lraspp_mobilenet_v3_large.
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

// A segmentation model's: torchvision's default is Pascal VOC's 21 classes, not ImageNet's 1000.
struct SegmentationOptions {
  std::optional<std::int64_t> num_classes;
  mixt::RecipeSection where;
};

const auto kSegmentationOptions =
    mixt::OptionsOf<SegmentationOptions>()
        .contextual(&SegmentationOptions::num_classes, "num_classes", "the dataset's, else 21 (Pascal VOC's)",
                    "output classes (per pixel)", mixt::at_least(1))
        .recipe_section(&SegmentationOptions::where);

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
  r.add_model("lraspp_mobilenet_v3_large",
              mixt::models::zoo_summary("LR-ASPP on MobileNetV3-Large (semantic segmentation, logits per pixel)",
                                        ZooFacts{3221538, 2.086, 520}),
              kSegmentationOptions, [](const SegmentationOptions& o, const mixt::ModelContext& context) {
                mixt::models::require_rgb_images({o.num_classes, o.where}, context);
                const std::int64_t classes = o.num_classes.value_or(context.num_classes > 0 ? context.num_classes : 21);
                return mixt::models::make_lraspp_mobilenet_v3_large(classes);
              });
}

}  // namespace

MIXT_PLUGIN("mobilenet", "1.0.0", register_components)
