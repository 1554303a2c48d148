#include "config/model_config.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/json_type_name.h"
#include "base/text_file.h"
#include "simdjson.h"

namespace kvwatch::config {
namespace {

namespace od = simdjson::ondemand;
using base::Result;
using base::Status;
using curve::ModelSpec;

// The keys this parser reads; everything else is skipped unread.
constexpr std::array<std::string_view, 47> kKnownKeys = {
    "num_hidden_layers",
    "n_layer",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "num_kv_heads",
    "n_head_kv",
    "multi_query",
    "head_dim",
    "hidden_size",
    "torch_dtype",
    "dtype",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "_name_or_path",
    // Hybrid models (see FillGroups).
    "layer_types",
    "sliding_window",
    "sliding_window_pattern",
    "_sliding_window_pattern",
    "attention_chunk_size",
    "no_rope_layers",
    "full_attention_interval",
    "linear_conv_kernel_dim",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "use_sliding_window",
    // Mamba hybrids (see LayerKinds and MambaGroup).
    "hybrid_override_pattern",
    "layers_block_type",
    "attn_layer_indices",
    "attn_layer_period",
    "attn_layer_offset",
    "mamba_d_state",
    "mamba_d_conv",
    "mamba_expand",
    "mamba_n_heads",
    "mamba_d_head",
    "mamba_n_groups",
    "mamba_num_heads",
    "mamba_head_dim",
    "n_groups",
    "ssm_state_size",
    "conv_kernel",
    "expand",
};
constexpr std::string_view kModelType = "model_type";
constexpr std::string_view kTextConfig = "text_config";

bool IsKnownKey(std::string_view key) {
  if (key == kModelType) return true;
  for (std::string_view k : kKnownKeys) {
    if (k == key) return true;
  }
  return false;
}

// One JSON value of a known key, kept as what the checks below need.
struct Scalar {
  enum class Kind { kInt, kString, kBool, kArray, kOther } kind = Kind::kOther;
  std::int64_t int_value = 0;
  std::string string_value;
  bool bool_value = false;
  // kArray: its elements (strings, integers or booleans; anything else is an error
  // when the key is used, reported by the element's index).
  std::vector<Scalar> items;
  std::string type_name;  // for errors: "a string", "an array", ...
};

// The known keys of one object level (top level, or text_config); null values are
// left out, so they count as absent.
using Level = std::map<std::string, Scalar, std::less<>>;

std::string JsonError(simdjson::error_code error) { return simdjson::error_message(error); }

// Where the document's iterator is, for messages: " at byte N", or "" at the end.
class Position {
 public:
  Position(od::document* doc, const char* base) : doc_(doc), base_(base) {}
  std::string Where() const {
    const char* at = nullptr;
    if (doc_->current_location().get(at) != simdjson::SUCCESS) return "";
    return " at byte " + std::to_string(at - base_);
  }

 private:
  od::document* doc_;
  const char* base_;
};

// Reads one value into *out; false when it is null (absent).
Result<bool> ReadScalar(od::value& value, const std::string& key, const Position& pos, Scalar* out) {
  od::json_type type;
  if (auto error = value.type().get(type)) {
    return Result<bool>::Error(key + ": invalid JSON value" + pos.Where() + " (" + JsonError(error) + ")");
  }
  out->type_name = base::JsonTypeName(type);
  switch (type) {
    case od::json_type::null:
      return false;
    case od::json_type::number: {
      std::int64_t i = 0;
      const simdjson::error_code error = value.get_int64().get(i);
      if (error == simdjson::SUCCESS) {
        out->kind = Scalar::Kind::kInt;
        out->int_value = i;
      } else if (error == simdjson::NUMBER_ERROR) {
        return Result<bool>::Error(key + ": invalid JSON number" + pos.Where() + " (" + JsonError(error) + ")");
      } else {
        out->type_name = "a number that is not a 64-bit integer";
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view s;
      if (auto error = value.get_string().get(s)) {
        return Result<bool>::Error(key + ": invalid string" + pos.Where() + " (" + JsonError(error) + ")");
      }
      out->kind = Scalar::Kind::kString;
      out->string_value = std::string(s);
      return true;
    }
    case od::json_type::boolean: {
      bool b = false;
      if (auto error = value.get_bool().get(b)) {
        return Result<bool>::Error(key + ": invalid boolean" + pos.Where() + " (" + JsonError(error) + ")");
      }
      out->kind = Scalar::Kind::kBool;
      out->bool_value = b;
      return true;
    }
    case od::json_type::array: {
      od::array array;
      if (auto error = value.get_array().get(array)) {
        return Result<bool>::Error(key + ": invalid array" + pos.Where() + " (" + JsonError(error) + ")");
      }
      out->kind = Scalar::Kind::kArray;
      std::size_t index = 0;
      for (auto element : array) {
        od::value item;
        if (auto error = element.get(item)) {
          return Result<bool>::Error(key + ": invalid array" + pos.Where() + " (" + JsonError(error) + ")");
        }
        Scalar inner;
        const std::string where = key + "[" + std::to_string(index++) + "]";
        Result<bool> present = ReadScalar(item, where, pos, &inner);
        if (!present.ok()) return present;
        if (inner.kind == Scalar::Kind::kArray) inner.kind = Scalar::Kind::kOther;  // no nesting
        out->items.push_back(std::move(inner));
      }
      return true;
    }
    default:
      return true;  // kOther: reported as a wrong type if the key is used
  }
}

// Reads the known keys of one object. At the top level (text_config != nullptr)
// the nested "text_config" object is read into *text_config.
Status ReadLevel(od::object& object, const std::string& prefix, const Position& pos, Level* level, Level* text_config) {
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) {
      return Status::Error(prefix + "invalid JSON object" + pos.Where() + " (" + JsonError(error) + ")");
    }
    std::string_view key_view;
    if (auto error = field.unescaped_key().get(key_view)) {
      return Status::Error(prefix + "invalid key" + pos.Where() + " (" + JsonError(error) + ")");
    }
    const std::string key(key_view);
    od::value& value = field.value();
    if (text_config != nullptr && key == kTextConfig) {
      od::json_type type;
      if (auto error = value.type().get(type)) {
        return Status::Error(key + ": invalid JSON value" + pos.Where() + " (" + JsonError(error) + ")");
      }
      if (type == od::json_type::null) continue;
      od::object nested;
      if (type != od::json_type::object || value.get_object().get(nested) != simdjson::SUCCESS) {
        return Status::Error(key + ": expected an object, found " + std::string(base::JsonTypeName(type)));
      }
      if (Status s = ReadLevel(nested, key + ".", pos, text_config, nullptr); !s.ok()) return s;
      continue;
    }
    if (!IsKnownKey(key)) continue;
    Scalar scalar;
    Result<bool> present = ReadScalar(value, prefix + key, pos, &scalar);
    if (!present.ok()) return present.status();
    if (present.value()) {
      (*level)[key] = std::move(scalar);
    } else {
      level->erase(key);  // a later null overrides an earlier value
    }
  }
  return Status::Ok();
}

// The parsed config: text_config's keys win over the top level's.
struct Config {
  Level top;
  Level text;

  struct Found {
    const Scalar* scalar = nullptr;  // nullptr when absent
    std::string key;                 // as written in errors
  };

  // The first of the names present, text_config first.
  Found Find(std::initializer_list<std::string_view> names) const {
    for (std::string_view name : names) {
      if (auto it = text.find(name); it != text.end()) {
        return {&it->second, std::string(kTextConfig) + "." + std::string(name)};
      }
    }
    for (std::string_view name : names) {
      if (auto it = top.find(name); it != top.end()) return {&it->second, std::string(name)};
    }
    return {nullptr, std::string(*names.begin())};
  }

  // A positive integer that fits in int; nullopt when absent.
  Result<std::optional<int>> PositiveInt(std::initializer_list<std::string_view> names) const {
    using R = Result<std::optional<int>>;
    const Found f = Find(names);
    if (f.scalar == nullptr) return std::optional<int>();
    if (f.scalar->kind != Scalar::Kind::kInt) {
      return R::Error(f.key + ": expected a positive integer, found " + f.scalar->type_name);
    }
    const std::int64_t v = f.scalar->int_value;
    if (v <= 0 || v > std::numeric_limits<int>::max()) {
      return R::Error(f.key + ": expected a positive integer, found " + std::to_string(v));
    }
    return std::optional<int>(static_cast<int>(v));
  }

  Result<int> RequiredPositiveInt(std::initializer_list<std::string_view> names) const {
    Result<std::optional<int>> r = PositiveInt(names);
    if (!r.ok()) return Result<int>::Error(r.error());
    if (!r.value().has_value()) {
      return Result<int>::Error(std::string(*names.begin()) + ": missing (expected a positive integer)");
    }
    return *r.value();
  }
};

Result<Config> ReadConfig(std::string_view json_text) {
  using R = Result<Config>;
  // On Demand reads past the end of its input: it needs SIMDJSON_PADDING spare
  // bytes, which padded_string provides (dependencies.md pitfall 3).
  const simdjson::padded_string padded(json_text);
  od::parser parser;
  od::document doc;
  if (auto error = parser.iterate(padded).get(doc)) {
    return R::Error("not valid JSON: " + JsonError(error));
  }
  od::object object;
  if (auto error = doc.get_object().get(object)) {
    if (error == simdjson::INCORRECT_TYPE) {
      return R::Error("expected a JSON object at the top level");
    }
    return R::Error("not valid JSON: " + JsonError(error));
  }
  const Position pos(&doc, padded.data());
  Config config;
  if (Status s = ReadLevel(object, "", pos, &config.top, &config.text); !s.ok()) {
    return R::Error(s.error());
  }
  if (const std::string where = pos.Where(); !where.empty()) {
    return R::Error("unexpected content after the top-level JSON object" + where);
  }
  return config;
}

// The KV element size: the override, else the dtype, else 2.
Result<int> ElementBytes(const Config& config, const ModelConfigOptions& options) {
  if (options.bytes_per_element.has_value()) {
    if (*options.bytes_per_element <= 0) {
      return Result<int>::Error("bytes per element must be positive, got " +
                                std::to_string(*options.bytes_per_element));
    }
    return *options.bytes_per_element;
  }
  const Config::Found f = config.Find({"torch_dtype", "dtype"});
  if (f.scalar == nullptr) return 2;
  if (f.scalar->kind != Scalar::Kind::kString) {
    return Result<int>::Error(f.key + ": expected a string such as \"bfloat16\", found " + f.scalar->type_name);
  }
  Result<int> bytes = curve::DtypeBytes(f.scalar->string_value);
  if (!bytes.ok()) return Result<int>::Error(f.key + ": " + bytes.error());
  return bytes;
}

// Sets kv_heads, and head_dim unless already set (by FillLatent). For an MLA
// model head_dim only feeds the prefill cost, so it may stay 0 when the config
// has no way to compute it.
Status FillHeads(const Config& config, ModelSpec* spec) {
  Result<std::optional<int>> kv = config.PositiveInt({"num_key_value_heads", "num_kv_heads", "n_head_kv"});
  if (!kv.ok()) return kv.status();
  if (kv.value().has_value()) {
    spec->kv_heads = *kv.value();
  } else {
    const Config::Found mq = config.Find({"multi_query"});
    if (mq.scalar != nullptr && mq.scalar->kind != Scalar::Kind::kBool) {
      return Status::Error(mq.key + ": expected a boolean, found " + mq.scalar->type_name);
    }
    const bool multi_query = mq.scalar != nullptr && mq.scalar->bool_value;
    spec->kv_heads = multi_query ? 1 : spec->query_heads;
  }
  if (spec->head_dim > 0) return Status::Ok();
  Result<std::optional<int>> head_dim = config.PositiveInt({"head_dim"});
  if (!head_dim.ok()) return head_dim.status();
  if (head_dim.value().has_value()) {
    spec->head_dim = *head_dim.value();
    return Status::Ok();
  }
  Result<std::optional<int>> hidden = config.PositiveInt({"hidden_size"});
  if (!hidden.ok()) return hidden.status();
  const bool divisible = hidden.value().has_value() && *hidden.value() % spec->query_heads == 0;
  if (spec->mla && !divisible) return Status::Ok();
  if (!hidden.value().has_value()) {
    return Status::Error(
        "head_dim: missing, and hidden_size is missing too (expected a "
        "positive integer in either)");
  }
  if (!divisible) {
    return Status::Error("head_dim: missing, and hidden_size " + std::to_string(*hidden.value()) +
                         " is not a multiple of num_attention_heads " + std::to_string(spec->query_heads));
  }
  spec->head_dim = *hidden.value() / spec->query_heads;
  return Status::Ok();
}

// Sets the MLA fields when kv_lora_rank is present.
Status FillLatent(const Config& config, ModelSpec* spec) {
  Result<std::optional<int>> rank = config.PositiveInt({"kv_lora_rank"});
  if (!rank.ok()) return rank.status();
  if (!rank.value().has_value()) return Status::Ok();
  spec->mla = true;
  spec->kv_lora_rank = *rank.value();
  Result<int> rope = config.RequiredPositiveInt({"qk_rope_head_dim"});
  if (!rope.ok()) return Status::Error(rope.error() + " (required with kv_lora_rank)");
  spec->qk_rope_head_dim = rope.value();
  Result<std::optional<int>> nope = config.PositiveInt({"qk_nope_head_dim"});
  if (!nope.ok()) return nope.status();
  Result<std::optional<int>> v = config.PositiveInt({"v_head_dim"});
  if (!v.ok()) return v.status();
  if (nope.value().has_value() && v.value().has_value()) {
    spec->head_dim = (*nope.value() + spec->qk_rope_head_dim + *v.value()) / 2;
  }
  return Status::Ok();
}

// The kind of each layer of a hybrid model, from the keys the model families
// use (Hugging Face transformers' configuration classes), the first present:
//   layer_types: "full_attention", "sliding_attention" (gpt-oss, Gemma 3, Mistral),
//     "chunked_attention" (Llama 4), "linear_attention" (Qwen3-Next); "attention"
//     and "mamba" (Granite 4.0's GraniteMoeHybrid);
//   hybrid_override_pattern (Nemotron-H): one letter per layer, '*' attention,
//     'M' Mamba-2, '-' MLP and 'E' mixture of experts (no cache);
//   layers_block_type (newer Nemotron-H): "attention", "mamba", "mlp", "moe";
//   attn_layer_indices (Bamba): those layers attention, the others Mamba;
//   attn_layer_period P and attn_layer_offset O (Jamba): layer i attention when
//     i % P == O, Mamba otherwise;
//   sliding_window_pattern N (Gemma 3): layer i full when (i + 1) % N == 0,
//     sliding otherwise;
//   attention_chunk_size (Llama 4): layer i full where no_rope_layers[i] is
//     0 (the NoPE layers), chunked local elsewhere; no no_rope_layers: every 4th
//     layer full (transformers' no_rope_layer_interval default);
//   full_attention_interval N (Qwen3-Next): layer i full when (i + 1) % N == 0,
//     linear attention otherwise.
// Windows: sliding_window (tokens), attention_chunk_size (tokens). A linear
// attention layer (gated DeltaNet) keeps a conv state of (linear_conv_kernel_dim
// - 1) * (2 * linear_num_key_heads * linear_key_head_dim + linear_num_value_heads
// * linear_value_head_dim) elements and a recurrent state of
// linear_num_value_heads * linear_key_head_dim * linear_value_head_dim (vLLM's
// mamba_utils gated_delta_net_state_shape, main branch of 2026); a Mamba layer's
// state is in MambaGroup. Layers with no cache (Nemotron-H's MLP and MoE layers)
// belong to no group and are not counted in the model's layers. A model whose
// layers are all full attention gets no groups (exactly the dense path). Not read
// (their layers count as full attention, as before): a bare sliding_window
// (Mistral 7B v0.1, Qwen2's unused one), Gemma 2's implicit alternation, and
// models whose layers run attention and Mamba side by side (Falcon-H1).
enum class LayerKind { kFull, kSliding, kChunked, kLinear, kMamba, kNone };

Result<std::vector<LayerKind>> LayerKinds(const Config& config, int layers, bool* hybrid) {
  using R = Result<std::vector<LayerKind>>;
  *hybrid = true;
  std::vector<LayerKind> kinds(static_cast<std::size_t>(layers), LayerKind::kFull);
  const Config::Found types = config.Find({"layer_types"});
  if (types.scalar != nullptr) {
    if (types.scalar->kind != Scalar::Kind::kArray) {
      return R::Error(types.key + ": expected an array of layer type names, found " + types.scalar->type_name);
    }
    if (types.scalar->items.size() != kinds.size()) {
      return R::Error(types.key + ": expected " + std::to_string(layers) + " entries (num_hidden_layers), found " +
                      std::to_string(types.scalar->items.size()));
    }
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      const Scalar& item = types.scalar->items[i];
      const std::string where = types.key + "[" + std::to_string(i) + "]";
      if (item.kind != Scalar::Kind::kString) return R::Error(where + ": expected a string, found " + item.type_name);
      const std::string& t = item.string_value;
      if (t == "full_attention") {
        kinds[i] = LayerKind::kFull;
      } else if (t == "sliding_attention") {
        kinds[i] = LayerKind::kSliding;
      } else if (t == "chunked_attention") {
        kinds[i] = LayerKind::kChunked;
      } else if (t == "linear_attention") {
        kinds[i] = LayerKind::kLinear;
      } else if (t == "attention") {
        kinds[i] = LayerKind::kFull;
      } else if (t == "mamba") {
        kinds[i] = LayerKind::kMamba;
      } else {
        return R::Error(where + ": unknown layer type '" + t +
                        "' (expected full_attention, sliding_attention, chunked_attention, linear_attention, "
                        "attention or mamba)");
      }
    }
    return kinds;
  }
  // Falcon-H1 runs attention and Mamba side by side in every layer: not modelled
  // (every layer counts as full attention, as before).
  if (const Config::Found type = config.Find({kModelType}); type.scalar != nullptr &&
                                                            type.scalar->kind == Scalar::Kind::kString &&
                                                            type.scalar->string_value == "falcon_h1") {
    *hybrid = false;
    return kinds;
  }
  if (const Config::Found pattern = config.Find({"hybrid_override_pattern"}); pattern.scalar != nullptr) {
    if (pattern.scalar->kind != Scalar::Kind::kString) {
      return R::Error(pattern.key + ": expected a string of layer letters, found " + pattern.scalar->type_name);
    }
    const std::string& letters = pattern.scalar->string_value;
    if (letters.size() != kinds.size()) {
      return R::Error(pattern.key + ": expected " + std::to_string(layers) + " letters (num_hidden_layers), found " +
                      std::to_string(letters.size()));
    }
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      switch (letters[i]) {
        case '*':
          kinds[i] = LayerKind::kFull;
          break;
        case 'M':
          kinds[i] = LayerKind::kMamba;
          break;
        case '-':
        case 'E':
          kinds[i] = LayerKind::kNone;
          break;
        default:
          return R::Error(pattern.key + "[" + std::to_string(i) + "]: unknown layer letter '" +
                          std::string(1, letters[i]) + "' (expected *, M, - or E)");
      }
    }
    return kinds;
  }
  if (const Config::Found types = config.Find({"layers_block_type"}); types.scalar != nullptr) {
    if (types.scalar->kind != Scalar::Kind::kArray || types.scalar->items.size() != kinds.size()) {
      return R::Error(types.key + ": expected an array of " + std::to_string(layers) +
                      " block type names (num_hidden_layers)");
    }
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      const Scalar& item = types.scalar->items[i];
      const std::string where = types.key + "[" + std::to_string(i) + "]";
      if (item.kind != Scalar::Kind::kString) return R::Error(where + ": expected a string, found " + item.type_name);
      const std::string& t = item.string_value;
      if (t == "attention") {
        kinds[i] = LayerKind::kFull;
      } else if (t == "mamba") {
        kinds[i] = LayerKind::kMamba;
      } else if (t == "mlp" || t == "moe") {
        kinds[i] = LayerKind::kNone;
      } else {
        return R::Error(where + ": unknown block type '" + t + "' (expected attention, mamba, mlp or moe)");
      }
    }
    return kinds;
  }
  if (const Config::Found indices = config.Find({"attn_layer_indices"}); indices.scalar != nullptr) {
    if (indices.scalar->kind != Scalar::Kind::kArray) {
      return R::Error(indices.key + ": expected an array of layer indices, found " + indices.scalar->type_name);
    }
    std::fill(kinds.begin(), kinds.end(), LayerKind::kMamba);
    for (std::size_t i = 0; i < indices.scalar->items.size(); ++i) {
      const Scalar& item = indices.scalar->items[i];
      if (item.kind != Scalar::Kind::kInt || item.int_value < 0 || item.int_value >= layers) {
        return R::Error(indices.key + "[" + std::to_string(i) + "]: expected a layer index from 0 to " +
                        std::to_string(layers - 1) + ", found " +
                        (item.kind == Scalar::Kind::kInt ? std::to_string(item.int_value) : item.type_name));
      }
      kinds[static_cast<std::size_t>(item.int_value)] = LayerKind::kFull;
    }
    return kinds;
  }
  Result<std::optional<int>> period = config.PositiveInt({"attn_layer_period"});
  if (!period.ok()) return R::Error(period.error());
  if (period.value()) {
    const Config::Found offset = config.Find({"attn_layer_offset"});
    if (offset.scalar == nullptr || offset.scalar->kind != Scalar::Kind::kInt || offset.scalar->int_value < 0 ||
        offset.scalar->int_value >= *period.value()) {
      return R::Error(offset.key + ": expected an integer from 0 to attn_layer_period - 1 (" +
                      std::to_string(*period.value() - 1) + "), found " +
                      (offset.scalar == nullptr                    ? std::string("nothing")
                       : offset.scalar->kind == Scalar::Kind::kInt ? std::to_string(offset.scalar->int_value)
                                                                   : offset.scalar->type_name));
    }
    for (int i = 0; i < layers; ++i) {
      kinds[static_cast<std::size_t>(i)] =
          i % *period.value() == offset.scalar->int_value ? LayerKind::kFull : LayerKind::kMamba;
    }
    return kinds;
  }
  Result<std::optional<int>> pattern = config.PositiveInt({"sliding_window_pattern", "_sliding_window_pattern"});
  if (!pattern.ok()) return R::Error(pattern.error());
  if (pattern.value()) {
    for (int i = 0; i < layers; ++i) {
      kinds[static_cast<std::size_t>(i)] = (i + 1) % *pattern.value() == 0 ? LayerKind::kFull : LayerKind::kSliding;
    }
    return kinds;
  }
  Result<std::optional<int>> chunk = config.PositiveInt({"attention_chunk_size"});
  if (!chunk.ok()) return R::Error(chunk.error());
  if (chunk.value()) {
    const Config::Found nope = config.Find({"no_rope_layers"});
    if (nope.scalar == nullptr) {
      for (int i = 0; i < layers; ++i) {
        kinds[static_cast<std::size_t>(i)] = (i + 1) % 4 == 0 ? LayerKind::kFull : LayerKind::kChunked;
      }
      return kinds;
    }
    if (nope.scalar->kind != Scalar::Kind::kArray || nope.scalar->items.size() != kinds.size()) {
      return R::Error(nope.key + ": expected an array of " + std::to_string(layers) + " integers (0 or 1)");
    }
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      const Scalar& item = nope.scalar->items[i];
      if (item.kind != Scalar::Kind::kInt && item.kind != Scalar::Kind::kBool) {
        return R::Error(nope.key + "[" + std::to_string(i) + "]: expected 0 or 1, found " + item.type_name);
      }
      const bool rope = item.kind == Scalar::Kind::kInt ? item.int_value != 0 : item.bool_value;
      kinds[i] = rope ? LayerKind::kChunked : LayerKind::kFull;
    }
    return kinds;
  }
  Result<std::optional<int>> interval = config.PositiveInt({"full_attention_interval"});
  if (!interval.ok()) return R::Error(interval.error());
  if (interval.value()) {
    for (int i = 0; i < layers; ++i) {
      kinds[static_cast<std::size_t>(i)] = (i + 1) % *interval.value() == 0 ? LayerKind::kFull : LayerKind::kLinear;
    }
    return kinds;
  }
  *hybrid = false;
  return kinds;
}

// The state of one Mamba layer for one sequence (vLLM's
// MambaStateShapeCalculator, vllm/model_executor/layers/mamba/mamba_utils.py,
// main branch of 2026), by the keys each family's config.json uses:
//   Mamba-2 with Nemotron-H's keys (mamba_num_heads H, mamba_head_dim D,
//     ssm_state_size N, n_groups G, conv_kernel K; intermediate I = H * D, as
//     vLLM's nemotron_h.py), or Bamba's and Granite 4.0's (mamba_n_heads,
//     mamba_d_head, mamba_d_state, mamba_n_groups, mamba_d_conv; I = mamba_expand *
//     hidden_size, as bamba.py): a conv state of (K - 1) * (I + 2 * G * N) and an
//     SSM state of H * D * N elements, split over the H heads, the G groups'
//     2 * N conv channels each replicated when tensor parallelism does not
//     divide G (curve::KvGroupSpec::state_groups);
//   Mamba-1 (Jamba: mamba_d_state N, mamba_d_conv K, mamba_expand E, hidden_size;
//     I = E * hidden_size): a conv state of (K - 1) * I and an SSM state of I * N
//     elements, split over the I channels.
Status MambaGroup(const Config& config, curve::KvGroupSpec* g) {
  g->kind = curve::KvGroupKind::kLinear;
  auto need = [&](std::initializer_list<std::string_view> names, std::uint64_t* out) {
    Result<int> v = config.RequiredPositiveInt(names);
    if (!v.ok()) return Status::Error(v.error() + " (required by Mamba layers)");
    *out = static_cast<std::uint64_t>(v.value());
    return Status::Ok();
  };
  const bool nemotron = config.Find({"mamba_num_heads"}).scalar != nullptr;
  const bool bamba = config.Find({"mamba_n_heads"}).scalar != nullptr;
  std::uint64_t heads = 0, head_dim = 0, state = 0, groups = 0, kernel = 0, intermediate = 0;
  if (nemotron || bamba) {
    for (Status st : {need({nemotron ? "mamba_num_heads" : "mamba_n_heads"}, &heads),
                      need({nemotron ? "mamba_head_dim" : "mamba_d_head"}, &head_dim),
                      need({nemotron ? "ssm_state_size" : "mamba_d_state"}, &state),
                      need({nemotron ? "n_groups" : "mamba_n_groups"}, &groups),
                      need({nemotron ? "conv_kernel" : "mamba_d_conv"}, &kernel)}) {
      if (!st.ok()) return st;
    }
    intermediate = heads * head_dim;
    if (bamba) {
      std::uint64_t expand = 0, hidden = 0;
      for (Status st : {need({"mamba_expand"}, &expand), need({"hidden_size"}, &hidden)}) {
        if (!st.ok()) return st;
      }
      intermediate = expand * hidden;
    }
    g->state_elements = (kernel - 1) * (intermediate + 2 * groups * state) + heads * head_dim * state;
    g->state_split = static_cast<int>(heads);
    g->state_groups = static_cast<int>(groups);
    g->state_group_elements = (kernel - 1) * 2 * state;
    return Status::Ok();
  }
  std::uint64_t expand = 0, hidden = 0;
  for (Status st : {need({"mamba_d_state"}, &state), need({"mamba_d_conv"}, &kernel), need({"mamba_expand"}, &expand),
                    need({"hidden_size"}, &hidden)}) {
    if (!st.ok()) return st;
  }
  intermediate = expand * hidden;
  if (intermediate > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    return Status::Error("mamba_expand * hidden_size: " + std::to_string(intermediate) + " is too large");
  }
  g->state_elements = (kernel - 1) * intermediate + intermediate * state;
  g->state_split = static_cast<int>(intermediate);
  return Status::Ok();
}

// The KV cache groups of a hybrid model (spec->groups), one per layer kind in the
// order of its first layer; none when every layer is full attention.
Status FillGroups(const Config& config, ModelSpec* spec) {
  bool hybrid = false;
  Result<std::vector<LayerKind>> kinds = LayerKinds(config, spec->layers, &hybrid);
  if (!kinds.ok()) return kinds.status();
  if (!hybrid) return Status::Ok();
  std::vector<LayerKind> order;
  std::map<LayerKind, int> count;
  for (LayerKind k : kinds.value()) {
    if (count[k]++ == 0 && k != LayerKind::kNone) order.push_back(k);
  }
  if (order.empty()) return Status::Error("the model's layers hold no KV cache or state (every layer is MLP or MoE)");
  if (order.size() == 1 && order[0] == LayerKind::kFull) {
    spec->layers = count[LayerKind::kFull];
    return Status::Ok();
  }
  spec->layers -= count[LayerKind::kNone];
  for (LayerKind k : order) {
    curve::KvGroupSpec g;
    g.layers = count[k];
    // The window (chunk) in tokens of a sliding (chunked) group.
    auto window = [&](std::string_view key, const char* layers) {
      Result<int> w = config.RequiredPositiveInt({key});
      if (!w.ok()) return Status::Error(w.error() + " (required by " + layers + " layers)");
      g.window_tokens = w.value();
      return Status::Ok();
    };
    switch (k) {
      case LayerKind::kFull:
        g.kind = curve::KvGroupKind::kFull;
        break;
      case LayerKind::kSliding:
        g.kind = curve::KvGroupKind::kSlidingWindow;
        if (Status st = window("sliding_window", "sliding-attention"); !st.ok()) return st;
        break;
      case LayerKind::kChunked:
        g.kind = curve::KvGroupKind::kChunkedLocal;
        if (Status st = window("attention_chunk_size", "chunked-attention"); !st.ok()) return st;
        break;
      case LayerKind::kLinear: {
        g.kind = curve::KvGroupKind::kLinear;
        int dims[5] = {};
        const char* names[5] = {"linear_conv_kernel_dim", "linear_num_key_heads", "linear_key_head_dim",
                                "linear_num_value_heads", "linear_value_head_dim"};
        for (int i = 0; i < 5; ++i) {
          Result<int> v = config.RequiredPositiveInt({names[i]});
          if (!v.ok()) return Status::Error(v.error() + " (required by linear-attention layers)");
          dims[i] = v.value();
        }
        const std::uint64_t kernel = static_cast<std::uint64_t>(dims[0]);
        const std::uint64_t nk = static_cast<std::uint64_t>(dims[1]), dk = static_cast<std::uint64_t>(dims[2]);
        const std::uint64_t nv = static_cast<std::uint64_t>(dims[3]), dv = static_cast<std::uint64_t>(dims[4]);
        g.state_elements = (kernel - 1) * (2 * nk * dk + nv * dv) + nv * dk * dv;
        g.state_split = std::gcd(dims[1], dims[3]);
        break;
      }
      case LayerKind::kMamba:
        if (Status st = MambaGroup(config, &g); !st.ok()) return st;
        break;
      case LayerKind::kNone:
        break;
    }
    spec->groups.push_back(g);
  }
  return Status::Ok();
}

// The model's own name: the top level's keys first (text_config's model_type
// names only the language part, e.g. "llama4_text").
Result<std::string> ModelName(const Config& config, const ModelConfigOptions& options) {
  if (!options.name.empty()) return options.name;
  for (const Level* level : {&config.top, &config.text}) {
    for (std::string_view key : {std::string_view("_name_or_path"), kModelType}) {
      auto it = level->find(key);
      if (it == level->end()) continue;
      if (it->second.kind != Scalar::Kind::kString) {
        const std::string where = level == &config.text ? std::string(kTextConfig) + "." : "";
        return Result<std::string>::Error(where + std::string(key) + ": expected a string, found " +
                                          it->second.type_name);
      }
      if (!it->second.string_value.empty()) return it->second.string_value;
    }
  }
  return std::string();
}

}  // namespace

base::Result<ModelSpec> ParseModelConfig(std::string_view json_text, const ModelConfigOptions& options) {
  using R = Result<ModelSpec>;
  Result<Config> parsed = ReadConfig(json_text);
  if (!parsed.ok()) return R::Error(parsed.error());
  const Config& config = parsed.value();

  ModelSpec spec;
  Result<int> layers = config.RequiredPositiveInt({"num_hidden_layers", "n_layer"});
  if (!layers.ok()) return R::Error(layers.error());
  spec.layers = layers.value();
  Result<int> heads = config.RequiredPositiveInt({"num_attention_heads", "n_head"});
  if (!heads.ok()) return R::Error(heads.error());
  spec.query_heads = heads.value();
  if (Status s = FillLatent(config, &spec); !s.ok()) return R::Error(s.error());
  if (Status s = FillHeads(config, &spec); !s.ok()) return R::Error(s.error());
  Result<int> element = ElementBytes(config, options);
  if (!element.ok()) return R::Error(element.error());
  spec.bytes_per_element = element.value();
  if (Status s = FillGroups(config, &spec); !s.ok()) return R::Error(s.error());
  Result<std::string> name = ModelName(config, options);
  if (!name.ok()) return R::Error(name.error());
  spec.name = name.value();
  spec.parameters = options.parameters;
  if (Status s = curve::ValidateModelSpec(spec); !s.ok()) return R::Error(s.error());
  return spec;
}

base::Result<ModelSpec> ReadModelConfigFile(const std::string& path, const ModelConfigOptions& options) {
  using R = Result<ModelSpec>;
  std::ifstream in(path, std::ios::binary);
  if (!in) return R::Error(path + ": cannot open the file (" + std::strerror(errno) + ")");
  std::string text;
  if (std::string problem = base::ReadBoundedText(path, in, &text); !problem.empty()) {
    return R::Error(path + ": " + problem);
  }
  R spec = ParseModelConfig(text, options);
  if (!spec.ok()) return R::Error(path + ": " + spec.error());
  if (spec.value().name.empty()) spec.value().name = path;
  return spec;
}

}  // namespace kvwatch::config
