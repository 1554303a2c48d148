// An intrusive doubly linked list over nodes that live in a caller's array and are
// named by 32-bit index: each node carries `prev` and `next` (std::uint32_t,
// kIndexNil for none). The eviction queues of curve/ (vllm's free queue) and of the
// core's eviction orders (curve/policy_core_*.cc) are such lists over their block arrays; this
// is their one implementation of append, unlink and pop. The list holds its ends and
// its length only; the nodes are passed to each call (any type with operator[](index)
// returning a node, e.g. std::vector), so one array can carry several lists (a node
// in at most one at a time).
//
// Thread safety: none (a value type).
#ifndef KVWATCH_CURVE_INDEX_LIST_H_
#define KVWATCH_CURVE_INDEX_LIST_H_

#include <cstdint>

namespace kvwatch::curve {

inline constexpr std::uint32_t kIndexNil = 0xffffffffu;

class IndexList {
 public:
  std::uint32_t front() const { return head_; }  // the oldest appended; kIndexNil when empty
  std::uint32_t back() const { return tail_; }
  std::uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Appends node i at the back. REQUIRES: i is in no list.
  template <typename Nodes>
  void PushBack(Nodes& nodes, std::uint32_t i) {
    auto& x = nodes[i];
    x.prev = tail_;
    x.next = kIndexNil;
    if (tail_ != kIndexNil)
      nodes[tail_].next = i;
    else
      head_ = i;
    tail_ = i;
    ++size_;
  }

  // Unlinks node i. REQUIRES: i is in this list.
  template <typename Nodes>
  void Erase(Nodes& nodes, std::uint32_t i) {
    auto& x = nodes[i];
    if (x.prev != kIndexNil)
      nodes[x.prev].next = x.next;
    else
      head_ = x.next;
    if (x.next != kIndexNil)
      nodes[x.next].prev = x.prev;
    else
      tail_ = x.prev;
    x.prev = x.next = kIndexNil;
    --size_;
  }

  // Unlinks and returns the front node. REQUIRES: !empty().
  template <typename Nodes>
  std::uint32_t PopFront(Nodes& nodes) {
    const std::uint32_t i = head_;
    Erase(nodes, i);
    return i;
  }

 private:
  std::uint32_t head_ = kIndexNil;
  std::uint32_t tail_ = kIndexNil;
  std::uint64_t size_ = 0;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_INDEX_LIST_H_
