// Where this build tree put what the tests run, as CMake configured it. Compiled once, into
// mixt_test_paths from a generated source (tests/CMakeLists.txt): paths compiled into every
// test would make each object differ from one clone to the next, missing ccache in every new
// checkout.
#pragma once

#include <string>

namespace mixt::testing::configured {

const std::string& source_dir();
const std::string& binary_dir();
const std::string& mixt_executable();
const std::string& distributed_probe();
const std::string& plugin_dir();
const std::string& fixture_plugin_dir();

// What ctest fixtures write into the build tree for the tests that need them.
const std::string& examples_prefix();
const std::string& token_files_dir();
const std::string& model_parity_dir();
const std::string& predict_golden_dir();
const std::string& gpt2_golden_dir();
const std::string& lm_training_golden_dir();  // gpt2/ and llama/
const std::string& lora_golden_dir();         // tests/golden/make_lora_golden.py's
const std::string& llama_golden_dir();
const std::string& float8_golden_dir();

}  // namespace mixt::testing::configured
