#include "collectors/testing/kv_event_encoder.h"

#include <array>
#include <cstddef>
#include <cstring>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "collectors/kv_event_decoder.h"

namespace kvwatch::collectors {

namespace {

struct VectorSink {
  std::vector<std::uint8_t>* out;
  void write(const char* data, std::size_t n) {
    out->insert(out->end(), reinterpret_cast<const std::uint8_t*>(data),
                reinterpret_cast<const std::uint8_t*>(data) + n);
  }
};

class Encoder {
 public:
  Encoder(std::vector<std::uint8_t>* out, const KvEncodeOptions& options) : sink_{out}, pk_(sink_), options_(options) {}

  void Batch(const KvEventBatch& batch) {
    const bool rank = batch.dp_rank.has_value();
    if (options_.envelope_as_map) {
      pk_.pack_map(rank ? 3 : 2);
      Str("ts");
    } else {
      pk_.pack_array(rank ? 3 : 2);
    }
    Float64(batch.ts);
    if (options_.envelope_as_map) Str("events");
    pk_.pack_array(static_cast<std::uint32_t>(batch.events.size()));
    for (const KvEvent& e : batch.events) std::visit([this](const auto& ev) { Event(ev); }, e);
    if (rank) {
      if (options_.envelope_as_map) Str("data_parallel_rank");
      pk_.pack_int64(*batch.dp_rank);
    }
  }

 private:
  // A field as written by one of the helpers below, with whether it is
  // defaulted (omitted when None) and whether it is None.
  struct Slot {
    const char* name;
    bool defaulted;
    bool none;
    void (Encoder::*write)(const void*);
    const void* value;
  };

  bool Map() const { return options_.encoding == KvEncoding::kMap; }

  // Always 0xcb and 8 big-endian bytes, as msgspec writes a float (pack_double
  // would shorten an integral value to an int).
  void Float64(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    const char tag = static_cast<char>(0xcb);
    const std::array<std::uint8_t, 8> be = EncodeSeqFrame(bits);
    sink_.write(&tag, 1);
    sink_.write(reinterpret_cast<const char*>(be.data()), be.size());
  }

  void Str(std::string_view s) {
    pk_.pack_str(static_cast<std::uint32_t>(s.size()));
    pk_.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
  }
  void Hash(std::uint64_t h) {
    switch (options_.hashes) {
      case KvHashEncoding::kUnsigned:
        pk_.pack_uint64(h);
        return;
      case KvHashEncoding::kSigned:
        pk_.pack_int64(static_cast<std::int64_t>(h));
        return;
      case KvHashEncoding::kBytes: {
        const std::array<std::uint8_t, 8> be = EncodeSeqFrame(h);
        pk_.pack_bin(8);
        pk_.pack_bin_body(reinterpret_cast<const char*>(be.data()), 8);
        return;
      }
    }
  }
  void WriteHashes(const void* v) {
    const auto& hashes = *static_cast<const std::vector<std::uint64_t>*>(v);
    pk_.pack_array(static_cast<std::uint32_t>(hashes.size()));
    for (std::uint64_t h : hashes) Hash(h);
  }
  void WriteOptHash(const void* v) {
    const auto& h = *static_cast<const std::optional<std::uint64_t>*>(v);
    if (h)
      Hash(*h);
    else
      pk_.pack_nil();
  }
  void WriteInts(const void* v) {
    const auto& ints = *static_cast<const std::vector<std::int64_t>*>(v);
    pk_.pack_array(static_cast<std::uint32_t>(ints.size()));
    for (std::int64_t t : ints) pk_.pack_int64(t);
  }
  void WriteInt(const void* v) { pk_.pack_int64(*static_cast<const std::int64_t*>(v)); }
  void WriteOptInt(const void* v) {
    const auto& i = *static_cast<const std::optional<std::int64_t>*>(v);
    if (i)
      pk_.pack_int64(*i);
    else
      pk_.pack_nil();
  }
  void WriteOptStr(const void* v) {
    const auto& s = *static_cast<const std::optional<std::string>*>(v);
    if (s)
      Str(*s);
    else
      pk_.pack_nil();
  }
  void WriteRaw(const void* v) {
    const auto& raw = *static_cast<const std::string*>(v);
    if (raw.empty())
      pk_.pack_nil();
    else
      sink_.write(raw.data(), raw.size());
  }

  static Slot OptStr(const char* name, bool defaulted, const std::optional<std::string>& v) {
    return {name, defaulted, !v.has_value(), &Encoder::WriteOptStr, &v};
  }
  static Slot OptInt(const char* name, bool defaulted, const std::optional<std::int64_t>& v) {
    return {name, defaulted, !v.has_value(), &Encoder::WriteOptInt, &v};
  }

  // Writes a tagged struct as msgspec does with omit_defaults: required slots
  // always, defaulted slots only when not None (array form: up to the last one
  // that is not None, earlier ones as nil).
  void Struct(std::string_view tag, const Slot* slots, std::size_t n) {
    if (Map()) {
      std::uint32_t count = 1;
      for (std::size_t i = 0; i < n; ++i) count += (!slots[i].defaulted || !slots[i].none) ? 1 : 0;
      pk_.pack_map(count);
      Str("type");
      Str(tag);
      for (std::size_t i = 0; i < n; ++i) {
        if (slots[i].defaulted && slots[i].none) continue;
        Str(slots[i].name);
        (this->*slots[i].write)(slots[i].value);
      }
      return;
    }
    std::size_t len = n;
    while (len > 0 && slots[len - 1].defaulted && slots[len - 1].none) --len;
    pk_.pack_array(static_cast<std::uint32_t>(len + 1));
    Str(tag);
    for (std::size_t i = 0; i < len; ++i) (this->*slots[i].write)(slots[i].value);
  }

  void Event(const BlockStored& e) {
    const bool extra = e.has_extra_keys && !e.extra_keys_msgpack.empty();
    Slot slots[] = {
        {"block_hashes", false, false, &Encoder::WriteHashes, &e.block_hashes},
        {"parent_block_hash", false, false, &Encoder::WriteOptHash, &e.parent_block_hash},
        {"token_ids", false, false, &Encoder::WriteInts, &e.token_ids},
        {"block_size", false, false, &Encoder::WriteInt, &e.block_size},
        OptInt("lora_id", false, e.lora_id),
        OptStr("medium", false, e.medium),
        OptStr("lora_name", false, e.lora_name),
        {"extra_keys", true, !extra, &Encoder::WriteRaw, &e.extra_keys_msgpack},
        OptInt("group_idx", true, e.group_idx),
        OptStr("kv_cache_spec_kind", true, e.kv_cache_spec_kind),
        OptInt("kv_cache_spec_sliding_window", true, e.kv_cache_spec_sliding_window),
        OptStr("locality", true, e.locality),
        OptStr("ownership", true, e.ownership),
        OptStr("session_id", true, e.session_id),
        OptStr("cache_salt", true, e.cache_salt),
    };
    // The array form has no cache_salt position; it is the last slot, so
    // dropping it from the count keeps every other position intact.
    Struct("BlockStored", slots, Map() ? std::size(slots) : std::size(slots) - 1);
  }

  void Event(const BlockRemoved& e) {
    Slot slots[] = {
        {"block_hashes", false, false, &Encoder::WriteHashes, &e.block_hashes},
        OptStr("medium", false, e.medium),
        OptInt("group_idx", true, e.group_idx),
        OptStr("locality", true, e.locality),
        OptStr("ownership", true, e.ownership),
    };
    Struct("BlockRemoved", slots, std::size(slots));
  }

  void Event(const AllBlocksCleared&) { Struct("AllBlocksCleared", nullptr, 0); }
  void Event(const UnknownKvEvent& e) { Struct(e.tag, nullptr, 0); }

  void Event(const CacheCreated& e) {
    pk_.pack_map(2);
    Str("type");
    Str("created");
    Str("num_blocks_per_cache_level");
    WriteInts(&e.num_blocks_per_cache_level);
  }

  void Diff(const std::optional<std::int64_t>& old_value, const std::optional<std::int64_t>& new_value) {
    if (!old_value && !new_value) {
      pk_.pack_nil();
      return;
    }
    pk_.pack_map(3);
    Str("type");
    Str("event_diff");
    Str("new_value");
    WriteOptInt(&new_value);
    Str("old_value");
    WriteOptInt(&old_value);
  }

  void Event(const BlockUpdated& e) {
    pk_.pack_map(4);
    Str("type");
    Str("updated");
    Str("block_hash");
    Hash(e.block_hash);
    Str("cache_level");
    Diff(e.cache_level_old, e.cache_level_new);
    Str("priority");
    Diff(e.priority_old, e.priority_new);
  }

  VectorSink sink_;
  msgpack::packer<VectorSink> pk_;
  KvEncodeOptions options_;
};

}  // namespace

std::vector<std::uint8_t> EncodeKvEventBatch(const KvEventBatch& batch, const KvEncodeOptions& options) {
  std::vector<std::uint8_t> out;
  Encoder(&out, options).Batch(batch);
  return out;
}

std::vector<std::uint8_t> EncodeKvEventBatch(const KvEventBatch& batch, KvEncoding encoding) {
  KvEncodeOptions options;
  options.encoding = encoding;
  return EncodeKvEventBatch(batch, options);
}

}  // namespace kvwatch::collectors
