#include "collectors/kv_events_collector.h"

#include <zmq.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <zmq.hpp>

#include "base/byte_io.h"
#include "base/json_writer.h"
#include "collectors/kv_event_decoder.h"

namespace kvwatch::collectors {
namespace {

using Clock = std::chrono::steady_clock;
using Result = base::Result<std::unique_ptr<KvEventsCollector>>;

// Past this many logged problems, only every 1000th is logged: the counters
// keep the totals, and a flood of garbage must not flood the log.
// Frames kept of one message: a replay reply on a DEALER has at most 4; one
// more tells "too many" apart.
constexpr std::size_t kMaxFrames = 5;

// Receives one whole multipart message without blocking. Returns its number of
// frames (0: nothing queued); frames beyond frames->size() are read and dropped.
std::size_t ReceiveMessage(zmq::socket_t& socket, std::vector<zmq::message_t>* frames) {
  std::size_t count = 0;
  zmq::message_t scratch;
  for (;;) {
    zmq::message_t& target = count < frames->size() ? (*frames)[count] : scratch;
    // The parts of a multipart message arrive together: only the first can be missing.
    const auto received = socket.recv(target, count == 0 ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    if (!received.has_value()) return count;
    ++count;
    if (!target.more()) return count;
  }
}

Frame AsFrame(const zmq::message_t& m) { return Frame(m.data<std::uint8_t>(), m.size()); }

std::atomic<std::uint64_t> monitor_counter{0};

// The collector's state part (AppendState): kStateMagic, kStateVersion, the
// publisher count, per publisher [endpoint index u32, configured endpoint,
// topic, last applied seq u64, highest seq known u64], the transport counters
// (batches, lost, replayed, replay requests, restarts, recovery polls: u64
// each), the collector's stats (collector.h AppendStats: records, dropped,
// errors), then the tracker's part (KvEventTracker::AppendState, its publishers
// in the same order) to the end. Host byte order (base/byte_io.h). Version 2
// (still read) had no KV cache groups in the tracker's part; version 1 (still
// read) no highest seq, counters or stats either.
constexpr std::uint32_t kStateMagic = 0x5645564b;  // "KVEV" read little-endian
constexpr std::uint32_t kStateVersion = 3;
constexpr std::uint32_t kStateVersionWithoutGroups = 2;
constexpr std::uint32_t kStateVersionWithoutCounters = 1;
constexpr std::size_t kSavedPublisherBytesV1 = 4 + 4 + 4 + 8;
constexpr std::size_t kSavedPublisherBytes = kSavedPublisherBytesV1 + 8;

// A topic as logged: quoted, its NULs and control bytes escaped (EscapeKvTopic: \x00), so one in
// it shows instead of cutting or garbling the line.
std::string QuotedTopic(std::string_view topic) { return "'" + EscapeKvTopic(topic) + "'"; }

// Where the requests of a batch whose ts is not sane go (its block events are
// still applied).
struct DiscardSink : RequestSink {
  void OnRequest(const curve::Request&) override {}
};

// The transport's and tracker's own metric families (the engine's block
// counters are engine_signals.h's).
enum class KvMetric {
  kBatches,
  kLost,
  kReplayed,
  kRestarts,
  kRecoveryPolls,
  kCacheClears,
  kUnknownEvents,
  kUnknownRemovals,
  kChainAnomalies,
  kParentMapEntries,
  kParentMapEvictions,
  kGroupStored,
  kGroupEvicted,
  kGroupResident,
  kGroupWindow,
  kRequestGroup,
  kGroupAnomalies,
};
using base::MetricType;
constexpr base::MetricDef kKvMetrics[] = {
    {"kvwatch_kv_events_batches_total", MetricType::kCounter,
     "KV event batches decoded and applied (live and replayed).", "collector"},
    {"kvwatch_kv_events_lost_total", MetricType::kCounter,
     "KV event batches known missing (sequence gaps) and not recovered: no longer in the engine's replay buffer, "
     "not answered within replay_give_up, or without a replay endpoint. Kept across agent restarts.",
     "collector"},
    {"kvwatch_kv_events_replayed_total", MetricType::kCounter,
     "KV event batches recovered from the engine's replay socket.", "collector"},
    {"kvwatch_kv_events_publisher_restarts_total", MetricType::kCounter,
     "Publisher restarts seen (a sequence number going back, or jumping more than 2^20 ahead); the publisher's "
     "block state was reset.",
     "collector"},
    {"kvwatch_kv_events_recovery_polls_total", MetricType::kCounter,
     "Polls that spent time fetching a sequence gap from a replay socket; each takes at most replay_timeout and "
     "max_messages_per_poll replies per publisher, so a gap of N batches takes at least N / max_messages_per_poll.",
     "collector"},
    {"kvwatch_kv_events_cache_clears_total", MetricType::kCounter,
     "AllBlocksCleared events (prefix cache resets; not evictions).", "collector"},
    {"kvwatch_kv_events_unknown_events_total", MetricType::kCounter, "KV events of a type this build does not know.",
     "collector"},
    {"kvwatch_kv_events_unknown_removals_total", MetricType::kCounter, "Removed block hashes that were not resident.",
     "collector"},
    {"kvwatch_kv_events_chain_anomalies_total", MetricType::kCounter,
     "Reconstructed requests whose ancestor chain stopped early, by kind.", "collector,kind"},
    {"kvwatch_kv_events_parent_map_entries", MetricType::kGauge, "Block parent links kept to rebuild request chains.",
     "collector"},
    {"kvwatch_kv_events_parent_map_evictions_total", MetricType::kCounter,
     "Parent links evicted because the parent map reached its bound.", "collector"},
    {"kvwatch_kv_events_group_stored_blocks_total", MetricType::kCounter,
     "Block hashes stored per KV cache group and medium (reuse reports not counted); only for streams whose "
     "events carry group_idx or a cache-spec kind. kind is what the group announced: full, sliding_window, "
     "chunked_local, linear, other or unannounced.",
     "collector,medium,group,kind"},
    {"kvwatch_kv_events_group_evicted_blocks_total", MetricType::kCounter,
     "Block hashes removed per KV cache group and medium (one per physical copy).", "collector,medium,group,kind"},
    {"kvwatch_kv_events_group_resident_blocks", MetricType::kGauge,
     "Distinct block hashes resident per KV cache group and medium, summed over publishers: the blocks each group "
     "retains.",
     "collector,medium,group,kind"},
    {"kvwatch_kv_events_group_window_tokens", MetricType::kGauge,
     "The sliding window (or chunk) a KV cache group announced, in tokens; 0 for none or unknown.",
     "collector,group,kind"},
    {"kvwatch_kv_events_request_group", MetricType::kGauge,
     "The KV cache group whose stores become requests (collectors.kv_events[].request_group, else the group "
     "announcing full attention, else 0); -1 while no group qualifies.",
     "collector"},
    {"kvwatch_kv_events_group_anomalies_total", MetricType::kCounter,
     "Events whose KV cache group fields were not as expected, by kind: unknown_kind (a kv_cache_spec_kind vLLM "
     "does not define), bad_window (a sliding window absent, <= 0 or absurd, or on a kind without one), "
     "kind_changed (a group announcing another spec than first), bad_group (a group_idx out of 0..255: the event "
     "is ignored), request_group_not_full (the configured request_group announces another kind). Each is logged "
     "once.",
     "collector,kind"},
};

// One ZeroMQ context (one I/O thread) for every collector of the process: an
// agent watching a fleet has one collector per replica, and 16 I/O threads cost
// more in wake-ups than the receiving itself (1M block events/s from 16
// publishers: 77% of a core with a context per collector, 38% with one;
// bench/fleet_ingest_bench.cc). Released with the last collector.
std::shared_ptr<zmq::context_t> SharedContext() {
  static std::mutex mu;
  static std::weak_ptr<zmq::context_t> shared;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<zmq::context_t> context = shared.lock();
  if (!context) {
    context = std::make_shared<zmq::context_t>(1);
    shared = context;
  }
  return context;
}

}  // namespace

base::Result<std::string> OffsetKvEndpoint(const std::string& endpoint, std::size_t rank) {
  if (rank == 0) return endpoint;
  if (endpoint.rfind("tcp://", 0) == 0) {
    const std::size_t colon = endpoint.rfind(':');
    const std::string port = colon == std::string::npos ? "" : endpoint.substr(colon + 1);
    const bool numeric = !port.empty() && port.size() <= 5 &&
                         std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!numeric || std::stoul(port) + rank > 65535) {
      return base::Result<std::string>::Error("cannot offset '" + endpoint + "' for rank " + std::to_string(rank) +
                                              ": expected tcp://host:PORT with a numeric port");
    }
    return endpoint.substr(0, colon + 1) + std::to_string(std::stoul(port) + rank);
  }
  if (endpoint.rfind("inproc://", 0) == 0 || endpoint.rfind("ipc://", 0) == 0) {
    return endpoint + "_dp" + std::to_string(rank);
  }
  return base::Result<std::string>::Error("cannot offset '" + endpoint +
                                          "': expected a tcp://, ipc:// or inproc:// endpoint");
}

// ---- Sockets ------------------------------------------------------------------

struct KvEventsCollector::Io {
  struct Endpoint {
    std::string address;  // as connected, or as bound (with the chosen port)
    std::string replay;   // this rank's replay endpoint; empty: none
    bool bound = false;
    int peers = 0;  // live connections, from the monitor
    zmq::socket_t sub;
    zmq::socket_t monitor;  // PAIR reading the SUB socket's monitor events
  };
  // A live batch of a publisher whose gap is being fetched, kept until the
  // replay reaches it.
  struct Held {
    std::uint64_t seq = 0;
    std::vector<std::uint8_t> payload;
  };
  // The fetching of one publisher's gap, across polls.
  struct Recovery {
    zmq::socket_t dealer;         // open while a request is out
    bool answer_started = false;  // a batch of the current answer arrived
    bool asked_again_on_silence = false;
    Clock::time_point last_heard{};  // the last reply, or the request
    std::deque<Held> held;           // ascending seqs, all > last_seq and <= seen
  };
  struct Publisher {
    std::size_t endpoint = 0;
    std::string topic;
    std::size_t tracker_id = 0;
    bool has_seq = false;
    std::uint64_t last_seq = 0;  // the last batch applied (or counted lost)
    // The highest seq known to exist (a live message's); above last_seq while a
    // gap is being fetched.
    std::uint64_t seen = 0;
    bool restored = false;               // last_seq came from RestoreState; no message since
    std::string label;                   // for logs
    std::unique_ptr<Recovery> recovery;  // while recovering with a replay endpoint

    bool recovering() const { return has_seq && seen > last_seq; }
  };

  // Declared first: destroyed after every socket of this collector.
  std::shared_ptr<zmq::context_t> context_owner = SharedContext();
  zmq::context_t& context = *context_owner;
  std::vector<Endpoint> endpoints;
  std::vector<Publisher> publishers;
  std::vector<zmq::message_t> frames = std::vector<zmq::message_t>(kMaxFrames);
  std::vector<zmq::message_t> replay_frames = std::vector<zmq::message_t>(kMaxFrames);
  std::vector<zmq::message_t> monitor_frames = std::vector<zmq::message_t>(2);
  KvEventDecoder decoder;
  KvEventBatch batch;

  // The publisher of (endpoint, topic.base), added on first sight; nullopt
  // beyond max. Its topic is the live topic it was last seen with (with an
  // SGLang epoch, so the state file keeps the epoch: HandleMessage).
  std::optional<std::size_t> FindPublisher(std::size_t endpoint, const KvTopic& topic, std::size_t max,
                                           KvEventTracker* tracker) {
    for (std::size_t i = 0; i < publishers.size(); ++i) {
      if (publishers[i].endpoint == endpoint && publishers[i].topic == topic.live) return i;
    }
    for (std::size_t i = 0; i < publishers.size(); ++i) {
      if (publishers[i].endpoint == endpoint && ParseKvTopic(publishers[i].topic).base == topic.base) return i;
    }
    if (publishers.size() >= max) return std::nullopt;
    Publisher p;
    p.endpoint = endpoint;
    p.topic = std::string(topic.live);
    p.tracker_id = tracker->AddPublisher();
    p.label = Label(endpoint, topic.live);
    publishers.push_back(std::move(p));
    return publishers.size() - 1;
  }

  // Topics whole, NULs included (EscapeKvTopic).
  std::string Label(std::size_t endpoint, std::string_view topic) const {
    return endpoints[endpoint].address + (topic.empty() ? "" : " topic " + QuotedTopic(topic));
  }
};

KvEventsCollector::KvEventsCollector(KvEventsCollectorOptions options, CollectorLog log)
    : options_(std::move(options)), log_(options_.name, std::move(log)), io_(new Io), tracker_(options_.tracker) {}

KvEventsCollector::~KvEventsCollector() = default;

Result KvEventsCollector::Create(KvEventsCollectorOptions options, CollectorLog log) {
  if (options.endpoints.empty()) return Result::Error("endpoints: expected at least one ZeroMQ endpoint");
  if (options.max_messages_per_poll == 0) options.max_messages_per_poll = 1;
  std::unique_ptr<KvEventsCollector> c(new KvEventsCollector(std::move(options), std::move(log)));
  const KvEventsCollectorOptions& o = c->options_;
  Io& io = *c->io_;
  io.endpoints.reserve(o.endpoints.size());
  for (std::size_t i = 0; i < o.endpoints.size(); ++i) {
    const std::string& endpoint = o.endpoints[i];
    const std::string where = "endpoints[" + std::to_string(i) + "]: ";
    io.endpoints.emplace_back();
    Io::Endpoint& e = io.endpoints.back();
    e.address = endpoint;
    if (!o.replay_endpoint.empty()) {
      base::Result<std::string> replay = OffsetKvEndpoint(o.replay_endpoint, i);
      if (!replay.ok()) return Result::Error("replay_endpoint: " + replay.error());
      e.replay = replay.value();
    }
    try {
      e.sub = zmq::socket_t(io.context, zmq::socket_type::sub);
      e.sub.set(zmq::sockopt::linger, 0);
      e.sub.set(zmq::sockopt::rcvhwm, o.receive_hwm);
      e.sub.set(zmq::sockopt::subscribe, o.topic);
      // The monitor must be attached before connecting, to see the first connection.
      const std::string monitor = "inproc://kvwatch-kv-events-monitor-" + std::to_string(monitor_counter++);
      if (zmq_socket_monitor(e.sub.handle(), monitor.c_str(),
                             ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0) {
        return Result::Error(where + "cannot monitor the socket: " + zmq_strerror(zmq_errno()));
      }
      e.monitor = zmq::socket_t(io.context, zmq::socket_type::pair);
      e.monitor.set(zmq::sockopt::linger, 0);
      e.monitor.connect(monitor);
      if (o.bind) {
        e.sub.bind(endpoint);
        e.address = e.sub.get(zmq::sockopt::last_endpoint);
        e.bound = true;
      } else {
        e.sub.connect(endpoint);
      }
    } catch (const zmq::error_t& err) {
      std::string hint;
      if (!o.bind && endpoint.find('*') != std::string::npos) {
        hint = " (an engine binding tcp://*:PORT is reached at tcp://<engine-host>:PORT)";
      }
      return Result::Error(where + "cannot " + (o.bind ? "bind" : "connect") + " '" + endpoint + "': " + err.what() +
                           hint);
    }
  }
  return c;
}

std::vector<std::string> KvEventsCollector::endpoints() const {
  std::vector<std::string> out;
  for (const Io::Endpoint& e : io_->endpoints) out.push_back(e.address);
  return out;
}

// ---- Poll ---------------------------------------------------------------------

void KvEventsCollector::CountError(std::string_view reason, const std::string& message) {
  ++stats_.errors[std::string(reason)];
  log_(message);
}

void KvEventsCollector::Poll(RequestSink& sink, double wall_now_s) {
  for (std::size_t i = 0; i < io_->endpoints.size(); ++i) {
    try {
      for (std::size_t n = 0; n < options_.max_messages_per_poll; ++n) {
        const std::size_t frames = ReceiveMessage(io_->endpoints[i].sub, &io_->frames);
        if (frames == 0) break;
        if (frames != 3) {
          CountError(
              KvDecodeErrorCodeName(KvDecodeErrorCode::kBadFrames),
              io_->endpoints[i].address + ": expected 3 frames [topic, seq, payload], got " + std::to_string(frames));
          continue;
        }
        HandleMessage(i, sink, wall_now_s);
      }
    } catch (const zmq::error_t& err) {
      CountError("zmq_error", io_->endpoints[i].address + ": " + err.what());
    }
  }
  // The gaps, after the live messages (which may have shown new ones), within
  // one budget for all publishers.
  // Each poll starts with the next publisher, so one gap cannot take every
  // poll's whole budget while another waits.
  const Clock::time_point deadline = Clock::now() + options_.replay_timeout;
  const std::size_t count = io_->publishers.size();
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t p = (polls_ + k) % count;
    if (io_->publishers[p].recovering()) AdvanceRecovery(p, deadline, sink, wall_now_s);
  }
  ++polls_;
  ReadMonitors();
}

void KvEventsCollector::HandleMessage(std::size_t endpoint, RequestSink& sink, double wall_now_s) {
  const std::vector<zmq::message_t>& f = io_->frames;
  KvResult<KvMessage> message = ParseFrames(AsFrame(f[0]), AsFrame(f[1]), AsFrame(f[2]));
  if (!message.ok()) {
    CountError(KvDecodeErrorCodeName(message.error().code),
               io_->endpoints[endpoint].address + ": " + message.error().message);
    return;
  }
  const KvMessage& m = message.value();
  // An SGLang snapshot barrier is a batch of its publisher's stream (it takes
  // a seq); a new epoch on a known topic is that publisher restarted.
  const KvTopic topic = ParseKvTopic(m.topic);
  std::optional<std::size_t> found = io_->FindPublisher(endpoint, topic, options_.max_publishers, &tracker_);
  if (!found.has_value()) {
    CountError("too_many_publishers", io_->endpoints[endpoint].address + ": more than " +
                                          std::to_string(options_.max_publishers) +
                                          " topics; dropping messages of new ones");
    return;
  }
  const std::size_t p = *found;
  if (io_->publishers[p].topic != topic.live) NewTopic(p, endpoint, topic, m.seq, sink, wall_now_s);
  transport_.barriers += topic.is_barrier;
  Io::Publisher& pub = io_->publishers[p];
  if (pub.has_seq) {
    // Unsigned: a seq below the last (a restart, or -5 on the wire) is not a
    // gap, and neither is a jump past the bound (it cannot be replayed and
    // would count 2^64 batches lost). A gap being fetched extends to `seen`.
    const bool ahead = m.seq > pub.seen && m.seq - pub.last_seq <= kKvMaxSeqJump;
    const bool known = m.seq > pub.last_seq && m.seq <= pub.seen;  // a gap being fetched covers it
    if (pub.recovering() && ahead) {
      pub.seen = m.seq;
      Hold(p, m.seq, m.payload);
      return;
    }
    if (known) return;  // the replay returns it, in order
    if (m.seq != pub.last_seq + 1) {
      if (ahead) {
        pub.seen = m.seq;
        pub.restored = false;
        if (!io_->endpoints[endpoint].replay.empty()) {
          Hold(p, m.seq, m.payload);  // applied once the replay reaches it
          return;
        }
        SkipTo(p, m.seq - 1, "no replay endpoint", sink, wall_now_s);
      } else {
        // A gap still being fetched is the old process's: what is not back is lost.
        if (pub.recovering()) FinishRecovery(p, pub.seen, "the publisher restarted", sink, wall_now_s);
        ++transport_.restarts;
        ++save_events_;
        tracker_.ResetPublisher(pub.tracker_id);
        log_(pub.label + ": seq " + std::to_string(m.seq) + " after " + std::to_string(pub.last_seq) +
             (m.seq > pub.last_seq ? " (a jump of more than 2^20)" : "") +
             (pub.restored ? " (the last before the agent restarted)" : "") +
             ": publisher restarted, its block state was reset");
      }
    }
  }
  pub.has_seq = true;
  pub.restored = false;
  pub.last_seq = m.seq;
  pub.seen = m.seq;
  ApplyPayload(p, m.seq, m.payload.data(), m.payload.size(), sink, wall_now_s, false);
}

void KvEventsCollector::Hold(std::size_t publisher, std::uint64_t seq, std::span<const std::uint8_t> payload) {
  Io::Publisher& pub = io_->publishers[publisher];
  if (!pub.recovery) pub.recovery = std::make_unique<Io::Recovery>();
  std::deque<Io::Held>& held = pub.recovery->held;
  // Bounded: the oldest held batch makes room (the replay returns it, or its
  // loss is counted when the replay buffer no longer has it).
  if (held.size() >= options_.max_messages_per_poll) held.pop_front();
  held.push_back(Io::Held{seq, std::vector<std::uint8_t>(payload.begin(), payload.end())});
}

void KvEventsCollector::NewTopic(std::size_t publisher, std::size_t endpoint, const KvTopic& topic, std::uint64_t seq,
                                 RequestSink& sink, double wall_now_s) {
  Io::Publisher& pub = io_->publishers[publisher];
  const KvTopic was = ParseKvTopic(pub.topic);
  if (pub.has_seq && topic.has_epoch && was.epoch != topic.epoch) {
    // A new process, whatever its seq: also one that restarted while the
    // agent was down and has published past the saved seq. A gap still being
    // fetched is the old process's: what is not back is lost.
    if (pub.recovering()) FinishRecovery(publisher, pub.seen, "the publisher restarted", sink, wall_now_s);
    ++transport_.restarts;
    ++save_events_;
    tracker_.ResetPublisher(pub.tracker_id);
    log_(pub.label + ": epoch " + QuotedTopic(topic.epoch) + " (seq " + std::to_string(seq) + ") after epoch " +
         QuotedTopic(was.epoch) + " (seq " + std::to_string(pub.last_seq) + ")" +
         (pub.restored ? " (the last before the agent restarted)" : "") + ", now topic " + QuotedTopic(topic.live) +
         ": publisher restarted, its block state was reset");
    pub.has_seq = false;
  }
  pub.topic = std::string(topic.live);
  pub.label = io_->Label(endpoint, pub.topic);
}

void KvEventsCollector::ApplyPayload(std::size_t publisher, std::uint64_t seq, const std::uint8_t* data,
                                     std::size_t size, RequestSink& sink, double wall_now_s, bool replayed) {
  const Io::Publisher& pub = io_->publishers[publisher];
  KvDecodeStatus status = io_->decoder.Decode(std::span<const std::uint8_t>(data, size), &io_->batch);
  if (!status.ok()) {
    CountError(KvDecodeErrorCodeName(status.code()),
               pub.label + (replayed ? " replayed" : "") + " seq " + std::to_string(seq) + ": " + status.message());
    return;
  }
  const TimestampVerdict verdict = CheckTimestamp(io_->batch.ts, wall_now_s, options_.max_clock_skew_s);
  if (verdict == TimestampVerdict::kOk) {
    tracker_.Apply(pub.tracker_id, io_->batch, sink);
  } else {
    // Its block events are still applied, so the block state and parent map
    // stay the engine's and later batches rebuild their chains; only its
    // requests (which would carry the bad time to the windows' clock) are not
    // handed on.
    CountError(TimestampReason(verdict),
               pub.label + (replayed ? " replayed" : "") + " seq " + std::to_string(seq) + ": ts " +
                   std::to_string(io_->batch.ts) +
                   (verdict == TimestampVerdict::kFuture
                        ? " is more than " + std::to_string(options_.max_clock_skew_s) + " s ahead of the wall clock"
                        : " is not a time") +
                   "; its requests are not handed on");
    DiscardSink discard;
    const std::uint64_t before = tracker_.counters().requests;
    tracker_.Apply(pub.tracker_id, io_->batch, discard);
    withheld_requests_ += tracker_.counters().requests - before;
  }
  for (const std::string& note : tracker_.TakeNotes()) {
    log_(pub.label + (replayed ? " replayed" : "") + " seq " + std::to_string(seq) + ": " + note);
  }
  ++transport_.batches;
  stats_.last_success_s = wall_now_s;
}

void KvEventsCollector::ApplyHeld(std::size_t publisher, RequestSink& sink, double wall_now_s) {
  Io::Publisher& pub = io_->publishers[publisher];
  if (!pub.recovery) return;
  std::deque<Io::Held>& held = pub.recovery->held;
  while (!held.empty() && held.front().seq <= pub.last_seq) held.pop_front();  // replayed already
  while (!held.empty() && held.front().seq == pub.last_seq + 1) {
    pub.last_seq = held.front().seq;
    ApplyPayload(publisher, pub.last_seq, held.front().payload.data(), held.front().payload.size(), sink, wall_now_s,
                 false);
    held.pop_front();
  }
}

void KvEventsCollector::SkipTo(std::size_t publisher, std::uint64_t upto, std::string_view why, RequestSink& sink,
                               double wall_now_s) {
  Io::Publisher& pub = io_->publishers[publisher];
  std::uint64_t lost_first = 0, lost_last = 0, lost = 0;
  auto lose = [&](std::uint64_t first, std::uint64_t last) {
    if (last < first) return;
    if (lost == 0) lost_first = first;
    lost_last = last;
    lost += last - first + 1;
  };
  std::deque<Io::Held>* held = pub.recovery ? &pub.recovery->held : nullptr;
  while (held != nullptr && !held->empty() && held->front().seq <= upto) {
    if (held->front().seq > pub.last_seq) {
      lose(pub.last_seq + 1, held->front().seq - 1);
      pub.last_seq = held->front().seq;
      ApplyPayload(publisher, pub.last_seq, held->front().payload.data(), held->front().payload.size(), sink,
                   wall_now_s, false);
    }
    held->pop_front();
  }
  if (upto > pub.last_seq) {
    lose(pub.last_seq + 1, upto);
    pub.last_seq = upto;
  }
  if (lost == 0) return;
  transport_.lost += lost;
  stats_.dropped += lost;
  ++save_events_;
  log_(pub.label + ": lost " + std::to_string(lost) + " batches between seq " + std::to_string(lost_first) + " and " +
       std::to_string(lost_last) + " (" + std::string(why) + ")");
}

void KvEventsCollector::FinishRecovery(std::size_t publisher, std::uint64_t upto, std::string_view why,
                                       RequestSink& sink, double wall_now_s) {
  Io::Publisher& pub = io_->publishers[publisher];
  SkipTo(publisher, upto, why, sink, wall_now_s);
  ApplyHeld(publisher, sink, wall_now_s);
  if (!pub.recovering()) {
    pub.recovery.reset();  // closes the DEALER: a late answer goes nowhere
    ++save_events_;
  }
}

void KvEventsCollector::AskReplay(std::size_t publisher, bool fresh_socket) {
  Io::Publisher& pub = io_->publishers[publisher];
  Io::Recovery& r = *pub.recovery;
  if (fresh_socket || !r.dealer) {
    // A fresh DEALER: replies to an earlier request can never be taken for
    // this one's (ZeroMQ drops what is queued for a closed socket).
    r.dealer = zmq::socket_t(io_->context, zmq::socket_type::dealer);
    r.dealer.set(zmq::sockopt::linger, 0);
    r.dealer.set(zmq::sockopt::rcvhwm, 0);
    r.dealer.connect(io_->endpoints[pub.endpoint].replay);
  }
  const std::array<std::uint8_t, 8> seq = EncodeSeqFrame(pub.last_seq + 1);
  r.dealer.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  r.dealer.send(zmq::buffer(seq), zmq::send_flags::dontwait);
  r.answer_started = false;
  r.last_heard = Clock::now();
  ++transport_.replay_requests;
}

// One poll's share of fetching a publisher's gap [last_seq + 1, seen] (see the
// header): at most max_messages_per_poll replies, until `deadline`.
void KvEventsCollector::AdvanceRecovery(std::size_t publisher, Clock::time_point deadline, RequestSink& sink,
                                        double wall_now_s) {
  Io::Publisher& pub = io_->publishers[publisher];
  const std::string& replay_address = io_->endpoints[pub.endpoint].replay;
  if (replay_address.empty()) {  // a gap restored from a state saved with a replay endpoint
    FinishRecovery(publisher, pub.seen, "no replay endpoint", sink, wall_now_s);
    return;
  }
  if (!pub.recovery) pub.recovery = std::make_unique<Io::Recovery>();
  Io::Recovery& r = *pub.recovery;
  ++transport_.recovery_polls;
  try {
    if (!r.dealer) AskReplay(publisher, true);
    std::size_t replies = 0;
    while (pub.recovering() && replies < options_.max_messages_per_poll) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      const std::size_t n = ReceiveMessage(r.dealer, &io_->replay_frames);
      if (n == 0) {
        zmq::pollitem_t item{r.dealer.handle(), 0, ZMQ_POLLIN, 0};
        const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
        if (zmq::poll(&item, 1, std::max(wait, std::chrono::milliseconds(1))) > 0) continue;
        // Silent for the whole wait: once past half the give-up time, ask
        // again on a fresh socket (a reply dropped on the way, say the end
        // marker); past the whole give-up time, what is missing is lost.
        const auto silent = Clock::now() - r.last_heard;
        if (silent >= options_.replay_give_up) {
          FinishRecovery(publisher, pub.seen,
                         "the replay endpoint " + replay_address + " did not answer for " +
                             std::to_string(options_.replay_give_up.count()) + " ms",
                         sink, wall_now_s);
          return;
        }
        if (silent >= options_.replay_give_up / 2 && !r.asked_again_on_silence) {
          r.asked_again_on_silence = true;
          AskReplay(publisher, true);
          r.last_heard -= options_.replay_give_up / 2;  // the give-up time still counts from the first silence
        }
        continue;
      }
      ++replies;
      r.last_heard = Clock::now();
      r.asked_again_on_silence = false;
      std::array<Frame, kMaxFrames> frames;
      for (std::size_t i = 0; i < std::min(n, kMaxFrames); ++i) frames[i] = AsFrame(io_->replay_frames[i]);
      KvResult<KvReplayReply> reply = ParseReplayReply(std::span<const Frame>(frames.data(), std::min(n, kMaxFrames)));
      if (!reply.ok() || n > kMaxFrames - 1) {
        const std::string why = reply.ok() ? "too many frames" : reply.error().message;
        CountError(KvDecodeErrorCodeName(reply.ok() ? KvDecodeErrorCode::kBadFrames : reply.error().code),
                   replay_address + ": replay reply: " + why);
        continue;
      }
      const KvReplayReply& rr = reply.value();
      if (rr.end_of_replay) {
        if (!r.answer_started) {
          // Nothing from last_seq + 1 on is in the engine's buffer any more.
          FinishRecovery(publisher, pub.seen, "not in the replay buffer", sink, wall_now_s);
          return;
        }
        AskReplay(publisher, false);  // the answer ended before the gap did: ask for the rest
        continue;
      }
      if (rr.seq <= pub.last_seq) continue;  // applied already (held, or an earlier answer)
      if (rr.seq > pub.last_seq + 1) {
        if (r.answer_started) {
          // A hole inside one answer: a reply dropped on the way (a ROUTER
          // drops at its high-water mark) or a batch the engine never
          // buffered. Ask again from the first missing seq: the new answer's
          // first batch tells which.
          AskReplay(publisher, true);
          continue;
        }
        // The first batch of an answer: the engine's buffer starts there.
        SkipTo(publisher, std::min(rr.seq - 1, pub.seen), "no longer in the replay buffer", sink, wall_now_s);
        ApplyHeld(publisher, sink, wall_now_s);
        if (rr.seq != pub.last_seq + 1 || !pub.recovering()) continue;
      }
      r.answer_started = true;
      ++transport_.replayed;
      pub.last_seq = rr.seq;
      ApplyPayload(publisher, rr.seq, rr.payload.data(), rr.payload.size(), sink, wall_now_s, true);
      ApplyHeld(publisher, sink, wall_now_s);
    }
  } catch (const zmq::error_t& err) {
    CountError("zmq_error", replay_address + ": replay: " + err.what());
  }
  if (!pub.recovering()) {
    pub.recovery.reset();
    ++save_events_;
  }
}

void KvEventsCollector::ReadMonitors() {
  std::vector<zmq::message_t>& frames = io_->monitor_frames;
  for (Io::Endpoint& e : io_->endpoints) {
    try {
      for (;;) {
        const std::size_t n = ReceiveMessage(e.monitor, &frames);
        if (n == 0) break;
        // libzmq 4.x: frame 1 is a 16-bit event id and a 32-bit value.
        if (frames[0].size() < sizeof(std::uint16_t)) continue;
        std::uint16_t event = 0;
        std::memcpy(&event, frames[0].data(), sizeof(event));
        if (event == ZMQ_EVENT_CONNECTED || event == ZMQ_EVENT_ACCEPTED) ++e.peers;
        if (event == ZMQ_EVENT_DISCONNECTED) e.peers = std::max(0, e.peers - 1);
      }
    } catch (const zmq::error_t& err) {
      CountError("zmq_error", e.address + ": monitor: " + err.what());
    }
  }
}

// ---- State ----------------------------------------------------------------------

void KvEventsCollector::AppendState(std::vector<std::uint8_t>* out) const {
  save_events_at_append_ = save_events_;
  std::vector<std::size_t> tracker_ids;
  std::uint32_t count = 0;
  for (const Io::Publisher& pub : io_->publishers) count += pub.has_seq;
  base::AppendPod<std::uint32_t>(out, kStateMagic);
  base::AppendPod<std::uint32_t>(out, kStateVersion);
  base::AppendPod<std::uint32_t>(out, count);
  for (const Io::Publisher& pub : io_->publishers) {
    if (!pub.has_seq) continue;
    base::AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(pub.endpoint));
    AppendKvStateString(out, options_.endpoints[pub.endpoint]);
    AppendKvStateString(out, pub.topic);
    // The last batch applied, and the end of a gap still being fetched: the
    // next agent asks the replay socket for the rest (the held live batches
    // are not saved; the replay returns them too).
    base::AppendPod<std::uint64_t>(out, pub.last_seq);
    base::AppendPod<std::uint64_t>(out, pub.seen);
    tracker_ids.push_back(pub.tracker_id);
  }
  for (std::uint64_t counter : {transport_.batches, transport_.lost, transport_.replayed, transport_.replay_requests,
                                transport_.restarts, transport_.recovery_polls}) {
    base::AppendPod<std::uint64_t>(out, counter);
  }
  AppendStats(stats(), out);
  tracker_.AppendState(tracker_ids, out);
}

base::Status KvEventsCollector::RestoreState(std::span<const std::uint8_t> in) {
  using base::Status;
  if (in.empty()) return Status::Ok();
  const std::string what = "kv_events collector '" + options_.name + "' state: ";
  if (!io_->publishers.empty() || tracker_.publishers() != 0) {
    return Status::Error(what + "restored after the first message");
  }
  std::uint32_t magic = 0, version = 0, count = 0;
  if (!base::ReadPod(&in, &magic) || !base::ReadPod(&in, &version)) return Status::Error(what + "truncated header");
  if (magic != kStateMagic) return Status::Error(what + "not a KV-events collector's state");
  if (version < kStateVersionWithoutCounters || version > kStateVersion) {
    return Status::Error(what + "version " + std::to_string(version) + "; this build reads versions " +
                         std::to_string(kStateVersionWithoutCounters) + " to " + std::to_string(kStateVersion));
  }
  const bool v1 = version == kStateVersionWithoutCounters;
  if (!ReadKvStateCount(&in, v1 ? kSavedPublisherBytesV1 : kSavedPublisherBytes, &count)) {
    return Status::Error(what + "truncated publishers");
  }
  struct Saved {
    std::uint32_t endpoint = 0;
    std::string address;
    std::string topic;
    std::uint64_t seq = 0;
    std::uint64_t seen = 0;
  };
  std::vector<Saved> saved(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    Saved& s = saved[i];
    if (!base::ReadPod(&in, &s.endpoint) || !ReadKvStateString(&in, in.size(), &s.address) ||
        !ReadKvStateString(&in, in.size(), &s.topic) || !base::ReadPod(&in, &s.seq) ||
        (!v1 && !base::ReadPod(&in, &s.seen))) {
      return Status::Error(what + "truncated publishers");
    }
    if (v1) s.seen = s.seq;
    if (s.seen < s.seq || s.seen - s.seq > kKvMaxSeqJump) {
      return Status::Error(what + "publisher " + std::to_string(s.endpoint) + " topic " + QuotedTopic(s.topic) +
                           ": a gap from seq " + std::to_string(s.seq) + " to " + std::to_string(s.seen));
    }
    for (std::uint32_t j = 0; j < i; ++j) {
      if (saved[j].endpoint == s.endpoint && saved[j].topic == s.topic) {
        return Status::Error(what + "publisher " + std::to_string(s.endpoint) + " topic " + QuotedTopic(s.topic) +
                             " twice");
      }
    }
  }
  KvTransportCounters counters;
  CollectorStats stats;
  if (!v1) {
    for (std::uint64_t* counter : {&counters.batches, &counters.lost, &counters.replayed, &counters.replay_requests,
                                   &counters.restarts, &counters.recovery_polls}) {
      if (!base::ReadPod(&in, counter)) return Status::Error(what + "truncated counters");
    }
    if (!ReadStats(&in, &stats)) return Status::Error(what + "malformed stats");
  }
  if (Status restored = tracker_.RestoreState(in, count, version > kStateVersionWithoutGroups); !restored.ok()) {
    return Status::Error(what + restored.error());
  }
  // The counters continue where they were (kvwatch_kv_events_lost_total and
  // the dropped count among them: a loss stays counted across restarts).
  transport_ = counters;
  records_restored_ = stats.records;
  stats_.dropped = stats.dropped;
  stats_.dropped_by = std::move(stats.dropped_by);
  stats_.errors = std::move(stats.errors);
  // Restored: tracker publishers 0..count-1 are the saved ones, in order. A
  // publisher of an endpoint no longer configured at its index keeps nothing.
  for (std::uint32_t i = 0; i < count; ++i) {
    const Saved& s = saved[i];
    const bool configured = s.endpoint < options_.endpoints.size() && options_.endpoints[s.endpoint] == s.address;
    if (!configured || io_->publishers.size() >= options_.max_publishers) {
      tracker_.ResetPublisher(i);
      log_("saved state of " + s.address + (s.topic.empty() ? "" : " topic " + QuotedTopic(s.topic)) +
           " not restored: " +
           (configured ? "more than max_publishers" : "no longer endpoints[" + std::to_string(s.endpoint) + "]"));
      continue;
    }
    Io::Publisher p;
    p.endpoint = s.endpoint;
    p.topic = s.topic;
    p.tracker_id = i;
    p.has_seq = true;
    p.last_seq = s.seq;
    p.seen = s.seen;  // above last_seq: the first Poll fetches the rest of the gap
    p.restored = true;
    p.label = io_->Label(s.endpoint, s.topic);
    io_->publishers.push_back(std::move(p));
  }
  return Status::Ok();
}

// ---- Reporting ----------------------------------------------------------------

CollectorStats KvEventsCollector::stats() const {
  CollectorStats s = stats_;
  s.records = records_restored_ + tracker_.counters().requests - withheld_requests_;
  s.up = std::all_of(io_->endpoints.begin(), io_->endpoints.end(),
                     [](const Io::Endpoint& e) { return e.bound || e.peers > 0; });
  return s;
}

EngineSignals KvEventsCollector::engine_signals() const {
  EngineSignals g;
  for (const KvMediumCounters& m : tracker_.MediumCounters()) {
    g.blocks.push_back({m.medium, static_cast<double>(m.stored_blocks), static_cast<double>(m.evicted_blocks),
                        static_cast<double>(m.resident_blocks), static_cast<double>(m.reused_blocks),
                        static_cast<double>(m.tier_moves)});
  }
  if (tracker_.grouped()) {
    for (const KvGroupSpec& spec : tracker_.GroupSpecs()) {
      g.kv_groups.push_back({spec.group, std::string(KvSpecKindName(spec.kind)), spec.window_tokens});
    }
  }
  return g;
}

void KvEventsCollector::AppendSamples(std::vector<MetricSample>* out) const {
  const std::string& c = options_.name;
  AppendEngineCounterSamples(engine_signals(), c, out);
  const KvTrackerCounters& t = tracker_.counters();
  auto add = [&](KvMetric metric, double value, Labels extra = {}) {
    out->push_back(MakeSample(kKvMetrics[static_cast<std::size_t>(metric)], c, value, std::move(extra)));
  };
  add(KvMetric::kBatches, static_cast<double>(transport_.batches));
  add(KvMetric::kLost, static_cast<double>(transport_.lost));
  add(KvMetric::kReplayed, static_cast<double>(transport_.replayed));
  add(KvMetric::kRestarts, static_cast<double>(transport_.restarts));
  add(KvMetric::kRecoveryPolls, static_cast<double>(transport_.recovery_polls));
  add(KvMetric::kCacheClears, static_cast<double>(t.cache_clears));
  add(KvMetric::kUnknownEvents, static_cast<double>(t.unknown_events));
  add(KvMetric::kUnknownRemovals, static_cast<double>(t.unknown_removals));
  add(KvMetric::kChainAnomalies, static_cast<double>(t.chains_truncated), {{"kind", "truncated"}});
  add(KvMetric::kChainAnomalies, static_cast<double>(t.chain_cycles), {{"kind", "cycle"}});
  add(KvMetric::kChainAnomalies, static_cast<double>(t.chains_too_long), {{"kind", "too_long"}});
  add(KvMetric::kParentMapEntries, static_cast<double>(tracker_.parent_map_size()));
  add(KvMetric::kParentMapEvictions, static_cast<double>(t.parent_map_evictions));
  if (!tracker_.grouped()) return;
  for (const KvGroupCounters& g : tracker_.GroupCounters()) {
    const Labels labels = {{"medium", g.medium},
                           {"group", std::to_string(g.spec.group)},
                           {"kind", std::string(KvSpecKindName(g.spec.kind))}};
    add(KvMetric::kGroupStored, static_cast<double>(g.stored_blocks), labels);
    add(KvMetric::kGroupEvicted, static_cast<double>(g.evicted_blocks), labels);
    add(KvMetric::kGroupResident, static_cast<double>(g.resident_blocks), labels);
  }
  for (const KvGroupSpec& spec : tracker_.GroupSpecs()) {
    add(KvMetric::kGroupWindow, static_cast<double>(spec.window_tokens),
        {{"group", std::to_string(spec.group)}, {"kind", std::string(KvSpecKindName(spec.kind))}});
  }
  const std::optional<std::int64_t> request_group = tracker_.RequestGroup();
  add(KvMetric::kRequestGroup, request_group.has_value() ? static_cast<double>(*request_group) : -1.0);
  for (std::size_t a = 0; a < kKvGroupAnomalies; ++a) {
    add(KvMetric::kGroupAnomalies, static_cast<double>(t.group_anomalies[a]),
        {{"kind", std::string(KvGroupAnomalyName(static_cast<KvGroupAnomaly>(a)))}});
  }
}

base::MetricDefs KvEventsMetricDefs() {
  base::MetricDefs defs;
  for (const base::MetricDef& def : kKvMetrics) defs.push_back(&def);
  return defs;
}

}  // namespace kvwatch::collectors
