// Test helper for the KV-events collector tests (gtest assertions, so apart from
// kv_events_test_publisher.h, which the benchmarks include too): a tracker's
// block state checked against EngineCacheModel's.
//
// Thread safety: call from the test's thread.
#ifndef KVWATCH_TESTS_COLLECTORS_KV_EVENTS_TEST_STATE_H_
#define KVWATCH_TESTS_COLLECTORS_KV_EVENTS_TEST_STATE_H_

#include <gtest/gtest.h>

#include <cstddef>

#include "collectors/kv_event_tracker.h"
#include "tests/collectors/kv_events_test_publisher.h"

namespace kvwatch::collectors::testing {

// The block state the tracker keeps for `publisher` (medium GPU, group 0)
// equals the model's, copy for copy.
inline void ExpectSameState(const KvEventTracker& t, std::size_t publisher, const EngineCacheModel& model) {
  const auto resident = model.Resident();
  EXPECT_EQ(t.ResidentBlocks(publisher, "GPU", 0), resident.size());
  std::size_t mismatches = 0;
  for (const auto& [hash, copies] : resident) mismatches += t.References(publisher, "GPU", 0, hash) != copies;
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace kvwatch::collectors::testing

#endif  // KVWATCH_TESTS_COLLECTORS_KV_EVENTS_TEST_STATE_H_
