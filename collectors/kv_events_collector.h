// KvEventsCollector: an engine's KV-cache events over ZeroMQ (vLLM, SGLang,
// TensorRT-LLM; ../shared/docs/engine-formats.md sections 1.2-1.5, 5.1, 6.2, 9),
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
// is kept:
//   - seq == last + 1: in order;
//   - seq >  last + 1: batches were lost. With a replay endpoint the collector
//     asks for them at once on a DEALER socket ([empty delimiter, 8-byte BE start
//     seq]; replies in the 2-frame [seq, payload] or 3-frame [topic, seq, payload]
//     form; the end marker, seq -1 or an empty payload, stops it), applies the
//     batches of the missing range in order, then the live one. The wait is
//     bounded: at most options.replay_timeout per Poll in total, so the agent's
//     loop never stalls longer; what did not arrive in time, or had already left
//     the engine's replay buffer, is counted as lost. Without a replay endpoint
//     the gap is counted as lost. Lost batches also count as CollectorStats
//     dropped;
//   - seq <= last: the publisher restarted (seq starts at 0 per process): its
//     block state is reset and the restart counted.
// The first message of a publisher is taken as is (the agent joins mid-stream).
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
//   kvwatch_kv_events_publisher_restarts_total, kvwatch_kv_events_cache_clears_total,
//   kvwatch_kv_events_unknown_events_total, kvwatch_kv_events_unknown_removals_total,
//   kvwatch_kv_events_chain_anomalies_total{kind="truncated"|"cycle"|"too_long"},
//   kvwatch_kv_events_parent_map_entries, kvwatch_kv_events_parent_map_evictions_total.
//
// Not persisted: block state and the parent map start empty when the agent
// starts, so chains through blocks cached before then are truncated until the
// engine stores them again.
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
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/kv_event_tracker.h"
#include "base/status.h"

namespace kvwatch::collectors {

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
  std::chrono::milliseconds replay_timeout{100};
  std::chrono::milliseconds poll_interval{50};
  int receive_hwm = 100000;  // messages queued per SUB socket (vLLM's own PUB default)
  std::size_t max_publishers = 256;
  double max_clock_skew_s = kDefaultMaxClockSkewS;
};

// Counters of the transport, beside the tracker's.
struct KvTransportCounters {
  std::uint64_t batches = 0;   // payloads decoded and applied (live + replayed)
  std::uint64_t lost = 0;      // batches known missing and not recovered
  std::uint64_t replayed = 0;  // batches recovered from a replay socket
  std::uint64_t replay_requests = 0;
  std::uint64_t restarts = 0;  // publisher restarts seen
};

// The replay endpoint of data-parallel rank `rank` (see above); an error when
// a tcp endpoint has no numeric port to offset.
base::Result<std::string> OffsetKvEndpoint(const std::string& endpoint, std::size_t rank);

class KvEventsCollector : public Collector {
 public:
  static base::Result<std::unique_ptr<KvEventsCollector>> Create(KvEventsCollectorOptions options,
                                                                   CollectorLog log);
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
  void ApplyPayload(std::size_t publisher, std::uint64_t seq, const std::uint8_t* data, std::size_t size,
                    RequestSink& sink, double wall_now_s, bool replayed);
  void Recover(std::size_t publisher, std::uint64_t from, std::uint64_t to, RequestSink& sink,
               double wall_now_s);
  std::uint64_t Replay(std::size_t publisher, std::uint64_t from, std::uint64_t to, RequestSink& sink,
                       double wall_now_s);
  void ReadMonitors();

  KvEventsCollectorOptions options_;
  RateLimitedLog log_;
  std::unique_ptr<Io> io_;
  KvEventTracker tracker_;
  KvTransportCounters transport_;
  CollectorStats stats_;
  std::chrono::steady_clock::duration replay_budget_{};
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_KV_EVENTS_COLLECTOR_H_
