// Sequential change detection for a sustained drift that no single window
// comparison catches: a tabular CUSUM (Page 1954) with a frozen, learned baseline,
// and ChangeTestDetector, which runs it on the per-period rate of one engine
// counter (default: evicted blocks) and reports its statistic as the alert value.
//
// Cusum. The first warmup_samples samples only learn the in-control mean mu0 and
// standard deviation sigma, which are then frozen (a running mean would chase the
// very shift being detected). sigma is floored at max(min_sigma,
// min_sigma_fraction * |mu0|) so that a flat warm-up (an idle counter) does not make
// every later event an alarm. Each later sample x gives z = (x - mu0) / sigma and
//   S+ = clamp(S+ + z - k, 0, cap)      S- = clamp(S- - z - k, 0, cap)
// with slack k. Both statistics are in sigma units; the alarm threshold h is the
// detector's fire_threshold. The cap bounds how long a cleared shift takes to
// drain: back at mu0 the statistic falls by about k per sample.
//
// Parameters and expected behaviour (defaults k = 0.75, h = 10, 120 warm-up
// samples, clear below 5, `for` 5 samples):
//   * with known mu0 and sigma, Siegmund's approximation ARL0 = (exp(2k(h+1.166)) -
//     2k(h+1.166) - 1) / (2k^2) gives over 10^7 samples between false crossings;
//     what limits false alarms in practice is the estimation of mu0 and sigma from
//     the warm-up (a mean off by 0.1 sigma eats a fifth of the slack). Simulated on
//     i.i.d. Gaussian samples with the defaults: 3 of 1000 stationary series of
//     20,000 samples (two weeks at one sample a minute) raised an alert; with the
//     textbook k = 0.5, h = 5 and 60 warm-up samples about 70% did, which is why
//     alerting does not use those.
//   * detection delay for a sustained shift of d sigma (d > k) is about
//     (h + 1.166) / (d - k) samples: about 19 samples (alert included) for
//     d = 1.5, about 49 for d = 1. A 15% rise of a rate with a 10% noise is thus
//     caught in about 20 minutes, far below any ratio threshold (rate_shift.h).
//   * real rates are autocorrelated (diurnal load), so expect more false alarms
//     than on i.i.d. samples; relearn_after re-bases the test after a long alarm.
//
// ChangeTestDetector. Every sample_period (default 60 s) it takes the counter's
// reset-corrected increase since the previous sample divided by the elapsed time
// (one sample per period however often the Alerter evaluates), and feeds it to the
// Cusum. Value: the statistic of the configured direction (default up: only an
// increase of the rate alarms). Once the statistic has stayed at or above the fire
// threshold for relearn_after (default 1h; 0 = never), the detector accepts the
// new level: it forgets the baseline and learns it again (the alert then resolves,
// as the detector reports no data while learning). Samples during low volume are
// skipped and restart the period.
//
// Page-Hinkley is not provided: with a frozen baseline and sigma-scaled slack and
// threshold, CUSUM is scale-free and its behaviour is known, whereas Page-Hinkley's
// running mean and absolute delta/lambda depend on the counter's scale.
//
// Thread safety: none (stateful); one owner serializes calls.
#ifndef KVWATCH_ALERTS_CHANGE_DETECTOR_H_
#define KVWATCH_ALERTS_CHANGE_DETECTOR_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "alerts/detector.h"
#include "alerts/rule.h"
#include "base/status.h"

namespace kvwatch::alerts {

enum class ChangeDirection { kUp, kDown, kBoth };
std::string_view DirectionName(ChangeDirection direction);  // "up", "down", "both"

struct CusumOptions {
  // Samples that learn mu0 and sigma before the test starts. Default: 120 (2h of
  // 60 s samples).
  int warmup_samples = 120;
  // Slack k, in sigma: the test is tuned to a shift of 2k sigma. Default:
  // 0.75 (a 1.5-sigma shift is detected fastest).
  double slack = 0.75;
  // Upper clamp of S+ and S-, in sigma; must be >= the alarm threshold. Default: 15.
  double cap = 15;
  // Absolute floor of sigma, in sample units (per second for rates). Default: 0.1.
  double min_sigma = 0.1;
  // Floor of sigma relative to |mu0|. Default: 0.02 (2% of the baseline).
  double min_sigma_fraction = 0.02;
  // Which shifts count. Default: kUp.
  ChangeDirection direction = ChangeDirection::kUp;

  base::Status Validate(std::string_view prefix) const;

  bool operator==(const CusumOptions&) const = default;
};

// The CUSUM statistic itself: pure arithmetic on a sample sequence.
class Cusum {
 public:
  explicit Cusum(CusumOptions options);

  // Adds one sample (ignored unless finite).
  void Add(double x);
  // Forgets the baseline and the statistics; the next warmup_samples samples learn again.
  void Reset();

  bool learning() const { return learned_ < options_.warmup_samples; }
  int samples_learned() const { return learned_; }
  // Frozen baseline; meaningful once !learning().
  double mean() const { return mean_; }
  double sigma() const { return sigma_; }
  // S+ and S- in sigma units (0 while learning).
  double upper() const { return up_.statistic; }
  double lower() const { return down_.statistic; }
  // The statistic of the configured direction (max of both for kBoth).
  double statistic() const;
  // The side of statistic(): kUp or kDown.
  ChangeDirection side() const;
  // Mean of the samples since statistic() last left 0 (the CUSUM estimate of the
  // shifted mean); NaN when the statistic is 0.
  double ShiftedMean() const;

  // Checkpoint encoding (appends / consumes): the warm-up's progress, the frozen
  // baseline and both statistics. Deserialize is false when truncated or
  // inconsistent with this test's options (more samples learned than the
  // warm-up has, a learned sigma that is not positive).
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  struct Side {
    double statistic = 0;
    double run_sum = 0;  // sum of samples since the statistic left 0
    int run_length = 0;
  };
  static void Update(Side& side, double drift, double x, double cap);

  const CusumOptions options_;
  int learned_ = 0;
  double mean_ = 0;
  double m2_ = 0;  // Welford's sum of squared deviations during warm-up
  double sigma_ = 0;
  Side up_;
  Side down_;
};

struct ChangeTestOptions {
  // Whether the Alerter evaluates this detector. Default: true.
  bool enabled = true;
  // The counter whose per-period rate is tested. Default: evicted blocks.
  CounterKind counter = CounterKind::kEvictedBlocks;
  // Length of one CUSUM sample. Default: 60s.
  std::chrono::seconds sample_period{60};
  // The statistic's parameters (see CusumOptions for defaults).
  CusumOptions cusum;
  // Alarm threshold h, in sigma. Default: 10.
  double fire_threshold = 10;
  // The statistic below which a firing alert clears, in sigma. Default: 5.
  double clear_threshold = 5;
  // How long an alarm lasts before the new level becomes the baseline. Default: 1h;
  // 0 keeps the old baseline for ever.
  std::chrono::seconds relearn_after{3600};
  // Requests needed in the short window for samples to count. Default: 500.
  double min_short_window_requests = 500;
  // Severity (default "warning"), `for` (default 5m), keep_firing_for (default 0).
  RuleOptions rule{"warning", std::chrono::seconds(5 * 60), std::chrono::seconds(0)};

  base::Status Validate(std::string_view prefix) const;

  bool operator==(const ChangeTestOptions&) const = default;
};

// "KVWatchEvictionRateDrift", "KVWatchRejectionRateDrift", ...
std::string_view ChangeTestAlertName(CounterKind counter);

class ChangeTestDetector : public Detector {
 public:
  explicit ChangeTestDetector(ChangeTestOptions options);

  // Detector
  std::string_view AlertName() const override { return ChangeTestAlertName(options_.counter); }
  std::string_view Window() const override { return window_; }
  Observation Evaluate(const DetectorInput& input) override;

  const Cusum& cusum() const { return cusum_; }
  // How many times the baseline was learned again after a long alarm.
  int relearned() const { return relearned_; }

  // The CUSUM, the current sample period's start, the last rate and the alarm's start.
  void Serialize(std::vector<std::uint8_t>* out) const override;
  bool Deserialize(std::span<const std::uint8_t>* in) override;

 private:
  struct Point {
    TimePoint time;
    double total;
  };
  void TakeSample(const Point& point);
  Annotations Annotate() const;

  const ChangeTestOptions options_;
  const std::string window_;
  Cusum cusum_;
  std::optional<Point> anchor_;  // start of the current sample period
  std::optional<double> last_rate_;
  std::optional<TimePoint> alarm_since_;
  int relearned_ = 0;
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_CHANGE_DETECTOR_H_
