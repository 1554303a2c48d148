// The admission rules' estimators (internal to sim/; the rules are described in
// sim/replica.h and docs/simulate.md): each class's output-length quantile learned
// from finished requests (reserve-quantile), and the eviction-free admission rate
// estimated from the recent mix (rate-cap).
//
// Thread safety: none; one per simulation.
#ifndef KVWATCH_SIM_ADMISSION_H_
#define KVWATCH_SIM_ADMISSION_H_

#include <algorithm>
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

// rate-cap: a pool of N blocks sustains about N / B admissions per step without
// eviction, B the mean block-steps per request (Little's law for memory: admissions
// per step x block-steps each = mean blocks in use). A request's block-steps are
// the sum, over the steps it is scheduled in, of the blocks it holds (prompt blocks
// at its prefill, ceil((prompt + k) / block) at decode step k: about output x
// (prompt + output / 2) / block tokens). At exactly N / B the mean is the whole
// pool and the blocks in use, which swing about their mean as requests come and go
// one at a time, overflow it; so the eviction-free rate estimate keeps half a
// request's peak blocks P free (P = ceil((prompt + output - 1) / block), its KV
// at its finish):
//     r = (N - P / 2) / B   admissions per step,
// B and P the means over the last 256 finished requests; before the first, a
// prior from the mean prompt admitted so far and the max output tokens M:
// B = M x (prompt blocks + M / (2 block)), P = prompt blocks + M / block; before
// any admission, r = 0 (the empty replica's first admission is allowed anyway).
// Admission credits accrue at r each step, fractions kept, up to r + 1 (a step
// that could not admit carries at most one step's worth over), and each admission
// spends one, so admissions average r per step. (Capping the credit at max(1, r)
// instead lost the fraction at every admission: 1 / ceil(1 / r) per step below
// r = 1, floor(r) above, so near half the rate just below r = 1.) An admission
// into an empty replica, allowed whatever the credit, is paid from later credit.
class RateCap {
 public:
  RateCap(std::uint64_t pool_blocks, std::uint32_t block_tokens, std::uint32_t prior_output_tokens)
      : pool_blocks_(pool_blocks), block_tokens_(block_tokens), prior_output_(prior_output_tokens) {}
  void Admitted(std::uint32_t prompt_tokens);  // first admissions only (the prior's prompt mean)
  // A finished request's block-steps and peak blocks.
  void Finished(double block_steps, std::uint64_t peak_blocks);
  double Rate() const;  // admissions per step
  // Called once per step before admissions.
  void StartStep() {
    const double r = Rate();
    credit_ = std::min(credit_ + r, r + 1);
  }
  bool CanAdmit() const { return credit_ >= 1 || allowed_; }
  void Spend() {
    credit_ -= 1;  // below 0 after an allowed admission: a debt
    allowed_ = false;
  }
  void Allow() { allowed_ = true; }  // nothing runs: admit one whatever the credit

 private:
  static constexpr std::size_t kWindow = 256;
  std::uint64_t pool_blocks_;
  std::uint32_t block_tokens_;
  std::uint32_t prior_output_;
  double prompt_sum_ = 0;
  std::uint64_t prompts_ = 0;
  std::array<double, kWindow> steps_ring_{}, peak_ring_{};
  std::size_t filled_ = 0, next_ = 0;
  double steps_sum_ = 0, peak_sum_ = 0;
  double credit_ = 0;
  bool allowed_ = false;
};

}  // namespace kvwatch::sim::internal

#endif  // KVWATCH_SIM_ADMISSION_H_
