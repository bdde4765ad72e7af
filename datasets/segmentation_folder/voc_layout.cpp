#include "voc_layout.h"

#include <cstdint>
#include <fstream>

namespace segmentation_folder {

namespace fs = std::filesystem;

const std::vector<std::string>& voc_class_names() {
  static const std::vector<std::string> names = {
      "background", "aeroplane", "bicycle",     "bird",  "boat",        "bottle", "bus",
      "car",        "cat",       "chair",       "cow",   "diningtable", "dog",    "horse",
      "motorbike",  "person",    "pottedplant", "sheep", "sofa",        "train",  "tvmonitor"};
  return names;
}

std::vector<std::uint8_t> voc_palette() {
  std::vector<std::uint8_t> palette(3 * 256);
  for (int i = 0; i < 256; ++i) {
    int r = 0, g = 0, b = 0, c = i;
    for (int j = 0; j < 8; ++j) {  // the bits of the index, spread over the colours' high bits
      r |= ((c >> 0) & 1) << (7 - j);
      g |= ((c >> 1) & 1) << (7 - j);
      b |= ((c >> 2) & 1) << (7 - j);
      c >>= 3;
    }
    palette[3 * i] = static_cast<std::uint8_t>(r);
    palette[3 * i + 1] = static_cast<std::uint8_t>(g);
    palette[3 * i + 2] = static_cast<std::uint8_t>(b);
  }
  return palette;
}

fs::path image_file(const fs::path& root, const std::string& id) { return root / "JPEGImages" / (id + ".jpg"); }
fs::path mask_file(const fs::path& root, const std::string& id) { return root / "SegmentationClass" / (id + ".png"); }
fs::path image_set_file(const fs::path& root, const std::string& image_set) {
  return root / "ImageSets" / "Segmentation" / (image_set + ".txt");
}

std::vector<std::string> read_image_set(const fs::path& root, const std::string& image_set) {
  const fs::path list = image_set_file(root, image_set);
  std::ifstream in(list);
  if (!in) {
    throw LayoutError{"no image set list " + list.string(),
                      "a VOC-layout root holds ImageSets/Segmentation/<image_set>.txt (one image id a line), "
                      "JPEGImages/<id>.jpg and SegmentationClass/<id>.png"};
  }
  std::vector<std::string> ids;
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    ids.push_back(line.substr(first, last - first + 1));
  }
  if (ids.empty()) throw LayoutError{list.string() + " lists no image", "one image id a line"};
  return ids;
}

}  // namespace segmentation_folder
