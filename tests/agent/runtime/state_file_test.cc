// The agent's state file (agent/runtime/state_file.h): one atomic commit of every
// part, read back whole or rejected whole with a reason; a complete leftover
// "<path>.tmp" (a kill between its write and its rename) is the newer state.
#include "agent/runtime/state_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>

#include "base/atomic_file.h"
#include "curve/stack_distance.h"
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
  EXPECT_NE(DecodeState(version).error().find("version 1 (this build reads versions 2 to 3)"), std::string::npos);
  version[8] = 4;
  EXPECT_NE(DecodeState(version).error().find("version 4 (this build reads versions 2 to 3)"), std::string::npos);
  StateBytes flipped = bytes;
  flipped.back() ^= 0xff;
  EXPECT_NE(DecodeState(flipped).error().find("checksum"), std::string::npos);
  bytes.pop_back();
  EXPECT_NE(DecodeState(bytes).error().find("truncated"), std::string::npos);
}

// Version 3 added the hybrid section; a version 2 file (the same format without
// it, as the previous build wrote) still reads, and the hybrid part round-trips.
TEST(StateFileTest, ReadsVersionTwoAndKeepsTheHybridPart) {
  StateParts parts = Sample();
  parts.hybrid = {7, 8, 9};
  base::Result<StateParts> back = DecodeState(EncodeState(parts));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back.value().hybrid, parts.hybrid);
  parts.hybrid.clear();
  StateBytes old = EncodeState(parts);
  old[8] = 2;  // the u32 version after the magic
  EXPECT_NE(DecodeState(old).error().find("checksum"), std::string::npos) << "version 3's CRC covers the version";
  // A version 2 file's CRC covers the body only.
  const auto crc = static_cast<std::uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), old.data() + kStateHeaderBytes, static_cast<uInt>(old.size() - kStateHeaderBytes)));
  std::memcpy(old.data() + kStateHeaderBytes - sizeof(crc), &crc, sizeof(crc));
  back = DecodeState(old);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_TRUE(back.value().hybrid.empty());
  EXPECT_EQ(back.value().engine, parts.engine);
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

// A header that announces `body` bytes after it (the CRC is not checked before
// the body is read, so any value does).
std::string HeaderAnnouncing(std::uint64_t body) {
  std::string h = "KVWSTATE";
  const std::uint32_t version = kStateVersion, crc = 0;
  h.append(reinterpret_cast<const char*>(&version), sizeof(version));
  h.append(reinterpret_cast<const char*>(&body), sizeof(body));
  h.append(reinterpret_cast<const char*>(&crc), sizeof(crc));
  return h;
}

// A sparse file of `size` bytes that starts with `head` (no disk blocks for the rest).
bool MakeSparse(const std::string& path, const std::string& head, std::uint64_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  const bool ok = ::ftruncate(fd, static_cast<off_t>(size)) == 0 &&
                  ::pwrite(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size());
  ::close(fd);
  return ok;
}

TEST(StateFileTest, AFifoIsRejectedWithoutBlockingAndReplacedByTheNextSave) {
  TempDir dir;
  const std::string path = dir.Sub("state.bin");
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << std::strerror(errno);
  ASSERT_EQ(::mkfifo((path + ".tmp").c_str(), 0644), 0) << std::strerror(errno);
  // On a thread: a blocking open() would wait for a writer for good. After the
  // bound, the test opens both FIFOs for writing to set the thread free and fails.
  auto read = std::async(std::launch::async, [&] { return ReadStateFile(path); });
  if (read.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    for (const std::string& f : {path, path + ".tmp"}) ::close(::open(f.c_str(), O_WRONLY | O_NONBLOCK));
    read.wait();
    FAIL() << "ReadStateFile blocked on a FIFO";
  }
  const LoadedState loaded = read.get();
  EXPECT_EQ(loaded.outcome, LoadedState::Outcome::kRejected);
  EXPECT_EQ(loaded.from, path);
  EXPECT_NE(loaded.error.find(path + ": is a FIFO, not a regular file"), std::string::npos) << loaded.error;
  EXPECT_EQ(loaded.bytes_read, 0u);
  // The FIFO at .tmp is replaced, not opened (a write-only open would block too).
  ASSERT_TRUE(std::filesystem::remove(path));
  ASSERT_TRUE(WriteStateFile(path, Sample()).ok());
  EXPECT_EQ(ReadStateFile(path).outcome, LoadedState::Outcome::kLoaded);
}

TEST(StateFileTest, ASymbolicLinkOrADirectoryIsRejectedNotFollowed) {
  TempDir dir;
  const std::string path = dir.Sub("state.bin");
  ASSERT_TRUE(WriteStateFile(dir.Sub("elsewhere.bin"), Sample()).ok());
  std::filesystem::create_symlink(dir.Sub("elsewhere.bin"), path);
  LoadedState loaded = ReadStateFile(path);
  EXPECT_EQ(loaded.outcome, LoadedState::Outcome::kRejected);
  EXPECT_NE(loaded.error.find("is a symbolic link (not followed)"), std::string::npos) << loaded.error;
  // A dangling link is reported too, not taken for "no state".
  ASSERT_TRUE(std::filesystem::remove(dir.Sub("elsewhere.bin")));
  EXPECT_EQ(ReadStateFile(path).outcome, LoadedState::Outcome::kRejected);
  ASSERT_TRUE(std::filesystem::remove(path));
  ASSERT_TRUE(std::filesystem::create_directory(path));
  loaded = ReadStateFile(path);
  EXPECT_EQ(loaded.outcome, LoadedState::Outcome::kRejected);
  EXPECT_NE(loaded.error.find("is a directory, not a regular file"), std::string::npos) << loaded.error;
}

// 2 GiB, sparse: the header is checked first, and the body is never read when
// the header is wrong or announces more than the limit. The counted reads say so.
TEST(StateFileTest, AHugeSparseFileIsRejectedAfterItsHeader) {
  TempDir dir;
  const std::string path = dir.Sub("state.bin");
  constexpr std::uint64_t kSize = std::uint64_t{2} << 30;
  const std::uint64_t limit = StateByteLimit({.max_pages = 1u << 20, .remembered_evictions = 1u << 20});
  ASSERT_LT(limit, kSize);

  ASSERT_TRUE(MakeSparse(path, "", kSize));  // zeros: no header
  LoadedState loaded = ReadStateFile(path, limit);
  EXPECT_EQ(loaded.outcome, LoadedState::Outcome::kRejected);
  EXPECT_NE(loaded.error.find("not a kvwatch state file"), std::string::npos) << loaded.error;
  EXPECT_LE(loaded.bytes_read, kStateHeaderBytes);

  ASSERT_TRUE(MakeSparse(path, HeaderAnnouncing(kSize - kStateHeaderBytes), kSize));  // a header that fits the size
  loaded = ReadStateFile(path, limit);
  EXPECT_EQ(loaded.outcome, LoadedState::Outcome::kRejected);
  EXPECT_NE(loaded.error.find("more than the " + std::to_string(limit)), std::string::npos) << loaded.error;
  EXPECT_EQ(loaded.bytes_read, kStateHeaderBytes);

  ASSERT_TRUE(MakeSparse(path, HeaderAnnouncing(kSize), kSize));  // announces more than the file holds
  loaded = ReadStateFile(path, limit);
  EXPECT_NE(loaded.error.find("truncated"), std::string::npos) << loaded.error;
  EXPECT_EQ(loaded.bytes_read, kStateHeaderBytes);

  // Under the limit, the whole file is read, once.
  ASSERT_TRUE(WriteStateFile(path, Sample()).ok());
  loaded = ReadStateFile(path, limit);
  ASSERT_EQ(loaded.outcome, LoadedState::Outcome::kLoaded);
  EXPECT_EQ(loaded.bytes_read, std::filesystem::file_size(path));
}

TEST(StateFileTest, TheSizeLimitFollowsTheConfiguration) {
  // The defaults (engine.max_pages = remembered_evictions = 2^20, one collector):
  // 256 MiB + 32 x 2^21 + 256 x 2^20 = 576 MiB.
  EXPECT_EQ(StateByteLimit({.max_pages = 1u << 20, .remembered_evictions = 1u << 20, .collectors = 1}),
            std::uint64_t{576} << 20);
  EXPECT_EQ(StateByteLimit({}), kStateBaseBytes);
  EXPECT_GT(StateByteLimit({.max_pages = 1u << 24}), StateByteLimit({.max_pages = 1u << 20}));
  EXPECT_GT(StateByteLimit({.canary_pages = 1000}), StateByteLimit({}));
}

// The engine term of the limit is above what a full engine writes: every page
// tracked and every eviction remembered.
TEST(StateFileTest, AFullEngineFitsItsShareOfTheLimit) {
  curve::EngineOptions o;
  o.max_pages = 4096;
  o.remembered_evictions = 4096;
  curve::StackDistanceEngine engine(o);
  curve::RequestOutcome out;
  for (curve::PageId p = 0; p < 4 * 4096; ++p) engine.Process(std::span<const curve::PageId>(&p, 1), &out);
  const std::size_t bytes = engine.Serialize().size();
  EXPECT_GT(bytes, 8u * 4096) << "the engine should be full";
  EXPECT_LE(bytes, kStateBytesPerEnginePage * (o.max_pages + o.remembered_evictions));
}

TEST(StateFileTest, ASecondLockOnAStatePathIsRefusedAndNamesTheHolder) {
  TempDir dir;
  const std::string path = dir.Sub("state.bin");
  auto first = StateLock::Acquire(path);
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(ReadFile(path + ".lock"), std::to_string(::getpid()) + "\n");
  // flock locks belong to the open file: a second open in this process conflicts as another process's would.
  auto second = StateLock::Acquire(path);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(
      second.error().find(path + ".lock is held by another kvwatch agent (pid " + std::to_string(::getpid()) + ")"),
      std::string::npos)
      << second.error();
  first.value().reset();  // released with the descriptor
  EXPECT_TRUE(StateLock::Acquire(path).ok());
}

TEST(StateFileTest, ReadWholeFileRefusesALargerFileFromItsSize) {
  TempDir dir;
  const std::string path = dir.Sub("big");
  ASSERT_TRUE(MakeSparse(path, "x", std::uint64_t{1} << 30));
  base::Result<std::string> text = base::ReadWholeFile(path, 1 << 20);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().find("larger than 1048576 bytes"), std::string::npos) << text.error();
  ASSERT_TRUE(WriteFile(path, "abc"));
  ASSERT_TRUE(base::ReadWholeFile(path, 3).ok());
  EXPECT_EQ(base::ReadWholeFile(path, 3).value(), "abc");
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
