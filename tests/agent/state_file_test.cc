// The agent's state file (agent/runtime/state_file.h): one atomic commit of every
// part, read back whole or rejected whole with a reason; a complete leftover
// "<path>.tmp" (a kill between its write and its rename) is the newer state.
#include "agent/runtime/state_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/atomic_file.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using testing_support::ReadFile;
using testing_support::TempDir;
using testing_support::WriteFile;

StateParts Sample() {
  StateParts p;
  p.fingerprint = "max_pages=1024 windows=300,";
  p.engine = {1, 2, 3, 4};
  p.curves = {5, 6};
  p.groups = {7};
  p.canaries = {8, 9};
  p.alerts = {10};
  p.collectors = {{"trace", {11, 12, 13}}, {"kv", {}}, {"logs", {14}}};
  return p;
}

void ExpectEqual(const StateParts& a, const StateParts& b) {
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.engine, b.engine);
  EXPECT_EQ(a.curves, b.curves);
  EXPECT_EQ(a.groups, b.groups);
  EXPECT_EQ(a.canaries, b.canaries);
  EXPECT_EQ(a.alerts, b.alerts);
  EXPECT_EQ(a.collectors, b.collectors);
}

TEST(StateFileTest, EncodeDecodeRoundTrip) {
  const StateParts p = Sample();
  auto decoded = DecodeState(EncodeState(p));
  ASSERT_TRUE(decoded.ok()) << decoded.error();
  ExpectEqual(decoded.value(), p);
  ASSERT_NE(decoded.value().Collector("kv"), nullptr);
  EXPECT_TRUE(decoded.value().Collector("kv")->empty());
  EXPECT_EQ(decoded.value().Collector("absent"), nullptr);
}

TEST(StateFileTest, EveryTruncationIsRejectedWithAReason) {
  const StateBytes bytes = EncodeState(Sample());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = DecodeState(std::span<const std::uint8_t>(bytes.data(), n));
    ASSERT_FALSE(decoded.ok()) << "a state cut at " << n << " of " << bytes.size() << " bytes was accepted";
    EXPECT_FALSE(decoded.error().empty());
  }
}

TEST(StateFileTest, EveryFlippedBitIsRejected) {
  const StateBytes bytes = EncodeState(Sample());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      StateBytes bad = bytes;
      bad[i] ^= static_cast<std::uint8_t>(1u << bit);
      EXPECT_FALSE(DecodeState(bad).ok()) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(StateFileTest, ReasonsNameWhatIsWrong) {
  StateBytes bytes = EncodeState(Sample());
  EXPECT_NE(DecodeState(StateBytes{'n', 'o', 'p', 'e'}).error().find("not a kvwatch state file"), std::string::npos);
  StateBytes version = bytes;
  version[8] = 1;  // the u32 version after the magic
  EXPECT_NE(DecodeState(version).error().find("version 1 (this build reads version 2)"), std::string::npos);
  StateBytes flipped = bytes;
  flipped.back() ^= 0xff;
  EXPECT_NE(DecodeState(flipped).error().find("checksum"), std::string::npos);
  bytes.pop_back();
  EXPECT_NE(DecodeState(bytes).error().find("truncated"), std::string::npos);
}

TEST(StateFileTest, ReadPrefersACompleteTemporaryFileAndIgnoresATornOne) {
  TempDir dir;
  const std::string path = dir.Sub("state.bin");
  EXPECT_EQ(ReadStateFile(path).outcome, LoadedState::Outcome::kNone);

  StateParts old = Sample();
  ASSERT_TRUE(WriteStateFile(path, old).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  LoadedState loaded = ReadStateFile(path);
  ASSERT_EQ(loaded.outcome, LoadedState::Outcome::kLoaded);
  EXPECT_EQ(loaded.from, path);
  ExpectEqual(loaded.parts, old);

  // A kill after the temporary file was written and before the rename.
  StateParts newer = Sample();
  newer.curves = {42};
  const StateBytes bytes = EncodeState(newer);
  const std::string text(bytes.begin(), bytes.end());
  ASSERT_TRUE(WriteFile(path + ".tmp", text));
  loaded = ReadStateFile(path);
  ASSERT_EQ(loaded.outcome, LoadedState::Outcome::kLoaded);
  EXPECT_EQ(loaded.from, path + ".tmp");
  EXPECT_EQ(loaded.parts.curves, newer.curves);

  // A kill while it was being written: torn, ignored; the committed file is used.
  ASSERT_TRUE(WriteFile(path + ".tmp", text.substr(0, text.size() / 2)));
  loaded = ReadStateFile(path);
  ASSERT_EQ(loaded.outcome, LoadedState::Outcome::kLoaded);
  EXPECT_EQ(loaded.from, path);
  EXPECT_EQ(loaded.parts.curves, old.curves);

  // A corrupt committed file is rejected with the reason.
  ASSERT_TRUE(WriteFile(path, "garbage"));
  loaded = ReadStateFile(path);
  EXPECT_EQ(loaded.outcome, LoadedState::Outcome::kRejected);
  EXPECT_NE(loaded.error.find("not a kvwatch state file"), std::string::npos);
}

// The fault points fire in order, and a write that fails leaves the old file.
std::vector<std::string> points;
void Record(std::string_view point) { points.emplace_back(point); }

TEST(StateFileTest, FaultPointsAreTheStepsOfTheAtomicWrite) {
  TempDir dir;
  const std::string path = dir.Sub("f");
  base::SetFaultHook(&Record);
  ASSERT_TRUE(base::WriteFileAtomically(path, "abc").ok());
  base::SetFaultHook(nullptr);
  EXPECT_EQ(points, (std::vector<std::string>{"created", "written", "synced", "renamed", "done"}));
  EXPECT_EQ(ReadFile(path), "abc");
  // A folder that does not exist: an error naming the file, nothing written.
  base::Status s = base::WriteFileAtomically(dir.Sub("missing/f"), "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("missing/f.tmp"), std::string::npos) << s.error();
}

}  // namespace
}  // namespace kvwatch::agent
