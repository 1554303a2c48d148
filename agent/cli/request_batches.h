// The hand-over of parsed requests from `kvwatch replay`'s reader thread to the
// thread that runs the engine: batches of requests (their facts and their pages
// in one flat buffer), circulating through a bounded queue.
#ifndef KVWATCH_AGENT_CLI_REQUEST_BATCHES_H_
#define KVWATCH_AGENT_CLI_REQUEST_BATCHES_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "curve/request.h"

namespace kvwatch::agent {

// Parsed requests on their way from the reader thread to the engine: each
// request's facts in `meta` (pages left empty) and its pages back to back in one
// flat buffer, ends[i] being the end of request i's pages.
struct RequestBatch {
  static constexpr std::size_t kMaxRequests = 1024;
  static constexpr std::size_t kMaxPages = std::size_t{1} << 16;

  std::vector<curve::Request> meta;
  std::vector<std::size_t> ends;
  std::vector<curve::PageId> pages;
  std::size_t size = 0;  // requests in use (meta keeps its strings' storage)

  void Push(const curve::Request& r) {
    if (size == meta.size()) meta.emplace_back();
    meta[size++].CopyFactsFrom(r);
    pages.insert(pages.end(), r.pages.begin(), r.pages.end());
    ends.push_back(pages.size());
  }
  bool Full() const { return size >= kMaxRequests || pages.size() >= kMaxPages; }
  void Reset() {
    size = 0;
    ends.clear();
    pages.clear();
  }
};

// A bounded hand-over of batches between one producer and one consumer: a fixed
// pool of batches circulates between a free list and a full list, so at most
// kBatches batches (and their memory) exist. Thread safety: every method may be
// called from either thread.
class BatchQueue {
 public:
  static constexpr int kBatches = 4;

  BatchQueue() {
    for (int i = 0; i < kBatches; ++i) free_.push_back(std::make_unique<RequestBatch>());
  }

  // Producer: an empty batch to fill (blocks while every batch is in flight).
  std::unique_ptr<RequestBatch> TakeFree() {
    std::unique_lock lock(mu_);
    free_cv_.wait(lock, [&] { return !free_.empty(); });
    auto b = std::move(free_.front());
    free_.pop_front();
    return b;
  }
  // Producer: hands a filled batch to the consumer.
  void PushFull(std::unique_ptr<RequestBatch> b) {
    {
      std::lock_guard lock(mu_);
      full_.push_back(std::move(b));
    }
    full_cv_.notify_one();
  }
  // Producer: no more batches.
  void Close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    full_cv_.notify_one();
  }
  // Consumer: the next filled batch, or nullptr once closed and drained.
  std::unique_ptr<RequestBatch> PopFull() {
    std::unique_lock lock(mu_);
    full_cv_.wait(lock, [&] { return !full_.empty() || closed_; });
    if (full_.empty()) return nullptr;
    auto b = std::move(full_.front());
    full_.pop_front();
    return b;
  }
  // Consumer: gives a processed batch back.
  void Recycle(std::unique_ptr<RequestBatch> b) {
    b->Reset();
    {
      std::lock_guard lock(mu_);
      free_.push_back(std::move(b));
    }
    free_cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable free_cv_, full_cv_;
  std::deque<std::unique_ptr<RequestBatch>> free_, full_;
  bool closed_ = false;
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_CLI_REQUEST_BATCHES_H_
