// Pascal VOC's segmentation layout, as torchvision's VOCSegmentation reads it:
//
//   root/ImageSets/Segmentation/<image_set>.txt   one image id a line
//   root/JPEGImages/<id>.jpg                      the image
//   root/SegmentationClass/<id>.png               its mask (palette or grey PNG of class indices)
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace segmentation_folder {

// VOC 2012's 21 classes, index = mask value (255: border / ignore).
const std::vector<std::string>& voc_class_names();

// The VOC colour map (VOCdevkit's labelcolormap / bitget): 256 RGB triples, index i's colour
// at 3i. Class 0 black, 1 (128, 0, 0), ..., 255 (224, 224, 192), VOC's border colour.
std::vector<std::uint8_t> voc_palette();

std::filesystem::path image_file(const std::filesystem::path& root, const std::string& id);
std::filesystem::path mask_file(const std::filesystem::path& root, const std::string& id);
std::filesystem::path image_set_file(const std::filesystem::path& root, const std::string& image_set);

// The ids listed in root/ImageSets/Segmentation/<image_set>.txt, in order (blank lines and
// surrounding spaces ignored). Throws LayoutError for a missing or empty list.
struct LayoutError {
  std::string message;
  std::string hint;
};
std::vector<std::string> read_image_set(const std::filesystem::path& root, const std::string& image_set);

}  // namespace segmentation_folder
