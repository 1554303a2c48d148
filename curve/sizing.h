// Sizing: a model's KV-cache geometry, pages to bytes, a stated capacity plan, and
// the depth-weighted prefill cost of a page. Normative text:
// docs/semantics.md sections 3 ("Depth weighting") and 4.
//
// Bytes per token per rank (section 4):
//   standard attention: B = 2 (K and V) * layers * kv_heads * head_dim * bytes_per_element
//                           / min(tensor_parallel, kv_heads).
//     The KV heads are split over the tensor-parallel ranks. When tp <= kv_heads,
//     tp must divide kv_heads and each rank holds kv_heads / tp heads. When
//     tp > kv_heads, kv_heads must divide tp: each head is replicated on
//     tp / kv_heads ranks and each rank holds exactly one head. Any other tp is an
//     error (a rank cannot hold a fraction of a head).
//   latent attention (MLA): B = (kv_lora_rank + qk_rope_head_dim) * layers *
//     bytes_per_element, the same on every rank (the latent is replicated, not
//     split), for any tp >= 1.
// Page bytes = P * B; payload of C pages = C * P * B (P = tokens per page).
//
// Capacity plan rows, each named and stated:
//   payload  = C * P * B
//   metadata = C * metadata_bytes_per_page (Default 0: block tables, transfer
//              buffers and allocator overhead are not counted unless configured)
//   reserve  = reserve_fraction * payload, rounded to the nearest byte (Default
//              fraction 0). The reserve is headroom on top of the KV payload
//              (metadata is not scaled): with a 20% reserve the total is 1.2 times
//              the payload, e.g. 100,000 pages * 16 tokens * 60 KiB = 91.6 GiB of
//              payload and 109.9 GiB in all.
//   total    = payload + metadata + reserve.
//
// Depth-weighted prefill cost (section 3): recomputing the token at position t
// (0-based, in the request) costs a + b * t FLOPs, with a = 2 * parameters (the
// dense matmuls over the active parameters) and b = 4 * layers * query_heads *
// head_dim (QK^T and AV against each earlier token). Page i of P tokens covers
// positions [i*P, (i+1)*P), so
//   cost(i) = P*a + b*P*(P-1)/2 + b*P*P*i,
// and N pages whose indices sum to I cost N*(P*a + b*P*(P-1)/2) + b*P*P*I.
//
// Thread safety: pure functions and plain values; the preset table is immutable.
#ifndef KVWATCH_CURVE_SIZING_H_
#define KVWATCH_CURVE_SIZING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kvwatch::curve {

// The kinds of KV cache group of a hybrid model, as vLLM's hybrid KV cache manager
// keeps them (vllm/v1/core/single_type_kv_cache_manager.py, main branch of
// 2026; docs.vllm.ai design/hybrid_kv_cache_manager): the retention rule of each
// is in curve/hybrid_engine.h and docs/semantics.md section 8.
enum class KvGroupKind {
  kFull,           // every token of the prefix (full attention, MLA)
  kSlidingWindow,  // the last window_tokens tokens before the position
  kChunkedLocal,   // the tokens of the current chunk of window_tokens tokens
  kLinear,         // one recurrent state per cached prefix point (Mamba, linear attention)
};

// Name used in tables and JSON: "full", "sliding_window", "chunked_local", "linear".
const char* KvGroupKindName(KvGroupKind kind);

// One KV cache group: the layers that share a retention rule. Attention groups
// (full, sliding window, chunked local) store K and V of the model's kv_heads of
// head_dim per layer (or MLA's latent when mla is set), like every layer of a
// dense model. A linear group stores, per layer and per cached prefix point, a
// state of state_elements elements (Mamba: conv + SSM state; gated DeltaNet: conv
// + recurrent state), split over state_split ways of tensor parallelism.
struct KvGroupSpec {
  KvGroupKind kind = KvGroupKind::kFull;
  int layers = 0;
  // Sliding window W or chunk size C in tokens; 0 for full and linear groups.
  int window_tokens = 0;
  // Linear groups only: elements of one layer's state for one sequence (all
  // ranks), and the heads (Mamba-1: channels) they split over (tensor parallelism
  // must divide it).
  std::uint64_t state_elements = 0;
  int state_split = 1;
  // Mamba-2 only: its n_groups groups of B and C conv channels, state_group_elements
  // each per layer (part of state_elements). Tensor parallelism splits them when it
  // divides state_groups; otherwise vLLM requires one group and gives every rank a
  // copy of it (MambaMixer2 and MambaStateShapeCalculator.extra_groups_for_head_shards,
  // vLLM main of 2026).
  int state_groups = 0;
  std::uint64_t state_group_elements = 0;

  bool operator==(const KvGroupSpec&) const = default;
};

struct ModelSpec {
  std::string name;
  // Attention layers that hold a KV cache (num_hidden_layers for dense models).
  int layers = 0;
  // KV heads (num_key_value_heads): grouped-query and multi-query attention have
  // fewer than query_heads. Not used for the bytes of an MLA model.
  int kv_heads = 0;
  // Dimension of one head. For MLA models it is used only by the prefill cost and
  // is the mean of the query-key and value head dimensions,
  // (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) / 2, so that 4 * head_dim =
  // 2 * d_qk + 2 * d_v FLOPs per head per earlier token.
  int head_dim = 0;
  // Bytes of one cached element: 2 for fp16/bf16 (Default), 1 for fp8, 4 for fp32.
  int bytes_per_element = 2;

  // Multi-head latent attention (DeepSeek-V2/V3): the cache holds a compressed
  // latent of kv_lora_rank plus a decoupled RoPE key of qk_rope_head_dim per layer.
  bool mla = false;
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;

  // For the depth-weighted prefill cost only. parameters: active parameters per
  // token (all of them for a dense model, the routed subset for a mixture of
  // experts); 0 when unknown. query_heads: num_attention_heads.
  double parameters = 0;
  int query_heads = 0;
  // Every parameter (a mixture of experts' whole set: the weights a decode step
  // reads), for the simulator's time model and weight memory (sim/time_model.h);
  // 0: the same as parameters (a dense model).
  double total_parameters = 0;

  // KV cache groups of a hybrid model, in the order of their first layer (the
  // order vLLM frees a finished request's blocks in). Empty: every one of the
  // `layers` layers is full attention, exactly as for a dense model. When set,
  // `layers` stays num_hidden_layers (what a full-attention count would size)
  // and the groups' layers add up to it.
  std::vector<KvGroupSpec> groups;
};

// Ok when the fields that the bytes need are set: layers, and kv_heads and
// head_dim (standard) or kv_lora_rank and qk_rope_head_dim (MLA), all positive,
// and bytes_per_element positive.
base::Status ValidateModelSpec(const ModelSpec& spec);

// B of the whole model (every KV head, one copy), before any tensor-parallel split.
base::Result<std::uint64_t> BytesPerToken(const ModelSpec& spec);

// B on one GPU rank at tensor_parallel ranks (see the file comment). Errors: an
// invalid spec, tensor_parallel < 1, or a tensor_parallel that neither divides nor
// is a multiple of kv_heads (the message names both numbers).
base::Result<std::uint64_t> BytesPerTokenPerRank(const ModelSpec& spec, int tensor_parallel = 1);

// P * B, and C * P * B. Errors on 64-bit overflow.
base::Result<std::uint64_t> PageBytes(std::uint64_t page_tokens, std::uint64_t bytes_per_token);
base::Result<std::uint64_t> PayloadBytes(std::uint64_t pages, std::uint64_t page_tokens, std::uint64_t bytes_per_token);

// The per-rank sizing of one KV cache group at tensor_parallel ranks and
// page_tokens tokens per page.
struct KvGroupSizing {
  KvGroupSpec spec;
  // Attention groups: B of the group's layers on one rank (bytes per token), 0
  // for a linear group.
  std::uint64_t bytes_per_token = 0;
  // Linear groups: bytes of one cached state of all the group's layers on one
  // rank; 0 for attention groups.
  std::uint64_t state_bytes = 0;
  // Bytes one page position of the group holds: page_tokens * bytes_per_token,
  // or state_bytes (a linear group caches one state per page boundary).
  std::uint64_t page_bytes = 0;
};

// The groups of a hybrid spec sized per rank. Errors: a spec with no groups, an
// invalid spec, groups whose layers do not add up to spec.layers, a sliding or
// chunked group without a window, a linear group without state, or a
// tensor_parallel that does not split the KV heads or the state evenly.
base::Result<std::vector<KvGroupSizing>> SizeKvGroups(const ModelSpec& spec, int tensor_parallel,
                                                      std::uint64_t page_tokens);

// Bytes of one element of a dtype name: float16/fp16/half/bfloat16/bf16 -> 2,
// float32/fp32/float -> 4, float8*/fp8* -> 1 (case-insensitive). Error otherwise.
base::Result<int> DtypeBytes(std::string_view dtype);

struct CapacityPlanOptions {
  // Metadata per page (block tables, transfer buffers, ...). Default 0.
  std::uint64_t metadata_bytes_per_page = 0;
  // Reserve as a fraction of the payload, in [0, 1] (0.2 = 20%). Default 0.
  double reserve_fraction = 0.0;
};

struct CapacityPlanRow {
  std::string name;  // "payload", "metadata", "reserve", "total"
  std::uint64_t bytes = 0;
  std::string formula;  // how it was computed, with the numbers
};

struct CapacityPlan {
  std::uint64_t pages = 0;
  std::uint64_t page_tokens = 0;
  std::uint64_t bytes_per_token = 0;
  std::uint64_t page_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t metadata_bytes = 0;
  std::uint64_t reserve_bytes = 0;
  std::uint64_t total_bytes = 0;
  double reserve_fraction = 0;
  // payload, metadata, reserve, total: in that order, always all four.
  std::vector<CapacityPlanRow> rows;
};

// The plan for `pages` pages of `page_tokens` tokens at `bytes_per_token`.
// Errors: page_tokens or bytes_per_token 0, a reserve fraction outside [0, 1] or
// not finite, or a total beyond 64 bits.
base::Result<CapacityPlan> PlanCapacity(std::uint64_t pages, std::uint64_t page_tokens, std::uint64_t bytes_per_token,
                                        const CapacityPlanOptions& options = {});

// The coefficients of the per-token prefill cost a + b * t (FLOPs).
struct PrefillCost {
  double a = 0;  // 2 * parameters
  double b = 0;  // 4 * layers * query_heads * head_dim

  // Cost of page i (0-based) of page_tokens tokens: sum over t in [i*P, (i+1)*P).
  double PageFlops(std::uint64_t page_index, std::uint64_t page_tokens) const;
  // Cost of page_count pages whose indices sum to page_index_sum (closed form).
  double PagesFlops(std::uint64_t page_count, std::uint64_t page_index_sum, std::uint64_t page_tokens) const;
};

// a and b of the spec. Errors when parameters, layers, query_heads or head_dim is
// not positive (the message names the missing figure).
base::Result<PrefillCost> PrefillCostForModel(const ModelSpec& spec);

// Conveniences over PrefillCost{2 * parameters, 4 * layers * query_heads * head_dim};
// they do not validate (unknown figures count as 0).
double PageCostFlops(std::uint64_t page_index, std::uint64_t page_tokens, const ModelSpec& spec);
double PagesCostFlops(std::uint64_t page_count, std::uint64_t page_index_sum, std::uint64_t page_tokens,
                      const ModelSpec& spec);

// Built-in presets from the models' published config.json (layers, heads, head
// dimension) and model cards (parameter counts), FP16/BF16 (2 bytes; change
// bytes_per_element for another KV dtype). Lookup is case-insensitive and accepts
// the aliases listed by ModelPresetNames(true); the returned spec's name is the
// canonical one. Error: unknown name (the message lists the known names).
base::Result<ModelSpec> LookupModelPreset(std::string_view name);

// Canonical preset names in table order; with include_aliases, each canonical name
// is followed by its aliases.
std::vector<std::string> ModelPresetNames(bool include_aliases = false);

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_SIZING_H_
