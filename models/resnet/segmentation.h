// Segmentation models on a dilated ResNet-50, as torchvision builds them: fcn_resnet50 and
// deeplabv3_resnet50 (segmentation.cpp).
#pragma once

#include <cstdint>
#include <memory>

#include "resnet.h"

namespace mixt::models {

enum class SegmentationHead { fcn, deeplabv3 };

// Logits [batch, classes, height, width] at the input's size; `aux`: the FCN head on layer3
// that torchvision's published weights carry (loaded and saved, not run).
std::shared_ptr<Model> make_segmentation_resnet50(SegmentationHead head, std::int64_t classes, bool aux);

}  // namespace mixt::models
