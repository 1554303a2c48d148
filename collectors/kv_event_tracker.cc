// KvEventTracker (kv_event_tracker.h): the engine's block state per publisher,
// medium and group, rebuilt from decoded KV events, and the requests it implies
// (reuse reports, ancestor chains, tenants); the page scope and tenant of an
// event. The parent map is KvChainIndex (kv_chain_index.cc); the state saved
// across restarts is written and read in kv_event_tracker_state.cc.
#include "collectors/kv_event_tracker.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <variant>

#include <msgpack.hpp>

#include "base/mix.h"

namespace kvwatch::collectors {
namespace {

constexpr std::string_view kPrimaryMedium = "GPU";
constexpr std::string_view kOtherMedium = "other";

using base::Mix64;

std::uint64_t Fold(std::uint64_t acc, std::uint64_t value) {
  return Mix64(acc ^ Mix64(value + 0x9e3779b97f4a7c15ULL));
}

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

// ---- Page scope ---------------------------------------------------------------

std::uint64_t KvBaseScope(std::string_view model) {
  return model.empty() ? 0 : Fold(kTagModel, StringDigest(model));
}

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

std::uint64_t KvScopedPageId(std::uint64_t event_scope, std::uint64_t extra_key_digest,
                             std::uint64_t block_hash) {
  return Mix64(block_hash ^ Fold(event_scope, extra_key_digest));
}

// ---- KvEventTracker -----------------------------------------------------------

KvEventTracker::KvEventTracker(KvEventTrackerOptions options)
    : options_(std::move(options)),
      base_scope_(KvBaseScope(options_.scope)),
      media_{std::string(kPrimaryMedium)},
      totals_(1),
      chains_(options_.parent_map_max_entries) {
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

std::uint32_t KvEventTracker::MediumIndexIn(std::vector<std::string>* media,
                                            const std::optional<std::string>& medium) {
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

KvEventTracker::GroupState& KvEventTracker::State(std::size_t publisher, std::uint32_t medium,
                                                  std::int64_t group) {
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

void KvEventTracker::AddCopy(GroupState& s, std::uint64_t hash) {
  if (std::uint32_t* n = s.refs.Find(hash)) {
    if (*n + 1 < curve::PageMap::kEmpty) ++*n;
    return;
  }
  s.refs.Insert(hash, 1);
}

void KvEventTracker::MaybeForgetLink(std::size_t publisher, std::uint64_t hash) {
  for (std::size_t q = 0; q < publishers_.size(); ++q) {
    if (q == publisher) continue;
    const GroupState* other = FindState(q, 0, options_.request_group);
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
  const std::uint32_t medium = MediumIndex(e.medium);
  GroupState& s = State(publisher, medium, e.group_idx.value_or(0));
  const std::uint64_t n = e.block_hashes.size();
  if (n == 0) return;
  // A reuse report: a root chain on the primary medium whose blocks are all resident.
  bool reuse = medium == 0 && !e.parent_block_hash.has_value();
  for (std::size_t i = 0; reuse && i < n; ++i) reuse = s.refs.Find(e.block_hashes[i]) != nullptr;
  MediumTotals& totals = totals_[medium];
  if (reuse) {
    totals.reused += n;
    ++counters_.reuse_reports;
  } else {
    totals.stored += n;
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
    const KvChainIndex::WalkEnd end = chains_.AppendChain(*e.parent_block_hash, options_.max_request_pages,
                                                          &request_.pages);
    walked_to_root = end == KvChainIndex::WalkEnd::kRoot;
    switch (end) {
      case KvChainIndex::WalkEnd::kRoot: break;
      case KvChainIndex::WalkEnd::kUnknown: ++counters_.chains_truncated; break;
      case KvChainIndex::WalkEnd::kCycle: ++counters_.chain_cycles; break;
      case KvChainIndex::WalkEnd::kTooLong: ++counters_.chains_too_long; break;
    }
  }
  const std::size_t first = request_.pages.size();
  AppendPages(e, &request_.pages);
  RecordLinks(e, first);
  SetTenant(e, walked_to_root);
  Flush(sink);
}

void KvEventTracker::OnRemoved(std::size_t publisher, const BlockRemoved& e) {
  const std::uint32_t medium = MediumIndex(e.medium);
  GroupState& s = State(publisher, medium, e.group_idx.value_or(0));
  totals_[medium].evicted += e.block_hashes.size();
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

std::uint64_t KvEventTracker::ResidentBlocks(std::size_t publisher, std::string_view medium,
                                             std::int64_t group) const {
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
