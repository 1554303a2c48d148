// KvEventTracker's state across agent restarts (kv_event_tracker.h, AppendState and
// RestoreState): the encoding of the options it depends on, the parent map, the
// salted roots' tenants and the publishers' block state, and the checked,
// all-or-nothing restore.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/byte_io.h"
#include "collectors/kv_event_tracker.h"

namespace kvwatch::collectors {

// ---- State ----------------------------------------------------------------------

void AppendKvStateString(std::vector<std::uint8_t>* out, std::string_view s) {
  base::AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(s.size()));
  out->insert(out->end(), s.begin(), s.end());
}

bool ReadKvStateString(std::span<const std::uint8_t>* in, std::size_t max_length, std::string* s) {
  std::uint32_t n = 0;
  if (!base::ReadPod(in, &n) || n > in->size() || n > max_length) return false;
  s->assign(reinterpret_cast<const char*>(in->data()), n);
  *in = in->subspan(n);
  return true;
}

bool ReadKvStateCount(std::span<const std::uint8_t>* in, std::size_t min_element_bytes, std::uint32_t* count) {
  return base::ReadPod(in, count) && *count <= in->size() / std::max<std::size_t>(1, min_element_bytes);
}

namespace {

// Bytes of the smallest encoded element of each list, for ReadKvStateCount.
constexpr std::size_t kLinkBytes = 8 + 1 + 8 + 8;  // hash, has_parent, parent, page
constexpr std::size_t kRootTenantBytes = 8 + 4;    // page, tenant length
constexpr std::size_t kPublisherBytes = 4;         // group count
constexpr std::size_t kGroupBytes = 4 + 8 + 4;     // medium length, group, ref count
constexpr std::size_t kRefBytes = 8 + 4;           // hash, copies
constexpr std::size_t kSpecBytes = 8 + 1 + 8;      // group, kind, window
// An unset request group, as saved.
constexpr std::int64_t kNoGroup = -1;

std::string GroupText(std::optional<std::int64_t> group) {
  return group.has_value() ? std::to_string(*group) : std::string("unset");
}
// Medium names and tenants are short labels. A longer one is not saved whole
// (AppendState cuts a medium name, leaves out a tenant), so what AppendState
// writes always reads back.
constexpr std::size_t kMaxStateString = std::size_t{1} << 16;

}  // namespace

void KvEventTracker::AppendState(std::span<const std::size_t> publishers, std::vector<std::uint8_t>* out) const {
  using base::AppendPod;
  AppendPod<std::uint64_t>(out, base_scope_);
  AppendPod<std::int64_t>(out, options_.request_group.value_or(kNoGroup));
  AppendPod<std::int64_t>(out, block_size_);
  AppendPod<std::uint8_t>(out, grouped_ ? 1 : 0);
  AppendPod<std::int64_t>(out, request_group_.value_or(kNoGroup));
  AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(specs_.size()));
  for (const KvGroupSpec& spec : specs_) {
    AppendPod<std::int64_t>(out, spec.group);
    AppendPod<std::uint8_t>(out, static_cast<std::uint8_t>(spec.kind));
    AppendPod<std::int64_t>(out, spec.window_tokens);
  }
  AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(chains_.size()));
  chains_.ForEachOldestFirst([&](std::uint64_t hash, std::optional<std::uint64_t> parent, std::uint64_t page) {
    AppendPod<std::uint64_t>(out, hash);
    AppendPod<std::uint8_t>(out, parent.has_value() ? 1 : 0);
    AppendPod<std::uint64_t>(out, parent.value_or(0));
    AppendPod<std::uint64_t>(out, page);
  });
  std::uint32_t roots = 0;
  for (const auto& entry : root_tenants_) roots += entry.second.size() <= kMaxStateString;
  AppendPod<std::uint32_t>(out, roots);
  for (const auto& [page, tenant] : root_tenants_) {
    if (tenant.size() > kMaxStateString) continue;
    AppendPod<std::uint64_t>(out, page);
    AppendKvStateString(out, tenant);
  }
  AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(publishers.size()));
  for (std::size_t p : publishers) {
    if (p >= publishers_.size()) {  // not ours: saved as empty
      AppendPod<std::uint32_t>(out, 0);
      continue;
    }
    const std::vector<GroupState>& groups = publishers_[p].groups;
    AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(groups.size()));
    for (const GroupState& g : groups) {
      AppendKvStateString(out, std::string_view(media_[g.medium]).substr(0, kMaxStateString));
      AppendPod<std::int64_t>(out, g.group);
      AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(g.refs.size()));
      g.refs.ForEach([&](std::uint64_t hash, std::uint32_t copies) {
        AppendPod<std::uint64_t>(out, hash);
        AppendPod<std::uint32_t>(out, copies);
      });
    }
  }
}

base::Status KvEventTracker::RestoreState(std::span<const std::uint8_t> bytes, std::size_t publishers,
                                          bool with_groups) {
  using base::ReadPod;
  std::span<const std::uint8_t>* in = &bytes;
  using base::Status;
  if (!publishers_.empty() || chains_.size() != 0 || counters_.batches != 0) {
    return Status::Error("KV-event tracker state restored into a tracker already in use");
  }
  auto truncated = [](std::string_view what) {
    return Status::Error("KV-event tracker state: truncated " + std::string(what));
  };
  std::uint64_t scope = 0;
  std::int64_t request_group = 0;
  std::int64_t block_size = 0;
  if (!ReadPod(in, &scope) || !ReadPod(in, &request_group) || !ReadPod(in, &block_size)) return truncated("header");
  if (scope != base_scope_) {
    return Status::Error("KV-event tracker state was written under another scope (the model or revision)");
  }
  // Before groups (with_groups false) the request group was always 0, the
  // group an unset request_group starts from.
  const std::optional<std::int64_t> saved_group =
      request_group == kNoGroup ? std::nullopt : std::optional<std::int64_t>(request_group);
  if (with_groups ? saved_group != options_.request_group : request_group != options_.request_group.value_or(0)) {
    return Status::Error("KV-event tracker state was written for request_group " + GroupText(saved_group) + ", not " +
                         GroupText(options_.request_group));
  }
  if (block_size < 0) return Status::Error("KV-event tracker state: negative block size");

  std::uint8_t grouped = 0;
  std::optional<std::int64_t> chosen = options_.request_group;
  std::vector<KvGroupSpec> specs;
  if (with_groups) {
    std::int64_t chosen_group = 0;
    std::uint32_t count = 0;
    if (!ReadPod(in, &grouped) || !ReadPod(in, &chosen_group) || !ReadKvStateCount(in, kSpecBytes, &count)) {
      return truncated("groups");
    }
    if (grouped > 1) return Status::Error("KV-event tracker state: bad grouped flag");
    if (chosen_group != kNoGroup && (chosen_group < 0 || chosen_group > kKvMaxGroupIdx)) {
      return Status::Error("KV-event tracker state: request group " + std::to_string(chosen_group));
    }
    chosen = chosen_group == kNoGroup ? std::nullopt : std::optional<std::int64_t>(chosen_group);
    if (options_.request_group.has_value() && chosen != options_.request_group) {
      return Status::Error("KV-event tracker state: request group " + GroupText(chosen) + " under request_group " +
                           GroupText(options_.request_group));
    }
    for (std::uint32_t i = 0; i < count; ++i) {
      KvGroupSpec spec;
      std::uint8_t kind = 0;
      if (!ReadPod(in, &spec.group) || !ReadPod(in, &kind) || !ReadPod(in, &spec.window_tokens)) {
        return truncated("groups");
      }
      if (spec.group < 0 || spec.group > kKvMaxGroupIdx || kind >= kKvSpecKinds || spec.window_tokens < 0 ||
          spec.window_tokens > kKvMaxWindowTokens || (!specs.empty() && specs.back().group >= spec.group)) {
        return Status::Error("KV-event tracker state: bad group spec " + std::to_string(i));
      }
      spec.kind = static_cast<KvSpecKind>(kind);
      specs.push_back(spec);
    }
  }

  KvChainIndex chains(options_.parent_map_max_entries);
  std::uint32_t links = 0;
  if (!ReadKvStateCount(in, kLinkBytes, &links)) return truncated("parent map");
  for (std::uint32_t i = 0; i < links; ++i) {
    std::uint64_t hash = 0, parent = 0, page = 0;
    std::uint8_t has_parent = 0;
    if (!ReadPod(in, &hash) || !ReadPod(in, &has_parent) || !ReadPod(in, &parent) || !ReadPod(in, &page)) {
      return truncated("parent map");
    }
    if (has_parent > 1) return Status::Error("KV-event tracker state: bad parent flag");
    chains.Put(hash, has_parent != 0 ? std::optional<std::uint64_t>(parent) : std::nullopt, page);
  }

  std::unordered_map<curve::PageId, std::string> root_tenants;
  std::uint32_t roots = 0;
  if (!ReadKvStateCount(in, kRootTenantBytes, &roots)) return truncated("root tenants");
  for (std::uint32_t i = 0; i < roots; ++i) {
    std::uint64_t page = 0;
    std::string tenant;
    if (!ReadPod(in, &page) || !ReadKvStateString(in, kMaxStateString, &tenant)) return truncated("root tenants");
    root_tenants[page] = std::move(tenant);
  }

  std::vector<std::string> media = media_;
  std::vector<Publisher> restored;
  std::uint32_t count = 0;
  if (!ReadKvStateCount(in, kPublisherBytes, &count)) return truncated("publishers");
  if (count != publishers) {
    return Status::Error("KV-event tracker state holds " + std::to_string(count) + " publishers, expected " +
                         std::to_string(publishers));
  }
  for (std::uint32_t p = 0; p < count; ++p) {
    Publisher& pub = restored.emplace_back();
    std::uint32_t groups = 0;
    if (!ReadKvStateCount(in, kGroupBytes, &groups)) return truncated("block state");
    for (std::uint32_t g = 0; g < groups; ++g) {
      std::string medium;
      std::int64_t group = 0;
      std::uint32_t refs = 0;
      if (!ReadKvStateString(in, kMaxStateString, &medium) || !ReadPod(in, &group) ||
          !ReadKvStateCount(in, kRefBytes, &refs)) {
        return truncated("block state");
      }
      GroupState state;
      state.medium = MediumIndexIn(&media, medium);
      state.group = group;
      for (const GroupState& other : pub.groups) {
        if (other.medium == state.medium && other.group == group) {
          return Status::Error("KV-event tracker state: medium '" + medium + "' group " + std::to_string(group) +
                               " twice in one publisher");
        }
      }
      state.refs.Reserve(refs);
      for (std::uint32_t r = 0; r < refs; ++r) {
        std::uint64_t hash = 0;
        std::uint32_t copies = 0;
        if (!ReadPod(in, &hash) || !ReadPod(in, &copies)) return truncated("block state");
        if (copies == 0 || copies == curve::PageMap::kEmpty) {
          return Status::Error("KV-event tracker state: bad reference count " + std::to_string(copies));
        }
        if (state.refs.Find(hash) != nullptr) return Status::Error("KV-event tracker state: a block hash twice");
        state.refs.Insert(hash, copies);
      }
      pub.groups.push_back(std::move(state));
    }
  }

  if (!in->empty()) return Status::Error("KV-event tracker state: " + std::to_string(in->size()) + " bytes left over");

  // Every part read and checked: commit.
  block_size_ = block_size;
  grouped_ = grouped != 0;
  request_group_ = chosen;
  specs_ = std::move(specs);
  chains_ = std::move(chains);
  root_tenants_ = std::move(root_tenants);
  media_ = std::move(media);
  totals_.resize(media_.size());
  publishers_ = std::move(restored);
  return Status::Ok();
}

}  // namespace kvwatch::collectors
