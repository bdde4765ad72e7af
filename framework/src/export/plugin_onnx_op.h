// A plugin's translation (sdk/plugin_translations.h) run on one traced node: the SDK's
// OnnxOp (mixt/onnx_translation.h) over the export's own AtenNode and OnnxBuilder.
#pragma once

#include "export/onnx_builder.h"
#include "sdk/plugin_translations.h"

namespace mixt {

// Throws Untranslatable when the translation refuses, or fails (its plugin named).
void run_plugin_translation(const PluginTranslation& translation, AtenNode& node, OnnxBuilder& builder);

}  // namespace mixt
