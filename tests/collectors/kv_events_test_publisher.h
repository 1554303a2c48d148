// Test helpers for the KV-events collector (not a test itself):
//
// EngineCacheModel turns a trace (requests as ordered page lists) into the KV
// events an engine with a prefix cache of `capacity_blocks` physical blocks
// would publish, as vLLM V1 does it: the longest cached prefix is reused (and,
// with report_reuse, reported as a BlockStored chain from the root: vLLM's
// kv_cache_report_mode "full"); every later block is computed into a new
// physical block and published in one BlockStored chain whose parent is the
// last reused block (a block cached already but behind the first miss becomes
// a second copy, as vLLM does not deduplicate); a block needed when the cache
// is full evicts the least recently used free copy, published as BlockRemoved
// (one per copy). A request's blocks are in use while it runs and go back to
// the free queue tail-first when it ends (its head becomes the most recently
// used). Modelled: prompt blocks only, one request at a time, capacity at least
// the longest request (a longer one overflows it for its duration).
//
// KvEventsTestPublisher speaks the wire format over real ZeroMQ sockets: an
// XPUB (which behaves as PUB on the wire and tells when a subscription arrived,
// for the slow-joiner problem) bound on tcp://127.0.0.1 at an ephemeral port,
// or connected to a bound collector; optionally a ROUTER replay socket served by
// a background thread from a bounded buffer of published batches, with or
// without the topic frame (vLLM >= v0.26 / <= v0.25). PublishOn sends on another
// topic than the publisher's own (SGLang's snapshot barriers), SetTopic changes it.
//
// Thread safety: a publisher is driven by one test thread; its replay thread
// only reads the buffer under a mutex.
#ifndef KVWATCH_TESTS_COLLECTORS_KV_EVENTS_TEST_PUBLISHER_H_
#define KVWATCH_TESTS_COLLECTORS_KV_EVENTS_TEST_PUBLISHER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "collectors/kv_event.h"
#include "collectors/kv_event_decoder.h"
#include "collectors/testing/kv_event_encoder.h"

namespace kvwatch::collectors::testing {

// ---- Engine model -------------------------------------------------------------

struct EngineModelOptions {
  std::size_t capacity_blocks = 1024;  // physical blocks
  bool report_reuse = false;           // kv_cache_report_mode "full" on every request
  std::size_t requests_per_batch = 1;  // requests per scheduler step (one batch each)
  std::int64_t tokens_per_block = 16;  // token_ids written per block (0: none)
  std::optional<std::string> medium = std::string("GPU");
  std::optional<std::int64_t> group_idx = 0;
  std::optional<std::int64_t> dp_rank = 0;
  double start_ts = 1.75e9;
  double ts_step = 0.02;  // seconds between batches
};

class EngineCacheModel {
 public:
  explicit EngineCacheModel(EngineModelOptions options) : options_(std::move(options)) {}

  // Runs one request; its events go into the current batch. Returns whether the
  // request produced a BlockStored that is not a reuse report (it missed).
  bool Run(const std::vector<std::uint64_t>& pages) {
    if (current_.events.empty() && requests_in_batch_ == 0) StartBatch();
    std::size_t hit = 0;
    while (hit < pages.size() && Cached(pages[hit])) ++hit;
    std::vector<CopyRef> used;
    used.reserve(pages.size());
    for (std::size_t i = 0; i < hit; ++i) used.push_back(TakeFree(pages[i]));
    if (options_.report_reuse && hit > 0) {
      AddStored(pages, 0, hit, std::nullopt);
      reused_blocks_ += hit;
    }
    for (std::size_t i = hit; i < pages.size(); ++i) {
      if (copies_total_ >= options_.capacity_blocks && !free_.empty()) EvictOldest();
      used.push_back(NewCopy(pages[i]));
    }
    if (hit < pages.size()) {
      AddStored(pages, hit, pages.size(), hit > 0 ? std::optional<std::uint64_t>(pages[hit - 1]) : std::nullopt);
      stored_blocks_ += pages.size() - hit;
    }
    // Freed tail-first: the last page goes back to the queue first.
    for (auto it = used.rbegin(); it != used.rend(); ++it) Release(*it);
    if (++requests_in_batch_ >= options_.requests_per_batch) EndBatch();
    return hit < pages.size();
  }

  // Ends the current batch and hands out every finished batch.
  std::vector<KvEventBatch> TakeBatches() {
    EndBatch();
    std::vector<KvEventBatch> out;
    out.swap(batches_);
    return out;
  }

  std::uint64_t stored_blocks() const { return stored_blocks_; }
  std::uint64_t evicted_blocks() const { return evicted_blocks_; }
  std::uint64_t reused_blocks() const { return reused_blocks_; }
  std::size_t copies() const { return copies_total_; }
  // Copies per cached hash.
  std::map<std::uint64_t, std::uint32_t> Resident() const {
    std::map<std::uint64_t, std::uint32_t> out;
    for (const auto& [hash, list] : copies_) {
      if (!list.empty()) out[hash] = static_cast<std::uint32_t>(list.size());
    }
    return out;
  }

 private:
  struct Copy {
    std::uint64_t hash = 0;
    bool in_use = false;
  };
  using CopyRef = std::list<Copy>::iterator;

  bool Cached(std::uint64_t hash) const {
    auto it = copies_.find(hash);
    return it != copies_.end() && !it->second.empty();
  }

  // Takes a cached copy of hash out of the free queue (or shares one in use).
  CopyRef TakeFree(std::uint64_t hash) {
    for (CopyRef c : copies_[hash]) {
      if (!c->in_use) {
        Copy copy = *c;
        copy.in_use = true;
        free_.erase(c);
        in_use_.push_back(copy);
        CopyRef moved = std::prev(in_use_.end());
        Replace(hash, c, moved);
        return moved;
      }
    }
    return copies_[hash].front();  // shared with an earlier page of this request
  }

  CopyRef NewCopy(std::uint64_t hash) {
    in_use_.push_back(Copy{hash, true});
    CopyRef c = std::prev(in_use_.end());
    copies_[hash].push_back(c);
    ++copies_total_;
    return c;
  }

  void Release(CopyRef c) {
    if (!c->in_use) return;  // a copy shared by two pages of the request
    Copy copy = *c;
    copy.in_use = false;
    in_use_.erase(c);
    free_.push_back(copy);
    Replace(copy.hash, c, std::prev(free_.end()));
  }

  void Replace(std::uint64_t hash, CopyRef from, CopyRef to) {
    for (CopyRef& r : copies_[hash]) {
      if (r == from) r = to;
    }
  }

  void EvictOldest() {
    const std::uint64_t hash = free_.front().hash;
    std::vector<CopyRef>& list = copies_[hash];
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (*it == free_.begin()) {
        list.erase(it);
        break;
      }
    }
    if (list.empty()) copies_.erase(hash);
    free_.pop_front();
    --copies_total_;
    ++evicted_blocks_;
    BlockRemoved removed;
    removed.block_hashes = {hash};
    removed.medium = options_.medium;
    removed.group_idx = options_.group_idx;
    current_.events.emplace_back(std::move(removed));
  }

  void AddStored(const std::vector<std::uint64_t>& pages, std::size_t begin, std::size_t end,
                 std::optional<std::uint64_t> parent) {
    BlockStored stored;
    stored.block_hashes.assign(pages.begin() + static_cast<std::ptrdiff_t>(begin),
                               pages.begin() + static_cast<std::ptrdiff_t>(end));
    stored.parent_block_hash = parent;
    for (std::size_t i = begin; i < end; ++i) {
      for (std::int64_t t = 0; t < options_.tokens_per_block; ++t) {
        stored.token_ids.push_back(static_cast<std::int64_t>((pages[i] * 31 + static_cast<std::uint64_t>(t)) % 151000));
      }
    }
    stored.block_size = options_.tokens_per_block;
    stored.medium = options_.medium;
    stored.group_idx = options_.group_idx;
    current_.events.emplace_back(std::move(stored));
  }

  void StartBatch() {
    current_ = KvEventBatch{};
    current_.ts = options_.start_ts + options_.ts_step * static_cast<double>(batch_index_);
    current_.dp_rank = options_.dp_rank;
  }

  void EndBatch() {
    if (requests_in_batch_ == 0 && current_.events.empty()) return;
    if (!current_.events.empty()) batches_.push_back(std::move(current_));
    current_ = KvEventBatch{};
    requests_in_batch_ = 0;
    ++batch_index_;
  }

  EngineModelOptions options_;
  std::list<Copy> free_;    // front: least recently used
  std::list<Copy> in_use_;  // copies of the running request
  std::unordered_map<std::uint64_t, std::vector<CopyRef>> copies_;
  std::size_t copies_total_ = 0;
  std::uint64_t stored_blocks_ = 0;
  std::uint64_t evicted_blocks_ = 0;
  std::uint64_t reused_blocks_ = 0;
  KvEventBatch current_;
  std::size_t requests_in_batch_ = 0;
  std::uint64_t batch_index_ = 0;
  std::vector<KvEventBatch> batches_;
};

// ---- Publisher ----------------------------------------------------------------

struct TestPublisherOptions {
  std::string topic = "kv-events";
  bool replay = false;             // serve a ROUTER replay socket
  bool replay_topic_frame = true;  // vLLM >= v0.26 reply framing
  std::size_t replay_buffer = 10000;
  std::string connect_to;  // non-empty: connect the XPUB here instead of binding
};

class KvEventsTestPublisher {
 public:
  explicit KvEventsTestPublisher(TestPublisherOptions options) : options_(std::move(options)) {
    pub_ = zmq::socket_t(context_, zmq::socket_type::xpub);
    pub_.set(zmq::sockopt::linger, 0);
    pub_.set(zmq::sockopt::sndhwm, 0);
    if (options_.connect_to.empty()) {
      pub_.bind("tcp://127.0.0.1:*");
      endpoint_ = pub_.get(zmq::sockopt::last_endpoint);
    } else {
      pub_.connect(options_.connect_to);
      endpoint_ = options_.connect_to;
    }
    if (options_.replay) {
      router_ = zmq::socket_t(context_, zmq::socket_type::router);
      router_.set(zmq::sockopt::linger, 0);
      router_.set(zmq::sockopt::sndhwm, 0);
      router_.bind("tcp://127.0.0.1:*");
      replay_endpoint_ = router_.get(zmq::sockopt::last_endpoint);
      thread_ = std::thread([this] { ServeReplay(); });
    }
  }
  ~KvEventsTestPublisher() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  KvEventsTestPublisher(const KvEventsTestPublisher&) = delete;
  KvEventsTestPublisher& operator=(const KvEventsTestPublisher&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }
  std::uint64_t next_seq() const { return next_seq_; }

  // Waits (bounded) until a subscriber's subscription reached the XPUB. pump,
  // when given, runs between tries: a bound SUB socket attaches connecting
  // peers only when its own thread calls into it (the collector's Poll).
  bool WaitForSubscriber(const std::function<void()>& pump = nullptr,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return WaitForSubscription(1, pump, timeout);
  }

  // Waits (bounded) until the last subscriber has gone (its unsubscription,
  // which the XPUB passes on when the subscriber disconnects, arrived): from
  // then on published batches reach no one, and the next subscriber's
  // subscription is passed on again.
  bool WaitForUnsubscribe(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return WaitForSubscription(0, nullptr, timeout);
  }

  // The next Publish uses this seq (a publisher whose seq jumps, or goes back
  // without a restart).
  void SetNextSeq(std::uint64_t seq) { next_seq_ = seq; }

  // Publishes a payload with the next seq; deliver=false keeps it for replay
  // only (a loss on the way).
  void Publish(const std::vector<std::uint8_t>& payload, bool deliver = true) {
    PublishOn(options_.topic, payload, deliver);
  }

  // Publishes a payload with the next seq on another topic (SGLang's snapshot
  // barriers: "<topic>\0sgl-kv-snapshot=<id>"); kept for replay like any batch.
  void PublishOn(const std::string& topic, const std::vector<std::uint8_t>& payload, bool deliver = true) {
    const std::uint64_t seq = next_seq_++;
    {
      std::lock_guard<std::mutex> lock(mu_);
      buffer_.emplace_back(seq, payload);
      while (buffer_.size() > options_.replay_buffer) buffer_.pop_front();
    }
    if (!deliver) return;
    const std::array<std::uint8_t, 8> seq_bytes = EncodeSeqFrame(seq);
    pub_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(payload), zmq::send_flags::none);
  }

  void PublishBatch(const KvEventBatch& batch, KvEncoding encoding, bool deliver = true) {
    Publish(EncodeKvEventBatch(batch, encoding), deliver);
  }

  // Sends arbitrary frames (malformed-input tests).
  void SendRaw(const std::vector<std::string>& frames) {
    for (std::size_t i = 0; i < frames.size(); ++i) {
      pub_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }

  // A new engine process: seq starts again at 0 and the replay buffer is empty.
  void Restart() {
    next_seq_ = 0;
    std::lock_guard<std::mutex> lock(mu_);
    buffer_.clear();
  }

  std::uint64_t replay_requests() const { return replay_requests_; }

  // The topic of later batches (an SGLang publisher's new epoch). Not while a
  // replay is served: the replay thread reads it.
  void SetTopic(std::string topic) {
    std::lock_guard<std::mutex> lock(mu_);
    options_.topic = std::move(topic);
  }
  const std::string& topic() const { return options_.topic; }

 private:
  // kind 1: a subscription; 0: an unsubscription.
  bool WaitForSubscription(std::uint8_t kind, const std::function<void()>& pump, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pump) pump();
      zmq::message_t m;
      pub_.set(zmq::sockopt::rcvtimeo, 50);
      if (pub_.recv(m, zmq::recv_flags::none).has_value() && m.size() >= 1 && m.data<std::uint8_t>()[0] == kind) {
        return true;
      }
    }
    return false;
  }

  void ServeReplay() {
    while (!stop_) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(10)) == 0) continue;
      std::vector<zmq::message_t> frames;
      for (;;) {
        frames.emplace_back();
        if (!router_.recv(frames.back(), zmq::recv_flags::none).has_value()) break;
        if (!frames.back().more()) break;
      }
      if (frames.size() != 3 || frames[2].size() != 8) continue;  // as vLLM: exactly [id, "", seq]
      ++replay_requests_;
      KvResult<std::uint64_t> start = ParseSeqFrame(Frame(frames[2].data<std::uint8_t>(), 8));
      const std::string id(frames[0].data<char>(), frames[0].size());
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [seq, payload] : buffer_) {
        if (seq >= start.value()) Reply(id, EncodeSeqFrame(seq), payload);
      }
      Reply(id, EncodeSeqFrame(kReplayEndSeq), {});
    }
  }

  void Reply(const std::string& id, const std::array<std::uint8_t, 8>& seq, const std::vector<std::uint8_t>& payload) {
    router_.send(zmq::buffer(id), zmq::send_flags::sndmore);
    router_.send(zmq::message_t(), zmq::send_flags::sndmore);
    if (options_.replay_topic_frame) {
      // The end marker's topic frame is empty, as in vLLM.
      const std::string topic = payload.empty() ? std::string() : options_.topic;
      router_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
    }
    router_.send(zmq::buffer(seq), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(payload), zmq::send_flags::none);
  }

  TestPublisherOptions options_;
  zmq::context_t context_{1};
  zmq::socket_t pub_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::string replay_endpoint_;
  std::uint64_t next_seq_ = 0;
  std::mutex mu_;
  std::deque<std::pair<std::uint64_t, std::vector<std::uint8_t>>> buffer_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> replay_requests_{0};
  std::thread thread_;
};

}  // namespace kvwatch::collectors::testing

#endif  // KVWATCH_TESTS_COLLECTORS_KV_EVENTS_TEST_PUBLISHER_H_
