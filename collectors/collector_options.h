// The options of every collector the agent config can set (collectors.*), apart
// from the collectors themselves: config/ parses collectors.* straight into these
// structs (config/collectors_section.cc), so each default is written once, here,
// and config/ includes this header without pulling in the ZeroMQ, HTTP, inotify
// or simdjson parts of collectors/. The collectors' own headers include it
// (file_tailer.h, trace_record.h, kv_event_tracker.h, exposition_parser.h,
// trace_file_collector.h, kv_events_collector.h, engine_log_collector.h,
// engine_metrics_collector.h, synth.h); what each option does is documented here.
//
// CollectorSpec is one collector the config asks for, parsed but not created:
// agent/runtime/collector_registry.h creates the live collector from it.
//
// Thread safety: plain values.
#ifndef KVWATCH_COLLECTORS_COLLECTOR_OPTIONS_H_
#define KVWATCH_COLLECTORS_COLLECTOR_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/source_kinds.h"
#include "collectors/time_sanity.h"

namespace kvwatch::collectors {

using TailStartPosition = base::TailStartPosition;  // base/source_kinds.h
using TimestampUnit = base::TimestampUnit;
using EngineLogKind = base::EngineLogKind;

// ------------------------------------------------------------------ The file tailer (file_tailer.h)

struct FileTailerOptions {
  // Paths or glob(3) patterns (*, ?, [...]; no "**", no "~"). Each string is
  // also the source name of the files it finds. A file matched by several
  // patterns belongs to the first. Required: at least one.
  std::vector<std::string> patterns;
  // Where files found by the first Poll() start when no checkpoint was loaded.
  // Default: kEnd.
  TailStartPosition start_position = TailStartPosition::kEnd;
  // Longest line delivered, in bytes, without its "\n". Default: 1 MiB.
  std::size_t max_line_bytes = std::size_t{1} << 20;
  // Size of each read(2). Default: 64 KiB.
  std::size_t read_chunk_bytes = std::size_t{64} << 10;
  // At most this many bytes are read from one file per Poll() (fairness and
  // event-loop latency); 0 means no limit. Default: 8 MiB.
  std::size_t max_read_bytes_per_poll = std::size_t{8} << 20;
  // Bytes at the head of a file hashed into its identity. Default: 256.
  // 0 disables the head check (identity is then dev+inode+offset marker).
  std::size_t fingerprint_bytes = 256;
  // How long a renamed-away file keeps being read after the rename was seen.
  // Default: 5 s (fluent-bit's rotate_wait).
  std::chrono::milliseconds rotate_wait{5000};
  // Checkpoint file; empty disables checkpoints. Its directory must exist.
  std::string checkpoint_path;
  // Create an inotify descriptor (NotifyFd()). Default: true.
  bool use_inotify = true;
  // Monotonic clock for rotate_wait; tests inject a fake one. Default (empty):
  // std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> clock;
  // Tests only: runs in every Poll() right after the patterns were expanded, before
  // any file is opened, so that a test can rename a file inside that window (as a
  // writer rotating on a loaded machine does). Default: none.
  std::function<void()> after_expansion;
  // Tests only: runs in every Poll() after the truncation checks and the
  // unread-rotation scans, right before the files are read, so that a test can
  // truncate a file inside that window (a copytruncate while the pass is busy).
  // Default: none.
  std::function<void()> before_read;

  // Every option but `clock`, `after_expansion` and `before_read`, test hooks that
  // cannot be compared.
  bool operator==(const FileTailerOptions& other) const;
};

inline bool FileTailerOptions::operator==(const FileTailerOptions& other) const {
  return patterns == other.patterns && start_position == other.start_position &&
         max_line_bytes == other.max_line_bytes && read_chunk_bytes == other.read_chunk_bytes &&
         max_read_bytes_per_poll == other.max_read_bytes_per_poll && fingerprint_bytes == other.fingerprint_bytes &&
         rotate_wait == other.rotate_wait && checkpoint_path == other.checkpoint_path &&
         use_inotify == other.use_inotify;
}

// ------------------------------------------------------------------ A trace record (trace_record.h)

struct TraceRecordOptions {
  // How to read "timestamp". Default: kAuto (see trace_record.h).
  TimestampUnit timestamp_unit = TimestampUnit::kAuto;
  // Field names tried, in order, for the tenant/class label. Names must not
  // contain '"' or '\\'. Default: "tenant", then "class", then "type" (the
  // Qwen-Bailian request type text/search/image/file is a class).
  std::vector<std::string> tenant_fields = {"tenant", "class", "type"};
  // Field names tried, in order, for the request class (same rules). Default:
  // "class", then "type".
  std::vector<std::string> class_fields = {"class", "type"};

  bool operator==(const TraceRecordOptions&) const = default;
};

// ------------------------------------------------------------------ The KV-event tracker (kv_event_tracker.h)

// Where a KV-event request's tenant comes from (see kv_event_tracker.h).
enum class KvTenantSource { kNone, kLora, kCacheSalt, kLoraOrSalt, kSessionId };
// Its spellings (collectors.kv_events[].tenant_source), in this order.
inline constexpr base::Spelling<KvTenantSource> kKvTenantSourceSpellings[] = {
    {"none", KvTenantSource::kNone},
    {"lora", KvTenantSource::kLora},
    {"cache_salt", KvTenantSource::kCacheSalt},
    {"lora_or_salt", KvTenantSource::kLoraOrSalt},
    {"session_id", KvTenantSource::kSessionId},
};

// The largest KV cache group index accepted (collectors.kv_events[].request_group,
// and group_idx on the wire: a model has a handful of groups).
inline constexpr std::int64_t kKvMaxGroupIdx = 255;

struct KvEventTrackerOptions {
  // Folded into every page id (docs/semantics.md section 1): the model or
  // revision these events come from. Empty: no model scope.
  std::string scope;
  // The KV-cache group whose primary-medium stores become requests, when set
  // (collectors.kv_events[].request_group, 0 to kKvMaxGroupIdx). Unset: the
  // group that announces a full-attention kind, else group 0 (see
  // kv_event_tracker.h).
  std::optional<std::int64_t> request_group = std::nullopt;
  // Bound of the parent map (see kv_event_tracker.h).
  std::size_t parent_map_max_entries = std::size_t{1} << 22;
  // Longest request emitted (ancestors included), in pages.
  std::size_t max_request_pages = std::size_t{1} << 16;
  // Where Request::tenant comes from. Default: none (no tenant).
  KvTenantSource tenant_source = KvTenantSource::kNone;

  bool operator==(const KvEventTrackerOptions&) const = default;
};

// ------------------------------------------------------------------ An engine's /metrics (exposition_parser.h)

struct EngineSnapshotOptions {
  // When set, only samples whose model_name label equals this (or that have no
  // model_name label) are used.
  std::optional<std::string> model_name;

  bool operator==(const EngineSnapshotOptions&) const = default;
};

// ------------------------------------------------------------------ The collectors

// trace_file_collector.h
struct TraceFileCollectorOptions {
  std::string name;
  FileTailerOptions tailer;
  TraceRecordOptions record;
  std::chrono::milliseconds poll_interval{250};
  // How far ahead of the wall clock a timestamp may be (curve.max_clock_skew).
  double max_clock_skew_s = kDefaultMaxClockSkewS;

  bool operator==(const TraceFileCollectorOptions&) const = default;
};

// kv_events_collector.h
struct KvEventsCollectorOptions {
  std::string name;
  std::vector<std::string> endpoints;  // non-empty
  std::string topic;                   // subscription prefix
  std::string replay_endpoint;         // empty: no replay
  bool bind = false;
  KvEventTrackerOptions tracker;
  // Per socket. Engines publish one batch per scheduler step (tens to hundreds
  // a second), so 1000 per poll is ample headroom, and a backlog is drained in
  // bounded slices rather than holding the agent's loop (its other collectors,
  // and the copy of this one's metrics that /metrics reads, wait for the poll).
  std::size_t max_messages_per_poll = 1000;
  // Fetching a gap from the replay endpoint: at most replay_timeout of each
  // poll (for all publishers together); what the endpoint has not answered
  // for replay_give_up is counted lost.
  std::chrono::milliseconds replay_timeout{100};
  std::chrono::milliseconds replay_give_up{5000};
  std::chrono::milliseconds poll_interval{50};
  int receive_hwm = 100000;  // messages queued per SUB socket (vLLM's own PUB default)
  std::size_t max_publishers = 256;
  // How far ahead of the wall clock a batch's ts may be (time_sanity.h); the
  // config's curve.max_clock_skew.
  double max_clock_skew_s = kDefaultMaxClockSkewS;

  bool operator==(const KvEventsCollectorOptions&) const = default;
};

// engine_log_collector.h
struct EngineLogCollectorOptions {
  std::string name;
  FileTailerOptions tailer;  // start_position defaults to kEnd
  EngineLogKind engine = EngineLogKind::kAuto;
  std::chrono::milliseconds poll_interval{1000};

  bool operator==(const EngineLogCollectorOptions&) const = default;
};

// engine_metrics_collector.h
struct EngineMetricsCollectorOptions {
  std::string name;
  // http:// or https:// URL; the path defaults to "/metrics".
  std::string url;
  std::chrono::milliseconds interval{15000};  // > 0
  std::chrono::milliseconds timeout{5000};    // > 0: connection and read timeout
  int max_backoff_factor = 8;                 // >= 1: longest delay = interval x this
  std::uint32_t page_tokens = 16;             // tokens per kvwatch page (capacity)
  EngineSnapshotOptions snapshot;             // model_name filter
  std::chrono::milliseconds poll_interval{1000};

  bool operator==(const EngineMetricsCollectorOptions&) const = default;
};

// The synthetic replica (synth.h, synth_collector.h).
struct SynthShift {
  // The shift covers arrivals with start_s <= t < end_s. Disabled when
  // end_s <= start_s. Default: disabled.
  double start_s = 0;
  double end_s = 0;
  // Fraction of arrivals during the shift that go to the shift tenant. Default: 0.4.
  double share = 0.4;
  // The shift tenant's label and system prompt length. Default: "tenant-shift", 600.
  std::string tenant = "tenant-shift";
  int system_prompt_pages = 600;
  // Its pool of open sessions and their mean length in turns. Default: 20, 12.
  int active_sessions = 20;
  double mean_session_turns = 12.0;

  bool operator==(const SynthShift&) const = default;
};

// Defaults give about 12,000 requests over 10 minutes with a working set of a few
// thousand pages: ~450 pages of system prompts that every request reuses, ~50
// growing sessions (~1,500 live pages) reused every few seconds, and 30% one-shot
// requests whose own pages are never reused.
struct SynthOptions {
  // ------------------- Stream
  // Seed of the random stream. Default: 1.
  std::uint64_t seed = 1;
  // Poisson arrival rate, requests per second. Default: 20.
  double rate_per_s = 20.0;
  // The stream ends before the first arrival at or after duration_s; 0 = no time
  // limit. Default: 600 s.
  double duration_s = 600.0;
  // The stream ends after max_requests requests; 0 = no count limit. Default: 0.
  // With both limits 0 the stream is unbounded (SynthGenerator only).
  std::uint64_t max_requests = 0;

  // ------------------- Tenants
  // Number of tenants, labelled "tenant-0" .. Default: 4.
  int tenants = 4;
  // Zipf exponent of tenant popularity (0 = uniform). Default: 1.
  double tenant_zipf_exponent = 1.0;
  // System prompt length range in pages, per tenant. Default: 20 .. 200.
  int system_prompt_min_pages = 20;
  int system_prompt_max_pages = 200;

  // ------------------- Requests
  // Open multi-turn sessions at any time. Default: 50.
  int active_sessions = 50;
  // Fraction of arrivals that are one-shot requests. Default: 0.3.
  double one_shot_fraction = 0.3;
  // Mean turns per session (geometric, at least 1). Default: 6.
  double mean_session_turns = 6.0;
  // Mean pages (geometric, at least 1) of a session's first message, of each later
  // message, of each answer, and of a one-shot request's own part. Defaults: 8, 3, 4, 16.
  double mean_first_message_pages = 8.0;
  double mean_followup_message_pages = 3.0;
  double mean_answer_pages = 4.0;
  double mean_one_shot_pages = 16.0;
  // Upper bound on a prompt's pages; a session ends before passing it, and longer
  // first or one-shot prompts are cut to it. At most 2^20 - 1. Default: 4096.
  int max_session_pages = 4096;
  // Tokens per page, for input_tokens and output_tokens. Default: 16.
  int page_tokens = 16;

  // ------------------- Workload shift
  SynthShift shift;

  bool operator==(const SynthOptions&) const = default;
};

// ------------------------------------------------------------------ One collector of the config

// The options of one collector, of its kind.
using CollectorOptions = std::variant<TraceFileCollectorOptions, KvEventsCollectorOptions, EngineLogCollectorOptions,
                                      EngineMetricsCollectorOptions, SynthOptions>;

// One collector the config asks for, parsed but not created.
struct CollectorSpec {
  std::string where;  // "collectors.kv_events[1]", "collectors.synth"
  CollectorOptions options;

  bool operator==(const CollectorSpec&) const = default;
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_COLLECTOR_OPTIONS_H_
