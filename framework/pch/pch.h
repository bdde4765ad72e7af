// Precompiled header: the heavy, stable headers almost every mixt translation unit needs.
// Narrow on purpose: no <torch/torch.h>.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
