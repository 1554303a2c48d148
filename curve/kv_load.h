// The KV load factor (issue 19, "Live"): how close a replica's admissions are to
// what its KV memory can hold, by Little's law for memory, and each class's
// output-length quantiles (what a reservation per class would use). Pure: the
// live agent keeps KvLoadWindows per curve window and reads them at scrape time;
// a simulator can call KvTokenSeconds and KvLoadFactor to compare against the
// same formula.
//
// The formula. A request with P prompt tokens and O output tokens holds its
// prompt's KV for its whole lifetime and its output's KV grows by one token per
// decode step, so with a decode rate r (tokens per second per sequence) and a
// prefill time T_p:
//   lifetime           L = T_p + O / r
//   KV token-seconds   S = P x L + O^2 / (2 r)
// Over a window with N requests arriving in a span of D seconds, the arrival
// rate is lambda = N / D, and the mean KV held (tokens) is lambda x mean(S)
// (Little's law); against a KV capacity of K tokens
//   rho = lambda x mean(S) / K.
// rho near 1 means admission is outrunning memory: preemptions follow.
//
// What it assumes and leaves out: every request's prompt is charged in full
// (prefix sharing between running requests is not subtracted: an upper bound
// when prompts share cached prefixes); the decode rate is one number for every
// sequence; queueing time holds no KV; a request without both token counts
// counts in the arrival rate and is assumed to have the mean S of those with
// them. A window without any request with both counts has no rho (absent, not
// 0): KV events, for instance, give no output lengths.
//
// Windows keep sufficient statistics (sum of P, sum of P x O + O^2 / 2, counts)
// rather than S itself, so the decode rate and the prefill time are applied when
// a window is read: a decode rate learned later from the engine applies to the
// whole window.
//
// Output-length quantiles: per class label, a histogram of output tokens with
// buckets exact below 32 tokens and 16 linear sub-buckets per doubling above
// (each bucket at most 1/16 = 6.25% wide relative to its lower end); a quantile
// is the nearest-rank quantile's bucket's upper end, so it is exact below 32
// tokens and at most 6.25% above the exact one otherwise (never below it: a
// reservation read off it is never short).
//
// Thread safety: none; plain values, callers serialize.
#ifndef KVWATCH_CURVE_KV_LOAD_H_
#define KVWATCH_CURVE_KV_LOAD_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "curve/request.h"
#include "curve/sliding_windows.h"

namespace kvwatch::curve {

// S = P x (prefill_s + O / r) + O^2 / (2 r). REQUIRES: decode_tokens_per_s > 0.
double KvTokenSeconds(double prompt_tokens, double output_tokens, double decode_tokens_per_s, double prefill_s = 0);

// rho = arrival rate x mean KV token-seconds / capacity; NaN unless capacity > 0.
double KvLoadFactor(double arrivals_per_s, double mean_token_seconds, double capacity_tokens);

// Output-length buckets: the bucket of a token count, and the largest count in a bucket.
inline constexpr std::uint32_t kOutputLengthBuckets = 32 + (64 - 5) * 16;
std::uint32_t OutputLengthBucket(std::uint64_t tokens);
std::uint64_t OutputLengthBucketUpper(std::uint32_t bucket);

// Per class: requests per output-length bucket (dense up to the highest bucket used).
using OutputLengthHistogram = std::vector<std::uint64_t>;
// The nearest-rank q-quantile (q in (0, 1]) as its bucket's upper end; nullopt when empty.
std::optional<std::uint64_t> OutputLengthQuantile(const OutputLengthHistogram& histogram, double q);

// One request's facts as the load factor needs them.
struct KvLoadRequest {
  std::int64_t prompt_tokens = -1;  // -1: unknown
  std::int64_t output_tokens = -1;
  std::string class_label;  // empty: no class (no quantiles)
};

// An additive summary of requests (a SlidingWindows slice).
class KvLoadSlice {
 public:
  void Add(const KvLoadRequest& request);
  void Merge(const KvLoadSlice& other);
  void Clear();

  std::uint64_t requests() const { return requests_; }  // every request
  std::uint64_t sized() const { return sized_; }        // with both token counts
  double prompt_sum() const { return prompt_sum_; }     // sum of P over sized requests
  double growth_sum() const { return growth_sum_; }     // sum of P x O + O^2 / 2 over sized requests
  // Sum of S over the sized requests: prefill_s x sum P + growth_sum / r.
  double TokenSeconds(double decode_tokens_per_s, double prefill_s = 0) const;
  // Output lengths by class label (requests with an output length and a class).
  const std::map<std::string, OutputLengthHistogram>& classes() const { return classes_; }

  // Checkpoint encoding (appends / consumes); false when malformed.
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  std::uint64_t requests_ = 0;
  std::uint64_t sized_ = 0;
  double prompt_sum_ = 0;
  double growth_sum_ = 0;
  std::map<std::string, OutputLengthHistogram> classes_;
};

// What a window's load reads as.
struct KvLoad {
  double span_s = 0;              // D
  double arrivals_per_s = 0;      // lambda = N / D
  double mean_token_seconds = 0;  // mean S of the sized requests
  double capacity_tokens = 0;     // K
  double load_factor = 0;         // rho
};
// The load of `window` over `span_s` seconds; nullopt without a sized request,
// a span > 0, a decode rate > 0 or a capacity > 0.
std::optional<KvLoad> KvLoadOf(const KvLoadSlice& window, double span_s, double decode_tokens_per_s,
                               double capacity_tokens, double prefill_s = 0);

// Sliding windows of KvLoadSlice on the curve windows' clock, with the span each
// window covers: from the later of its oldest slice's start and the first request
// counted, to now (so a window shorter than its length after start-up reads its
// true arrival rate).
class KvLoadWindows {
 public:
  explicit KvLoadWindows(const std::vector<double>& windows_s) : windows_(windows_s, KvLoadSlice()) {}

  // Counts the request at time t (non-finite: now); moves the clock.
  void Add(const KvLoadRequest& request, double t);
  void Advance(double t) { windows_.Advance(t); }
  // Window i's merged slices and its span in seconds (0 before any request).
  KvLoadSlice Window(std::size_t i) const { return windows_.Window(i, KvLoadSlice()); }
  double Span(std::size_t i) const;
  std::size_t size() const { return windows_.size(); }
  double now() const { return windows_.now(); }

  // Checkpoint encoding (appends / consumes): the clock, every slice and the first
  // request's time. false (the windows are then unspecified: recreate them) when
  // malformed or written for other window lengths.
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  SlidingWindows<KvLoadSlice> windows_;
  double first_s_ = 0;
  bool any_ = false;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_KV_LOAD_H_
