#include "files/weights_export.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_weights.h"
#include "mixt/helpers/nf4.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/version.h"

namespace mixt::cli {

namespace fs = std::filesystem;

// A model.pth that torch.load cannot read would fail far from here, in someone's script.
void refuse_pickle_name(const std::string& option, const std::string& output, const std::string& command) {
  std::string extension = fs::path(output).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* pickle : {".pt", ".pth", ".bin", ".ckpt", ".pkl"}) {
    if (extension == pickle) {
      throw usage_error(option + " " + output + ": " + command + " writes safetensors, which torch.load cannot read",
                        "name it " + fs::path(output).replace_extension(".safetensors").string() +
                            " (in Python: safetensors.torch.load_file" +
                            (command == "mixt export" ? ", then model.load_state_dict)" : ")"));
    }
  }
}

int export_weights(const std::string& checkpoint, const std::string& format, const std::string& output, bool ema,
                   bool best) {
  if (format != "safetensors") {
    throw usage_error("unknown export format '" + format + "'", "mixt export writes --format safetensors");
  }
  refuse_pickle_name("-o", output, "mixt export");
  const fs::path file = best ? resolve_best_checkpoint(checkpoint) : resolve_checkpoint(checkpoint, "checkpoint");
  CheckpointContents contents = read_checkpoint(file);
  if (omits_frozen_base(contents) && !ema) {
    throw Error(ErrorKind::recipe,
                "this checkpoint is of a run with an adapter: it holds the adapter's tensors, not the frozen base "
                "model they adapt",
                SourceLocation{file.string()}, {},
                "the run's adapter/ folder holds the adapter in PEFT's layout (peft.PeftModel.from_pretrained "
                "loads it); --merge-adapter (or --format transformers -o DIR) writes the base with the adapter "
                "merged in; docs/adapters.md");
  }
  NamedTensors tensors = checkpoint_weights(contents, file, ema);
  for (const auto& [name, tensor] : tensors) {
    if (held_in_nf4(tensor)) {
      throw usage_error("the checkpoint's " + name +
                            " is held in NF4 (adapter.quantize_base: nf4): the checkpoint "
                            "has no float weights for the base",
                        "give PEFT the run's adapter/ folder over model.from's base, or export a LoRA run");
    }
  }
  // float32, as torchvision's weights are: a bfloat16 or float16 tensor (a bf16_true model,
  // a master-weight policy's buffers) widens exactly.
  for (auto& item : tensors) {
    if (item.second.scalar_type() == at::kHalf || item.second.scalar_type() == at::kBFloat16) {
      item.second = item.second.to(at::kFloat);
    }
  }
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"source", "mixt " + std::string(version())}};
  if (contents.header.contains("components")) metadata["mixt_components"] = contents.header["components"].dump();
  save_safetensors(output, tensors, metadata);
  std::int64_t values = 0;
  for (const auto& item : tensors) values += item.second.numel();
  std::printf("wrote %zu tensors (%lld values) from %s to %s\n", tensors.size(), static_cast<long long>(values),
              file.string().c_str(), output.c_str());
  return 0;
}

}  // namespace mixt::cli
