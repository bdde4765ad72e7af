#include "files/transformers_export.h"

#include <unistd.h>

#include <set>

#include "mixt/error.h"
#include "mixt/helpers/state_dict.h"
#include "mixt/version.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {
// What a transformers folder holds besides the weights, copied as the base had them.
const char* const kCopied[] = {"config.json",           "generation_config.json",  "tokenizer.json",
                               "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model"};
}  // namespace

std::set<std::string> adapter_parameter_names(const torch::nn::Module& model) {
  std::set<std::string> names;
  for (const auto& item : model.named_parameters()) {
    if (item.value().requires_grad()) names.insert(item.key());
  }
  return names;
}

NamedTensors exported_state(torch::nn::Module& model, bool adapter) {
  const std::set<std::string> adapter_parameters = adapter ? adapter_parameter_names(model) : std::set<std::string>{};
  NamedTensors tensors;
  for (auto& [name, tensor] : state_dict(model)) {
    if (adapter_parameters.count(name)) continue;
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    if (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16) t = t.to(at::kFloat);
    tensors.emplace_back(name, t);
  }
  return tensors;
}

void check_transformers_output(const fs::path& output) {
  std::error_code ec;
  if (!fs::exists(output, ec)) return;
  if (!fs::is_directory(output, ec) || !fs::is_empty(output, ec)) {
    throw usage_error("-o " + output.string() + " exists: --format transformers writes a new folder",
                      "name a folder that does not exist yet (or an empty one)");
  }
}

void write_transformers_folder(const fs::path& output, const NamedTensors& tensors, const fs::path& from) {
  check_transformers_output(output);
  if (!fs::exists(from / "config.json")) {
    throw usage_error("--format transformers copies config.json from model.from, and " + from.string() + " has none");
  }
  const fs::path absolute = fs::absolute(output).lexically_normal();
  const fs::path parent = absolute.parent_path();
  fs::create_directories(parent);
  const fs::path temporary = parent / ("." + absolute.filename().string() + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(temporary);
  fs::create_directory(temporary);
  try {
    save_safetensors(temporary / "model.safetensors", tensors,
                     {{"format", "pt"}, {"source", "mixt " + std::string(version())}});
    for (const char* name : kCopied) {
      if (fs::exists(from / name)) fs::copy_file(from / name, temporary / name);
    }
    if (fs::exists(absolute)) fs::remove(absolute);  // an empty folder, checked above
    fs::rename(temporary, absolute);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temporary, ignored);
    throw;
  }
}

}  // namespace mixt::cli
