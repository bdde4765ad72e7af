// The ONNX translations plugins registered (Registrar::add_onnx_translation), by op, looked
// up before the built-in table (export/onnx_op_table.h). One table for the process: the
// registry that loads the plugins fills it, the export reads it.
#pragma once

#include <string>
#include <string_view>

#include "mixt/onnx_translation.h"

namespace mixt {

struct PluginTranslation {
  std::string op;      // "aten::my_op", "myops::swish"
  std::string onnx;    // what it becomes, for --list-ops
  std::string plugin;  // the library that registered it
  OnnxTranslator translate;
};

// Adds (or, from the same plugin file, replaces) the translation of `translation.op`; a
// plugin error when another plugin has one for that op.
void add_plugin_translation(PluginTranslation translation);
// Drops what `plugin` registered (a plugin whose registration failed).
void remove_plugin_translations(const std::string& plugin);
// The translation registered for `op`, or null.
const PluginTranslation* find_plugin_translation(std::string_view op);

}  // namespace mixt
