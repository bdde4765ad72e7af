#include "mixt/helpers/state_dict.h"

#include <c10/util/StringUtil.h>

#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include "mixt/error.h"
#include "mixt/helpers/nf4.h"
#include "sdk/helpers/state_dict_check.h"

namespace mixt {

NamedTensors state_dict(const torch::nn::Module& module) {
  NamedTensors out;
  // Pre-order walk: a module's own parameters, then its own buffers, then its children —
  // the order of torch.nn.Module.state_dict().
  module.apply([&](const std::string& prefix, const torch::nn::Module& m) {
    const std::string dotted = prefix.empty() ? "" : prefix + ".";
    for (const auto& p : m.named_parameters(/*recurse=*/false)) out.emplace_back(dotted + p.key(), p.value());
    for (const auto& b : m.named_buffers(/*recurse=*/false)) out.emplace_back(dotted + b.key(), b.value());
  });
  return out;
}

namespace {
std::string shape_text(const at::Tensor& t) { return c10::str(t.sizes()); }

std::string join_some(const std::vector<std::string>& items) {
  constexpr std::size_t kShown = 12;
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < kShown; ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > kShown) text += ", ... (" + std::to_string(items.size() - kShown) + " more)";
  return text;
}
}  // namespace

std::string LoadReport::describe() const {
  std::ostringstream text;
  if (!missing.empty()) text << "\n  missing in the file (" << missing.size() << "): " << join_some(missing);
  if (!unexpected.empty()) {
    text << "\n  unexpected in the file (" << unexpected.size() << "): " << join_some(unexpected);
  }
  if (!mismatched.empty()) text << "\n  shape mismatch (" << mismatched.size() << "): " << join_some(mismatched);
  return text.str();
}

namespace {
// The module's tensors that `tensors` has under the same name and shape (target, index in
// `tensors`), and a report of the rest.
std::vector<std::pair<at::Tensor, std::size_t>> match_state_dict(const torch::nn::Module& module,
                                                                 const NamedTensors& tensors, LoadReport& report) {
  std::map<std::string, std::size_t> given;
  for (std::size_t i = 0; i < tensors.size(); ++i) given[tensors[i].first] = i;
  std::vector<std::pair<at::Tensor, std::size_t>> matches;
  std::map<std::string, bool> known;
  for (auto& [name, target] : state_dict(module)) {
    known[name] = true;
    const auto found = given.find(name);
    if (found == given.end()) {
      // As torch.nn.BatchNorm._load_from_state_dict: a state dict without it (safetensors
      // carry no version metadata; PyTorch before 0.4.1 had none) keeps the module's count.
      const std::string_view suffix = "num_batches_tracked";
      const bool batch_count = name == suffix || (name.size() > suffix.size() &&
                                                  name.compare(name.size() - suffix.size() - 1, std::string::npos,
                                                               "." + std::string(suffix)) == 0);
      if (!batch_count) report.missing.push_back(name);
    } else if (const at::Tensor& saved = tensors[found->second].second; saved.sizes() != target.sizes()) {
      report.mismatched.push_back(name + ": file " + shape_text(saved) + " vs model " + shape_text(target));
    } else {
      matches.emplace_back(target, found->second);
    }
  }
  for (const auto& [name, tensor] : tensors) {
    if (!known.count(name)) report.unexpected.push_back(name);
  }
  return matches;
}
}  // namespace

LoadReport compare_state_dict(const torch::nn::Module& module, const NamedTensors& tensors) {
  LoadReport report;
  match_state_dict(module, tensors, report);
  return report;
}

LoadReport load_state_dict(torch::nn::Module& module, const NamedTensors& layout,
                           const std::function<void(std::size_t, const at::Tensor&)>& copy_into, bool strict,
                           const std::string& source) {
  LoadReport report;
  const auto copies = match_state_dict(module, layout, report);
  if (strict && !report.complete()) {
    throw Error(ErrorKind::recipe, "weights do not match the model" + report.describe(), SourceLocation{source}, {},
                "use weights made for this model and num_classes, or set `strict: false` to load what matches");
  }
  at::NoGradGuard no_grad;
  for (const auto& [target, index] : copies) {
    // A weight held in NF4 (adapter.quantize_base) was quantised from model.from's; a
    // checkpoint of such a model holds the same one number, anything else is another base.
    if (held_in_nf4(target)) {
      const at::Tensor value = at::empty(target.sizes(), target.options());
      copy_into(index, value);
      if (!at::equal(value, target)) {
        throw Error(ErrorKind::recipe, "the file has float weights for a layer held in NF4", SourceLocation{source}, {},
                    "the base of a QLoRA model (adapter.quantize_base) is model.from's: name these weights there");
      }
      continue;
    }
    copy_into(index, target);
  }
  report.loaded = copies.size();
  return report;
}

LoadReport load_state_dict(torch::nn::Module& module, const NamedTensors& tensors, bool strict,
                           const std::string& source) {
  return load_state_dict(
      module, tensors, [&](std::size_t i, const at::Tensor& target) { target.copy_(tensors[i].second); }, strict,
      source);
}

}  // namespace mixt
