// KvEventTracker (kv_event_tracker.h): the engine's block state per publisher,
// medium and group, rebuilt from decoded KV events, and the requests it implies
// (reuse reports, ancestor chains, tenants); the page scope and tenant of an
// event. The parent map is KvChainIndex (kv_chain_index.cc); the state saved
// across restarts is written and read in kv_event_tracker_state.cc.
#include "collectors/kv_event_tracker.h"

#include <algorithm>
#include <msgpack.hpp>
#include <type_traits>
#include <utility>
#include <variant>

#include "base/mix.h"

namespace kvwatch::collectors {
namespace {

constexpr std::string_view kPrimaryMedium = "GPU";
constexpr std::string_view kOtherMedium = "other";

using base::Mix64;

std::uint64_t Fold(std::uint64_t acc, std::uint64_t value) { return Mix64(acc ^ Mix64(value + 0x9e3779b97f4a7c15ULL)); }

// FNV-1a over the bytes, then mixed.
std::uint64_t StringDigest(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix64(h);
}

// Distinct tags keep, say, a LoRA id 7 apart from a salt whose digest is 7.
constexpr std::uint64_t kTagModel = 1;
constexpr std::uint64_t kTagLoraName = 2;
constexpr std::uint64_t kTagLoraId = 3;
constexpr std::uint64_t kTagSalt = 4;

bool UsesLora(KvTenantSource source) {
  return source == KvTenantSource::kLora || source == KvTenantSource::kLoraOrSalt;
}
bool UsesSalt(KvTenantSource source) {
  return source == KvTenantSource::kCacheSalt || source == KvTenantSource::kLoraOrSalt;
}

// Whether LoraTenant(e) is non-empty, without building it.
bool HasLoraTenant(const BlockStored& e) {
  return e.lora_name.has_value() ? !e.lora_name->empty() : e.lora_id.has_value();
}

std::string LoraTenant(const BlockStored& e) {
  if (e.lora_name.has_value()) return *e.lora_name;
  if (e.lora_id.has_value()) return "lora-" + std::to_string(*e.lora_id);
  return "";
}

// vLLM's cache salt: the last str entry of block 0's extra_keys that is not the
// LoRA name, in a root chain. "" when there is none or the bytes do not parse.
std::string VllmSalt(const BlockStored& e) {
  if (e.parent_block_hash.has_value() || !e.has_extra_keys || e.extra_keys_msgpack.empty()) return "";
  try {
    const msgpack::object_handle handle = msgpack::unpack(e.extra_keys_msgpack.data(), e.extra_keys_msgpack.size());
    const msgpack::object& keys = handle.get();
    if (keys.type != msgpack::type::ARRAY || keys.via.array.size == 0) return "";
    const msgpack::object& first = keys.via.array.ptr[0];
    if (first.type != msgpack::type::ARRAY) return "";
    std::string salt;
    for (std::uint32_t i = 0; i < first.via.array.size; ++i) {
      const msgpack::object& entry = first.via.array.ptr[i];
      if (entry.type != msgpack::type::STR) continue;
      std::string value(entry.via.str.ptr, entry.via.str.size);
      if (i == 0 && e.lora_name.has_value() && value == *e.lora_name) continue;
      salt = std::move(value);
    }
    return salt;
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

// ---- Tenants ------------------------------------------------------------------

std::string_view KvTenantSourceName(KvTenantSource source) {
  for (const auto& spelling : kKvTenantSourceSpellings) {
    if (spelling.value == source) return spelling.name;
  }
  return "none";
}

std::optional<KvTenantSource> ParseKvTenantSource(std::string_view name) {
  for (const auto& spelling : kKvTenantSourceSpellings) {
    if (spelling.name == name) return spelling.value;
  }
  return std::nullopt;
}

std::string KvEventTenant(KvTenantSource source, const BlockStored& e) {
  if (source == KvTenantSource::kSessionId) return e.session_id.value_or("");
  if (UsesLora(source)) {
    std::string lora = LoraTenant(e);
    if (!lora.empty()) return lora;
  }
  if (UsesSalt(source)) {
    if (e.cache_salt.has_value() && !e.cache_salt->empty()) return *e.cache_salt;
    return VllmSalt(e);
  }
  return "";
}

// ---- KV cache groups ------------------------------------------------------------

std::string_view KvSpecKindName(KvSpecKind kind) {
  switch (kind) {
    case KvSpecKind::kUnannounced:
      return "unannounced";
    case KvSpecKind::kFull:
      return "full";
    case KvSpecKind::kSlidingWindow:
      return "sliding_window";
    case KvSpecKind::kChunkedLocal:
      return "chunked_local";
    case KvSpecKind::kLinear:
      return "linear";
    case KvSpecKind::kOther:
      return "other";
  }
  return "other";
}

namespace {

// vLLM's KVCacheSpecKind values (vllm/v1/kv_cache_interface.py, main of 2026), classed.
struct VllmKind {
  std::string_view name;
  KvSpecKind kind;
};
constexpr VllmKind kVllmKinds[] = {
    {"full_attention", KvSpecKind::kFull},
    {"mla_attention", KvSpecKind::kFull},
    {"sink_full_attention", KvSpecKind::kFull},
    {"sliding_window", KvSpecKind::kSlidingWindow},
    {"sliding_window_mla", KvSpecKind::kSlidingWindow},
    {"chunked_local_attention", KvSpecKind::kChunkedLocal},
    {"mamba", KvSpecKind::kLinear},
    {"cross_attention", KvSpecKind::kOther},
    {"encoder_only_attention", KvSpecKind::kOther},
    {"unknown", KvSpecKind::kOther},
};

std::string ExpectedKinds() {
  std::string out;
  for (const VllmKind& k : kVllmKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

// Groups that hold only part of a prefix: their reuse reports list hashes they hold no block for.
bool IsPartialKind(KvSpecKind kind) {
  return kind == KvSpecKind::kSlidingWindow || kind == KvSpecKind::kChunkedLocal || kind == KvSpecKind::kLinear;
}

std::string SpecText(const KvGroupSpec& spec) {
  std::string out(KvSpecKindName(spec.kind));
  if (spec.window_tokens > 0) out += " of " + std::to_string(spec.window_tokens) + " tokens";
  return out;
}

}  // namespace

std::optional<KvSpecKind> ParseVllmSpecKind(std::string_view name) {
  for (const VllmKind& k : kVllmKinds) {
    if (k.name == name) return k.kind;
  }
  return std::nullopt;
}

std::string_view KvGroupAnomalyName(KvGroupAnomaly anomaly) {
  switch (anomaly) {
    case KvGroupAnomaly::kUnknownKind:
      return "unknown_kind";
    case KvGroupAnomaly::kBadWindow:
      return "bad_window";
    case KvGroupAnomaly::kKindChanged:
      return "kind_changed";
    case KvGroupAnomaly::kBadGroup:
      return "bad_group";
    case KvGroupAnomaly::kRequestGroupNotFull:
      return "request_group_not_full";
  }
  return "unknown_kind";
}

// ---- Page scope ---------------------------------------------------------------

std::uint64_t KvBaseScope(std::string_view model) { return model.empty() ? 0 : Fold(kTagModel, StringDigest(model)); }

std::uint64_t KvEventScope(std::uint64_t base_scope, const BlockStored& e) {
  std::uint64_t scope = base_scope;
  if (e.lora_name.has_value()) {
    scope = Fold(scope, Fold(kTagLoraName, StringDigest(*e.lora_name)));
  } else if (e.lora_id.has_value()) {
    scope = Fold(scope, Fold(kTagLoraId, static_cast<std::uint64_t>(*e.lora_id)));
  }
  if (e.cache_salt.has_value()) scope = Fold(scope, Fold(kTagSalt, StringDigest(*e.cache_salt)));
  return scope;
}

std::uint64_t KvScopedPageId(std::uint64_t event_scope, std::uint64_t extra_key_digest, std::uint64_t block_hash) {
  return Mix64(block_hash ^ Fold(event_scope, extra_key_digest));
}

// ---- KvEventTracker -----------------------------------------------------------

KvEventTracker::KvEventTracker(KvEventTrackerOptions options)
    : options_(std::move(options)),
      base_scope_(KvBaseScope(options_.scope)),
      media_{std::string(kPrimaryMedium)},
      totals_(1),
      chains_(options_.parent_map_max_entries),
      request_group_(options_.request_group) {
  options_.max_request_pages = std::max<std::size_t>(1, options_.max_request_pages);
}

std::size_t KvEventTracker::AddPublisher() {
  publishers_.emplace_back();
  return publishers_.size() - 1;
}

std::optional<std::uint32_t> KvEventTracker::FindMedium(std::string_view medium) const {
  for (std::uint32_t i = 0; i < media_.size(); ++i) {
    if (media_[i] == medium) return i;
  }
  return std::nullopt;
}

std::uint32_t KvEventTracker::MediumIndexIn(std::vector<std::string>* media, const std::optional<std::string>& medium) {
  if (!medium.has_value() || *medium == kPrimaryMedium) return 0;
  auto find = [&](std::string_view name) -> std::optional<std::uint32_t> {
    for (std::uint32_t i = 0; i < media->size(); ++i) {
      if ((*media)[i] == name) return i;
    }
    return std::nullopt;
  };
  if (std::optional<std::uint32_t> i = find(*medium)) return *i;
  // Keep the last name for "other", so labels stay bounded.
  const std::string name = media->size() + 1 < kMaxMedia ? *medium : std::string(kOtherMedium);
  if (std::optional<std::uint32_t> i = find(name)) return *i;
  media->push_back(name);
  return static_cast<std::uint32_t>(media->size() - 1);
}

std::uint32_t KvEventTracker::MediumIndex(const std::optional<std::string>& medium) {
  const std::uint32_t i = MediumIndexIn(&media_, medium);
  totals_.resize(media_.size());
  return i;
}

std::uint32_t KvEventTracker::TierIndex(const std::optional<std::string>& medium,
                                        const std::optional<std::string>& locality) {
  if (!locality.has_value() || locality->empty() || *locality == "LOCAL") return MediumIndex(medium);
  return MediumIndex(std::string(medium.value_or(std::string(kPrimaryMedium))) + "/" + *locality);
}

KvEventTracker::GroupState& KvEventTracker::State(std::size_t publisher, std::uint32_t medium, std::int64_t group) {
  std::vector<GroupState>& groups = publishers_[publisher].groups;
  for (GroupState& s : groups) {
    if (s.medium == medium && s.group == group) return s;
  }
  groups.emplace_back();
  groups.back().medium = medium;
  groups.back().group = group;
  return groups.back();
}

const KvEventTracker::GroupState* KvEventTracker::FindState(std::size_t publisher, std::uint32_t medium,
                                                            std::int64_t group) const {
  if (publisher >= publishers_.size()) return nullptr;
  for (const GroupState& s : publishers_[publisher].groups) {
    if (s.medium == medium && s.group == group) return &s;
  }
  return nullptr;
}

const KvGroupSpec* KvEventTracker::FindSpec(std::int64_t group) const {
  for (const KvGroupSpec& spec : specs_) {
    if (spec.group == group) return &spec;
  }
  return nullptr;
}

KvGroupSpec& KvEventTracker::Spec(std::int64_t group) {
  auto it = std::lower_bound(specs_.begin(), specs_.end(), group,
                             [](const KvGroupSpec& spec, std::int64_t g) { return spec.group < g; });
  if (it == specs_.end() || it->group != group) it = specs_.insert(it, KvGroupSpec{.group = group});
  return *it;
}

KvSpecKind KvEventTracker::KindOf(std::int64_t group) const {
  const KvGroupSpec* spec = FindSpec(group);
  return spec == nullptr ? KvSpecKind::kUnannounced : spec->kind;
}

std::optional<std::int64_t> KvEventTracker::RequestGroup() const {
  if (request_group_.has_value()) return request_group_;
  if (KindOf(0) == KvSpecKind::kUnannounced) return 0;
  return std::nullopt;
}

void KvEventTracker::Anomaly(KvGroupAnomaly anomaly, std::string note) {
  const std::size_t i = static_cast<std::size_t>(anomaly);
  ++counters_.group_anomalies[i];
  if (noted_[i]) return;
  noted_[i] = true;
  notes_.push_back(std::move(note) + " (counted as kvwatch_kv_events_group_anomalies_total{kind=\"" +
                   std::string(KvGroupAnomalyName(anomaly)) + "\"}; logged once)");
}

std::vector<std::string> KvEventTracker::TakeNotes() {
  std::vector<std::string> out;
  out.swap(notes_);
  return out;
}

bool KvEventTracker::CheckGroup(const std::optional<std::int64_t>& group_idx) {
  if (!group_idx.has_value()) return true;
  grouped_ = true;
  if (*group_idx >= 0 && *group_idx <= kKvMaxGroupIdx) return true;
  Anomaly(KvGroupAnomaly::kBadGroup, "an event of group_idx " + std::to_string(*group_idx) + "; expected 0 to " +
                                         std::to_string(kKvMaxGroupIdx) + " (such events are ignored)");
  return false;
}

void KvEventTracker::Announce(const BlockStored& e) {
  const std::optional<std::int64_t>& w = e.kv_cache_spec_sliding_window;
  if (!e.kv_cache_spec_kind.has_value() && !w.has_value()) return;
  grouped_ = true;
  const std::int64_t group = e.group_idx.value_or(0);
  const std::string g = "group " + std::to_string(group);
  if (!e.kv_cache_spec_kind.has_value()) {
    Anomaly(KvGroupAnomaly::kBadWindow, g + " announces a sliding window of " + std::to_string(*w) +
                                            " without kv_cache_spec_kind; expected a kind with it (ignored)");
    return;
  }
  KvGroupSpec announced{.group = group};
  if (std::optional<KvSpecKind> kind = ParseVllmSpecKind(*e.kv_cache_spec_kind)) {
    announced.kind = *kind;
  } else {
    announced.kind = KvSpecKind::kOther;
    Anomaly(KvGroupAnomaly::kUnknownKind, g + " announces kv_cache_spec_kind '" + e.kv_cache_spec_kind->substr(0, 64) +
                                              "'; expected one of " + ExpectedKinds() + " (kept as other)");
  }
  const bool valid_window = w.has_value() && *w > 0 && *w <= kKvMaxWindowTokens;
  const std::string window_text = w.has_value() ? std::to_string(*w) : std::string("none");
  if (announced.kind == KvSpecKind::kSlidingWindow || (announced.kind == KvSpecKind::kChunkedLocal && w.has_value())) {
    if (valid_window) {
      announced.window_tokens = *w;
    } else {
      Anomaly(KvGroupAnomaly::kBadWindow, g + " (" + *e.kv_cache_spec_kind + ") announces a window of " + window_text +
                                              " tokens; expected 1 to " + std::to_string(kKvMaxWindowTokens) +
                                              " (kept without a window)");
    }
  } else if (w.has_value()) {
    Anomaly(KvGroupAnomaly::kBadWindow, g + " (" + e.kv_cache_spec_kind->substr(0, 64) + ") announces a window of " +
                                            window_text + " tokens; expected none for that kind (ignored)");
  }
  KvGroupSpec& spec = Spec(group);
  if (spec.kind == KvSpecKind::kUnannounced) {
    spec = announced;
    if (spec.kind == KvSpecKind::kFull && !request_group_.has_value()) request_group_ = group;
    if (options_.request_group == group && spec.kind != KvSpecKind::kFull) {
      Anomaly(KvGroupAnomaly::kRequestGroupNotFull,
              "request_group " + std::to_string(group) + " is configured, but the group announces " + SpecText(spec) +
                  "; expected a full-attention group (requests are still taken from it)");
    }
  } else if (spec != announced) {
    Anomaly(KvGroupAnomaly::kKindChanged, g + " announced " + SpecText(spec) + " first, now " + SpecText(announced) +
                                              "; expected one spec per group (the first kept)");
  }
}

KvEventTracker::GroupTotals& KvEventTracker::Totals(std::uint32_t medium, std::int64_t group) {
  for (GroupTotals& t : group_totals_) {
    if (t.medium == medium && t.group == group) return t;
  }
  group_totals_.push_back(GroupTotals{.medium = medium, .group = group});
  return group_totals_.back();
}

void KvEventTracker::AddCopy(GroupState& s, std::uint64_t hash) {
  if (std::uint32_t* n = s.refs.Find(hash)) {
    if (*n + 1 < curve::PageMap::kEmpty) ++*n;
    return;
  }
  s.refs.Insert(hash, 1);
}

void KvEventTracker::MaybeForgetLink(std::size_t publisher, std::uint64_t hash) {
  const std::int64_t request_group = RequestGroup().value_or(0);
  for (std::size_t q = 0; q < publishers_.size(); ++q) {
    if (q == publisher) continue;
    const GroupState* other = FindState(q, 0, request_group);
    if (other != nullptr && other->refs.Find(hash) != nullptr) return;
  }
  chains_.Erase(hash);
}

void KvEventTracker::DropCopy(std::size_t publisher, GroupState& s, std::uint64_t hash) {
  std::uint32_t* n = s.refs.Find(hash);
  if (n == nullptr) {
    ++counters_.unknown_removals;
    return;
  }
  if (--*n > 0) return;
  s.refs.Erase(hash);
  if (IsRequestState(s)) MaybeForgetLink(publisher, hash);
}

void KvEventTracker::ClearPublisher(std::size_t publisher) {
  std::vector<std::uint64_t> forgotten;
  for (GroupState& s : publishers_[publisher].groups) {
    if (IsRequestState(s)) {
      s.refs.ForEach([&](std::uint64_t hash, std::uint32_t&) { forgotten.push_back(hash); });
    }
    s.refs.Clear();
  }
  for (std::uint64_t hash : forgotten) MaybeForgetLink(publisher, hash);
}

void KvEventTracker::ResetPublisher(std::size_t publisher) {
  if (publisher >= publishers_.size()) return;
  ++counters_.publisher_resets;
  ClearPublisher(publisher);
}

void KvEventTracker::Apply(std::size_t publisher, const KvEventBatch& batch, RequestSink& sink) {
  if (publisher >= publishers_.size()) return;
  ++counters_.batches;
  counters_.events += batch.events.size();
  for (const KvEvent& event : batch.events) {
    std::visit(
        [&](const auto& e) {
          using T = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<T, BlockStored>) {
            OnStored(publisher, e, batch.ts, sink);
          } else if constexpr (std::is_same_v<T, BlockRemoved>) {
            OnRemoved(publisher, e);
          } else if constexpr (std::is_same_v<T, AllBlocksCleared>) {
            ++counters_.cache_clears;
            ClearPublisher(publisher);
          } else if constexpr (std::is_same_v<T, BlockUpdated>) {
            OnUpdated(publisher, e);
          } else if constexpr (std::is_same_v<T, UnknownKvEvent>) {
            ++counters_.unknown_events;
          }
          // CacheCreated: pool sizes only; nothing to track.
        },
        event);
  }
  Flush(sink);
}

void KvEventTracker::OnStored(std::size_t publisher, const BlockStored& e, double ts, RequestSink& sink) {
  if (!CheckGroup(e.group_idx)) return;
  Announce(e);
  const std::int64_t group = e.group_idx.value_or(0);
  const std::uint32_t medium = TierIndex(e.medium, e.locality);
  GroupState& s = State(publisher, medium, group);
  const std::uint64_t n = e.block_hashes.size();
  if (n == 0) return;
  // A reuse report: a root chain on the primary medium whose blocks are all
  // resident (for a group holding part of a prefix: whose last block is).
  bool reuse = medium == 0 && !e.parent_block_hash.has_value();
  if (reuse && IsPartialKind(KindOf(group))) {
    reuse = s.refs.Find(e.block_hashes.back()) != nullptr;
  } else {
    for (std::size_t i = 0; reuse && i < n; ++i) reuse = s.refs.Find(e.block_hashes[i]) != nullptr;
  }
  MediumTotals& totals = totals_[medium];
  GroupTotals& group_totals = Totals(medium, group);
  if (reuse) {
    totals.reused += n;
    group_totals.reused += n;
    ++counters_.reuse_reports;
  } else {
    totals.stored += n;
    group_totals.stored += n;
    if (medium != 0 && e.token_ids.empty()) totals.tier_moves += n;
    for (std::uint64_t hash : e.block_hashes) AddCopy(s, hash);
  }
  if (!IsRequestState(s)) return;
  if (e.block_size > 0) block_size_ = e.block_size;

  if (reuse) {
    Flush(sink);
    StartRequest(ts);
    AppendPages(e, &request_.pages);
    RecordLinks(e, 0);
    SetTenant(e, /*walked_to_root=*/true);
    pending_.mergeable = true;
    pending_.tail = e.block_hashes.back();
    return;
  }
  if (pending_.active && pending_.mergeable && e.parent_block_hash == pending_.tail) {
    // The newly cached blocks of the request whose hits were just reported.
    const std::size_t first = request_.pages.size();
    AppendPages(e, &request_.pages);
    RecordLinks(e, first);
    if (request_.tenant.empty()) SetTenant(e, /*walked_to_root=*/false);
    ++counters_.merged_chains;
    Flush(sink);
    return;
  }
  Flush(sink);
  StartRequest(ts);
  bool walked_to_root = true;
  if (e.parent_block_hash.has_value()) {
    const KvChainIndex::WalkEnd end =
        chains_.AppendChain(*e.parent_block_hash, options_.max_request_pages, &request_.pages);
    walked_to_root = end == KvChainIndex::WalkEnd::kRoot;
    switch (end) {
      case KvChainIndex::WalkEnd::kRoot:
        break;
      case KvChainIndex::WalkEnd::kUnknown:
        ++counters_.chains_truncated;
        break;
      case KvChainIndex::WalkEnd::kCycle:
        ++counters_.chain_cycles;
        break;
      case KvChainIndex::WalkEnd::kTooLong:
        ++counters_.chains_too_long;
        break;
    }
  }
  const std::size_t first = request_.pages.size();
  AppendPages(e, &request_.pages);
  RecordLinks(e, first);
  SetTenant(e, walked_to_root);
  Flush(sink);
}

void KvEventTracker::OnRemoved(std::size_t publisher, const BlockRemoved& e) {
  if (!CheckGroup(e.group_idx)) return;
  const std::int64_t group = e.group_idx.value_or(0);
  const std::uint32_t medium = TierIndex(e.medium, e.locality);
  GroupState& s = State(publisher, medium, group);
  totals_[medium].evicted += e.block_hashes.size();
  Totals(medium, group).evicted += e.block_hashes.size();
  for (std::uint64_t hash : e.block_hashes) DropCopy(publisher, s, hash);
}

void KvEventTracker::OnUpdated(std::size_t publisher, const BlockUpdated& e) {
  if (!e.cache_level_old.has_value() || !e.cache_level_new.has_value()) return;
  if (*e.cache_level_old == *e.cache_level_new) return;
  auto medium_of = [](std::int64_t level) { return std::optional<std::string>(level == 0 ? "GPU" : "CPU"); };
  const std::uint32_t from = MediumIndex(medium_of(*e.cache_level_old));
  const std::uint32_t to = MediumIndex(medium_of(*e.cache_level_new));
  // State() may grow the vector: take both before holding a reference.
  State(publisher, to, 0);
  GroupState& source = State(publisher, from, 0);
  if (source.refs.Find(e.block_hash) != nullptr) DropCopy(publisher, source, e.block_hash);
  AddCopy(State(publisher, to, 0), e.block_hash);
  ++totals_[to].stored;
  ++Totals(to, 0).stored;
  ++totals_[to].tier_moves;
}

void KvEventTracker::AppendPages(const BlockStored& e, std::vector<curve::PageId>* pages) {
  const std::uint64_t scope = KvEventScope(base_scope_, e);
  const std::size_t digests = e.has_extra_keys ? e.extra_key_digests.size() : 0;
  for (std::size_t i = 0; i < e.block_hashes.size(); ++i) {
    const std::uint64_t extra = i < digests ? e.extra_key_digests[i] : 0;
    pages->push_back(KvScopedPageId(scope, extra, e.block_hashes[i]));
  }
}

void KvEventTracker::RecordLinks(const BlockStored& e, std::size_t first_page) {
  for (std::size_t i = 0; i < e.block_hashes.size(); ++i) {
    std::optional<std::uint64_t> parent = i == 0 ? e.parent_block_hash : e.block_hashes[i - 1];
    if (chains_.Put(e.block_hashes[i], parent, request_.pages[first_page + i])) ++counters_.parent_map_evictions;
  }
}

void KvEventTracker::SetTenant(const BlockStored& e, bool walked_to_root) {
  const KvTenantSource source = options_.tenant_source;
  if (source == KvTenantSource::kNone || request_.pages.empty()) return;
  request_.tenant = KvEventTenant(source, e);
  const bool lora = UsesLora(source) && HasLoraTenant(e);
  if (lora || !UsesSalt(source)) return;
  const curve::PageId root = request_.pages.front();
  if (!e.parent_block_hash.has_value()) {
    // A root chain: remember its salt for the requests that extend it.
    if (request_.tenant.empty()) return;
    if (root_tenants_.size() >= options_.parent_map_max_entries) root_tenants_.clear();
    root_tenants_[root] = request_.tenant;
  } else if (request_.tenant.empty() && walked_to_root) {
    if (auto it = root_tenants_.find(root); it != root_tenants_.end()) request_.tenant = it->second;
  }
}

void KvEventTracker::StartRequest(double ts) {
  request_.pages.clear();
  request_.tenant.clear();
  request_.timestamp_s = ts;
  pending_.active = true;
  pending_.mergeable = false;
}

void KvEventTracker::Flush(RequestSink& sink) {
  if (!pending_.active) return;
  pending_.active = false;
  pending_.mergeable = false;
  if (request_.pages.size() > options_.max_request_pages) {
    request_.pages.resize(options_.max_request_pages);
    ++counters_.chains_too_long;
  }
  ++counters_.requests;
  counters_.request_pages += request_.pages.size();
  // The prompt's tokens: its full blocks x the engine's block size (the footprint
  // of curve/tenants.h; the partial last block and the output are not known).
  request_.input_tokens = block_size_ > 0 ? static_cast<std::int64_t>(request_.pages.size()) * block_size_ : -1;
  sink.OnRequest(request_);
}

std::vector<KvMediumCounters> KvEventTracker::MediumCounters() const {
  std::vector<KvMediumCounters> out(media_.size());
  for (std::size_t m = 0; m < media_.size(); ++m) {
    out[m].medium = media_[m];
    out[m].stored_blocks = totals_[m].stored;
    out[m].evicted_blocks = totals_[m].evicted;
    out[m].reused_blocks = totals_[m].reused;
    out[m].tier_moves = totals_[m].tier_moves;
  }
  for (const Publisher& p : publishers_) {
    for (const GroupState& s : p.groups) out[s.medium].resident_blocks += s.refs.size();
  }
  return out;
}

std::vector<KvGroupSpec> KvEventTracker::GroupSpecs() const {
  std::vector<KvGroupSpec> out = specs_;
  auto add = [&](std::int64_t group) {
    for (const KvGroupSpec& spec : out) {
      if (spec.group == group) return;
    }
    out.push_back(KvGroupSpec{.group = group});
  };
  for (const GroupTotals& t : group_totals_) add(t.group);
  for (const Publisher& p : publishers_) {
    for (const GroupState& s : p.groups) add(s.group);
  }
  std::sort(out.begin(), out.end(), [](const KvGroupSpec& a, const KvGroupSpec& b) { return a.group < b.group; });
  return out;
}

std::vector<KvGroupCounters> KvEventTracker::GroupCounters() const {
  std::vector<KvGroupCounters> out;
  if (!grouped_) return out;
  std::vector<std::pair<std::uint32_t, std::int64_t>> keys;
  for (const GroupTotals& t : group_totals_) keys.emplace_back(t.medium, t.group);
  for (const Publisher& p : publishers_) {
    for (const GroupState& s : p.groups) keys.emplace_back(s.medium, s.group);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (const auto& [medium, group] : keys) {
    KvGroupCounters& c = out.emplace_back();
    c.medium = media_[medium];
    const KvGroupSpec* spec = FindSpec(group);
    c.spec = spec != nullptr ? *spec : KvGroupSpec{.group = group};
    for (const GroupTotals& t : group_totals_) {
      if (t.medium != medium || t.group != group) continue;
      c.stored_blocks = t.stored;
      c.evicted_blocks = t.evicted;
      c.reused_blocks = t.reused;
    }
    for (const Publisher& p : publishers_) {
      for (const GroupState& s : p.groups) {
        if (s.medium == medium && s.group == group) c.resident_blocks += s.refs.size();
      }
    }
  }
  return out;
}

std::uint64_t KvEventTracker::ResidentBlocks(std::size_t publisher, std::string_view medium, std::int64_t group) const {
  const std::optional<std::uint32_t> m = FindMedium(medium);
  if (!m.has_value()) return 0;
  const GroupState* s = FindState(publisher, *m, group);
  return s == nullptr ? 0 : s->refs.size();
}

std::uint32_t KvEventTracker::References(std::size_t publisher, std::string_view medium, std::int64_t group,
                                         std::uint64_t hash) const {
  const std::optional<std::uint32_t> m = FindMedium(medium);
  if (!m.has_value()) return 0;
  const GroupState* s = FindState(publisher, *m, group);
  if (s == nullptr) return 0;
  const std::uint32_t* n = s->refs.Find(hash);
  return n == nullptr ? 0 : *n;
}

}  // namespace kvwatch::collectors
