#include "collectors/trace_reader.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kvwatch::collectors {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct BadLine {
  std::string source;
  std::uint64_t line;
  std::string message;
};

// Everything a read delivered.
struct Collected {
  std::vector<curve::Request> requests;
  std::vector<BadLine> bad;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> progress;
};

class TraceReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "trace_reader_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WritePlain(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  // Writes `members` as consecutive gzip members of one file.
  std::string WriteGzip(const std::string& name, const std::vector<std::string>& members) {
    const std::string path = dir_ + "/" + name;
    std::filesystem::remove(path);
    for (const std::string& member : members) {
      gzFile gz = gzopen(path.c_str(), "ab");
      EXPECT_NE(gz, nullptr);
      if (!member.empty()) {
        EXPECT_EQ(gzwrite(gz, member.data(), static_cast<unsigned>(member.size())), static_cast<int>(member.size()));
      }
      EXPECT_EQ(gzclose(gz), Z_OK);
    }
    return path;
  }

  base::Result<TraceReadSummary> Read(const std::string& path, Collected* out, TraceReaderOptions options = {}) {
    TraceCallbacks callbacks;
    callbacks.on_request = [out](curve::Request& r) { out->requests.push_back(r); };
    callbacks.on_bad_line = [out](std::string_view source, std::uint64_t line, std::string_view message) {
      out->bad.push_back({std::string(source), line, std::string(message)});
    };
    callbacks.on_progress = [out](std::uint64_t done, std::uint64_t total) { out->progress.emplace_back(done, total); };
    return ReadTrace(path, options, callbacks);
  }

  std::string dir_;
};

constexpr std::size_t kDefaultMaxLine = std::size_t{64} << 20;

TraceReaderOptions ReaderOptions(bool strict, std::size_t max_line_bytes = kDefaultMaxLine,
                                 std::size_t chunk_bytes = std::size_t{1} << 20) {
  TraceReaderOptions options;
  options.strict = strict;
  options.max_line_bytes = max_line_bytes;
  options.chunk_bytes = chunk_bytes;
  return options;
}

// Three records, the last one with a different page count, as one JSONL text.
const char kThreeRecords[] =
    "{\"timestamp\": 0, \"input_length\": 40, \"hash_ids\": [1, 2, 3]}\n"
    "{\"timestamp\": 1500, \"hash_ids\": [1, 2, 4], \"tenant\": \"a\"}\n"
    "{\"timestamp\": 3000, \"hash_ids\": [9]}\n";

void ExpectThreeRecords(const Collected& got) {
  ASSERT_EQ(got.requests.size(), 3u);
  EXPECT_THAT(got.requests[0].pages, ElementsAre(1u, 2u, 3u));
  EXPECT_EQ(got.requests[0].input_tokens, 40);
  EXPECT_THAT(got.requests[1].pages, ElementsAre(1u, 2u, 4u));
  EXPECT_EQ(got.requests[1].tenant, "a");
  EXPECT_DOUBLE_EQ(got.requests[1].timestamp_s, 1.5);
  EXPECT_THAT(got.requests[2].pages, ElementsAre(9u));
  EXPECT_DOUBLE_EQ(got.requests[2].timestamp_s, 3.0);
}

TEST_F(TraceReaderTest, ReadsPlainFile) {
  const std::string path = WritePlain("t.jsonl", kThreeRecords);
  Collected got;
  auto result = Read(path, &got);
  ASSERT_TRUE(result.ok()) << result.error();
  ExpectThreeRecords(got);
  const TraceReadSummary& s = result.value();
  EXPECT_EQ(s.source, path);
  EXPECT_FALSE(s.gzip);
  EXPECT_EQ(s.lines, 3u);
  EXPECT_EQ(s.records, 3u);
  EXPECT_EQ(s.blank_lines, 0u);
  EXPECT_EQ(s.bad_lines, 0u);
  EXPECT_EQ(s.page_refs, 7u);
  EXPECT_EQ(s.bytes, sizeof(kThreeRecords) - 1);
  EXPECT_EQ(s.source_bytes, sizeof(kThreeRecords) - 1);
  EXPECT_EQ(s.timestamp_unit, TimestampUnit::kMilliseconds);
  EXPECT_TRUE(got.bad.empty());
}

TEST_F(TraceReaderTest, DetectsGzipByMagicNotByName) {
  const std::string gz = WriteGzip("looks_plain.jsonl", {kThreeRecords});
  Collected got;
  auto result = Read(gz, &got);
  ASSERT_TRUE(result.ok()) << result.error();
  ExpectThreeRecords(got);
  EXPECT_TRUE(result.value().gzip);
  EXPECT_EQ(result.value().bytes, sizeof(kThreeRecords) - 1);
  EXPECT_EQ(result.value().source_bytes, std::filesystem::file_size(gz));

  const std::string plain = WritePlain("looks_compressed.jsonl.gz", kThreeRecords);
  Collected got_plain;
  auto plain_result = Read(plain, &got_plain);
  ASSERT_TRUE(plain_result.ok()) << plain_result.error();
  ExpectThreeRecords(got_plain);
  EXPECT_FALSE(plain_result.value().gzip);
}

TEST_F(TraceReaderTest, ReadsConcatenatedGzipMembers) {
  const std::string gz =
      WriteGzip("multi.gz", {"{\"hash_ids\": [1]}\n{\"hash_", "ids\": [2]}\n", "", "{\"hash_ids\": [3]}"});
  Collected got;
  auto result = Read(gz, &got);
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(got.requests.size(), 3u);
  EXPECT_THAT(got.requests[1].pages, ElementsAre(2u));
  EXPECT_THAT(got.requests[2].pages, ElementsAre(3u));
}

TEST_F(TraceReaderTest, TruncatedGzipIsAnError) {
  std::string big;
  for (int i = 0; i < 2000; ++i) big += "{\"hash_ids\": [" + std::to_string(i * 7919 % 100003) + "]}\n";
  const std::string gz = WriteGzip("full.gz", {big});
  std::string bytes;
  {
    std::ifstream in(gz, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = WritePlain("cut.gz", bytes.substr(0, bytes.size() / 2));
  Collected got;
  auto result = Read(cut, &got);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.error(), HasSubstr("cut.gz: unexpected end of gzip data"));
  EXPECT_LT(got.requests.size(), 2000u);

  std::string corrupt = bytes;
  for (std::size_t i = 20; i < 60; ++i) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
  const std::string bad = WritePlain("bad.gz", corrupt);
  auto bad_result = Read(bad, &got);
  ASSERT_FALSE(bad_result.ok());
  EXPECT_THAT(bad_result.error(), HasSubstr("bad.gz: corrupt gzip data"));
}

TEST_F(TraceReaderTest, CrlfLineEndings) {
  std::string text = kThreeRecords;
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  Collected got;
  auto result = Read(WritePlain("crlf.jsonl", crlf), &got);
  ASSERT_TRUE(result.ok()) << result.error();
  ExpectThreeRecords(got);
  EXPECT_EQ(result.value().bad_lines, 0u);
}

TEST_F(TraceReaderTest, LastLineWithoutNewline) {
  std::string text = kThreeRecords;
  text.pop_back();
  Collected got;
  auto result = Read(WritePlain("nonl.jsonl", text), &got);
  ASSERT_TRUE(result.ok()) << result.error();
  ExpectThreeRecords(got);
  EXPECT_EQ(result.value().lines, 3u);
}

TEST_F(TraceReaderTest, BadLineIsReportedWithItsNumberAndTheRestIsRead) {
  const std::string path = WritePlain("bad.jsonl",
                                      "{\"hash_ids\": [1]}\n"
                                      "\n"
                                      "{\"hash_ids\": [2, -5]}\n"
                                      "   \r\n"
                                      "not json\n"
                                      "{\"hash_ids\": [3]}\n");
  Collected got;
  auto result = Read(path, &got);
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(got.requests.size(), 2u);
  EXPECT_THAT(got.requests[1].pages, ElementsAre(3u));
  ASSERT_EQ(got.bad.size(), 2u);
  EXPECT_EQ(got.bad[0].source, path);
  EXPECT_EQ(got.bad[0].line, 3u);
  EXPECT_THAT(got.bad[0].message, HasSubstr("hash_ids[1] is negative (-5)"));
  EXPECT_EQ(got.bad[1].line, 5u);
  EXPECT_THAT(got.bad[1].message, HasSubstr("not valid JSON"));
  const TraceReadSummary& s = result.value();
  EXPECT_EQ(s.lines, 6u);
  EXPECT_EQ(s.records, 2u);
  EXPECT_EQ(s.blank_lines, 2u);
  EXPECT_EQ(s.bad_lines, 2u);
}

// NaN and Infinity (as Python's json module writes non-finite floats) are no JSON
// number: a bad line that says so, with the file, the line and the column. Before,
// NaN read as "an integer out of range" and nan as "null".
TEST_F(TraceReaderTest, NaNOrInfinityTimestampIsABadLineThatSaysSo) {
  const std::string path = WritePlain("nan.jsonl",
                                      "{\"timestamp\": 1, \"hash_ids\": [1]}\n"
                                      "{\"timestamp\": NaN, \"hash_ids\": [2]}\n"
                                      "{\"timestamp\": nan, \"hash_ids\": [3]}\n"
                                      "{\"timestamp\": -Infinity, \"hash_ids\": [4]}\n"
                                      "{\"timestamp\": 2, \"hash_ids\": [5]}\n");
  Collected got;
  auto result = Read(path, &got);
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(got.requests.size(), 2u);
  ASSERT_EQ(got.bad.size(), 3u);
  for (std::size_t i = 0; i < got.bad.size(); ++i) {
    EXPECT_EQ(got.bad[i].source, path);
    EXPECT_EQ(got.bad[i].line, i + 2);
    EXPECT_THAT(got.bad[i].message, StartsWith("column 15: \"timestamp\" is NaN or Infinity, which JSON has no "
                                               "number for"));
  }
  Collected strict;
  auto stopped = Read(path, &strict, ReaderOptions(true));
  ASSERT_FALSE(stopped.ok());
  EXPECT_THAT(stopped.error(), StartsWith(path + ":2: column 15: \"timestamp\" is NaN or Infinity"));
}

TEST_F(TraceReaderTest, StrictModeStopsAtTheFirstBadLine) {
  const std::string path = WritePlain("strict.jsonl",
                                      "{\"hash_ids\": [1]}\n"
                                      "{\"hash_ids\": [2]}\n"
                                      "{\"timestamp\": 5}\n"
                                      "{\"hash_ids\": [3]}\n");
  Collected got;
  auto result = Read(path, &got, ReaderOptions(true));
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.error(), StartsWith(path + ":3: missing \"hash_ids\""));
  EXPECT_EQ(got.requests.size(), 2u);
  EXPECT_TRUE(got.bad.empty());
}

TEST_F(TraceReaderTest, OverLongLineIsSkipped) {
  const std::string long_line = "{\"hash_ids\": [" + std::string(300, ' ') + "1]}";
  const std::string path =
      WritePlain("long.jsonl", "{\"hash_ids\": [1]}\n" + long_line + "\n{\"hash_ids\": [2]}\n" + long_line);
  Collected got;
  auto result = Read(path, &got, ReaderOptions(false, 100));
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(got.requests.size(), 2u);
  EXPECT_THAT(got.requests[1].pages, ElementsAre(2u));
  ASSERT_EQ(got.bad.size(), 2u);
  EXPECT_EQ(got.bad[0].line, 2u);
  EXPECT_EQ(got.bad[0].message, "line longer than 100 bytes");
  EXPECT_EQ(got.bad[1].line, 4u);
  EXPECT_EQ(result.value().lines, 4u);

  // Exactly at the limit is fine, with or without "\r".
  const std::string exact = "{\"hash_ids\": [" + std::string(100 - 17, ' ') + "7]}";
  ASSERT_EQ(exact.size(), 100u);
  Collected got_exact;
  auto exact_result = Read(WritePlain("exact.jsonl", exact + "\r\n" + exact), &got_exact, ReaderOptions(false, 100));
  ASSERT_TRUE(exact_result.ok()) << exact_result.error();
  EXPECT_EQ(got_exact.requests.size(), 2u);
  EXPECT_TRUE(got_exact.bad.empty());
}

TEST_F(TraceReaderTest, OverLongLineSpanningManyChunksIsSkippedInStrictModeToo) {
  const std::string long_line = "{\"hash_ids\": [" + std::string(50000, ' ') + "1]}\n";
  const std::string path = WritePlain("long2.jsonl", "{\"hash_ids\": [1]}\n" + long_line + "{\"hash_ids\": [2]}\n");
  Collected got;
  auto result = Read(path, &got, ReaderOptions(false, 10000, 4096));
  ASSERT_TRUE(result.ok()) << result.error();
  EXPECT_EQ(got.requests.size(), 2u);
  ASSERT_EQ(got.bad.size(), 1u);
  EXPECT_EQ(got.bad[0].line, 2u);

  auto strict = Read(path, &got, ReaderOptions(true, 10000, 4096));
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.error(), path + ":2: line longer than 10000 bytes");
}

TEST_F(TraceReaderTest, LinesLongerThanTheChunkGrowTheBuffer) {
  std::string ids;
  for (int i = 0; i < 5000; ++i) ids += (i ? ", " : "") + std::to_string(i);
  const std::string line = "{\"hash_ids\": [" + ids + "]}\n";
  Collected got;
  auto result = Read(WritePlain("wide.jsonl", line + line), &got, ReaderOptions(false, kDefaultMaxLine, 4096));
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(got.requests.size(), 2u);
  ASSERT_EQ(got.requests[1].pages.size(), 5000u);
  EXPECT_EQ(got.requests[1].pages[4999], 4999u);
}

TEST_F(TraceReaderTest, SplitsLinesAcrossChunkBoundaries) {
  std::string text;
  std::vector<std::vector<curve::PageId>> expected;
  for (int i = 0; i < 3000; ++i) {
    std::vector<curve::PageId> pages;
    text += "{\"timestamp\": " + std::to_string(i) + ", \"hash_ids\": [";
    for (int j = 0; j <= i % 13; ++j) {
      pages.push_back(static_cast<curve::PageId>(i) * 100 + j);
      text += (j ? "," : "") + std::to_string(pages.back());
    }
    text += "]}\n";
    expected.push_back(pages);
  }
  for (const std::string& path : {WritePlain("many.jsonl", text), WriteGzip("many.gz", {text})}) {
    Collected got;
    auto result = Read(path, &got, ReaderOptions(false, kDefaultMaxLine, 4096));
    ASSERT_TRUE(result.ok()) << result.error();
    ASSERT_EQ(got.requests.size(), expected.size()) << path;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(got.requests[i].pages, expected[i]) << path << " record " << i;
    }
    EXPECT_EQ(result.value().bytes, text.size());
  }
}

TEST_F(TraceReaderTest, ProgressEndsAtTheSourceSize) {
  std::string text;
  for (int i = 0; i < 4000; ++i) text += "{\"hash_ids\": [" + std::to_string(i) + ", 1, 2, 3, 4, 5]}\n";
  for (const std::string& path : {WritePlain("p.jsonl", text), WriteGzip("p.gz", {text})}) {
    Collected got;
    auto result = Read(path, &got, ReaderOptions(false, kDefaultMaxLine, 4096));
    ASSERT_TRUE(result.ok()) << result.error();
    const std::uint64_t size = std::filesystem::file_size(path);
    ASSERT_GE(got.progress.size(), 2u) << path;
    for (std::size_t i = 1; i < got.progress.size(); ++i) {
      EXPECT_LE(got.progress[i - 1].first, got.progress[i].first);
    }
    EXPECT_EQ(got.progress.back().first, size) << path;
    EXPECT_EQ(got.progress.back().second, size) << path;
  }
}

TEST_F(TraceReaderTest, SkipsUtf8ByteOrderMark) {
  Collected got;
  auto result = Read(WritePlain("bom.jsonl", "\xEF\xBB\xBF{\"hash_ids\": [4]}\n"), &got);
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(got.requests.size(), 1u);
  EXPECT_THAT(got.requests[0].pages, ElementsAre(4u));
}

TEST_F(TraceReaderTest, EmptyFileHasNoLines) {
  Collected got;
  auto result = Read(WritePlain("empty.jsonl", ""), &got);
  ASSERT_TRUE(result.ok()) << result.error();
  EXPECT_EQ(result.value().lines, 0u);
  EXPECT_EQ(result.value().timestamp_unit, TimestampUnit::kAuto);
}

TEST_F(TraceReaderTest, MissingFileIsAnError) {
  Collected got;
  auto result = Read(dir_ + "/nope.jsonl", &got);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.error(), HasSubstr("cannot open " + dir_ + "/nope.jsonl"));
  auto dir_result = Read(dir_, &got);
  ASSERT_FALSE(dir_result.ok());
  EXPECT_THAT(dir_result.error(), HasSubstr("is a directory"));
}

TEST_F(TraceReaderTest, DashReadsStandardInput) {
  const std::string path = WriteGzip("stdin.gz", {kThreeRecords});
  const int saved = dup(STDIN_FILENO);
  ASSERT_GE(saved, 0);
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(dup2(fd, STDIN_FILENO), STDIN_FILENO);
  close(fd);
  Collected got;
  auto result = Read("-", &got);
  dup2(saved, STDIN_FILENO);
  close(saved);
  ASSERT_TRUE(result.ok()) << result.error();
  ExpectThreeRecords(got);
  EXPECT_EQ(result.value().source, "<stdin>");
  EXPECT_TRUE(result.value().gzip);
}

TEST_F(TraceReaderTest, RecordOptionsArePassedToTheParser) {
  Collected got;
  TraceReaderOptions options;
  options.record.timestamp_unit = TimestampUnit::kSeconds;
  options.record.tenant_fields = {"user"};
  auto result =
      Read(WritePlain("opt.jsonl", "{\"timestamp\": 7, \"user\": \"u1\", \"tenant\": \"x\", \"hash_ids\": []}\n"), &got,
           options);
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(got.requests.size(), 1u);
  EXPECT_DOUBLE_EQ(got.requests[0].timestamp_s, 7.0);
  EXPECT_EQ(got.requests[0].tenant, "u1");
  EXPECT_EQ(result.value().timestamp_unit, TimestampUnit::kSeconds);
}

// The shared real traces: the README's request and page-reference counts.
struct SharedTrace {
  const char* file;
  std::uint64_t requests;
  std::uint64_t page_refs;
  bool has_timestamps;
};

class SharedTraceTest : public ::testing::TestWithParam<SharedTrace> {};

TEST_P(SharedTraceTest, MatchesTheReadmeFigures) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/" + GetParam().file;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  std::uint64_t pages = 0;
  std::uint64_t with_timestamp = 0;
  double last_timestamp = -1;
  bool sorted = true;
  TraceCallbacks callbacks;
  callbacks.on_request = [&](curve::Request& r) {
    pages += r.pages.size();
    if (r.has_timestamp()) {
      ++with_timestamp;
      sorted = sorted && r.timestamp_s >= last_timestamp;
      last_timestamp = r.timestamp_s;
    }
  };
  auto result = ReadTrace(path, ReaderOptions(true), callbacks);
  ASSERT_TRUE(result.ok()) << result.error();
  const TraceReadSummary& s = result.value();
  EXPECT_EQ(s.records, GetParam().requests);
  EXPECT_EQ(s.page_refs, GetParam().page_refs);
  EXPECT_EQ(pages, GetParam().page_refs);
  EXPECT_EQ(s.bad_lines, 0u);
  if (GetParam().has_timestamps) {
    EXPECT_EQ(with_timestamp, s.records);
    EXPECT_EQ(s.timestamp_unit, TimestampUnit::kMilliseconds);
  } else {
    EXPECT_EQ(with_timestamp, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Readme, SharedTraceTest,
                         ::testing::Values(SharedTrace{"mooncake/conversation_trace.jsonl", 12031, 288500, true},
                                           SharedTrace{"mooncake/toolagent_trace_hash_ids.jsonl", 23608, 409616, false},
                                           SharedTrace{"mooncake/synthetic_trace.jsonl", 3993, 121877, true},
                                           SharedTrace{"weka/claude_code_sessions_merged.jsonl.gz", 49334, 11767283,
                                                       true}),
                         [](const ::testing::TestParamInfo<SharedTrace>& info) {
                           std::string name = std::filesystem::path(info.param.file).stem().stem().string();
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kvwatch::collectors
