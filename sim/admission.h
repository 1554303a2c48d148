// The admission rules' estimators (internal to sim/; the rules are described in
// sim/replica.h and docs/simulate.md): each class's output-length quantile learned
// from finished requests (reserve-quantile), and the eviction-free admission rate
// estimated from the recent mix (rate-cap).
//
// Thread safety: none; one per simulation.
#ifndef KVWATCH_SIM_ADMISSION_H_
#define KVWATCH_SIM_ADMISSION_H_

#include <array>
#include <cstdint>
#include <vector>

namespace kvwatch::sim::internal {

// Output lengths per class on log-spaced buckets (32 per doubling: a quantile is
// the upper bound of its bucket, at most 2.2% above the exact one).
class OutputQuantiles {
 public:
  explicit OutputQuantiles(std::uint32_t classes) : classes_(classes) {}
  void Add(std::uint32_t class_id, std::uint32_t output_tokens);
  std::uint64_t count(std::uint32_t class_id) const { return classes_[class_id].count; }
  // The q-quantile (nearest rank) of the class's outputs, rounded up to its bucket's
  // upper bound. REQUIRES: count(class_id) > 0.
  std::uint32_t Quantile(std::uint32_t class_id, double q);

 private:
  static constexpr int kSub = 32;
  static constexpr int kBuckets = 33 * kSub;
  static int Bucket(std::uint32_t v);
  static std::uint32_t UpperBound(int bucket);
  struct Class {
    std::vector<std::uint32_t> counts;  // kBuckets once used
    std::uint64_t count = 0;
    double cached_q = -1;
    std::uint32_t cached = 0;
    bool dirty = true;
  };
  std::vector<Class> classes_;
};

// rate-cap: a pool of N blocks sustains about N / (mean block-steps per request)
// admissions per step without eviction (Little's law for memory: admissions per
// step x block-steps each = blocks in use). The mean is over the last 256 finished
// requests; before the first, a prior: the mean prompt blocks admitted so far plus
// half the growth, over max output tokens of decode steps. Admission credits
// accrue at that rate each step, up to one step's worth (at least 1), and each
// admission spends one.
class RateCap {
 public:
  RateCap(std::uint64_t pool_blocks, std::uint32_t block_tokens, std::uint32_t prior_output_tokens)
      : pool_blocks_(pool_blocks), block_tokens_(block_tokens), prior_output_(prior_output_tokens) {}
  void Admitted(std::uint32_t prompt_tokens);  // first admissions only (the prior's prompt mean)
  void Finished(double block_steps);
  double Rate() const;  // admissions per step
  // Called once per step before admissions.
  void StartStep() {
    const double r = Rate();
    credit_ = std::min(credit_ + r, std::max(1.0, r));
  }
  bool CanAdmit() const { return credit_ >= 1; }
  void Spend() { credit_ -= 1; }
  void Allow() { credit_ = std::max(credit_, 1.0); }  // nothing runs: admit one whatever the rate

 private:
  static constexpr std::size_t kWindow = 256;
  std::uint64_t pool_blocks_;
  std::uint32_t block_tokens_;
  std::uint32_t prior_output_;
  double prompt_sum_ = 0;
  std::uint64_t prompts_ = 0;
  std::array<double, kWindow> ring_{};
  std::size_t filled_ = 0, next_ = 0;
  double ring_sum_ = 0;
  double credit_ = 1;
};

}  // namespace kvwatch::sim::internal

#endif  // KVWATCH_SIM_ADMISSION_H_
