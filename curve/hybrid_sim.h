// HybridPoolSim: one shared block pool of a fixed capacity in bytes, simulated
// request by request with the behaviours of vLLM's hybrid KV cache manager that
// the one-pass model of curve/hybrid_engine.h leaves out, each one switchable, so
// that what each changes can be measured (docs/semantics.md section 8; `kvwatch
// replay --hybrid-check`).
//
// The pool, as vLLM's (vllm/v1/core/block_pool.py and
// single_type_kv_cache_manager.py, main branch of 2026): cached blocks that no
// request uses sit in one free queue; a freed block is appended to its tail and
// eviction takes its head. Requests run one at a time. A request:
//   1. finds its hit L by the groups' rules (curve/hybrid_engine.h) against the
//      cached blocks, at most floor((prompt tokens - 1) / P) pages when
//      cap_prompt (vLLM's max_cache_hit_length = num_tokens - 1);
//   2. takes the blocks its hit uses out of the free queue: with touch_skipped,
//      every group's pages [0, L) (the one-pass model); without, only those the
//      rule needs (a window's last k pages, the current chunk, the last state),
//      as vLLM's allocate_new_computed_blocks does;
//   3. allocates its pages [L, n) in every group, evicting from the head of the
//      free queue as needed (a block whose id is cached is taken instead);
//   4. with early_free, frees the pages that left the window or the chunk when
//      its prompt is computed (remove_skipped_blocks, last first), and those
//      that leave it while its output is decoded (one per step), before
//   5. at finish, freeing each group's remaining blocks in group order, each in
//      the touch order (tail-first as vLLM's free()).
// Blocks in use may exceed the capacity for a request larger than the pool (the
// engine would preempt it); the pool is trimmed back once they are freed.
// With touch_skipped and neither early_free nor cap_prompt, the hits equal the
// one-pass curve's at that capacity (tests/curve/hybrid_sim_test.cc).
//
// Cost: O(pages * groups) hash operations per request per capacity: one pass per
// capacity, so only a handful of capacities are simulated.
//
// Thread safety: none.
#ifndef KVWATCH_CURVE_HYBRID_SIM_H_
#define KVWATCH_CURVE_HYBRID_SIM_H_

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "curve/hybrid_engine.h"

namespace kvwatch::curve {

struct HybridSimOptions {
  HybridEngineOptions engine;  // groups, page size, touch (free) order
  bool touch_skipped = false;  // true: a hit references every page before L in every group
  bool early_free = true;      // out-of-window and earlier-chunk pages freed before the rest
  bool cap_prompt = true;      // at most prompt tokens - 1 tokens hit
};

class HybridPoolSim {
 public:
  // REQUIRES: ValidateHybridOptions(options.engine).ok().
  HybridPoolSim(const HybridSimOptions& options, std::uint64_t capacity_bytes);

  // The request's hit in pages. input_tokens <= 0: unknown (n * P tokens);
  // output_tokens <= 0: unknown (no decode frees).
  std::uint32_t Request(std::span<const PageId> pages, std::int64_t input_tokens, std::int64_t output_tokens);

  std::uint64_t page_hits() const { return page_hits_; }
  std::uint64_t page_refs() const { return page_refs_; }
  // Requests whose blocks in use alone exceeded the capacity.
  std::uint64_t overflows() const { return overflows_; }

 private:
  using Key = std::pair<std::uint32_t, PageId>;  // (group, page)
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<PageId>()(k.second * 0x9E3779B97F4A7C15ull + k.first);
    }
  };
  bool Cached(std::uint32_t g, PageId p) const { return free_.count({g, p}) > 0; }
  void Take(std::uint32_t g, PageId p);  // into use: out of the free queue, or a new block
  void Free(std::uint32_t g, PageId p);  // out of use: to the free queue's tail
  void Trim();                           // evicts from the head until within capacity

  HybridSimOptions options_;
  std::uint64_t capacity_;
  std::list<Key> queue_;  // the free queue: head (front) evicted first
  std::unordered_map<Key, std::list<Key>::iterator, KeyHash> free_;
  std::uint64_t free_bytes_ = 0;
  std::uint64_t used_bytes_ = 0;
  std::unordered_set<Key, KeyHash> using_;  // blocks the current request uses
  std::uint64_t page_hits_ = 0;
  std::uint64_t page_refs_ = 0;
  std::uint64_t overflows_ = 0;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_HYBRID_SIM_H_
