// Tests of collectors/file_tailer.h on real files in a temporary directory, with
// real rename, truncate and unlink. No sleeps: time only matters for
// rotate_wait, which is driven by an injected clock.
#include "collectors/file_tailer.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kvwatch::collectors {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Line {
  std::string source;
  std::uint64_t number = 0;
  std::string text;
  bool operator==(const Line&) const = default;
};

struct Event {
  TailEventKind kind;
  std::string source;
  std::string path;
  std::uint64_t count;
  std::string message;
};

// Collects what the tailer hands out.
class Recorder {
 public:
  TailCallbacks Callbacks() {
    TailCallbacks callbacks;
    callbacks.on_line = [this](std::string_view source, std::string_view path, std::uint64_t number,
                               std::string_view text) {
      lines.push_back(Line{std::string(source), number, std::string(text)});
      paths.push_back(std::string(path));
    };
    callbacks.on_event = [this](const TailEvent& e) {
      events.push_back(Event{e.kind, std::string(e.source), e.path, e.count, e.message});
    };
    return callbacks;
  }
  std::vector<std::string> Texts() const {
    std::vector<std::string> texts;
    for (const Line& l : lines) texts.push_back(l.text);
    return texts;
  }
  std::vector<std::uint64_t> Numbers() const {
    std::vector<std::uint64_t> numbers;
    for (const Line& l : lines) numbers.push_back(l.number);
    return numbers;
  }
  std::vector<const Event*> Of(TailEventKind kind) const {
    std::vector<const Event*> found;
    for (const Event& e : events) {
      if (e.kind == kind) found.push_back(&e);
    }
    return found;
  }
  void Clear() {
    lines.clear();
    paths.clear();
    events.clear();
  }

  std::vector<Line> lines;
  std::vector<std::string> paths;  // the file each line came from, in step with lines
  std::vector<Event> events;
};

// "first\n" ... "last\n".
std::string NumberedLines(int first, int last) {
  std::string text;
  for (int i = first; i <= last; ++i) text += std::to_string(i) + "\n";
  return text;
}

class FileTailerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "file_tailer_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  void Append(const std::string& name, const std::string& text) {
    std::ofstream out(Path(name), std::ios::binary | std::ios::app);
    out << text;
    ASSERT_TRUE(out.good()) << name;
  }
  void Rename(const std::string& from, const std::string& to) {
    ASSERT_EQ(::rename(Path(from).c_str(), Path(to).c_str()), 0) << from << " -> " << to;
  }
  void Truncate(const std::string& name, off_t size) { ASSERT_EQ(::truncate(Path(name).c_str(), size), 0) << name; }
  void Remove(const std::string& name) { ASSERT_EQ(::unlink(Path(name).c_str()), 0) << name; }
  void Copy(const std::string& from, const std::string& to) {
    std::filesystem::copy_file(Path(from), to, std::filesystem::copy_options::overwrite_existing);
  }

  FileTailerOptions Options(std::vector<std::string> names, TailStartPosition start = TailStartPosition::kBeginning) {
    FileTailerOptions options;
    for (const std::string& name : names) options.patterns.push_back(Path(name));
    options.start_position = start;
    options.rotate_wait = std::chrono::milliseconds(0);
    return options;
  }

  std::unique_ptr<FileTailer> Make(FileTailerOptions options) {
    auto tailer = FileTailer::Create(std::move(options));
    EXPECT_TRUE(tailer.ok()) << tailer.error();
    return tailer.ok() ? std::move(tailer).value() : nullptr;
  }

  // What the agent keeps of a tailer across a restart: positions, the files
  // counted as unread, the files closed.
  struct SavedTailer {
    std::string positions;
    std::vector<FileTailer::UnreadFile> unread;
    std::vector<FileTailer::ClosedFile> closed;
  };
  // Saves what the agent would, destroys the tailer and forgets what it delivered.
  SavedTailer Stop(std::unique_ptr<FileTailer>& tailer) {
    SavedTailer saved{tailer->SavePositions(), tailer->UnreadReported(), tailer->ClosedRemembered()};
    tailer.reset();
    recorder_.Clear();
    return saved;
  }
  // A tailer restored from `saved`, not polled yet.
  std::unique_ptr<FileTailer> Resume(FileTailerOptions options, const SavedTailer& saved) {
    auto tailer = Make(std::move(options));
    EXPECT_TRUE(tailer->RestorePositions(saved.positions).ok());
    tailer->RestoreUnreadReported(saved.unread);
    tailer->RestoreClosedRemembered(saved.closed);
    return tailer;
  }

  // logrotate's copytruncate with a restart between the copy and the truncation:
  // the agent read lines 1-48 of app.log and saved; lines 49-100 were appended and
  // app.log copied to app.log.1. The truncation is the caller's.
  SavedTailer SaveAfter48LinesThenCopy(const FileTailerOptions& options) {
    Append("app.log", NumberedLines(1, 48));
    auto tailer = Make(options);
    Poll(*tailer);
    SavedTailer saved = Stop(tailer);
    Append("app.log", NumberedLines(49, 100));
    Copy("app.log", Path("app.log.1"));
    return saved;
  }

  // Polls until nothing is pending (a read budget may split the work).
  TailPollSummary Poll(FileTailer& tailer) {
    TailPollSummary total;
    for (int i = 0; i < 1000; ++i) {
      TailPollSummary s = tailer.Poll(recorder_.Callbacks());
      total.lines += s.lines;
      total.bytes += s.bytes;
      total.events += s.events;
      total.files_open = s.files_open;
      if (!s.more_pending) return total;
    }
    ADD_FAILURE() << "still pending after 1000 polls";
    return total;
  }

  std::string dir_;
  Recorder recorder_;
};

// --- Basics -----------------------------------------------------------------

TEST_F(FileTailerTest, DeliversAppendedLinesWithNumbersAndSource) {
  Append("app.log", "alpha\nbeta\n");
  auto tailer = Make(Options({"app.log"}));
  TailPollSummary s = Poll(*tailer);
  EXPECT_EQ(s.lines, 2u);
  EXPECT_EQ(s.bytes, 11u);
  EXPECT_EQ(s.files_open, 1u);
  Append("app.log", "gamma\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.lines, ElementsAre(Line{Path("app.log"), 1, "alpha"}, Line{Path("app.log"), 2, "beta"},
                                           Line{Path("app.log"), 3, "gamma"}));
  ASSERT_EQ(recorder_.Of(TailEventKind::kOpened).size(), 1u);
  EXPECT_EQ(recorder_.Of(TailEventKind::kOpened)[0]->path, Path("app.log"));
}

TEST_F(FileTailerTest, PartialLineIsBufferedUntilItsNewline) {
  FileTailerOptions options = Options({"app.log"});
  options.read_chunk_bytes = 3;  // lines straddle reads
  auto tailer = Make(options);
  Append("app.log", "hel");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), IsEmpty());
  Append("app.log", "lo\nwor");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("hello"));
  Append("app.log", "ld\n\nlast line\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("hello", "world", "", "last line"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 2, 3, 4));
}

// Decision: the line excludes "\n" and one trailing "\r" (CRLF files read like
// LF files); any other "\r" is content.
TEST_F(FileTailerTest, StripsOneTrailingCarriageReturn) {
  Append("app.log", "a\r\nb\r\r\n\r\nc\rd\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("a", "b\r", "", "c\rd"));
}

TEST_F(FileTailerTest, StartAtEndSkipsCompleteLinesButReadsTheLineInProgress) {
  Append("app.log", "old 1\nold 2\npart");
  auto tailer = Make(Options({"app.log"}, TailStartPosition::kEnd));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), IsEmpty());
  ASSERT_EQ(recorder_.Of(TailEventKind::kOpened).size(), 1u);
  EXPECT_EQ(recorder_.Of(TailEventKind::kOpened)[0]->count, 12u);  // after "old 2\n"
  Append("app.log", "ial\nnew\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("partial", "new"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 2));  // counted from where reading began
}

TEST_F(FileTailerTest, StartAtEndInsideAnOverlongLineSkipsToItsEnd) {
  FileTailerOptions options = Options({"app.log"}, TailStartPosition::kEnd);
  options.max_line_bytes = 8;
  options.read_chunk_bytes = 4;
  Append("app.log", "ok\n" + std::string(20, 'x'));
  auto tailer = Make(options);
  Poll(*tailer);
  Append("app.log", "yy\nnext\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("next"));
  EXPECT_EQ(recorder_.Of(TailEventKind::kLineTooLong).size(), 1u);
}

TEST_F(FileTailerTest, StartAtBeginningReadsExistingContent) {
  Append("app.log", "old 1\nold 2\n");
  auto tailer = Make(Options({"app.log"}, TailStartPosition::kBeginning));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("old 1", "old 2"));
}

TEST_F(FileTailerTest, FilesAppearingAfterTheFirstPollAreReadFromTheBeginning) {
  auto tailer = Make(Options({"*.log"}, TailStartPosition::kEnd));
  for (int i = 0; i < 5; ++i) Poll(*tailer);
  EXPECT_THAT(recorder_.events, IsEmpty());  // nothing matched: no error storm
  Append("late.log", "first\nsecond\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("first", "second"));
  EXPECT_EQ(recorder_.lines[0].source, Path("*.log"));
}

TEST_F(FileTailerTest, MissingFileIsSilentUntilCreated) {
  auto tailer = Make(Options({"missing.log", "nodir/*.log"}, TailStartPosition::kEnd));
  for (int i = 0; i < 10; ++i) {
    TailPollSummary s = Poll(*tailer);
    EXPECT_EQ(s.events, 0u);
    EXPECT_EQ(s.files_open, 0u);
  }
  EXPECT_THAT(recorder_.events, IsEmpty());
  Append("missing.log", "here\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("here"));
}

TEST_F(FileTailerTest, UnreadableFileIsReportedOnceNotEveryPoll) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files regardless of their mode";
  Append("secret.log", "x\n");
  ASSERT_EQ(::chmod(Path("secret.log").c_str(), 0), 0);
  auto tailer = Make(Options({"secret.log"}));
  for (int i = 0; i < 5; ++i) Poll(*tailer);
  ASSERT_EQ(recorder_.Of(TailEventKind::kReadError).size(), 1u);
  EXPECT_EQ(recorder_.Of(TailEventKind::kReadError)[0]->count, static_cast<std::uint64_t>(EACCES));
  ASSERT_EQ(::chmod(Path("secret.log").c_str(), 0644), 0);
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("x"));
}

TEST_F(FileTailerTest, SourceIsThePatternAndEventsCarryTheRealPath) {
  Append("a.log", "from a\n");
  Append("b-1.txt", "from b\n");
  auto tailer = Make(Options({"a.log", "b-*.txt"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.lines, ElementsAre(Line{Path("a.log"), 1, "from a"}, Line{Path("b-*.txt"), 1, "from b"}));
  const auto opened = recorder_.Of(TailEventKind::kOpened);
  ASSERT_EQ(opened.size(), 2u);
  EXPECT_EQ(opened[1]->source, Path("b-*.txt"));
  EXPECT_EQ(opened[1]->path, Path("b-1.txt"));
  EXPECT_EQ(TailEventKindName(TailEventKind::kLineTooLong), "line_too_long");
  EXPECT_EQ(TailEventKindName(TailEventKind::kLostBytes), "lost_bytes");
}

// A line's path is the file a glob found, not the pattern: a log of a bad line
// names the file to open. A rotated file being drained gives its new name.
TEST_F(FileTailerTest, LinesCarryThePathOfTheFileTheyCameFrom) {
  Append("t-1.jsonl", "one\n");
  Append("t-2.jsonl", "two\nthree\n");
  auto tailer = Make(Options({"t-*.jsonl"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("one", "two", "three"));
  EXPECT_THAT(recorder_.paths, ElementsAre(Path("t-1.jsonl"), Path("t-2.jsonl"), Path("t-2.jsonl")));
  EXPECT_EQ(recorder_.lines[2].source, Path("t-*.jsonl"));

  recorder_.Clear();
  Append("app.log", "");
  auto single = Make(Options({"app.log"}));
  Poll(*single);
  Append("app.log", "before\n");
  Rename("app.log", "app.log.1");
  Poll(*single);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("before"));
  EXPECT_THAT(recorder_.paths, ElementsAre(Path("app.log.1")));
}

TEST_F(FileTailerTest, FileMatchedByTwoPatternsIsReadOnce) {
  Append("app.log", "once\n");
  auto tailer = Make(Options({"app.log", "*.log"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.lines, ElementsAre(Line{Path("app.log"), 1, "once"}));
}

TEST_F(FileTailerTest, RejectsBadOptions) {
  auto none = FileTailer::Create(FileTailerOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.error(), HasSubstr("patterns"));
  FileTailerOptions zero_line = Options({"app.log"});
  zero_line.max_line_bytes = 0;
  auto bad = FileTailer::Create(zero_line);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error(), HasSubstr("max_line_bytes"));
  FileTailerOptions zero_chunk = Options({"app.log"});
  zero_chunk.read_chunk_bytes = 0;
  EXPECT_FALSE(FileTailer::Create(zero_chunk).ok());
}

TEST_F(FileTailerTest, ReadBudgetSplitsWorkAcrossPolls) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + "\n";
  Append("app.log", text);
  FileTailerOptions options = Options({"app.log"});
  options.read_chunk_bytes = 16;
  options.max_read_bytes_per_poll = 64;
  auto tailer = Make(options);
  TailPollSummary first = tailer->Poll(recorder_.Callbacks());
  EXPECT_TRUE(first.more_pending);
  EXPECT_LE(first.bytes, 64u);
  Poll(*tailer);
  ASSERT_EQ(recorder_.lines.size(), 100u);
  EXPECT_EQ(recorder_.lines[99].text, "line 99");
}

// --- Long lines and garbage ----------------------------------------------------

TEST_F(FileTailerTest, OverlongLineIsSkippedCountedAndTheNextLineIsIntact) {
  FileTailerOptions options = Options({"app.log"});
  options.max_line_bytes = 10;
  options.read_chunk_bytes = 4;
  auto tailer = Make(options);
  Append("app.log", "short\n" + std::string(25, 'x'));
  Poll(*tailer);  // the long line is not complete yet
  Append("app.log", std::string(5, 'x') + "\nafter\n0123456789\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("short", "after", "0123456789"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 3, 4));  // the skipped line keeps its number
  const auto too_long = recorder_.Of(TailEventKind::kLineTooLong);
  ASSERT_EQ(too_long.size(), 1u);
  EXPECT_EQ(too_long[0]->count, 30u);
  EXPECT_THAT(too_long[0]->message, HasSubstr("line 2"));
}

TEST_F(FileTailerTest, TenMegabyteLineAndBinaryGarbageAreSurvivedAndCounted) {
  std::string garbage;
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) garbage += static_cast<char>(rng() & 0xff);
  Append("app.log", std::string(10 << 20, 'x') + "\n" + garbage + "\nfinal\n");
  std::size_t garbage_newlines = std::count(garbage.begin(), garbage.end(), '\n');
  auto tailer = Make(Options({"app.log"}));  // default max_line_bytes: 1 MiB
  Poll(*tailer);
  const auto too_long = recorder_.Of(TailEventKind::kLineTooLong);
  ASSERT_EQ(too_long.size(), 1u);
  EXPECT_EQ(too_long[0]->count, 10u << 20);
  ASSERT_FALSE(recorder_.lines.empty());
  EXPECT_EQ(recorder_.lines.back().text, "final");
  // Every garbage line was delivered (none is near 1 MiB) and numbered in order.
  EXPECT_EQ(recorder_.lines.size(), garbage_newlines + 2);
  EXPECT_EQ(recorder_.lines.back().number, garbage_newlines + 3);
}

// --- Rotation -------------------------------------------------------------------

TEST_F(FileTailerTest, RenameRotationDrainsTheOldFileThenReadsTheNewOne) {
  Append("app.log", "1\n2\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  // The writer still holds the old file while logrotate renames it.
  const int writer = ::open(Path("app.log").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(writer, 0);
  ASSERT_EQ(::write(writer, "3\n", 2), 2);
  Rename("app.log", "app.log.1");
  ASSERT_EQ(::write(writer, "4\npartial", 9), 9);  // before the writer reopens
  ::close(writer);
  Append("app.log", "5\n");
  TailPollSummary s = Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3", "4", "partial", "5"));
  // Decision: a rotated-away file's final partial line is delivered when it is closed.
  EXPECT_EQ(recorder_.lines[4].number, 5u);
  EXPECT_EQ(recorder_.lines[4].source, Path("app.log"));  // not the rotated name
  EXPECT_EQ(recorder_.lines[5].number, 1u);
  ASSERT_EQ(recorder_.Of(TailEventKind::kRotated).size(), 1u);
  EXPECT_EQ(recorder_.Of(TailEventKind::kRotated)[0]->path, Path("app.log.1"));
  EXPECT_EQ(recorder_.Of(TailEventKind::kClosed).size(), 1u);
  EXPECT_EQ(s.files_open, 1u);
}

TEST_F(FileTailerTest, RotatedFileStaysOpenForRotateWait) {
  auto now = std::chrono::steady_clock::time_point{};
  FileTailerOptions options = Options({"app.log"});
  options.rotate_wait = std::chrono::seconds(5);
  options.clock = [&now] { return now; };
  Append("app.log", "1\n");
  auto tailer = Make(options);
  Poll(*tailer);
  const int writer = ::open(Path("app.log").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(writer, 0);
  Rename("app.log", "app.log.1");
  Append("app.log", "new 1\n");
  EXPECT_EQ(Poll(*tailer).files_open, 2u);
  now += std::chrono::seconds(4);
  ASSERT_EQ(::write(writer, "late\n", 5), 5);  // the writer has not reopened yet
  ::close(writer);
  EXPECT_EQ(Poll(*tailer).files_open, 2u);
  now += std::chrono::seconds(1);
  EXPECT_EQ(Poll(*tailer).files_open, 1u);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "new 1", "late"));
}

// Pattern app.log* also matches the rotated names, so files created and rotated
// between two polls are found too; each record is delivered exactly once.
TEST_F(FileTailerTest, SeveralRenameRotationsBetweenPollsDeliverEveryRecordOnce) {
  auto tailer = Make(Options({"app.log*"}));
  Append("app.log", "r1\n");
  Poll(*tailer);
  Append("app.log", "r2\n");
  Rename("app.log", "app.log.1");
  Append("app.log", "r3\n");
  Rename("app.log.1", "app.log.2");
  Rename("app.log", "app.log.1");
  Append("app.log", "r4\n");
  Poll(*tailer);
  Append("app.log", "r5\n");
  Rename("app.log.2", "app.log.3");
  Rename("app.log.1", "app.log.2");
  Rename("app.log", "app.log.1");
  Append("app.log", "r6\n");
  Poll(*tailer);
  Poll(*tailer);
  std::vector<std::string> texts = recorder_.Texts();
  std::sort(texts.begin(), texts.end());
  EXPECT_THAT(texts, ElementsAre("r1", "r2", "r3", "r4", "r5", "r6"));
  for (const Line& line : recorder_.lines) EXPECT_EQ(line.source, Path("app.log*"));
  // One per rename of a file the tailer knew: app.log.2 at the second poll, and
  // app.log.3, app.log.2, app.log.1 at the third.
  EXPECT_EQ(recorder_.Of(TailEventKind::kRotated).size(), 4u);
}

// --- Truncation -----------------------------------------------------------------

TEST_F(FileTailerTest, CopytruncateReadsRecordsWrittenBeforeTheCopyFromTheCopy) {
  Append("app.log", "1\n2\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Append("app.log", "3\n4\n");  // after the last poll, before the copy
  Copy("app.log", Path("app.log.1"));
  Truncate("app.log", 0);
  Append("app.log", "5\n");
  Poll(*tailer);
  // Stated behaviour: 3 and 4 are read from the copy, before the new content.
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3", "4", "5"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 2, 3, 4, 1));
  ASSERT_EQ(recorder_.Of(TailEventKind::kTruncated).size(), 1u);
  EXPECT_THAT(recorder_.Of(TailEventKind::kTruncated)[0]->message, HasSubstr("app.log.1"));
  EXPECT_THAT(recorder_.Of(TailEventKind::kLostBytes), IsEmpty());
  Poll(*tailer);
  EXPECT_EQ(recorder_.lines.size(), 5u);
}

TEST_F(FileTailerTest, CopytruncateWithTheCopyElsewhereLosesUnseenRecords) {
  std::filesystem::create_directory(Path("old"));
  Append("app.log", "1\n2\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Append("app.log", "3\n");
  Copy("app.log", Path("old/app.log.1"));
  Truncate("app.log", 0);
  Append("app.log", "4\n");
  Poll(*tailer);
  // Stated behaviour: "3" was never seen and is gone from app.log; the tailer
  // cannot measure it, so it reports the truncation (no lost-bytes count).
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "4"));
  ASSERT_EQ(recorder_.Of(TailEventKind::kTruncated).size(), 1u);
  EXPECT_THAT(recorder_.Of(TailEventKind::kTruncated)[0]->message, HasSubstr("no copy found"));
  EXPECT_THAT(recorder_.Of(TailEventKind::kLostBytes), IsEmpty());
}

TEST_F(FileTailerTest, TruncationCountsTheBufferedPartialLineAsLost) {
  Append("app.log", "1\npart");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Truncate("app.log", 0);
  Append("app.log", "2\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2"));
  const auto lost = recorder_.Of(TailEventKind::kLostBytes);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]->count, 4u);  // "part"
}

TEST_F(FileTailerTest, CopytruncateWithAStaleNonAppendWriterSkipsTheNulHole) {
  const int writer = ::open(Path("app.log").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(writer, 0);
  ASSERT_EQ(::write(writer, "seq=1\nseq=2\n", 12), 12);
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Copy("app.log", Path("app.log.1"));
  Truncate("app.log", 0);
  ASSERT_EQ(::write(writer, "seq=3\n", 6), 6);  // lands at offset 12: a 12-byte hole
  ::close(writer);
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("seq=1", "seq=2", "seq=3"));
  EXPECT_EQ(recorder_.Of(TailEventKind::kTruncated).size(), 1u);
}

TEST_F(FileTailerTest, TruncationToZeroRestartsAtTheBeginning) {
  Append("app.log", "a\nb\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Truncate("app.log", 0);
  Poll(*tailer);
  Append("app.log", "c\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("a", "b", "c"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 2, 1));
  const auto truncated = recorder_.Of(TailEventKind::kTruncated);
  ASSERT_EQ(truncated.size(), 1u);
  EXPECT_EQ(truncated[0]->count, 0u);
  EXPECT_THAT(truncated[0]->message, HasSubstr("shrank from 4 to 0"));
}

// Stated behaviour: any truncation restarts at offset 0, so the lines kept
// below the new size are delivered again (as fluent-bit, Alloy and Filebeat do).
TEST_F(FileTailerTest, TruncationToASmallerSizeRestartsAtTheBeginning) {
  Append("app.log", "aaaa\nbbbb\ncccc\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Truncate("app.log", 5);
  Append("app.log", "dddd\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("aaaa", "bbbb", "cccc", "aaaa", "dddd"));
  ASSERT_EQ(recorder_.Of(TailEventKind::kTruncated).size(), 1u);
  EXPECT_EQ(recorder_.Of(TailEventKind::kTruncated)[0]->count, 10u);
}

TEST_F(FileTailerTest, TruncationHiddenByRegrowthIsCaughtByTheFingerprint) {
  Append("app.log", "seq=1\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Truncate("app.log", 0);
  Append("app.log", "seq=2 is a longer record\n");  // already past our offset
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("seq=1", "seq=2 is a longer record"));
  ASSERT_EQ(recorder_.Of(TailEventKind::kTruncated).size(), 1u);
  EXPECT_THAT(recorder_.Of(TailEventKind::kTruncated)[0]->message, HasSubstr("changed in place"));
}

// --- Deletion -------------------------------------------------------------------

TEST_F(FileTailerTest, DeletedFileIsDrainedThroughItsOpenDescriptorThenClosed) {
  Append("app.log", "a\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Append("app.log", "b\nc");
  Remove("app.log");
  TailPollSummary s = Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("a", "b", "c"));
  EXPECT_EQ(recorder_.Of(TailEventKind::kDeleted).size(), 1u);
  EXPECT_EQ(recorder_.Of(TailEventKind::kClosed).size(), 1u);
  EXPECT_EQ(s.files_open, 0u);
  Append("app.log", "recreated\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("a", "b", "c", "recreated"));
}

TEST_F(FileTailerTest, DeleteAndRecreateBetweenPollsReadsBoth) {
  Append("app.log", "a\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Append("app.log", "b\n");
  Remove("app.log");
  Append("app.log", "c\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("a", "b", "c"));
}

// --- Notification -----------------------------------------------------------------

TEST_F(FileTailerTest, NotifyFdBecomesReadableOnAppendAndPollDrainsIt) {
  Append("app.log", "a\n");
  auto tailer = Make(Options({"app.log"}));
  const int fd = tailer->NotifyFd();
  if (fd < 0) GTEST_SKIP() << "inotify unavailable";
  Poll(*tailer);
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  Append("app.log", "b\n");
  EXPECT_EQ(::poll(&p, 1, 0), 1);  // queued synchronously by the write
  Poll(*tailer);
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  Append("new.log", "x\n");  // a directory event
  EXPECT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("a", "b"));
}

TEST_F(FileTailerTest, WorksWithoutInotify) {
  FileTailerOptions options = Options({"app.log"});
  options.use_inotify = false;
  auto tailer = Make(options);
  EXPECT_EQ(tailer->NotifyFd(), -1);
  Append("app.log", "a\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("a"));
}

// --- Checkpoints --------------------------------------------------------------------

class FileTailerCheckpointTest : public FileTailerTest {
 protected:
  FileTailerOptions CheckpointOptions(std::vector<std::string> names,
                                      TailStartPosition start = TailStartPosition::kBeginning) {
    FileTailerOptions options = Options(std::move(names), start);
    options.checkpoint_path = Path("tailer.checkpoint");
    return options;
  }
  std::string ReadText(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void WriteText(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
};

TEST_F(FileTailerCheckpointTest, RestartAfterCheckpointIsExactlyOnce) {
  Append("app.log", "1\n2\n");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  EXPECT_FALSE(std::filesystem::exists(Path("tailer.checkpoint.tmp")));
  EXPECT_EQ(ReadText(Path("tailer.checkpoint")).rfind("kvwatch-file-tailer-checkpoint 2\n", 0), 0u);
  Append("app.log", "3\n");
  tailer = Make(CheckpointOptions({"app.log"}, TailStartPosition::kEnd));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 2, 3));
  EXPECT_THAT(recorder_.Of(TailEventKind::kOpened).back()->message, HasSubstr("resumed"));
}

// Destroyed without a final Checkpoint(): lines delivered after the last one
// come again (at-least-once); nothing before it is repeated, nothing is lost.
TEST_F(FileTailerCheckpointTest, RestartWithoutFinalCheckpointRepeatsOnlyLinesSinceTheLastOne) {
  Append("app.log", "1\n2\n");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  Append("app.log", "3\n");
  Poll(*tailer);
  tailer.reset();  // "killed"
  Append("app.log", "4\n");
  tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3", "3", "4"));
}

TEST_F(FileTailerCheckpointTest, KilledBeforeAnyCheckpointStartsPerTheStartOption) {
  Append("app.log", "1\n");
  auto tailer = Make(CheckpointOptions({"app.log"}, TailStartPosition::kEnd));
  Poll(*tailer);
  Append("app.log", "2\n");
  Poll(*tailer);
  tailer.reset();
  Append("app.log", "3\n");
  tailer = Make(CheckpointOptions({"app.log"}, TailStartPosition::kEnd));
  Poll(*tailer);
  Append("app.log", "4\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("2", "4"));
}

TEST_F(FileTailerCheckpointTest, PartialLineAcrossRestartIsDeliveredOnce) {
  Append("app.log", "1\npar");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  Append("app.log", "tial\n");
  tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "partial"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 2));
}

// The rotated name does not match the pattern: the checkpointed inode is found
// in its old directory and drained, and the new file is read from 0.
TEST_F(FileTailerCheckpointTest, RestartAfterRotationWhileDownFindsTheRenamedFile) {
  Append("app.log", "1\n");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  Append("app.log", "2\n");
  Rename("app.log", "app.log.1");
  Append("app.log", "3\n");
  tailer = Make(CheckpointOptions({"app.log"}, TailStartPosition::kEnd));
  TailPollSummary s = Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 2, 1));
  EXPECT_EQ(s.files_open, 1u);  // app.log.1 drained and closed (rotate_wait 0)
}

TEST_F(FileTailerCheckpointTest, RestartAfterRotationWhileDownWithAGlobMatchingRotatedNames) {
  Append("app.log", "1\n");
  auto tailer = Make(CheckpointOptions({"app.log*"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  Append("app.log", "2\n");
  Rename("app.log", "app.log.1");
  Append("app.log", "3\n");
  tailer = Make(CheckpointOptions({"app.log*"}, TailStartPosition::kEnd));
  TailPollSummary s = Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3"));
  EXPECT_EQ(s.files_open, 2u);
}

TEST_F(FileTailerCheckpointTest, RestartAfterCopytruncateWhileDownContinuesFromTheCopy) {
  Append("app.log", "1\n2\n");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  Append("app.log", "3\n");
  Copy("app.log", Path("app.log.1"));
  Truncate("app.log", 0);
  Append("app.log", "4\n");
  tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3", "4"));
  EXPECT_EQ(recorder_.Of(TailEventKind::kTruncated).size(), 1u);
}

// The checkpointed file was copytruncated and then deleted while we were down:
// its unread data continues from the copy (which the glob also matches, so
// reading it from 0 would repeat lines).
TEST_F(FileTailerCheckpointTest, GoneFileContinuesFromItsCopy) {
  Append("app.log", "1\n2\n");
  auto tailer = Make(CheckpointOptions({"app.log*"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  Append("app.log", "3\n");
  Copy("app.log", Path("app.log.1"));
  Truncate("app.log", 0);
  Remove("app.log");
  tailer = Make(CheckpointOptions({"app.log*"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3"));
  EXPECT_THAT(recorder_.Numbers(), ElementsAre(1, 2, 3));
}

// Found by the torture test: a rotation while we were down deleted a
// checkpointed file, and the copytruncate copy made next got its inode number.
// The copy must be recognized as the copy of the other entry, not read from 0,
// also when the deleted file was empty (its entry has no content to check).
class InodeReuseTest : public FileTailerCheckpointTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(InodeReuseTest, CopyReusingACheckpointedInodeIsNotReadTwice) {
  Append("app.log.1", GetParam());
  Append("app.log", "1\n2\n");
  auto tailer = Make(CheckpointOptions({"app.log*"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  struct stat old_rotated {};
  ASSERT_EQ(::stat(Path("app.log.1").c_str(), &old_rotated), 0);
  Remove("app.log.1");
  Append("app.log", "3\n");
  // Create files until one gets the freed inode number (ext4 reuses them, but
  // not always the next time); the misses move aside under another name.
  bool reused = false;
  for (int attempt = 0; attempt < 200 && !reused; ++attempt) {
    const int fd = ::open(Path("app.log.1").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    ASSERT_GE(fd, 0);
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0);
    ::close(fd);
    reused = st.st_ino == old_rotated.st_ino;
    if (!reused) Rename("app.log.1", "filler." + std::to_string(attempt));
  }
  if (!reused) GTEST_SKIP() << "this filesystem did not reuse the inode number";
  Append("app.log.1", "1\n2\n3\n");  // the copy, in the file that has the old inode
  Truncate("app.log", 0);
  Append("app.log", "4\n");
  tailer = Make(CheckpointOptions({"app.log*"}));
  Poll(*tailer);
  std::vector<std::string> texts = recorder_.Texts();
  std::sort(texts.begin(), texts.end());
  std::vector<std::string> expected = {"1", "2", "3", "4"};
  if (!GetParam().empty()) expected.push_back("old 1");
  EXPECT_EQ(texts, expected);
}

INSTANTIATE_TEST_SUITE_P(RotatedFile, InodeReuseTest, ::testing::Values("old 1\n", ""),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? "Empty" : "WithContent";
                         });

TEST_F(FileTailerCheckpointTest, ContentReplacedWhileDownIsReadFromTheBeginning) {
  Append("app.log", "aaaa\n");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  Truncate("app.log", 0);
  Append("app.log", "bbbbbbbbbb\n");  // same inode, new content, longer than the offset
  tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("aaaa", "bbbbbbbbbb"));
  EXPECT_EQ(recorder_.Of(TailEventKind::kTruncated).size(), 1u);
}

TEST_F(FileTailerCheckpointTest, FileDeletedWhileDownIsReportedOnce) {
  Append("app.log", "1\n");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  Remove("app.log");
  tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  Poll(*tailer);
  EXPECT_EQ(recorder_.Of(TailEventKind::kDeleted).size(), 1u);
  Append("app.log", "new\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "new"));
}

TEST_F(FileTailerCheckpointTest, CheckpointBeforeTheFirstPollKeepsRestoredPositions) {
  Append("app.log", "1\n");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer = Make(CheckpointOptions({"app.log"}));
  ASSERT_TRUE(tailer->Checkpoint().ok());  // before its first Poll()
  tailer = Make(CheckpointOptions({"app.log"}));
  Append("app.log", "2\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2"));
}

TEST_F(FileTailerCheckpointTest, CorruptCheckpointIsReportedAndIgnored) {
  const std::vector<std::string> corruptions = {
      "garbage\n",
      "kvwatch-file-tailer-checkpoint 2\nend 0 0\n",  // future version
      "kvwatch-file-tailer-checkpoint 1\n",           // no end line
      "kvwatch-file-tailer-checkpoint 1\nfile 1 2 3\nend 1 0\n",
      std::string("\0\xff\x01", 3),
  };
  Append("app.log", "old\n");
  // A genuine checkpoint with one byte changed fails its checksum.
  {
    auto tailer = Make(CheckpointOptions({"app.log"}));
    Poll(*tailer);
    ASSERT_TRUE(tailer->Checkpoint().ok());
  }
  std::string edited = ReadText(Path("tailer.checkpoint"));
  const std::size_t digit = edited.find(" 4 ");  // a length or offset field: 4 bytes
  ASSERT_NE(digit, std::string::npos);
  edited[digit + 1] = '0';
  std::vector<std::string> all = corruptions;
  all.push_back(edited);
  for (std::size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE("corruption " + std::to_string(i));
    WriteText(Path("tailer.checkpoint"), all[i]);
    recorder_.Clear();
    auto tailer = Make(CheckpointOptions({"app.log"}, TailStartPosition::kEnd));
    Poll(*tailer);
    const auto errors = recorder_.Of(TailEventKind::kCheckpointError);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0]->path, Path("tailer.checkpoint"));
    EXPECT_THAT(errors[0]->message, HasSubstr("tailer.checkpoint"));
    EXPECT_THAT(recorder_.Texts(), IsEmpty());  // started fresh at the end
    Poll(*tailer);
    EXPECT_EQ(recorder_.Of(TailEventKind::kCheckpointError).size(), 1u);  // reported once
  }
}

TEST_F(FileTailerCheckpointTest, UnreadableCheckpointIsReportedAndIgnored) {
  std::filesystem::create_directory(Path("tailer.checkpoint"));  // read() fails: EISDIR
  Append("app.log", "old\n");
  auto tailer = Make(CheckpointOptions({"app.log"}, TailStartPosition::kBeginning));
  Poll(*tailer);
  EXPECT_EQ(recorder_.Of(TailEventKind::kCheckpointError).size(), 1u);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("old"));
  EXPECT_FALSE(tailer->Checkpoint().ok());  // cannot rename over a directory
}

TEST_F(FileTailerCheckpointTest, CompleteLeftoverTmpIsPreferredAndATornOneIgnored) {
  Append("app.log", "1\n");
  auto tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  const std::string older = ReadText(Path("tailer.checkpoint"));
  Append("app.log", "2\n");
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  // A crash between the tmp's fsync and the rename: tmp is newer than the main file.
  Rename("tailer.checkpoint", "tailer.checkpoint.tmp");
  WriteText(Path("tailer.checkpoint"), older);
  Append("app.log", "3\n");
  tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3"));
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  EXPECT_FALSE(std::filesystem::exists(Path("tailer.checkpoint.tmp")));
  // A torn tmp (crash while writing it) is ignored in favour of the main file.
  const std::string current = ReadText(Path("tailer.checkpoint"));
  WriteText(Path("tailer.checkpoint.tmp"), current.substr(0, current.size() / 2));
  Append("app.log", "4\n");
  tailer = Make(CheckpointOptions({"app.log"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3", "4"));
  EXPECT_THAT(recorder_.Of(TailEventKind::kCheckpointError), IsEmpty());
}

TEST_F(FileTailerCheckpointTest, CheckpointWriteFailureNamesTheFile) {
  FileTailerOptions options = Options({"app.log"});
  options.checkpoint_path = Path("no-such-dir/tailer.checkpoint");
  auto tailer = Make(options);
  Poll(*tailer);
  base::Status status = tailer->Checkpoint();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.error(), HasSubstr("no-such-dir/tailer.checkpoint.tmp"));
}

TEST_F(FileTailerCheckpointTest, PathsWithSpacesAndNewlinesRoundTrip) {
  const std::string name = "my app %20\nlog";
  Append(name, "1\n");
  auto tailer = Make(CheckpointOptions({"my app*"}));
  Poll(*tailer);
  ASSERT_TRUE(tailer->Checkpoint().ok());
  tailer.reset();
  Append(name, "2\n");
  Rename(name, "renamed");  // found by a directory scan using the stored path
  tailer = Make(CheckpointOptions({"my app*"}));
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2"));
  EXPECT_THAT(recorder_.Of(TailEventKind::kCheckpointError), IsEmpty());
}

// --- Positions kept by the caller, and rotations never seen -----------------------

// SavePositions/RestorePositions: the same positions as a checkpoint file, kept
// by the caller (the agent commits them with its curves).
TEST_F(FileTailerTest, RestoredPositionsResumeExactlyOnce) {
  Append("app.log", "1\n2\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  const std::string saved = tailer->SavePositions();
  tailer.reset();
  Append("app.log", "3\n");
  tailer = Make(Options({"app.log"}, TailStartPosition::kEnd));
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3"));
  EXPECT_FALSE(tailer->RestorePositions(saved).ok()) << "only before the first poll";
  auto other = Make(Options({"app.log"}));
  base::Status bad = other->RestorePositions(saved.substr(0, saved.size() - 3));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error(), HasSubstr("saved positions"));
}

// Two copytruncates while down: the first copy continues the checkpointed data,
// the second was never seen by anyone: its lines are counted, not read.
TEST_F(FileTailerTest, CopiesMadeWhileDownBeyondTheFirstAreCountedAsUnread) {
  Append("app.log", "1\n2\n");
  Append("old.log.1", "unrelated\n");
  Append("app.log.0", "an old rotation, read before the checkpoint\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  const std::string saved = tailer->SavePositions();
  tailer.reset();
  recorder_.Clear();
  Append("app.log", "3\n");
  Copy("app.log", Path("app.log.1"));
  Truncate("app.log", 0);
  Append("app.log", "4\n5\n6\n");
  Copy("app.log", Path("app.log.2"));
  Truncate("app.log", 0);
  Append("app.log", "7\n");
  // Leave app.log.0 with its old time: it predates the checkpoint.
  struct timespec times[2] = {{0, UTIME_OMIT}, {1, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, Path("app.log.0").c_str(), times, 0), 0);
  tailer = Make(Options({"app.log"}));
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("3", "7"));
  const auto unread = recorder_.Of(TailEventKind::kUnreadRotation);
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_EQ(unread[0]->path, Path("app.log.2"));
  EXPECT_EQ(unread[0]->count, 3u);
  EXPECT_THAT(unread[0]->message, HasSubstr("3 lines never read"));
}

// Renamed twice while down with an exact-path pattern: the checkpointed file is
// found by its inode and drained; the file rotated in between is counted.
TEST_F(FileTailerTest, RenameRotationsWhileDownAreDrainedOrCounted) {
  Append("app.log", "1\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  const std::string saved = tailer->SavePositions();
  tailer.reset();
  recorder_.Clear();
  Append("app.log", "2\n");
  Rename("app.log", "app.log.1");
  Append("app.log", "3\n4\n");
  Rename("app.log", "app.log.2");
  Append("app.log", "5\n");
  Append("app.log.3.gz", "compressed bytes");
  tailer = Make(Options({"app.log"}));
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("2", "5"));
  const auto unread = recorder_.Of(TailEventKind::kUnreadRotation);
  ASSERT_EQ(unread.size(), 2u);
  EXPECT_EQ(unread[0]->path, Path("app.log.2"));
  EXPECT_EQ(unread[0]->count, 2u);
  EXPECT_EQ(unread[1]->path, Path("app.log.3.gz"));
  EXPECT_EQ(unread[1]->count, 0u);
  EXPECT_THAT(unread[1]->message, HasSubstr("compressed"));
}

// A rotated file drained and closed just before the state was saved: its last write
// is within the unread scan's slack of the saved time (FileTailer::kMtimeSlackNs),
// so only the remembered closed files keep a restart from counting it as unread.
TEST_F(FileTailerTest, AFileClosedJustBeforeTheSaveIsNotUnreadAfterARestart) {
  Append("app.log", "1\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  Append("app.log", "2\n");
  Rename("app.log", "app.log.1");
  Append("app.log", "3\n");
  Poll(*tailer);  // drains app.log.1 and closes it (rotate_wait 0), opens app.log
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3"));
  const std::string saved = tailer->SavePositions();
  const std::vector<FileTailer::ClosedFile> closed = tailer->ClosedRemembered();
  ASSERT_EQ(closed.size(), 1u);
  tailer.reset();
  recorder_.Clear();

  // With the closed files restored: nothing is counted.
  tailer = Make(Options({"app.log"}));
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  tailer->RestoreClosedRemembered(closed);
  Poll(*tailer);
  EXPECT_TRUE(recorder_.Texts().empty());
  EXPECT_TRUE(recorder_.Of(TailEventKind::kUnreadRotation).empty());
  tailer.reset();
  recorder_.Clear();

  // Without them (a state saved by an older version) the slack counts it: what the
  // closed files are kept for.
  tailer = Make(Options({"app.log"}));
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  Poll(*tailer);
  const auto unread = recorder_.Of(TailEventKind::kUnreadRotation);
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_EQ(unread[0]->path, Path("app.log.1"));
}

// A pass saw the path empty (its file rotated away, the next not yet created);
// before the next pass a file was created there and rotated away too (the loop
// stalled): that file was never seen, and it is counted when the next new file is
// opened at the path.
TEST_F(FileTailerTest, AFileCreatedAndRotatedBetweenPassesWhileThePathWasEmptyIsCounted) {
  FileTailerOptions options = Options({"app.log"});
  options.rotate_wait = std::chrono::hours(1);  // app.log.1 stays followed
  auto tailer = Make(options);
  Append("app.log", "1\n");
  Poll(*tailer);
  Rename("app.log", "app.log.1");
  Poll(*tailer);  // nothing at the path now
  Append("app.log", "2\n3\n");
  Rename("app.log", "app.log.2");
  Append("app.log", "4\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "4"));
  const auto unread = recorder_.Of(TailEventKind::kUnreadRotation);
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_EQ(unread[0]->path, Path("app.log.2"));
  EXPECT_EQ(unread[0]->count, 2u);
  Append("app.log", "5\n");
  Poll(*tailer);
  EXPECT_EQ(recorder_.Of(TailEventKind::kUnreadRotation).size(), 1u);  // once
}

// A rotation between the patterns' expansion and the open of a checkpointed file
// (a loaded machine can stall the tailer there for a while): the file is found by
// inode where it went and resumed at its offset. It is neither read again from the
// beginning (a glob finds it under its new name) nor taken for gone and counted as
// unread (an exact path), and the new file is read once.
class RotationDuringRestoreTest : public FileTailerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RotationDuringRestoreTest, TheCheckpointedFileIsResumedWhereItWent) {
  const std::string pattern = GetParam() ? "app.log*" : "app.log";
  Append("app.log", "1\n2\n");
  auto tailer = Make(Options({pattern}));
  Poll(*tailer);
  const std::string saved = tailer->SavePositions();
  tailer.reset();
  recorder_.Clear();
  Append("app.log", "3\n");
  FileTailerOptions options = Options({pattern});
  bool rotated = false;
  options.after_expansion = [&] {
    if (rotated) return;
    rotated = true;
    Rename("app.log", "app.log.1");
    Append("app.log", "4\n");
  };
  tailer = Make(options);
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  Poll(*tailer);
  Poll(*tailer);
  EXPECT_TRUE(rotated);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("3", "4"));
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty());
  EXPECT_THAT(recorder_.Of(TailEventKind::kDeleted), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(GlobAndExactPath, RotationDuringRestoreTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Glob") : std::string("ExactPath");
                         });

// Saved while a copytruncate copy was being drained: the copy's name matches no
// pattern, yet it belongs to app.log and is resumed where it was.
TEST_F(FileTailerTest, ACopyBeingDrainedWhenSavedIsResumed) {
  FileTailerOptions options = Options({"app.log"});
  options.rotate_wait = std::chrono::hours(1);
  Append("app.log", "1\n");
  auto tailer = Make(options);
  Poll(*tailer);
  Append("app.log", "2\n");
  Copy("app.log", Path("app.log.1"));
  Truncate("app.log", 0);
  Append("app.log", "3\n");
  Poll(*tailer);
  ASSERT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3"));
  const std::string saved = tailer->SavePositions();
  ASSERT_THAT(saved, HasSubstr("app.log.1"));
  tailer.reset();
  recorder_.Clear();
  std::ofstream(Path("app.log.1"), std::ios::app) << "late\n";  // the writer still had it open
  tailer = Make(options);
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("late"));
  EXPECT_TRUE(recorder_.Of(TailEventKind::kUnreadRotation).empty());
}

std::vector<std::string> Numbers(int first, int last) {
  std::vector<std::string> numbers;
  for (int i = first; i <= last; ++i) numbers.push_back(std::to_string(i));
  return numbers;
}

// The crash test's "48 records both counted and reported unread", replayed: the
// agent had saved its position after 48 lines; it restarted between logrotate's
// copy (app.log.1, 100 lines) and its truncation, which came while the first pass
// was busy (before it read). The restore's unread scan took the copy, not
// followed, for a rotation never seen and counted its 100 lines, 48 of them
// already counted: the state saved right after start-up said counted 48 + unread
// 100 of 100 written; the next pass then read lines 49-100 from the copy as well.
// The copy holds what the resumed file held, so it is not unread: it is read
// once, from line 49, when the truncation is seen.
TEST_F(FileTailerTest, ARestartBetweenTheCopyAndTheTruncationCountsNothingTwice) {
  FileTailerOptions options = Options({"app.log"});
  options.rotate_wait = std::chrono::hours(1);
  const SavedTailer saved = SaveAfter48LinesThenCopy(options);  // the truncation comes during the pass
  bool truncated = false;
  options.before_read = [&] {
    if (truncated) return;
    truncated = true;
    Truncate("app.log", 0);
    Append("app.log", "101\n");
  };
  auto tailer = Resume(options, saved);
  tailer->Poll(recorder_.Callbacks());  // the pass after which the agent saves
  EXPECT_TRUE(truncated);
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty())
      << "lines 1-48 counted before the restart would be counted again as unread";
  Poll(*tailer);
  std::vector<std::string> expected = Numbers(49, 101);
  EXPECT_EQ(recorder_.Texts(), expected);
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty());
  EXPECT_THAT(recorder_.Of(TailEventKind::kLostBytes), IsEmpty());
}

// The same restart with the truncation after the first pass: the resumed file
// gives lines 49-100 and the copy is claimed with nothing left to read.
TEST_F(FileTailerTest, ACopyOfTheResumedFileIsNotAnUnreadRotation) {
  FileTailerOptions options = Options({"app.log"});
  options.rotate_wait = std::chrono::hours(1);
  const SavedTailer saved = SaveAfter48LinesThenCopy(options);
  auto tailer = Resume(options, saved);
  Poll(*tailer);
  Truncate("app.log", 0);
  Append("app.log", "101\n");
  Poll(*tailer);
  EXPECT_EQ(recorder_.Texts(), Numbers(49, 101));
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty());
  // A second copytruncate: the next copy is claimed as the first was.
  Append("app.log", "102\n");
  Copy("app.log", Path("app.log.2"));
  Truncate("app.log", 0);
  Append("app.log", "103\n");
  Poll(*tailer);
  EXPECT_EQ(recorder_.Texts(), Numbers(49, 103));
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty());
}

// A copytruncate, and new lines past the old offset, between the pass's truncation
// check and its read (the pass was busy draining other files): the bytes at the old
// offset are the new content's, not the rest of the old; they are not delivered as
// such. The next pass sees the truncation and reads the old rest from the copy.
TEST_F(FileTailerTest, ACopyTruncateBetweenTheCheckAndTheReadIsNotReadAsTheOldContent) {
  FileTailerOptions options = Options({"app.log"});
  bool truncated = false;
  bool armed = false;
  options.before_read = [&] {
    if (!armed || truncated) return;
    truncated = true;
    Copy("app.log", Path("app.log.1"));
    Truncate("app.log", 0);
    Append("app.log", "10\n11\n12\n");
  };
  Append("app.log", "1\n2\n");
  auto tailer = Make(options);
  Poll(*tailer);
  Append("app.log", "3\n");
  armed = true;
  Poll(*tailer);
  EXPECT_TRUE(truncated);
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "2", "3", "10", "11", "12"));
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty());
}

// The agent started before its file: the only save names no file. The file
// appeared, was read (then the agent was killed before saving again) and was
// copied and truncated twice while the agent was down. Both copies are counted as
// unread (the restored state counts none of their lines), from the pattern's mark
// in the save; before, the pattern had no saved position to look from and the
// 7 lines went missing without a count.
TEST_F(FileTailerTest, CopiesOfAFileThatAppearedAfterTheSaveAreCountedAfterARestart) {
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);  // no file yet
  const std::string saved = tailer->SavePositions();
  ASSERT_THAT(saved, HasSubstr("source "));
  Append("app.log", NumberedLines(1, 5));
  Poll(*tailer);
  EXPECT_EQ(recorder_.Texts(), Numbers(1, 5));
  tailer.reset();  // killed: lines 1-5 were counted in what the kill lost
  recorder_.Clear();
  Copy("app.log", Path("app.log.1"));
  Truncate("app.log", 0);
  Append("app.log", NumberedLines(6, 7));
  Copy("app.log", Path("app.log.2"));
  Truncate("app.log", 0);
  Append("app.log", "8\n");
  tailer = Make(Options({"app.log"}));
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("8"));
  const auto unread = recorder_.Of(TailEventKind::kUnreadRotation);
  ASSERT_EQ(unread.size(), 2u);
  EXPECT_EQ(unread[0]->path, Path("app.log.1"));
  EXPECT_EQ(unread[0]->count, 5u);
  EXPECT_EQ(unread[1]->path, Path("app.log.2"));
  EXPECT_EQ(unread[1]->count, 2u);
}

// A pattern added to the configuration since the save has no mark: its old
// rotated files are history, not counted.
TEST_F(FileTailerTest, APatternNewSinceTheSaveCountsNoOldRotations) {
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  const std::string saved = tailer->SavePositions();
  tailer.reset();
  Append("other.log", "1\n");
  Append("other.log.1", "0\n");
  tailer = Make(Options({"app.log", "other.log"}));
  ASSERT_TRUE(tailer->RestorePositions(saved).ok());
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1"));
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty());
}

// A followed file with no content yet (just truncated) was written, copied and
// truncated between two passes (the loop stalled for a whole rotation period):
// nothing in the file tells, so the tailer looks at its rotated files when it
// first finds content, and counts the copy it never saw.
TEST_F(FileTailerTest, AFileCopiedWhileItHadNoContentYetIsCounted) {
  FileTailerOptions options = Options({"app.log"});
  options.rotate_wait = std::chrono::hours(1);
  Append("app.log", "1\n");
  auto tailer = Make(options);
  Poll(*tailer);
  Copy("app.log", Path("app.log.1"));
  Truncate("app.log", 0);
  Poll(*tailer);  // the copy is claimed; app.log is empty
  Append("app.log", "2\n3\n");
  Copy("app.log", Path("app.log.2"));
  Truncate("app.log", 0);
  Append("app.log", "4\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("1", "4"));
  const auto unread = recorder_.Of(TailEventKind::kUnreadRotation);
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_EQ(unread[0]->path, Path("app.log.2"));
  EXPECT_EQ(unread[0]->count, 2u);
}

std::uint64_t Inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

// The torture test's ExactPath failure (seed 20261107), replayed: a rotated file
// was counted as unread, then deleted, and the next copytruncate copy got its
// inode number (here: copied over it, which keeps the inode). The copy holds the
// unread rest of the followed file; taken for the file already counted, it was
// not read, and nothing counted the rest (seq 39 delivered 0 times). A file with
// a counted file's inode number but other first bytes is another file.
TEST_F(FileTailerTest, ACopyReusingTheInodeOfAFileCountedAsUnreadIsRead) {
  FileTailerOptions options = Options({"app.log"});
  options.rotate_wait = std::chrono::hours(1);
  Append("app.log", "1\n");
  auto tailer = Make(options);
  Poll(*tailer);
  const SavedTailer saved = Stop(tailer);
  Append("app.log", "2\n");
  Copy("app.log", Path("app.log.1"));  // continues the saved position
  Truncate("app.log", 0);
  Append("app.log", "3\n");
  Copy("app.log", Path("app.log.2"));  // never seen: counted
  Truncate("app.log", 0);
  Append("app.log", "4\n");
  tailer = Resume(options, saved);
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("2", "4"));
  const auto unread = recorder_.Of(TailEventKind::kUnreadRotation);
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_EQ(unread[0]->path, Path("app.log.2"));
  ASSERT_EQ(tailer->UnreadReported().size(), 1u);

  const std::uint64_t inode = Inode(Path("app.log.2"));
  Append("app.log", "5\n");            // written after the last read
  Copy("app.log", Path("app.log.2"));  // the copy takes the counted file's inode
  ASSERT_EQ(Inode(Path("app.log.2")), inode);
  Truncate("app.log", 0);
  Append("app.log", "6\n");
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("2", "4", "5", "6"));
  EXPECT_EQ(recorder_.Of(TailEventKind::kUnreadRotation).size(), 1u);
  EXPECT_THAT(recorder_.Of(TailEventKind::kLostBytes), IsEmpty());
}

// Likewise across a restart: a file counted as unread (kept in the saved state
// with its first bytes) and, while the agent is down, overwritten in place by a
// copy it never saw is counted again; the file counted, unchanged, is not. A
// state saved before heads were kept (length 0) takes any content for the file
// counted, as before.
TEST_F(FileTailerTest, ARotationReusingTheInodeOfAFileCountedAsUnreadIsCounted) {
  Append("app.log", "1\n");
  auto tailer = Make(Options({"app.log"}));
  Poll(*tailer);
  SavedTailer saved = Stop(tailer);
  Append("app.log", "2\n");
  Copy("app.log", Path("app.log.1"));  // continues the saved position
  Truncate("app.log", 0);
  Append("app.log", "3\n4\n");
  Copy("app.log", Path("app.log.2"));  // never seen: counted
  Truncate("app.log", 0);
  tailer = Resume(Options({"app.log"}), saved);
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), ElementsAre("2"));
  ASSERT_EQ(recorder_.Of(TailEventKind::kUnreadRotation).size(), 1u);
  saved = Stop(tailer);
  ASSERT_EQ(saved.unread.size(), 1u);
  EXPECT_GT(saved.unread[0].head.len, 0u);

  // Restarted with nothing new: app.log.2 is not counted twice.
  tailer = Resume(Options({"app.log"}), saved);
  Poll(*tailer);
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty());
  saved = Stop(tailer);

  // Restarted after app.log.2 was overwritten in place by a copy never seen.
  const std::uint64_t inode = Inode(Path("app.log.2"));
  Append("app.log", "5\n6\n7\n");
  Copy("app.log", Path("app.log.2"));
  ASSERT_EQ(Inode(Path("app.log.2")), inode);
  Truncate("app.log", 0);
  tailer = Resume(Options({"app.log"}), saved);
  Poll(*tailer);
  EXPECT_THAT(recorder_.Texts(), IsEmpty());
  const auto unread = recorder_.Of(TailEventKind::kUnreadRotation);
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_EQ(unread[0]->path, Path("app.log.2"));
  EXPECT_EQ(unread[0]->count, 3u);

  // The same restart from a state without heads: not counted (as before heads).
  Stop(tailer);
  for (FileTailer::UnreadFile& f : saved.unread) f.head = {};
  tailer = Resume(Options({"app.log"}), saved);
  Poll(*tailer);
  EXPECT_THAT(recorder_.Of(TailEventKind::kUnreadRotation), IsEmpty());
}

}  // namespace
}  // namespace kvwatch::collectors
