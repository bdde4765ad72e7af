// Fuzz target: a token file (tokens::open_token_file, the tokens dataset's reader of nanoGPT
// and llm.c files), opened as each format a recipe may name. What must hold:
//   - the reader accepts or refuses with a TokenFileError (the plugin's recipe error at the
//     key that named the file); nothing else escapes;
//   - a file it accepts holds exactly its tokens: header + count * width is the file's size,
//     and every id TokenStream copies is the little-endian number at its place in the bytes
//     (decoded here on their own, not by the reader).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "scratch_file.h"
#include "tokens/token_file.h"
#include "tokens/token_stream.h"

namespace {

std::int64_t little_endian(const std::uint8_t* at, int width) {
  std::int64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = value * 256 + at[i];
  return value;
}

void check(const ScratchFile& file, const std::uint8_t* data, std::size_t size, tokens::TokenFormat format) {
  tokens::TokenFile read;
  try {
    read = tokens::open_token_file(file.path.string(), format);
  } catch (const tokens::TokenFileError&) {
    return;
  }
  const tokens::TokenRun& run = read.run;
  MIXT_FUZZ_CHECK(run.width == 2 || run.width == 4, "a token file of ids neither uint16 nor uint32");
  MIXT_FUZZ_CHECK(run.count >= 0 && run.header_bytes >= 0, "a negative count or header");
  MIXT_FUZZ_CHECK(static_cast<std::size_t>(run.header_bytes + run.count * run.width) == size,
                  "header and tokens do not make up the file");
  if (run.count == 0) return;
  const tokens::TokenStream stream({run});
  MIXT_FUZZ_CHECK(stream.size() == run.count, "the stream's size is not the file's count");
  std::vector<std::int64_t> ids(static_cast<std::size_t>(run.count));
  stream.copy(0, run.count, ids.data());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    MIXT_FUZZ_CHECK(ids[i] == little_endian(data + run.header_bytes + run.width * i, run.width),
                    "an id is not the bytes at its place");
  }
  (void)stream.locate(run.count - 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const ScratchFile file("tokens.bin", data, size);
  for (const auto format :
       {tokens::TokenFormat::auto_detect, tokens::TokenFormat::nanogpt, tokens::TokenFormat::llmc}) {
    check(file, data, size, format);
  }
  return 0;
}
