#include "collectors/kv_events_collector.h"

#include <zmq.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <zmq.hpp>

#include "base/byte_io.h"
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
// topic, last seq u64], then the tracker's part (KvEventTracker::AppendState,
// its publishers in the same order) to the end. Host byte order (base/byte_io.h).
constexpr std::uint32_t kStateMagic = 0x5645564b;  // "KVEV" read little-endian
constexpr std::uint32_t kStateVersion = 1;
constexpr std::size_t kSavedPublisherBytes = 4 + 4 + 4 + 8;

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
  kCacheClears,
  kUnknownEvents,
  kUnknownRemovals,
  kChainAnomalies,
  kParentMapEntries,
  kParentMapEvictions,
};
using base::MetricType;
constexpr base::MetricDef kKvMetrics[] = {
    {"kvwatch_kv_events_batches_total", MetricType::kCounter, "KV event batches decoded and applied (live and replayed).",
     "collector"},
    {"kvwatch_kv_events_lost_total", MetricType::kCounter,
     "KV event batches known missing (sequence gaps) and not recovered.", "collector"},
    {"kvwatch_kv_events_replayed_total", MetricType::kCounter,
     "KV event batches recovered from the engine's replay socket.", "collector"},
    {"kvwatch_kv_events_publisher_restarts_total", MetricType::kCounter,
     "Publisher restarts seen (a sequence number going back, or jumping more than 2^20 ahead); the publisher's "
     "block state was reset.",
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
  struct Publisher {
    std::size_t endpoint = 0;
    std::string topic;
    std::size_t tracker_id = 0;
    bool has_seq = false;
    std::uint64_t last_seq = 0;
    bool restored = false;  // last_seq came from RestoreState; no message since
    std::string label;      // for logs
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
    return endpoints[endpoint].address + (topic.empty() ? "" : " topic '" + EscapeKvTopic(topic) + "'");
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
      return Result::Error(where + "cannot " + (o.bind ? "bind" : "connect") + " '" + endpoint + "': " +
                           err.what() + hint);
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
  replay_budget_ = options_.replay_timeout;
  for (std::size_t i = 0; i < io_->endpoints.size(); ++i) {
    try {
      for (std::size_t n = 0; n < options_.max_messages_per_poll; ++n) {
        const std::size_t frames = ReceiveMessage(io_->endpoints[i].sub, &io_->frames);
        if (frames == 0) break;
        if (frames != 3) {
          CountError(KvDecodeErrorCodeName(KvDecodeErrorCode::kBadFrames),
                     io_->endpoints[i].address + ": expected 3 frames [topic, seq, payload], got " +
                         std::to_string(frames));
          continue;
        }
        HandleMessage(i, sink, wall_now_s);
      }
    } catch (const zmq::error_t& err) {
      CountError("zmq_error", io_->endpoints[i].address + ": " + err.what());
    }
  }
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
  if (io_->publishers[p].topic != topic.live) NewTopic(p, endpoint, topic, m.seq);
  transport_.barriers += topic.is_barrier;
  {
    Io::Publisher& pub = io_->publishers[p];
    if (pub.has_seq && m.seq != pub.last_seq + 1) {
      // Unsigned: a seq below last (a restart, or -5 on the wire) is not a gap,
      // and neither is a jump past the bound (it cannot be replayed and would
      // count 2^64 batches lost).
      if (m.seq > pub.last_seq && m.seq - pub.last_seq <= kKvMaxSeqJump) {
        Recover(p, pub.last_seq + 1, m.seq, sink, wall_now_s);
      } else {
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
  Io::Publisher& pub = io_->publishers[p];
  pub.has_seq = true;
  pub.restored = false;
  pub.last_seq = m.seq;
  ApplyPayload(p, m.seq, m.payload.data(), m.payload.size(), sink, wall_now_s, false);
}

void KvEventsCollector::NewTopic(std::size_t publisher, std::size_t endpoint, const KvTopic& topic,
                                 std::uint64_t seq) {
  Io::Publisher& pub = io_->publishers[publisher];
  const KvTopic was = ParseKvTopic(pub.topic);
  if (pub.has_seq && topic.has_epoch && was.epoch != topic.epoch) {
    // A new process, whatever its seq: also one that restarted while the
    // agent was down and has published past the saved seq.
    ++transport_.restarts;
    ++save_events_;
    tracker_.ResetPublisher(pub.tracker_id);
    log_(pub.label + ": epoch '" + EscapeKvTopic(topic.epoch) + "' (seq " + std::to_string(seq) +
         ") after epoch '" + EscapeKvTopic(was.epoch) + "' (seq " + std::to_string(pub.last_seq) + ")" +
         (pub.restored ? " (the last before the agent restarted)" : "") + ", now topic '" +
         EscapeKvTopic(topic.live) + "': publisher restarted, its block state was reset");
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
    CountError(KvDecodeErrorCodeName(status.code()), pub.label + (replayed ? " replayed" : "") + " seq " +
                                                         std::to_string(seq) + ": " + status.message());
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
  ++transport_.batches;
  stats_.last_success_s = wall_now_s;
}

void KvEventsCollector::Recover(std::size_t publisher, std::uint64_t from, std::uint64_t to, RequestSink& sink,
                                double wall_now_s) {
  const std::uint64_t gap = to - from;
  const Io::Endpoint& endpoint = io_->endpoints[io_->publishers[publisher].endpoint];
  std::uint64_t received = 0;
  if (!endpoint.replay.empty() && replay_budget_ > Clock::duration::zero()) {
    received = Replay(publisher, from, to, sink, wall_now_s);
  }
  if (received > 0) ++save_events_;
  const std::uint64_t lost = gap - received;
  if (lost == 0) return;
  transport_.lost += lost;
  stats_.dropped += lost;
  log_(io_->publishers[publisher].label + ": lost " + std::to_string(lost) + " of " + std::to_string(gap) +
      " batches between seq " + std::to_string(from) + " and " + std::to_string(to - 1) +
      (endpoint.replay.empty() ? " (no replay endpoint)" : " (not in the replay buffer or not in time)"));
}

std::uint64_t KvEventsCollector::Replay(std::size_t publisher, std::uint64_t from, std::uint64_t to,
                                        RequestSink& sink, double wall_now_s) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + replay_budget_;
  const std::string replay_address = io_->endpoints[io_->publishers[publisher].endpoint].replay;
  std::uint64_t received = 0;
  try {
    // A fresh DEALER per recovery: replies left over from a timed-out one can
    // never be mistaken for this one's.
    zmq::socket_t dealer(io_->context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvhwm, 0);
    dealer.connect(replay_address);
    const std::array<std::uint8_t, 8> seq = EncodeSeqFrame(from);
    dealer.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    dealer.send(zmq::buffer(seq), zmq::send_flags::dontwait);
    ++transport_.replay_requests;
    std::uint64_t expected = from;
    while (expected < to) {
      const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (remaining <= std::chrono::milliseconds::zero()) break;
      zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, remaining) == 0) continue;
      const std::size_t n = ReceiveMessage(dealer, &io_->replay_frames);
      if (n == 0) continue;
      std::array<Frame, kMaxFrames> frames;
      for (std::size_t i = 0; i < std::min(n, kMaxFrames); ++i) frames[i] = AsFrame(io_->replay_frames[i]);
      KvResult<KvReplayReply> reply = ParseReplayReply(std::span<const Frame>(frames.data(), std::min(n, kMaxFrames)));
      if (!reply.ok() || n > kMaxFrames - 1) {
        const std::string why = reply.ok() ? "too many frames" : reply.error().message;
        CountError(KvDecodeErrorCodeName(reply.ok() ? KvDecodeErrorCode::kBadFrames : reply.error().code),
                   replay_address + ": replay reply: " + why);
        continue;
      }
      const KvReplayReply& r = reply.value();
      if (r.end_of_replay || r.seq >= to) break;  // past the gap: the live stream has the rest
      if (r.seq < expected) continue;
      // Batches between expected and r.seq had left the engine's buffer: lost.
      ++received;
      ++transport_.replayed;
      expected = r.seq + 1;
      ApplyPayload(publisher, r.seq, r.payload.data(), r.payload.size(), sink, wall_now_s, true);
    }
  } catch (const zmq::error_t& err) {
    CountError("zmq_error", replay_address + ": replay: " + err.what());
  }
  replay_budget_ -= Clock::now() - start;
  return received;
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
    base::AppendPod<std::uint64_t>(out, pub.last_seq);
    tracker_ids.push_back(pub.tracker_id);
  }
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
  if (version != kStateVersion) {
    return Status::Error(what + "version " + std::to_string(version) + "; this build reads version " +
                         std::to_string(kStateVersion));
  }
  if (!ReadKvStateCount(&in, kSavedPublisherBytes, &count)) return Status::Error(what + "truncated publishers");
  struct Saved {
    std::uint32_t endpoint = 0;
    std::string address;
    std::string topic;
    std::uint64_t seq = 0;
  };
  std::vector<Saved> saved(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    Saved& s = saved[i];
    if (!base::ReadPod(&in, &s.endpoint) || !ReadKvStateString(&in, in.size(), &s.address) ||
        !ReadKvStateString(&in, in.size(), &s.topic) || !base::ReadPod(&in, &s.seq)) {
      return Status::Error(what + "truncated publishers");
    }
    for (std::uint32_t j = 0; j < i; ++j) {
      if (saved[j].endpoint == s.endpoint && saved[j].topic == s.topic) {
        return Status::Error(what + "publisher " + std::to_string(s.endpoint) + " topic '" + s.topic + "' twice");
      }
    }
  }
  if (Status restored = tracker_.RestoreState(in, count); !restored.ok()) {
    return Status::Error(what + restored.error());
  }
  // Restored: tracker publishers 0..count-1 are the saved ones, in order. A
  // publisher of an endpoint no longer configured at its index keeps nothing.
  for (std::uint32_t i = 0; i < count; ++i) {
    const Saved& s = saved[i];
    const bool configured = s.endpoint < options_.endpoints.size() && options_.endpoints[s.endpoint] == s.address;
    if (!configured || io_->publishers.size() >= options_.max_publishers) {
      tracker_.ResetPublisher(i);
      log_("saved state of " + s.address + (s.topic.empty() ? "" : " topic '" + s.topic + "'") +
           " not restored: " + (configured ? "more than max_publishers" : "no longer endpoints[" +
                                                                                std::to_string(s.endpoint) + "]"));
      continue;
    }
    Io::Publisher p;
    p.endpoint = s.endpoint;
    p.topic = s.topic;
    p.tracker_id = i;
    p.has_seq = true;
    p.last_seq = s.seq;
    p.restored = true;
    p.label = io_->Label(s.endpoint, s.topic);
    io_->publishers.push_back(std::move(p));
  }
  return Status::Ok();
}

// ---- Reporting ----------------------------------------------------------------

CollectorStats KvEventsCollector::stats() const {
  CollectorStats s = stats_;
  s.records = tracker_.counters().requests - withheld_requests_;
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
  add(KvMetric::kCacheClears, static_cast<double>(t.cache_clears));
  add(KvMetric::kUnknownEvents, static_cast<double>(t.unknown_events));
  add(KvMetric::kUnknownRemovals, static_cast<double>(t.unknown_removals));
  add(KvMetric::kChainAnomalies, static_cast<double>(t.chains_truncated), {{"kind", "truncated"}});
  add(KvMetric::kChainAnomalies, static_cast<double>(t.chain_cycles), {{"kind", "cycle"}});
  add(KvMetric::kChainAnomalies, static_cast<double>(t.chains_too_long), {{"kind", "too_long"}});
  add(KvMetric::kParentMapEntries, static_cast<double>(tracker_.parent_map_size()));
  add(KvMetric::kParentMapEvictions, static_cast<double>(t.parent_map_evictions));
}

base::MetricDefs KvEventsMetricDefs() {
  base::MetricDefs defs;
  for (const base::MetricDef& def : kKvMetrics) defs.push_back(&def);
  return defs;
}

}  // namespace kvwatch::collectors
