// Model config: a Hugging Face config.json turned into the KV geometry of
// curve::ModelSpec (see curve/sizing.h and docs/semantics.md
// section 4).
//
// Keys read (a null value counts as absent):
//   layers           num_hidden_layers (or n_layer)                      required
//   query_heads      num_attention_heads (or n_head)                     required
//   kv_heads         num_key_value_heads (or num_kv_heads, n_head_kv); 1 when
//                    "multi_query" is true; else num_attention_heads
//   head_dim         head_dim; else hidden_size / num_attention_heads (which must
//                    divide evenly)
//   bytes_per_element  torch_dtype (or dtype): float16/bfloat16 -> 2, float32 -> 4,
//                    float8* -> 1; 2 when absent; options.bytes_per_element
//                    overrides it (and then the dtype is not read)
//   MLA              when kv_lora_rank is present: mla = true, kv_lora_rank,
//                    qk_rope_head_dim (then required); head_dim becomes
//                    (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) / 2 when
//                    those three are present (the prefill-cost head dimension,
//                    see curve/sizing.h), else as for standard attention, else 0
//                    (unknown; the bytes of an MLA model do not need it)
//   groups           the KV cache groups of a hybrid model (curve::KvGroupSpec),
//                    from layer_types, sliding_window_pattern, attention_chunk_size
//                    with no_rope_layers, or full_attention_interval with the
//                    linear_* dimensions; see FillGroups in model_config.cc for
//                    each family's keys and what is not read. None when every
//                    layer is full attention.
// Multimodal configs (Llama 4, Qwen2-VL, ...) keep the language model's keys in a
// nested "text_config" object: a key found there wins over the same key at the top
// level, and the top level fills in what text_config lacks (often torch_dtype).
// Every other key is ignored, and its value is skipped without being validated
// (simdjson On Demand checks the document's structure, not the atoms it skips).
//
// parameters is NOT in config.json and is not estimated: it stays 0 (unknown)
// unless options.parameters is set. name is options.name, else "_name_or_path",
// else "model_type", else empty.
//
// Errors name the key (prefixed "text_config." when it was read there) and what
// was expected: missing, wrong JSON type, not a positive integer, unknown dtype,
// or text that is not a JSON object.
//
// Thread safety: pure functions; ReadModelConfigFile reads the file system.
#ifndef KVWATCH_CONFIG_MODEL_CONFIG_H_
#define KVWATCH_CONFIG_MODEL_CONFIG_H_

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "curve/sizing.h"

namespace kvwatch::config {

struct ModelConfigOptions {
  // Name of the resulting spec. Default: taken from the config (see above).
  std::string name;
  // KV element size in bytes, overriding torch_dtype (e.g. 1 for an fp8 KV cache).
  std::optional<int> bytes_per_element;
  // Active parameters per token for the depth-weighted prefill cost. Default: unknown (0).
  double parameters = 0;
};

// Parses the text of a config.json.
base::Result<curve::ModelSpec> ParseModelConfig(std::string_view json_text, const ModelConfigOptions& options = {});

// Reads and parses the file at path. Errors start with the path. When neither
// options.name nor the config gives a name, the path is the name.
base::Result<curve::ModelSpec> ReadModelConfigFile(const std::string& path, const ModelConfigOptions& options = {});

}  // namespace kvwatch::config

#endif  // KVWATCH_CONFIG_MODEL_CONFIG_H_
