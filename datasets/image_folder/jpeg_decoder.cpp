#include "jpeg_decoder.h"

// jpeglib.h needs FILE and size_t declared first.
#include <csetjmp>
#include <cstdio>
#include <jpeglib.h>
#include <jerror.h>

namespace image_folder {

namespace {

// libjpeg reports fatal errors through error_exit, which must not return: we longjmp back
// to decode_into. Every object alive in that frame is trivially destructible, so skipping
// destructors is safe; the output tensor belongs to the caller.
struct ErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

void on_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (e.g. "extraneous bytes before marker", common in ImageNet and accepted by PIL)
// are ignored, except premature end of data: the rest of the picture would be grey.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) reinterpret_cast<ErrorManager*>(cinfo->err)->truncated = true;
}

bool decode_into(const std::uint8_t* data, std::size_t size, int channels, at::Tensor* out, ErrorManager* errors) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&errors->base);
  errors->base.error_exit = on_error;
  errors->base.emit_message = on_message;
  if (setjmp(errors->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  const auto height = static_cast<std::int64_t>(cinfo.output_height);
  const auto width = static_cast<std::int64_t>(cinfo.output_width);
  *out = at::empty({height, width, channels}, at::kByte);
  std::uint8_t* pixels = out->data_ptr<std::uint8_t>();
  const std::int64_t row_bytes = width * channels;
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels + static_cast<std::int64_t>(cinfo.output_scanline) * row_bytes;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

}  // namespace

JpegResult decode_jpeg(const std::uint8_t* data, std::size_t size, int channels) {
  ErrorManager errors{};
  JpegResult result;
  at::Tensor image;
  const bool ok = decode_into(data, size, channels, &image, &errors);
  result.truncated = errors.truncated;
  if (ok && !errors.truncated) {
    result.image = image;
  } else if (!ok) {
    result.error = errors.message;
  }
  return result;
}

}  // namespace image_folder
