// Typed KV-cache events as the engines publish them over ZMQ (vLLM
// vllm/distributed/kv_events.py, BlockStored's fields up to v0.26.0; SGLang
// python/sglang/srt/disaggregation/kv_events.py; TensorRT-LLM
// tensorrt_llm/_torch/pyexecutor/kv_cache_events.py).
//
// These are plain value types filled by the decoder in kv_event_decoder.h and
// read by the collectors. Block hashes are normalised to uint64 whatever their
// wire form (unsigned int, SGLang's signed int64, or vLLM's raw bytes). Optional
// fields are std::nullopt when the event did not carry them or carried None.
//
// Thread safety: plain data; the usual rules for concurrent access to values.
#ifndef KVWATCH_COLLECTORS_KV_EVENT_H_
#define KVWATCH_COLLECTORS_KV_EVENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvwatch::collectors {

// A chain of consecutive full blocks newly cached (or, in vLLM's full report
// mode, reused). block_hashes[0]'s predecessor is parent_block_hash.
struct BlockStored {
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::uint64_t> parent_block_hash;  // nullopt: root of a chain
  // Concatenated tokens of all blocks; empty for offload placeholders. String
  // tokens (TensorRT-LLM) are parsed as decimal, or replaced by a 64-bit digest
  // of the string when they are not numbers.
  std::vector<std::int64_t> token_ids;
  std::int64_t block_size = 0;  // 0 for offload placeholders or when absent
  std::optional<std::int64_t> lora_id;
  std::optional<std::string> medium;  // "GPU", "CPU", "CPU_PINNED", "STORAGE", ...
  std::optional<std::string> lora_name;
  // extra_keys (LoRA name, multimodal ids, cache salt, prompt-embeds digest),
  // one entry per block. has_extra_keys is true when the field was present and
  // not None. extra_key_digests has one entry per wire entry: 0 for a None
  // entry, otherwise a non-zero stable 64-bit digest of the entry's value (see
  // DigestOfExtraKey in kv_event_decoder.h), so scope can be folded into ids.
  // extra_keys_msgpack holds the field's msgpack bytes as received, so the
  // encoder can reproduce it; it is ignored when has_extra_keys is false.
  bool has_extra_keys = false;
  std::vector<std::uint64_t> extra_key_digests;
  std::string extra_keys_msgpack;
  std::optional<std::int64_t> group_idx;
  std::optional<std::string> kv_cache_spec_kind;  // e.g. "full_attention"
  std::optional<std::int64_t> kv_cache_spec_sliding_window;
  std::optional<std::string> locality;   // "LOCAL" / "REMOTE"
  std::optional<std::string> ownership;  // fork-only field (UNCONFIRMED upstream)
  std::optional<std::string> session_id;
  // SGLang: a BlockStored field in the map encoding, or metadata.cache_salt in
  // the older BlockStoredWithMetadata positional encoding.
  std::optional<std::string> cache_salt;
  // TensorRT-LLM native "stored" events: cache level (0 primary/GPU,
  // 1 secondary/host; medium is set from it), priority, attention window size.
  std::optional<std::int64_t> cache_level;
  std::optional<std::int64_t> priority;
  std::optional<std::int64_t> window_size;

  // Empties every field but keeps the vectors' capacity.
  void Clear();
  bool operator==(const BlockStored&) const = default;
};

// Blocks evicted (one hash per physical copy; consumers refcount).
struct BlockRemoved {
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::string> medium;
  std::optional<std::int64_t> group_idx;
  std::optional<std::string> locality;
  std::optional<std::string> ownership;
  std::optional<std::int64_t> window_size;  // TensorRT-LLM native events

  void Clear();
  bool operator==(const BlockRemoved&) const = default;
};

// The whole prefix cache was reset (not an eviction).
struct AllBlocksCleared {
  bool operator==(const AllBlocksCleared&) const = default;
};

// TensorRT-LLM "created": the cache was created with these pool sizes.
struct CacheCreated {
  std::vector<std::int64_t> num_blocks_per_cache_level;
  bool operator==(const CacheCreated&) const = default;
};

// TensorRT-LLM "updated": a block moved between cache levels or changed
// priority. Each old/new value is nullopt when absent or None.
struct BlockUpdated {
  std::uint64_t block_hash = 0;
  std::optional<std::int64_t> cache_level_old;
  std::optional<std::int64_t> cache_level_new;
  std::optional<std::int64_t> priority_old;
  std::optional<std::int64_t> priority_new;
  std::optional<std::int64_t> window_size;
  bool operator==(const BlockUpdated&) const = default;
};

// An event whose tag this decoder does not know; callers count these.
struct UnknownKvEvent {
  std::string tag;
  bool operator==(const UnknownKvEvent&) const = default;
};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared, CacheCreated, BlockUpdated, UnknownKvEvent>;

enum class KvEventKind {
  kBlockStored,
  kBlockRemoved,
  kAllBlocksCleared,
  kCacheCreated,
  kBlockUpdated,
  kUnknown,
};

inline KvEventKind KindOf(const KvEvent& event) { return static_cast<KvEventKind>(event.index()); }

// "BlockStored", "BlockRemoved", "AllBlocksCleared", "created", "updated", "unknown".
std::string_view KvEventKindName(KvEventKind kind);

// One published message: all events of one scheduler step.
struct KvEventBatch {
  double ts = 0.0;                      // wall-clock epoch seconds
  std::optional<std::int64_t> dp_rank;  // data_parallel_rank / attn_dp_rank
  std::vector<KvEvent> events;
  bool operator==(const KvEventBatch&) const = default;
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_KV_EVENT_H_
