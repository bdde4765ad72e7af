// The recipe of the adapter suites' reference loop (tests/golden/make_lora_golden.py and
// make_qlora_golden.py): the loop's settings as it wrote them in GOLDEN/training.json, over
// the fixture's base folder and token file.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.h"

namespace mixt::testing {

inline std::string quoted(const std::filesystem::path& path) { return nlohmann::json(path.string()).dump(); }

// `adapter`: the recipe's adapter section (none when empty); `trainer`: options put first in
// the trainer's section ("activation_checkpointing: all, ").
inline std::string reference_loop_recipe(const std::filesystem::path& golden, const std::string& name,
                                         const std::string& adapter, const std::string& trainer = "",
                                         const std::string& precision = "fp32") {
  const nlohmann::json g = nlohmann::json::parse(read_file(golden / "training.json"));
  return "name: " + name +
         "\n"
         "task: { name: causal_lm, fused_loss: false }\n"
         "model: { name: llama, from: " +
         quoted(golden / "base") + " }\n" + (adapter.empty() ? "" : "adapter: " + adapter + "\n") +
         "precision: { name: " + precision +
         " }\n"
         "optimizer: " +
         g["optimizer"].dump() +
         "\n"
         "data:\n"
         "  train: { name: tokens, files: " +
         quoted(golden / "tokens.bin") + ", format: nanogpt, vocab: " + std::to_string(g["vocab"].get<int>()) +
         ", context: " + std::to_string(g["context"].get<int>()) +
         ", batch_size: " + std::to_string(g["batch_size"].get<int>()) +
         ", shuffle: false }\n"
         "trainer: { " +
         trainer +
         "epochs: 1, seed: 0, threads: 1, log_every: 1, clip_grad_norm: " + nlohmann::json(g["clip_grad_norm"]).dump() +
         " }\n"
         "callbacks: [{ name: tensorboard, enabled: false }]\n"
         "output: runs\n";
}

}  // namespace mixt::testing
