// Registers the resnet family: one entry per torchvision builder, same depths and widths;
// and the segmentation models on its dilated ResNet-50, fcn_resnet50 and deeplabv3_resnet50.
#include <mixt/plugin.h>

#include "../common/zoo.h"
#include "resnet.h"
#include "segmentation.h"

namespace {

using mixt::models::ResNetOptions;
using mixt::models::ZooFacts;

struct Variant {
  const char* name;
  const char* title;
  ResNetOptions options;
  ZooFacts facts;
};

const Variant kVariants[] = {
    {"resnet18", "ResNet-18", {false, {2, 2, 2, 2}, 1, 64}, {11689512, 1.814, 224}},
    {"resnet34", "ResNet-34", {false, {3, 4, 6, 3}, 1, 64}, {21797672, 3.664, 224}},
    {"resnet50", "ResNet-50", {true, {3, 4, 6, 3}, 1, 64}, {25557032, 4.089, 224}},
    {"resnet101", "ResNet-101", {true, {3, 4, 23, 3}, 1, 64}, {44549160, 7.801, 224}},
    {"resnet152", "ResNet-152", {true, {3, 8, 36, 3}, 1, 64}, {60192808, 11.514, 224}},
    {"resnext50_32x4d", "ResNeXt-50 32x4d", {true, {3, 4, 6, 3}, 32, 4}, {25028904, 4.230, 224}},
    {"resnext101_32x8d", "ResNeXt-101 32x8d", {true, {3, 4, 23, 3}, 32, 8}, {88791336, 16.414, 224}},
    {"wide_resnet50_2", "Wide ResNet-50-2", {true, {3, 4, 6, 3}, 1, 128}, {68883240, 11.398, 224}},
    {"wide_resnet101_2", "Wide ResNet-101-2", {true, {3, 4, 23, 3}, 1, 128}, {126886696, 22.753, 224}},
};

// The recipe's `model:` section, the same for every variant.
struct ResNetRecipe {
  mixt::models::ZooOptions zoo;
  bool zero_init_residual = false;
};

using O = ResNetRecipe;
const auto kOptions = mixt::OptionsOf<O>()
                          .include(&O::zoo, mixt::models::kZooOptions)
                          .add(&O::zero_init_residual, "zero_init_residual",
                               "start the last BN of each residual block at zero");

// A segmentation model's: torchvision's default is Pascal VOC's 21 classes, not ImageNet's 1000.
struct SegmentationRecipe {
  std::optional<std::int64_t> num_classes;
  bool aux_classifier = true;
  mixt::RecipeSection where;
};

using S = SegmentationRecipe;
const auto kSegmentationOptions =
    mixt::OptionsOf<S>()
        .contextual(&S::num_classes, "num_classes", "the dataset's, else 21 (Pascal VOC's)",
                    "output classes (per pixel)", mixt::at_least(1))
        .add(&S::aux_classifier, "aux_classifier",
             "keep torchvision's auxiliary FCN head on layer3 (`aux_classifier.*`, in its published weights); it is "
             "not run: the forward returns the main output")
        .recipe_section(&S::where);

void register_components(mixt::Registrar& registrar) {
  const struct {
    const char* name;
    const char* title;
    mixt::models::SegmentationHead head;
    ZooFacts facts;
  } segmentation[] = {{"fcn_resnet50",
                       "FCN on a dilated ResNet-50 (semantic segmentation, logits per pixel)",
                       mixt::models::SegmentationHead::fcn,
                       {35322218, 152.717, 520}},
                      {"deeplabv3_resnet50",
                       "DeepLabV3 on a dilated ResNet-50 (semantic segmentation, logits per pixel)",
                       mixt::models::SegmentationHead::deeplabv3,
                       {42004074, 178.722, 520}}};
  for (const auto& s : segmentation) {
    registrar.add_model(s.name, mixt::models::zoo_summary(s.title, s.facts), kSegmentationOptions,
                        [head = s.head](const S& o, const mixt::ModelContext& context) {
                          mixt::models::require_rgb_images({o.num_classes, o.where}, context);
                          const std::int64_t classes =
                              o.num_classes.value_or(context.num_classes > 0 ? context.num_classes : 21);
                          return mixt::models::make_segmentation_resnet50(head, classes, o.aux_classifier);
                        });
  }
  for (const Variant& v : kVariants) {
    registrar.add_model(v.name, mixt::models::zoo_summary(v.title, v.facts), kOptions,
                        [v](const O& recipe, const mixt::ModelContext& context) -> std::shared_ptr<mixt::Model> {
                          mixt::models::require_rgb_images(recipe.zoo, context);
                          ResNetOptions o = v.options;
                          o.num_classes = recipe.zoo.classes(context);
                          o.zero_init_residual = recipe.zero_init_residual;
                          return std::make_shared<mixt::models::ResNet>(o);
                        });
  }
}

}  // namespace

MIXT_PLUGIN("resnet", "1.0.0", register_components)
