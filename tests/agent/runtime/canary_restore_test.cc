// The policy canaries on restart (Analysis::Restore): a checkpoint the canaries
// refuse restarts them alone, and the log line says why. A checkpoint in an
// older layout version (a build before the policy core wrote format 1) is
// refused whatever the settings, so the line must name the format, not
// changed settings; one written with other curve.policies names the settings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "agent/runtime/agent.h"
#include "agent/runtime/analysis.h"
#include "agent/runtime/state_file.h"
#include "collectors/synth.h"
#include "curve/policy_canaries.h"

namespace kvwatch::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

AgentOptions CanaryAgentOptions(std::vector<curve::PolicyKind> policies) {
  AgentOptions o;
  o.engine.max_pages = 1u << 14;
  o.engine.remembered_evictions = 1u << 14;
  o.curve.windows = {{"5m", 300}};
  o.curve.capacities = {100, 1000};
  curve::CanaryOptions canaries;
  canaries.policies = std::move(policies);
  o.canaries = canaries;
  return o;
}

// The state of an analysis with these options after 2,000 synthetic requests.
StateParts SavedState(const AgentOptions& o) {
  auto analysis = Analysis::Create(o);
  EXPECT_TRUE(analysis.ok()) << analysis.error();
  collectors::SynthOptions so;
  so.seed = 3;
  so.duration_s = 0;
  so.max_requests = 2000;
  auto generator = collectors::SynthGenerator::Create(so);
  EXPECT_TRUE(generator.ok()) << generator.error();
  collectors::SynthRequest r;
  double t = 0;
  while (generator.value().Next(&r)) analysis.value()->Ingest(r.request, t += 0.01);
  StateParts parts;
  analysis.value()->Serialize(&parts);
  return parts;
}

// What Restore says on standard error, and that the rest of the state is
// restored (an empty reason).
std::string RestoreLog(const AgentOptions& o, const StateParts& parts) {
  auto analysis = Analysis::Create(o);
  EXPECT_TRUE(analysis.ok()) << analysis.error();
  ::testing::internal::CaptureStderr();
  const std::string why = analysis.value()->Restore(parts);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(why, "");
  return log;
}

TEST(CanaryRestoreTest, SameSettingsRestoreSilently) {
  const AgentOptions o = CanaryAgentOptions({curve::PolicyKind::kLru, curve::PolicyKind::kFifo});
  EXPECT_EQ(RestoreLog(o, SavedState(o)), "");
}

TEST(CanaryRestoreTest, AnOlderCheckpointFormatIsNamedAsTheReason) {
  const AgentOptions o = CanaryAgentOptions({curve::PolicyKind::kLru, curve::PolicyKind::kFifo});
  StateParts parts = SavedState(o);
  // The same checkpoint as an older build wrote it: the version field (after
  // the 4-byte tag) one below this build's.
  const std::uint32_t written = curve::PolicyCanaries::CheckpointVersionWritten();
  ASSERT_GE(written, 2u);
  ASSERT_EQ(curve::PolicyCanaries::CheckpointVersion(parts.canaries), written);
  const std::uint32_t older = written - 1;
  std::memcpy(parts.canaries.data() + 4, &older, sizeof(older));
  ASSERT_EQ(curve::PolicyCanaries::CheckpointVersion(parts.canaries), older);

  const std::string log = RestoreLog(o, parts);
  EXPECT_THAT(log, HasSubstr("kvwatch agent: state: the saved policy canaries are in checkpoint format " +
                             std::to_string(older) + ", older than the format " + std::to_string(written) +
                             " this build reads; the canaries start cold"));
  EXPECT_THAT(log, Not(HasSubstr("curve.policies")));
}

TEST(CanaryRestoreTest, OtherPoliciesAreNamedAsTheReason) {
  const AgentOptions saved_with = CanaryAgentOptions({curve::PolicyKind::kLru, curve::PolicyKind::kFifo});
  const AgentOptions now = CanaryAgentOptions({curve::PolicyKind::kLru, curve::PolicyKind::kS3Fifo});
  const std::string log = RestoreLog(now, SavedState(saved_with));
  EXPECT_THAT(log, HasSubstr("kvwatch agent: state: the saved policy canaries do not fit curve.policies as "
                             "configured now; the canaries start cold"));
  EXPECT_THAT(log, Not(HasSubstr("format")));
}

TEST(CanaryRestoreTest, CheckpointVersionNeedsTheTag) {
  const std::vector<std::uint8_t> none = {1, 2, 3, 4, 2, 0, 0, 0};
  EXPECT_EQ(curve::PolicyCanaries::CheckpointVersion(none), std::nullopt);
  EXPECT_EQ(curve::PolicyCanaries::CheckpointVersion({}), std::nullopt);
}

}  // namespace
}  // namespace kvwatch::agent
