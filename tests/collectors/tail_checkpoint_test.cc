// Tests of collectors/tail_checkpoint.h and collectors/file_identity.h on their
// own: the checkpoint text round-trips, a damaged file is refused with a reason,
// and the hashes recognize content. Real files in a temporary directory.
#include "collectors/tail_checkpoint.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "collectors/file_identity.h"

namespace kvwatch::collectors::tail {
namespace {

using ::testing::HasSubstr;

FilePosition Entry(std::uint64_t ino, std::string path) {
  FilePosition p;
  p.dev = 2049;
  p.ino = ino;
  p.head = ContentHash{256, 0x0123456789abcdefull};
  p.marker = ContentHash{32, 0xfedcba9876543210ull};
  p.offset = 4096;
  p.line = 77;
  p.validated_ns = 1'700'000'000'123'456'789;
  p.path = std::move(path);
  return p;
}

void ExpectSame(const FilePosition& a, const FilePosition& b) {
  EXPECT_EQ(a.dev, b.dev);
  EXPECT_EQ(a.ino, b.ino);
  EXPECT_EQ(a.head.len, b.head.len);
  EXPECT_EQ(a.head.hash, b.head.hash);
  EXPECT_EQ(a.marker.len, b.marker.len);
  EXPECT_EQ(a.marker.hash, b.marker.hash);
  EXPECT_EQ(a.offset, b.offset);
  EXPECT_EQ(a.line, b.line);
  EXPECT_EQ(a.validated_ns, b.validated_ns);
  EXPECT_EQ(a.path, b.path);
}

class TailCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "tail_checkpoint_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream out(Path(name), std::ios::binary | std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << name;
  }

  std::string dir_;
};

TEST_F(TailCheckpointTest, TextRoundTripsEveryFieldAndOddPaths) {
  const std::vector<FilePosition> entries = {Entry(11, "/var/log/app.log"),
                                             Entry(12, "/logs/with space/100%\tdone\n.log")};
  const std::string text = SerializeCheckpoint(entries);
  EXPECT_EQ(text.rfind("kvwatch-file-tailer-checkpoint 2\n", 0), 0u);
  base::Result<std::vector<FilePosition>> parsed = ParseCheckpoint(text, "cp");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_EQ(parsed.value().size(), 2u);
  ExpectSame(parsed.value()[0], entries[0]);
  ExpectSame(parsed.value()[1], entries[1]);
}

TEST_F(TailCheckpointTest, EmptyCheckpointIsValid) {
  base::Result<std::vector<FilePosition>> parsed = ParseCheckpoint(SerializeCheckpoint({}), "cp");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_TRUE(parsed.value().empty());
}

TEST_F(TailCheckpointTest, DamagedTextIsRefusedWithTheReason) {
  const std::string text = SerializeCheckpoint({Entry(11, "/var/log/app.log")});
  std::string edited = text;
  edited[edited.find("4096")] = '5';  // the offset, under an unchanged checksum
  EXPECT_THAT(ParseCheckpoint(edited, "cp").error(), HasSubstr("checksum mismatch"));
  EXPECT_THAT(ParseCheckpoint(text.substr(0, text.size() - 1), "cp").error(), HasSubstr("truncated"));
  EXPECT_THAT(ParseCheckpoint(text.substr(0, text.find("end ")), "cp").error(), HasSubstr("no 'end' line"));
  std::string version = text;
  version.replace(version.find(" 2\n"), 3, " 9\n");
  EXPECT_THAT(ParseCheckpoint(version, "cp").error(), HasSubstr("unsupported version 9"));
  FilePosition p;
  EXPECT_THAT(ParseCheckpointEntry("file 1 2 3", p).value_or(""), HasSubstr("got 4 fields"));
}

TEST_F(TailCheckpointTest, SourceMarksRoundTripAndVersionOneStillLoads) {
  const std::vector<SourceMark> marks = {{"/var/log/app.log", 1700000000123456789}, {"/logs/with space/*.log", 5}};
  const std::string text = SerializeCheckpoint({Entry(11, "/var/log/app.log")}, marks);
  std::vector<SourceMark> parsed_marks;
  base::Result<std::vector<FilePosition>> parsed = ParseCheckpoint(text, "cp", &parsed_marks);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed.value().size(), 1u);
  EXPECT_EQ(parsed_marks, marks);
  EXPECT_THAT(
      ParseCheckpoint(text.substr(0, text.find("source ")) + "source x /a\n" + text.substr(text.find("end ")), "cp")
          .error(),
      HasSubstr("bad timestamp 'x'"));
  // A version 1 checkpoint (no source lines) loads as before.
  std::string v1 = SerializeCheckpoint({Entry(11, "/var/log/app.log")});
  v1 = v1.substr(0, v1.find("end "));
  v1.replace(v1.find(" 2\n"), 3, " 1\n");
  v1 += "end 1 " + [&] {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(Fnv1a(v1)));
    return std::string(buf);
  }() + "\n";
  parsed_marks.clear();
  parsed = ParseCheckpoint(v1, "cp", &parsed_marks);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed.value().size(), 1u);
  EXPECT_TRUE(parsed_marks.empty());
  ASSERT_TRUE(WriteCheckpoint(Path("cp"), {}, marks).ok());
  EXPECT_EQ(LoadCheckpoint(Path("cp")).sources, marks);
}

TEST_F(TailCheckpointTest, WriteThenLoadRoundTrips) {
  const std::vector<FilePosition> entries = {Entry(11, Path("app.log"))};
  ASSERT_TRUE(WriteCheckpoint(Path("cp"), entries).ok());
  EXPECT_FALSE(std::filesystem::exists(Path("cp.tmp")));
  LoadedCheckpoint loaded = LoadCheckpoint(Path("cp"));
  EXPECT_TRUE(loaded.loaded);
  EXPECT_EQ(loaded.error, "");
  ASSERT_EQ(loaded.entries.size(), 1u);
  ExpectSame(loaded.entries[0], entries[0]);
}

TEST_F(TailCheckpointTest, MissingFileIsAFirstStart) {
  LoadedCheckpoint loaded = LoadCheckpoint(Path("cp"));
  EXPECT_FALSE(loaded.loaded);
  EXPECT_EQ(loaded.error, "");
  EXPECT_TRUE(loaded.entries.empty());
}

TEST_F(TailCheckpointTest, CorruptFileIsReportedNotLoaded) {
  Write("cp", "kvwatch-file-tailer-checkpoint 1\nfile 1 2\n");
  LoadedCheckpoint loaded = LoadCheckpoint(Path("cp"));
  EXPECT_FALSE(loaded.loaded);
  EXPECT_THAT(loaded.error, HasSubstr("checkpoint corrupt: "));
  EXPECT_TRUE(loaded.entries.empty());
}

TEST_F(TailCheckpointTest, CompleteTmpFileWinsTornOneIsIgnored) {
  ASSERT_TRUE(WriteCheckpoint(Path("cp"), {Entry(11, Path("old.log"))}).ok());
  const std::string newer = SerializeCheckpoint({Entry(12, Path("new.log"))});
  Write("cp.tmp", newer);
  LoadedCheckpoint loaded = LoadCheckpoint(Path("cp"));
  ASSERT_EQ(loaded.entries.size(), 1u);
  EXPECT_EQ(loaded.entries[0].ino, 12u);
  Write("cp.tmp", newer.substr(0, newer.size() / 2));  // a torn write
  loaded = LoadCheckpoint(Path("cp"));
  ASSERT_EQ(loaded.entries.size(), 1u);
  EXPECT_EQ(loaded.entries[0].ino, 11u);
  EXPECT_EQ(loaded.error, "");
}

TEST_F(TailCheckpointTest, HashesRecognizeContentAndItsChange) {
  Write("f", std::string(100, 'a') + "\nline two\n");
  const int fd = ::open(Path("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  FilePosition p;
  p.head = HashHead(fd, 110, 64);
  p.offset = 101;
  p.marker = HashBefore(fd, p.offset);
  EXPECT_EQ(p.head.len, 64u);
  EXPECT_EQ(p.marker.len, kMarkerBytes);
  EXPECT_TRUE(Holds(fd, 110, p));
  EXPECT_FALSE(Holds(fd, 100, p));  // the offset is past the end
  ::close(fd);
  Write("f", std::string(100, 'b') + "\nline two\n");  // same length, other content
  const int changed = ::open(Path("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(changed, 0);
  EXPECT_EQ(Matches(changed, 0, p.head), false);
  EXPECT_FALSE(Holds(changed, 110, p));
  ::close(changed);
}

}  // namespace
}  // namespace kvwatch::collectors::tail
