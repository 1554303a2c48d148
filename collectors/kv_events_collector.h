// KvEventsCollector: an engine's KV-cache events over ZeroMQ (vLLM, SGLang,
// TensorRT-LLM: the wire formats of collectors/kv_event_decoder.h, with their sources),
// decoded by KvEventDecoder and turned into engine state, engine metrics and a
// page-reference stream by KvEventTracker (kv_event_tracker.h, which documents
// the state, the request reconstruction and what it misses).
//
// Sockets. One SUB socket per configured endpoint (one per data-parallel rank,
// listed in rank order), subscribed to the configured topic prefix ("" = all);
// connected, or bound when options.bind is set (engines then connect in, as in
// llm-d's centralized mode; a "tcp://host:*" bind takes an ephemeral port, see
// endpoints()). Each Poll drains what is queued without blocking, at most
// options.max_messages_per_poll messages per socket. Every message must have 3
// frames [topic, seq (8 bytes big-endian), msgpack payload].
//
// Publishers and sequence numbers. A publisher is (endpoint, topic): in connect
// mode one per endpoint; in bind mode engines sharing an endpoint must use
// distinct topics (llm-d's kv@<pod>@<model> convention), or their sequence
// numbers interleave and read as gaps and restarts. Per publisher the last seq
// is kept (unsigned 64-bit, as the 8 big-endian bytes read):
//   - seq == last + 1: in order;
//   - last + 1 < seq <= last + kKvMaxSeqJump (2^20): batches were lost on the
//     way. Without a replay endpoint they are counted lost at once. With one,
//     the gap [last + 1, seq - 1] is fetched from it over as many polls as it
//     takes ("recovering"). The request is vLLM's ([empty delimiter, 8-byte BE
//     start seq] on a DEALER kept across polls); the answer is every buffered
//     batch with seq >= start, then an end marker (seq -1 or an empty
//     payload), in the 2-frame [seq, payload] or 3-frame [topic, seq, payload]
//     form (vLLM vllm/distributed/kv_events.py ZmqEventPublisher._service_replay,
//     v0.25 and v0.26 framings with the 8-byte request; SGLang and
//     TensorRT-LLM answer alike).
//     Each poll spends at most options.replay_timeout on all gaps together and
//     reads at most options.max_messages_per_poll replies per publisher, so the
//     agent's loop never stalls longer; the fetching goes on at the next poll.
//     last stays the last batch applied; `seen` (the highest seq a live message
//     showed) is where the gap ends. Live messages of a recovering publisher
//     beyond `seen` are held, at most max_messages_per_poll of the newest (an
//     older one dropped from the hold is fetched by the replay like the rest),
//     and applied in order once the replay reaches them; one within the gap is
//     dropped (the replay returns it). Replies:
//       - seq == last + 1: applied (counted replayed), then the held batches
//         that follow; the recovery ends when last reaches seen;
//       - seq <= last: already applied, skipped;
//       - the first batch of an answer beyond last + 1: the engine's buffer
//         no longer holds the batches before it: exactly those are counted
//         lost and logged;
//       - a later batch of an answer beyond last + 1 (a reply dropped on the
//         way, e.g. at the ROUTER's high-water mark): asked again from last + 1
//         on a fresh DEALER, whose answer's first batch tells what is lost;
//       - an end marker before last reaches seen: asked again from last + 1
//         (the engine published on meanwhile); one before any batch of its
//         answer: nothing from last + 1 on is buffered any more: lost;
//       - nothing for options.replay_give_up / 2: asked once more on a fresh
//         DEALER; nothing for options.replay_give_up: the rest is lost.
//     Nothing is applied twice or out of order. Lost batches also count as
//     CollectorStats dropped;
//   - seq <= last, or seq > last + 2^20: the publisher restarted (seq starts at
//     0 per process; a jump that far is no loss a replay buffer could answer,
//     and read as a gap a seq of -5 would count 2^64 batches lost): its block
//     state is reset, the restart counted
//     (kvwatch_kv_events_publisher_restarts_total) and logged with the endpoint,
//     topic and both seqs; nothing is counted lost. 2^20 batches is hours of a
//     busy engine's steps (one batch per scheduler step), far beyond any replay
//     buffer (vLLM keeps 10000). A publisher whose seq goes wild and back counts
//     a restart each way.
// The first message of a publisher is taken as is (the agent joins mid-stream),
// unless its last seq was restored (below).
//
// SGLang's snapshot-capable publisher (python/sglang/srt/disaggregation/
// kv_events.py with a snapshot_endpoint, SNAPSHOT_PROTOCOL_VERSION 1, 2026)
// appends "\0sgl-kv-epoch=<epoch>" to its topic (a fresh epoch per publisher
// process) and, each time a client asks its snapshot endpoint for a placement
// snapshot, publishes a barrier: an empty batch on
// "<topic>\0sgl-kv-epoch=<epoch>\0sgl-kv-snapshot=<id>" that takes the next seq
// of the same stream (its replay buffer holds it too). ParseKvTopic
// (kv_event_decoder.h) splits such topics, and a publisher is (endpoint, topic
// without them):
//   - a barrier is a batch of its publisher: its seq goes through the rules
//     above (in order, or a gap before it is still a gap), its empty payload is
//     applied; it is neither a publisher of its own nor, taken in order, a gap
//     (counted in KvTransportCounters.barriers);
//   - a new epoch on a known topic is that publisher restarted, whatever the
//     seq: counted and logged as a restart, its block state reset, the new seq
//     taken as the first. The publisher's topic (as saved in the state file)
//     carries its epoch, so an engine that restarted while the agent was down
//     is a restart too, even when it has published past the saved seq (the
//     limit below does not apply to such publishers).
// The epoch names a process, not an engine: SGLang engines that share a bound
// endpoint still need distinct topics (above), or each one's batches restart
// the other's publisher.
// kvwatch does not read the snapshot endpoint: gaps are recovered from the
// replay endpoint as for any publisher. Topics are logged whole, SGLang's NUL
// separators and other control bytes as \xNN (EscapeKvTopic).
// The replay endpoint of the endpoint with index i is options.replay_endpoint
// offset as vLLM offsets it per rank: tcp port + i; inproc and ipc get "_dp<i>".
// Replay assumes one publisher per endpoint.
//
// A bound SUB socket attaches engines that connect in only when Poll calls into
// it, so the first subscription reaches them at the first Poll after they
// connect. NotifyFd is -1: ZeroMQ's ZMQ_FD is edge-triggered and per socket, so
// the agent polls on the interval (default 50 ms; the SUB queue holds
// options.receive_hwm messages per socket meanwhile).
//
// Errors by reason (CollectorStats.errors): the decoder's codes ("bad_frames"
// for a wrong frame count or seq frame, "not_msgpack", "truncated",
// "bad_envelope", "bad_event", "bad_hash", ...), "too_many_publishers", and
// "zmq_error". None is fatal; each is logged (the first 100, then every 1000th).
//
// up: every connected endpoint has a live connection to its publisher (from
// the socket monitor), and every bound endpoint is bound.
//
// Metrics (AppendSamples; the block counters through engine_signals.h's table),
// all labelled collector=<name>:
//   kvwatch_engine_stored_blocks_total{medium}, kvwatch_engine_evicted_blocks_total{medium},
//   kvwatch_engine_resident_blocks{medium}, kvwatch_engine_reused_blocks_total{medium},
//   kvwatch_engine_tier_moved_blocks_total{medium}, kvwatch_kv_events_batches_total,
//   kvwatch_kv_events_lost_total, kvwatch_kv_events_replayed_total,
//   kvwatch_kv_events_recovery_polls_total, kvwatch_kv_events_publisher_restarts_total,
//   kvwatch_kv_events_cache_clears_total,
//   kvwatch_kv_events_unknown_events_total, kvwatch_kv_events_unknown_removals_total,
//   kvwatch_kv_events_chain_anomalies_total{kind="truncated"|"cycle"|"too_long"},
//   kvwatch_kv_events_parent_map_entries, kvwatch_kv_events_parent_map_evictions_total;
// and, once an event carried group_idx or a cache-spec field (KvEventTracker::
// grouped(): a stream without group fields gives exactly the families above),
// per KV cache group (kv_event_tracker.h):
//   kvwatch_kv_events_group_stored_blocks_total{medium,group,kind},
//   kvwatch_kv_events_group_evicted_blocks_total{medium,group,kind},
//   kvwatch_kv_events_group_resident_blocks{medium,group,kind},
//   kvwatch_kv_events_group_window_tokens{group,kind},
//   kvwatch_kv_events_request_group (the group requests are taken from, -1: none yet),
//   kvwatch_kv_events_group_anomalies_total{kind}.
// Each group anomaly is logged once, at its first occurrence, with the
// publisher and seq, what was seen and what was expected.
//
// Batch timestamps. A batch's ts (wall-clock epoch seconds) becomes its
// requests' timestamp_s, which drives the windows' clock, so it is checked
// (time_sanity.h) against the poll's wall time: more than
// options.max_clock_skew_s ahead is error "future_timestamp", not finite or
// negative is "bad_timestamp", each logged with the publisher and seq. Such a
// batch's block events are still applied (the block state and parent map stay
// the engine's, and later batches rebuild their chains through its blocks);
// its requests are not handed on (nor counted in CollectorStats records).
//
// State across agent restarts (AppendState / RestoreState, the collector's part
// of the agent's one atomic state file). Saved: per publisher its endpoint index,
// the endpoint as configured, its topic, its last applied seq and `seen` (above
// the last applied seq: a gap still being fetched), the transport counters and
// the collector's stats (batches, lost, replayed, replay requests, restarts,
// recovery polls; records, dropped, errors: they continue across restarts, so
// a loss stays counted), and the tracker's state (KvEventTracker::AppendState:
// block state per publisher, the parent map, the salted roots' tenants, the
// block size, the KV cache groups). Encoding: a magic, a version (3; version 2,
// without groups, and version 1, without `seen`, counters or stats either, are
// still read), then little fixed-size fields and
// length-prefixed strings in host byte order; RestoreState checks every count
// and length against the bytes left, rejects another magic or version, bytes
// left over, duplicate publishers and a tracker state of another scope or
// request group, and is all or nothing. After a restore each publisher
// continues from its saved seq as if the agent had never stopped: a gap still
// being fetched is asked for again at the first Poll (held live batches are not
// saved: the replay returns them); a first message with seq == saved + 1 is in
// order; with a larger seq (within 2^20) the missed range is fetched from the
// replay endpoint, so every batch is applied exactly once, or counted lost when
// the replay buffer no longer holds it; with seq <= saved the engine restarted
// while the agent was down (a restart, as above). A saved publisher whose
// endpoint index no longer holds the same configured endpoint keeps nothing
// (its block state is dropped, logged). Limit: an engine that restarted while
// the agent was down and has already published more than saved + 1 batches is
// taken for a gap (the seq alone cannot tell; an SGLang epoch can, above); its replay returns the new
// process's batches, applied onto the old block state. WantsSave is true after
// a restart, a loss, or the end of a recovery, until the next AppendState.
//
// Topics are logged quoted, NULs and control bytes escaped (\x00), so a NUL or control
// byte in one shows instead of cutting the line.
//
// Every collector of a process shares one ZeroMQ context (one I/O thread),
// released with the last collector: one collector per replica of a fleet must
// not mean one I/O thread each.
//
// Thread safety: one thread (the agent's loop) calls every method.
#ifndef KVWATCH_COLLECTORS_KV_EVENTS_COLLECTOR_H_
#define KVWATCH_COLLECTORS_KV_EVENTS_COLLECTOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/metric_def.h"
#include "base/status.h"
#include "collectors/collector.h"
#include "collectors/collector_options.h"  // KvEventsCollectorOptions
#include "collectors/kv_event_tracker.h"
#include "collectors/time_sanity.h"

namespace kvwatch::collectors {

struct KvTopic;  // kv_event_decoder.h

// A sequence number more than this many beyond a publisher's last is a restart,
// not a gap (see above).
inline constexpr std::uint64_t kKvMaxSeqJump = std::uint64_t{1} << 20;

// Counters of the transport, beside the tracker's.
struct KvTransportCounters {
  std::uint64_t batches = 0;   // payloads decoded and applied (live + replayed)
  std::uint64_t lost = 0;      // batches known missing and not recovered
  std::uint64_t replayed = 0;  // batches recovered from a replay socket
  std::uint64_t replay_requests = 0;
  std::uint64_t restarts = 0;        // publisher restarts seen
  std::uint64_t recovery_polls = 0;  // polls that spent time fetching a gap
  std::uint64_t barriers = 0;        // SGLang snapshot barriers received live (also in batches)
};

// The replay endpoint of data-parallel rank `rank` (see above); an error when
// a tcp endpoint has no numeric port to offset.
base::Result<std::string> OffsetKvEndpoint(const std::string& endpoint, std::size_t rank);

class KvEventsCollector : public Collector {
 public:
  static base::Result<std::unique_ptr<KvEventsCollector>> Create(KvEventsCollectorOptions options, CollectorLog log);
  ~KvEventsCollector() override;
  KvEventsCollector(const KvEventsCollector&) = delete;
  KvEventsCollector& operator=(const KvEventsCollector&) = delete;

  const std::string& name() const override { return options_.name; }
  std::string_view kind() const override { return "kv_events"; }
  std::chrono::milliseconds poll_interval() const override { return options_.poll_interval; }
  void Poll(RequestSink& sink, double wall_now_s) override;
  CollectorStats stats() const override;
  EngineSignals engine_signals() const override;  // the block counters per medium
  void AppendSamples(std::vector<MetricSample>* out) const override;
  // Per publisher its last sequence number, and the tracker's state (see above).
  void AppendState(std::vector<std::uint8_t>* out) const override;
  // Before the first Poll; an empty part is a fresh start.
  base::Status RestoreState(std::span<const std::uint8_t> in) override;
  // After a publisher restart or a gap recovered from a replay socket.
  bool WantsSave() const override { return save_events_ != save_events_at_append_; }

  // The endpoints as bound or connected: for a bind, the address ZeroMQ reports
  // (with the port it chose for "tcp://host:*").
  std::vector<std::string> endpoints() const;
  const KvEventTracker& tracker() const { return tracker_; }
  const KvTransportCounters& transport() const { return transport_; }

 private:
  struct Io;
  KvEventsCollector(KvEventsCollectorOptions options, CollectorLog log);

  void CountError(std::string_view reason, const std::string& message);
  void HandleMessage(std::size_t endpoint, RequestSink& sink, double wall_now_s);
  // A known publisher seen on another live topic: a new SGLang epoch restarts it.
  void NewTopic(std::size_t publisher, std::size_t endpoint, const KvTopic& topic, std::uint64_t seq, RequestSink& sink,
                double wall_now_s);
  void ApplyPayload(std::size_t publisher, std::uint64_t seq, const std::uint8_t* data, std::size_t size,
                    RequestSink& sink, double wall_now_s, bool replayed);
  // Gap recovery (see above): a live batch kept until the replay reaches it;
  // the held batches that are next in order applied; every seq up to `upto`
  // applied from the held batches or counted lost; that, ending the recovery
  // when nothing is left to fetch; a replay request from last_seq + 1; one
  // poll's share of the fetching.
  void Hold(std::size_t publisher, std::uint64_t seq, std::span<const std::uint8_t> payload);
  void ApplyHeld(std::size_t publisher, RequestSink& sink, double wall_now_s);
  void SkipTo(std::size_t publisher, std::uint64_t upto, std::string_view why, RequestSink& sink, double wall_now_s);
  void FinishRecovery(std::size_t publisher, std::uint64_t upto, std::string_view why, RequestSink& sink,
                      double wall_now_s);
  void AskReplay(std::size_t publisher, bool fresh_socket);
  void AdvanceRecovery(std::size_t publisher, std::chrono::steady_clock::time_point deadline, RequestSink& sink,
                       double wall_now_s);
  void ReadMonitors();

  KvEventsCollectorOptions options_;
  RateLimitedLog log_;
  std::unique_ptr<Io> io_;
  KvEventTracker tracker_;
  KvTransportCounters transport_;
  CollectorStats stats_;
  std::uint64_t polls_ = 0;
  std::uint64_t records_restored_ = 0;               // CollectorStats records before the last restart
  std::uint64_t withheld_requests_ = 0;              // requests of batches with a bad ts, not handed on
  std::uint64_t save_events_ = 0;                    // restarts and recovered gaps seen
  mutable std::uint64_t save_events_at_append_ = 0;  // save_events_ at the last AppendState
};

// The KV-events collector's own metric families (the engine signals' are
// engine_signals.h's), for the metrics reference.
base::MetricDefs KvEventsMetricDefs();

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_KV_EVENTS_COLLECTOR_H_
