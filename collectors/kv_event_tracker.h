// KvEventTracker: the engine's KV-cache state and page-reference stream rebuilt
// from decoded KV events (vLLM, SGLang, TensorRT-LLM; when vLLM emits them:
// vllm/v1/core/block_pool.py, BlockStored for newly cached full blocks only unless
// a request sets kv_cache_report_mode=full (PR #45261), a BlockRemoved per
// physical copy evicted (PR #48933's description)). Pure: no
// sockets, no clocks. KvEventsCollector (kv_events_collector.h) feeds it from
// ZeroMQ; tests and the benchmark feed it directly.
//
// Publishers. Every event source with its own sequence numbers (one engine
// process, one data-parallel rank) is a publisher with its own state. The caller
// registers publishers and says which one each batch came from.
//
// Block state. Per (publisher, medium, group_idx) the tracker keeps a reference
// count per block hash: vLLM may hold several physical copies of one hash and
// emits BlockRemoved once per copy, so a hash is resident while its count is
// above zero. Medium unset means "GPU" (the primary tier); group_idx unset means
// 0. Counters by medium: blocks stored, evicted (every hash of every
// BlockRemoved), reported as reused, and tier moves (BlockStored on a non-primary
// medium with empty token_ids: an offload of a block already counted on the GPU).
// AllBlocksCleared and ResetPublisher (a publisher restart) drop a publisher's
// state without counting evictions. A BlockRemoved of a hash that is not resident
// is counted as an unknown removal and otherwise ignored. TensorRT-LLM's
// "updated" events with a cache-level change move one copy between media.
// At most kMaxMedia distinct medium names are kept; further names count as
// "other" (a bound on label cardinality). A store or removal whose `locality` is
// set and is not "LOCAL" (vLLM #48281, merged 2026-07: "LOCAL" or "REMOTE" for
// the file-system and object-store offload tiers) counts in the medium
// "<medium>/<locality>", e.g. "FS/REMOTE", so a node's own copies and those on
// shared storage are told apart; "LOCAL" or no locality leaves the medium as is.
//
// Reuse reports. With vLLM's kv_cache_report_mode "full" (set per request), a
// request's prefix-cache hits are reported as a BlockStored chain from the root
// (parent None) made of blocks that are all resident. A primary-medium
// BlockStored with no parent whose every hash is already resident in its
// (publisher, medium, group) is therefore read as a reuse report: a reference,
// not a new copy (reference counts do not change). Any other BlockStored adds
// one copy per hash. The rule needs no configuration and also works when only
// some requests carry the full mode. It misreads one rare case: a real duplicate
// copy of a whole root chain (all hashes resident, parent None) is taken for a
// reuse report, so that copy is not counted and its later second BlockRemoved
// counts as an unknown removal.
//
// KV cache groups (hybrid models). vLLM publishes one BlockStored per KV cache
// group for the same tokens, each with its group_idx, and annotates it with the
// group's kind and sliding window (vllm/v1/core/kv_cache_manager.py take_events,
// kv_cache_event_metadata from get_kv_cache_spec_kind and
// get_kv_cache_spec_sliding_window in vllm/v1/kv_cache_interface.py; main at
// commit 003df29 of 2026; fields added by PRs #37688 and #40984); BlockRemoved
// carries the group_idx only. The tracker learns each group's spec from the
// stores that announce it (KvGroupSpecs), tracker-wide (every publisher of a
// collector serves one model), kept across publisher restarts and saved in the
// state:
//   - full_attention, mla_attention, sink_full_attention: full (every token of
//     the prefix); sliding_window, sliding_window_mla: a window of
//     kv_cache_spec_sliding_window tokens; chunked_local_attention: chunked
//     local (vLLM announces no size: the chunk comes from the model, or from
//     kv_cache_spec_sliding_window when an engine sets it); mamba: linear (one
//     state per cached prefix point); cross_attention, encoder_only_attention,
//     unknown: other (kept, never requests);
//   - the first announcement of a group sticks. Hostile or unexpected input is
//     counted by KvGroupAnomaly (KvTrackerCounters.group_anomalies) and
//     described once per anomaly in TakeNotes, never a stop: a kind vLLM does
//     not define (kept as other), a sliding window that is absent, <= 0 or
//     above kKvMaxWindowTokens, or a window on a full kind (kept without a
//     window), another kind or window for a group already announced (the first
//     kept), a group_idx < 0 or above kKvMaxGroupIdx (the event is ignored).
// The request group, whose primary-medium stores make requests (so a hybrid
// model is not counted once per group): options.request_group when set (an
// override, for engines that publish group_idx without kinds: vLLM between
// #37688 and #40984); else the first group that announces a full kind (vLLM's
// full groups store the same hashes, so any one gives the same requests); else,
// until one does, group 0 unless it announced another kind. A stream without
// group fields is therefore read exactly as before groups existed (group 0).
// The other groups' stores and removals keep their own block state (reference
// counts per hash, per medium): their retention, counted per (medium, group)
// in GroupCounters. In vLLM's full report mode, a sliding-window, chunked or
// linear group's reuse report lists every hash of the hit, also the positions
// the group holds no block for (null blocks): for these groups a root chain on
// the primary medium whose last hash is resident is read as a reuse report
// (for a full or unannounced group, every hash must be resident, as below). It
// misreads, as below, a real duplicate root chain whose last block the group
// holds. Limits: an offload connector's legacy placeholder stores carry no
// group_idx and count in group 0; a chunked group's size is not published by
// vLLM (the model's config has it).
//
// Requests. Only BlockStored events on the primary medium in the request group
// make requests; one curve::Request per chain, timestamp = the batch's ts,
// pages in prefix order:
//   - a reuse report R = [h1..hj] starts a request with those pages; when the
//     next BlockStored of the same batch has parent hj (the same request's newly
//     cached blocks, which vLLM emits in the same scheduler step), its blocks are
//     appended: that request's chain is then exact (full mode);
//   - any other BlockStored with parent P and hashes h1..hk gives the request
//     (P's ancestors as last known, from the root) + h1..hk: a stored block
//     implies its whole parent chain was referenced.
// Page ids are scoped: each block hash is mixed (a 64-bit bijective mix, see
// KvScopedPageId) with the collector's scope string (the model), the event's
// LoRA (lora_name, else lora_id), its cache_salt and the block's extra_keys
// digest, so pages of different scopes never match (docs/semantics.md section 1).
//
// What the reconstruction misses (without full report mode):
//   - a request that hits on blocks already cached produces no event at all when
//     it needs no new full block: fully hitting requests are invisible. The
//     reconstructed stream holds the requests that stored something, each with
//     its whole prefix, so reuse of a prefix IS seen when a new block extends it,
//     but every hit of a request that extends nothing is lost;
//   - one request whose blocks are stored over several scheduler steps (chunked
//     prefill, and blocks filled during decode) gives one reconstructed request
//     per step, each re-referencing the prefix: extra references, counted as hits
//     at short distances. Full mode only merges events within one batch;
//   - pages emitted are the engine's full blocks only (partial blocks never
//     appear);
//   - the ancestor chain is "as last known": a block stored before the tracker
//     started (or whose store was lost and not replayed) truncates the chain at
//     that point (counted as truncated chains). Across agent restarts the
//     parent map and block state are restored (AppendState / RestoreState), so
//     only blocks stored while the agent was down and not replayed truncate;
//   - per-request token counts are not known (left unset).
//
// Tenants (options.tenant_source, default none: Request::tenant left empty).
// Engines isolate tenants with a LoRA adapter or a cache salt, so a request's
// tenant can be read from its events:
//   - lora: the event's lora_name, else "lora-<lora_id>"; no LoRA: no tenant;
//   - cache_salt: the event's cache_salt field (SGLang, TensorRT-LLM); for vLLM,
//     which publishes the salt only inside extra_keys of the first block of a
//     chain (after the LoRA name and the multimodal pairs, before the
//     prompt-embeds digest, all untagged), the last string entry of block 0's
//     extra_keys in a root chain (parent None) that is not the LoRA name. A
//     request extending a chain whose events carry no salt (vLLM: every event
//     but the root's) inherits the salt recorded for the chain's root page when
//     the ancestor walk reached the root. The root map keeps salted roots only
//     and is cleared when it reaches parent_map_max_entries (chains rooted
//     before then lose their tenant until their root is stored again);
//   - lora_or_salt: the LoRA tenant when there is one, else the salt tenant;
//   - session_id: the event's session_id (vLLM PR #51381, echoed on GPU
//     stores and reuse reports; SGLang's map encoding), else no tenant.
// A reuse report merged with its new blocks keeps the report's tenant (or takes
// the new blocks' when the report had none). Names are passed on raw: the
// consumer sanitizes and folds them (bounded label cardinality).
//
// Parent map. Ancestors are found in a map block hash -> (parent hash, page id)
// filled from primary-medium BlockStored events of the request group. An entry
// lives while its block is resident in that state of at least one publisher
// (a new block can only extend a chain the engine holds, so the map follows the
// engines' caches and needs no tuning), bounded by options.parent_map_max_entries
// as a guard against lost removals: beyond it the oldest-stored entry is evicted
// (counted). Memory: 56 to 72 bytes per entry (a 40-byte record plus a 12-byte
// hash-table slot at 3/4 to 3/8 load). Walks stop at a missing entry, at the root,
// on a cycle (hash collisions or hostile input; counted) and at
// options.max_request_pages (counted).
//
// Thread safety: none; one thread applies batches and reads the counters.
#ifndef KVWATCH_COLLECTORS_KV_EVENT_TRACKER_H_
#define KVWATCH_COLLECTORS_KV_EVENT_TRACKER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/source_kinds.h"
#include "base/status.h"
#include "collectors/collector.h"
#include "collectors/collector_options.h"  // KvTenantSource, KvEventTrackerOptions
#include "collectors/kv_chain_index.h"
#include "collectors/kv_event.h"
#include "curve/page_map.h"
#include "curve/request.h"

namespace kvwatch::collectors {

// ---- Page scope ---------------------------------------------------------------

// The 64-bit digest of a scope string (the model); 0 for "".
std::uint64_t KvBaseScope(std::string_view model);
// The scope of one BlockStored event: base folded with its LoRA (lora_name,
// else lora_id) and cache_salt, when present.
std::uint64_t KvEventScope(std::uint64_t base_scope, const BlockStored& event);
// The page id of a block: a bijection of block_hash for a fixed (scope,
// extra_key_digest), so distinct hashes never collide within one scope.
std::uint64_t KvScopedPageId(std::uint64_t event_scope, std::uint64_t extra_key_digest, std::uint64_t block_hash);

// ---- Tenants ------------------------------------------------------------------

// "none", "lora", "cache_salt", "lora_or_salt".
std::string_view KvTenantSourceName(KvTenantSource source);
// The inverse of KvTenantSourceName; std::nullopt for any other text.
std::optional<KvTenantSource> ParseKvTenantSource(std::string_view name);
// The tenant one BlockStored names by itself under `source` ("" when none); a
// vLLM salt is found only in a root chain's first block.
std::string KvEventTenant(KvTenantSource source, const BlockStored& event);

// ---- State encoding -------------------------------------------------------------

// The string and count encodings of the KV-event state (a u32 count or length,
// host order, as base/byte_io.h). ReadKvStateString fails when the length is
// beyond the bytes left or max_length; ReadKvStateCount when count x
// min_element_bytes is beyond the bytes left, so no reader reserves or loops on
// a count the bytes cannot hold.
void AppendKvStateString(std::vector<std::uint8_t>* out, std::string_view s);
bool ReadKvStateString(std::span<const std::uint8_t>* in, std::size_t max_length, std::string* s);
bool ReadKvStateCount(std::span<const std::uint8_t>* in, std::size_t min_element_bytes, std::uint32_t* count);

// ---- KV cache groups ------------------------------------------------------------

// A group's kind as announced (BlockStored.kv_cache_spec_kind), classed.
enum class KvSpecKind : std::uint8_t { kUnannounced, kFull, kSlidingWindow, kChunkedLocal, kLinear, kOther };
inline constexpr std::size_t kKvSpecKinds = 6;
// "unannounced", "full", "sliding_window", "chunked_local", "linear", "other"
// (the curve's KvGroupKindName spellings where they exist).
std::string_view KvSpecKindName(KvSpecKind kind);
// A kind name vLLM defines (KVCacheSpecKind values) classed; nullopt for another name.
std::optional<KvSpecKind> ParseVllmSpecKind(std::string_view name);

// The largest sliding window accepted, in tokens (above any model's context).
inline constexpr std::int64_t kKvMaxWindowTokens = std::int64_t{1} << 26;

struct KvGroupSpec {
  std::int64_t group = 0;
  KvSpecKind kind = KvSpecKind::kUnannounced;
  std::int64_t window_tokens = 0;  // sliding window (or announced chunk); 0: none or unknown
  bool operator==(const KvGroupSpec&) const = default;
};

// What the group fields of a stream can get wrong (see above).
enum class KvGroupAnomaly : std::uint8_t { kUnknownKind, kBadWindow, kKindChanged, kBadGroup, kRequestGroupNotFull };
inline constexpr std::size_t kKvGroupAnomalies = 5;
// "unknown_kind", "bad_window", "kind_changed", "bad_group", "request_group_not_full".
std::string_view KvGroupAnomalyName(KvGroupAnomaly anomaly);

// ---- Tracker ------------------------------------------------------------------

// Per-medium counters, summed over publishers and groups.
struct KvMediumCounters {
  std::string medium;
  std::uint64_t stored_blocks = 0;    // hashes of BlockStored events, not reuse reports
  std::uint64_t evicted_blocks = 0;   // hashes of BlockRemoved events
  std::uint64_t reused_blocks = 0;    // hashes of reuse reports
  std::uint64_t tier_moves = 0;       // stored blocks that were tier moves (also in stored_blocks)
  std::uint64_t resident_blocks = 0;  // distinct resident hashes, summed over (publisher, group)
};

struct KvTrackerCounters {
  std::uint64_t batches = 0;
  std::uint64_t events = 0;
  std::uint64_t requests = 0;       // requests handed to the sink
  std::uint64_t request_pages = 0;  // their pages
  std::uint64_t reuse_reports = 0;
  std::uint64_t merged_chains = 0;     // stores appended to a reuse report's request
  std::uint64_t unknown_removals = 0;  // removed hashes that were not resident
  std::uint64_t unknown_events = 0;    // events of an unknown tag
  std::uint64_t cache_clears = 0;      // AllBlocksCleared events
  std::uint64_t publisher_resets = 0;  // ResetPublisher calls
  std::uint64_t chains_truncated = 0;  // ancestor walks that hit an unknown block
  std::uint64_t chain_cycles = 0;
  std::uint64_t chains_too_long = 0;
  std::uint64_t parent_map_evictions = 0;
  std::array<std::uint64_t, kKvGroupAnomalies> group_anomalies{};  // by KvGroupAnomaly
};

// Per (medium, group) counters, summed over publishers; only for streams whose
// events carry group fields (KvEventTracker::grouped()).
struct KvGroupCounters {
  std::string medium;
  KvGroupSpec spec;
  std::uint64_t stored_blocks = 0;  // as KvMediumCounters
  std::uint64_t evicted_blocks = 0;
  std::uint64_t reused_blocks = 0;
  std::uint64_t resident_blocks = 0;
};

class KvEventTracker {
 public:
  explicit KvEventTracker(KvEventTrackerOptions options = {});
  KvEventTracker(const KvEventTracker&) = delete;
  KvEventTracker& operator=(const KvEventTracker&) = delete;

  // Registers a publisher; returns its id (0, 1, ...).
  std::size_t AddPublisher();
  std::size_t publishers() const { return publishers_.size(); }

  // Applies one batch from publisher (an id from AddPublisher) and hands the
  // requests it implies to sink, in event order.
  void Apply(std::size_t publisher, const KvEventBatch& batch, RequestSink& sink);

  // Drops a publisher's block state (a restart: its cache is empty again).
  void ResetPublisher(std::size_t publisher);

  // State across agent restarts (kv_events_collector.h's part of the agent's
  // state file). AppendState appends what the page-reference stream depends on
  // beyond the batches still to come: the options it was built under (the scope
  // digest and configured request group: page ids in the parent map were made
  // with them), the engine's block size, the groups (whether any was seen, the
  // request group chosen, each group's spec), the parent map oldest first (so
  // the bound evicts in the same order), the salted roots' tenants, and the
  // block state of `publishers`, in that order. A batch applied after RestoreState then gives
  // the requests it would have given without the restart. Counters are not kept
  // (Prometheus counters restart with the process) and the media are kept by
  // name.
  void AppendState(std::span<const std::size_t> publishers, std::vector<std::uint8_t>* out) const;
  // Restores what AppendState wrote (all of `in`, nothing after it) into this
  // tracker, which must be fresh (no publisher added): the saved publishers,
  // which must be `publishers` many, become 0..publishers-1 in the saved order.
  // Every count and length is checked against the bytes left; bytes left over,
  // another number of publishers, zero or duplicate reference counts, duplicate
  // groups and other options (scope, request group) are errors. All or nothing:
  // on an error the tracker is unchanged. with_groups false reads the encoding
  // of the collector's state version 2 and before (no group specs: a request
  // group of 0, written before it could be configured).
  base::Status RestoreState(std::span<const std::uint8_t> in, std::size_t publishers, bool with_groups = true);

  const KvTrackerCounters& counters() const { return counters_; }
  // Whether any event carried group_idx or a cache-spec field.
  bool grouped() const { return grouped_; }
  // The groups seen (announced or not), by group index.
  std::vector<KvGroupSpec> GroupSpecs() const;
  // The group whose stores make requests now (see above); nullopt: none yet.
  std::optional<std::int64_t> RequestGroup() const;
  // One entry per (medium, group) seen, media in MediumCounters' order, groups ascending.
  std::vector<KvGroupCounters> GroupCounters() const;
  // The description of each anomaly's first occurrence since the last call
  // (what was seen and what was expected), for the collector to log once.
  std::vector<std::string> TakeNotes();
  // One entry per medium seen ("GPU" always first).
  std::vector<KvMediumCounters> MediumCounters() const;
  // Distinct resident hashes of one (publisher, medium, group); 0 when unknown.
  std::uint64_t ResidentBlocks(std::size_t publisher, std::string_view medium, std::int64_t group) const;
  // Reference count of one hash there (0: not resident).
  std::uint32_t References(std::size_t publisher, std::string_view medium, std::int64_t group,
                           std::uint64_t hash) const;
  std::size_t parent_map_size() const { return chains_.size(); }
  const KvChainIndex& chains() const { return chains_; }
  const KvEventTrackerOptions& options() const { return options_; }

  static constexpr std::size_t kMaxMedia = 16;

 private:
  struct GroupState {
    std::uint32_t medium = 0;
    std::int64_t group = 0;
    curve::PageMap refs;  // hash -> copies (> 0)
  };
  struct Publisher {
    std::vector<GroupState> groups;
  };
  struct MediumTotals {
    std::uint64_t stored = 0, evicted = 0, reused = 0, tier_moves = 0;
  };
  // The request being built from a reuse report, waiting for its new blocks.
  struct Pending {
    bool active = false;
    bool mergeable = false;
    std::uint64_t tail = 0;
    double ts = 0;
  };

  std::uint32_t MediumIndex(const std::optional<std::string>& medium);
  // MediumIndex of a store's or removal's tier: its medium, qualified by a
  // locality other than "LOCAL" (see the header comment).
  std::uint32_t TierIndex(const std::optional<std::string>& medium, const std::optional<std::string>& locality);
  // MediumIndex over a given list of names (RestoreState resolves into a copy).
  static std::uint32_t MediumIndexIn(std::vector<std::string>* media, const std::optional<std::string>& medium);
  std::optional<std::uint32_t> FindMedium(std::string_view medium) const;
  GroupState& State(std::size_t publisher, std::uint32_t medium, std::int64_t group);
  const GroupState* FindState(std::size_t publisher, std::uint32_t medium, std::int64_t group) const;
  bool IsRequestGroup(std::int64_t group) const {
    const std::optional<std::int64_t> g = RequestGroup();
    return g.has_value() && *g == group;
  }
  bool IsRequestState(const GroupState& s) const { return s.medium == 0 && IsRequestGroup(s.group); }
  // The spec entry of a group (created unannounced).
  KvGroupSpec& Spec(std::int64_t group);
  const KvGroupSpec* FindSpec(std::int64_t group) const;
  KvSpecKind KindOf(std::int64_t group) const;
  // Notes the group fields of an event; false when its group_idx is out of range.
  bool CheckGroup(const std::optional<std::int64_t>& group_idx);
  // Learns (or checks) the spec a store announces.
  void Announce(const BlockStored& e);
  void Anomaly(KvGroupAnomaly anomaly, std::string note);
  struct GroupTotals {
    std::uint32_t medium = 0;
    std::int64_t group = 0;
    std::uint64_t stored = 0, evicted = 0, reused = 0;
  };
  GroupTotals& Totals(std::uint32_t medium, std::int64_t group);

  void OnStored(std::size_t publisher, const BlockStored& e, double ts, RequestSink& sink);
  void OnRemoved(std::size_t publisher, const BlockRemoved& e);
  void OnUpdated(std::size_t publisher, const BlockUpdated& e);
  void AddCopy(GroupState& s, std::uint64_t hash);
  void DropCopy(std::size_t publisher, GroupState& s, std::uint64_t hash);
  void ClearPublisher(std::size_t publisher);
  // A hash left a request state: forget its parent link unless another
  // publisher still holds it.
  void MaybeForgetLink(std::size_t publisher, std::uint64_t hash);
  void AppendPages(const BlockStored& e, std::vector<curve::PageId>* pages);
  void RecordLinks(const BlockStored& e, std::size_t first_page);
  void StartRequest(double ts);
  // Sets request_.tenant from the event (and, for salts, the chain's root).
  void SetTenant(const BlockStored& e, bool walked_to_root);
  void Flush(RequestSink& sink);

  KvEventTrackerOptions options_;
  std::uint64_t base_scope_;
  std::vector<std::string> media_;  // media_[0] == "GPU"
  std::vector<MediumTotals> totals_;
  std::vector<Publisher> publishers_;
  KvChainIndex chains_;
  KvTrackerCounters counters_;
  Pending pending_;
  curve::Request request_;       // the request being built (reused storage)
  std::int64_t block_size_ = 0;  // the engine's block size, from the last BlockStored that had one
  // Root page of a salted chain -> its salt tenant (tenant_source with salts only).
  std::unordered_map<curve::PageId, std::string> root_tenants_;
  // Groups: specs by index, the request group once chosen (options or the
  // first full kind), per (medium, group) totals, anomaly notes to log.
  bool grouped_ = false;
  std::vector<KvGroupSpec> specs_;  // ascending group
  std::optional<std::int64_t> request_group_;
  std::vector<GroupTotals> group_totals_;
  std::vector<std::string> notes_;
  std::array<bool, kKvGroupAnomalies> noted_{};
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_KV_EVENT_TRACKER_H_
