#include "mask_decoder.h"

#include <mixt/helpers/data_loader.h>
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>

namespace segmentation_folder {

namespace {

struct Reader {
  const std::vector<std::uint8_t>* bytes;
  std::size_t at = 8;  // after the signature, which png_set_sig_bytes skips
  std::string error;
};

void read_from_memory(png_structp png, png_bytep out, png_size_t count) {
  auto* reader = static_cast<Reader*>(png_get_io_ptr(png));
  if (reader->at + count > reader->bytes->size()) png_error(png, "truncated PNG (unexpected end of data)");
  std::memcpy(out, reader->bytes->data() + reader->at, count);
  reader->at += count;
}

// libpng reports through longjmp: keep its message, jump back into decode_mask.
void on_error(png_structp png, png_const_charp message) {
  static_cast<Reader*>(png_get_error_ptr(png))->error = message;
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}  // e.g. a bad sRGB profile: the indices are fine

const char* colour_type_name(int type) {
  switch (type) {
    case PNG_COLOR_TYPE_RGB:
      return "RGB";
    case PNG_COLOR_TYPE_RGB_ALPHA:
      return "RGBA";
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return "grey with alpha";
    default:
      return "an unusual colour type";
  }
}

}  // namespace

at::Tensor decode_mask(const std::vector<std::uint8_t>& bytes, std::int64_t max_pixels) {
  if (bytes.size() < 8 || png_sig_cmp(bytes.data(), 0, 8) != 0) throw mixt::BadSample("the mask is not a PNG");
  Reader reader{&bytes, 8, {}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw mixt::BadSample("out of memory reading the mask");
  }
  at::Tensor mask;
  std::vector<png_bytep> rows;
  std::string problem;
  // Nothing with a destructor may be created between setjmp and a longjmp back to it.
  if (setjmp(png_jmpbuf(png)) == 0) {
    png_set_read_fn(png, &reader, read_from_memory);
    png_set_sig_bytes(png, 8);
    png_read_info(png, info);
    const auto width = static_cast<std::int64_t>(png_get_image_width(png, info));
    const auto height = static_cast<std::int64_t>(png_get_image_height(png, info));
    const int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (width * height > max_pixels) {
      problem = "the mask's header claims " + std::to_string(width) + " x " + std::to_string(height) +
                " pixels, more than max_image_pixels (" + std::to_string(max_pixels) + ")";
    } else if ((type != PNG_COLOR_TYPE_PALETTE && type != PNG_COLOR_TYPE_GRAY) || depth > 8) {
      problem = std::string("the mask is ") +
                (depth > 8 ? std::to_string(depth) + "-bit" : std::string(colour_type_name(type))) +
                ": expected a palette PNG (VOC's) or an 8-bit grey PNG of class indices";
    } else {
      png_set_packing(png);  // 1, 2 and 4-bit indices one per byte, values unchanged
      png_read_update_info(png, info);
      mask = at::empty({height, width}, at::kByte);
      rows.resize(static_cast<std::size_t>(height));
      for (std::int64_t y = 0; y < height; ++y) rows[static_cast<std::size_t>(y)] = mask[y].data_ptr<std::uint8_t>();
      png_read_image(png, rows.data());
    }
  } else {
    problem = "cannot decode the mask: " + reader.error;
  }
  png_destroy_read_struct(&png, &info, nullptr);
  if (!problem.empty()) throw mixt::BadSample(problem);
  return mask;
}

}  // namespace segmentation_folder
