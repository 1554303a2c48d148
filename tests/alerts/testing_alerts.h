// Helpers shared by the alert tests: seeded noise, and an Alerter stepped one
// evaluation at a time on a fake clock.
#ifndef KVWATCH_TESTS_ALERTS_TESTING_ALERTS_H_
#define KVWATCH_TESTS_ALERTS_TESTING_ALERTS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "alerts/alerter.h"
#include "base/mix.h"

namespace kvwatch::alerts::testing {

// SplitMix64 with Box-Muller: deterministic, seeded noise for the tests.
class TestRng {
 public:
  explicit TestRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t Next() { return base::Mix64(state_ += 0x9e3779b97f4a7c15ull); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Gaussian() {
    const double u1 = std::max(Uniform(), 1e-300);
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * Uniform());
  }

 private:
  std::uint64_t state_;
};

// AlerterOptions with every detector disabled, for tests that enable one.
inline AlerterOptions NoDetectors() {
  AlerterOptions options;
  options.knee_shift.enabled = false;
  options.capacity_shortfall.enabled = false;
  options.eviction_rate_shift.enabled = false;
  options.rejection_rate_shift.enabled = false;
  options.preemption_rate_shift.enabled = false;
  options.capacity_miss_share.enabled = false;
  options.change_tests.clear();
  options.kv_load.enabled = false;
  return options;
}

// An Alerter with the given options, stepped by the test.
class SteppedAlerter {
 public:
  explicit SteppedAlerter(const AlerterOptions& options) : alerter_(Alerter::Create(options).value()) {}

  // Evaluates and returns the events' kinds.
  std::vector<EventKind> Step(const AlertInputs& inputs) {
    base::Result<Evaluation> result = alerter_.Evaluate(inputs);
    EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error());
    std::vector<EventKind> kinds;
    if (!result.ok()) return kinds;
    for (const AlertEvent& event : result.value().events) kinds.push_back(event.kind);
    return kinds;
  }
  // The state of the first (only) alert.
  AlertState State() const { return alerter_.Statuses().at(0).state; }

  Alerter alerter_;
};

}  // namespace kvwatch::alerts::testing

#endif  // KVWATCH_TESTS_ALERTS_TESTING_ALERTS_H_
