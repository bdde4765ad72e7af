// How llama reads a transformers folder's config.json (LlamaConfig): which key fills which
// option, and LlamaConfig's defaults for keys a published file leaves out. A file of its own
// so that the transformers_config fuzz target reads config.json exactly as the plugin does.
#pragma once

#include <mixt/plugin.h>

namespace mixt::models::llama {

TransformersConfig transformers_config();
TransformersDefaults transformers_defaults();

}  // namespace mixt::models::llama
