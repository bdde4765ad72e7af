// Token files as nanoGPT, llm.c and `mixt tokenize` write them:
//   nanogpt: uint16 ids and nothing else (prepare.py: np.array(ids, dtype=np.uint16).tofile(f));
//   llmc:    256 int32 (magic, version, token count, zeros), then the ids: magic 20240520 and
//            version 1 for uint16 ids (GPT-2), magic 20240801 and version 7 for uint32 ids
//            (LLaMA 3; vocabularies over 65,536) (dev/data/data_common.py, write_datafile).
#pragma once

#include <stdexcept>
#include <string>

#include "token_stream.h"

namespace tokens {

enum class TokenFormat { auto_detect, nanogpt, llmc };

// A file that cannot be used as asked; the message names it. The plugin turns it into a
// recipe error at the key that named the file.
class TokenFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TokenFile {
  TokenRun run;
  TokenFormat format = TokenFormat::nanogpt;  // the one read (auto_detect is resolved)
};

// Maps `path` and checks it against `format` (auto_detect: llmc when the file starts with
// the magic, else nanogpt). Throws TokenFileError.
TokenFile open_token_file(const std::string& path, TokenFormat format);

}  // namespace tokens
