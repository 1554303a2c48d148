#include "collectors/trace_record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace kvwatch::collectors {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class TraceRecordTest : public ::testing::Test {
 protected:
  // Parses one line with parser_ and expects a record.
  curve::Request MustParse(std::string_view line) {
    curve::Request request;
    auto result = parser_.Parse(line, &request);
    EXPECT_TRUE(result.ok()) << line << " -> " << (result.ok() ? "" : result.error());
    if (result.ok()) {
      EXPECT_EQ(result.value(), ParseOutcome::kRecord) << line;
    }
    return request;
  }
  // Parses one line and returns its error message ("" if it parsed).
  std::string ErrorOf(std::string_view line) {
    curve::Request request;
    auto result = parser_.Parse(line, &request);
    return result.ok() ? std::string() : result.error();
  }

  TraceRecordParser parser_;
};

TEST_F(TraceRecordTest, ParsesMooncakeRecord) {
  curve::Request r =
      MustParse(R"({"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 27.482);
  EXPECT_EQ(r.input_tokens, 6955);
  EXPECT_EQ(r.output_tokens, 52);
  EXPECT_THAT(r.pages, ElementsAre(46u, 47u, 48u));
  EXPECT_THAT(r.tenant, IsEmpty());
  EXPECT_EQ(parser_.resolved_unit(), TimestampUnit::kMilliseconds);
}

TEST_F(TraceRecordTest, ParsesBailianRecordInSeconds) {
  curve::Request r = MustParse(R"({"chat_id": 159, "parent_chat_id": 55, "timestamp": 61.114, "input_length": 521,)"
                               R"( "output_length": 132, "type": "text", "turn": 2, "hash_ids": [1089, 1090, 13148]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 61.114);
  EXPECT_EQ(r.tenant, "text");
  EXPECT_EQ(r.input_tokens, 521);
  EXPECT_EQ(r.output_tokens, 132);
  EXPECT_THAT(r.pages, ElementsAre(1089u, 1090u, 13148u));
  EXPECT_EQ(parser_.resolved_unit(), TimestampUnit::kSeconds);
}

TEST_F(TraceRecordTest, BailianShapeMeansSecondsEvenForIntegerTimestamps) {
  curve::Request r = MustParse(R"({"chat_id": 1, "timestamp": 61, "hash_ids": [1]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 61.0);
}

TEST_F(TraceRecordTest, EndTimestampInTheTimestampsUnit) {
  curve::Request r = MustParse(R"({"timestamp": 27482, "end_timestamp": 29000, "hash_ids": [1]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 27.482);
  EXPECT_DOUBLE_EQ(r.end_timestamp_s, 29.0);
  // Without a timestamp to measure from it is not read; a reused Request forgets it.
  curve::Request none = MustParse(R"({"end_timestamp": 5, "hash_ids": [1]})");
  EXPECT_TRUE(std::isnan(none.end_timestamp_s));
  EXPECT_NE(ErrorOf(R"({"timestamp": 1, "end_timestamp": "soon", "hash_ids": [1]})").find("end_timestamp"),
            std::string::npos);
}

TEST_F(TraceRecordTest, HashIdsOnlyRecordHasNoOptionalFacts) {
  curve::Request r = MustParse(R"({"hash_ids": [0, 18446744073709551615]})");
  EXPECT_FALSE(r.has_timestamp());
  EXPECT_EQ(r.input_tokens, -1);
  EXPECT_EQ(r.output_tokens, -1);
  EXPECT_THAT(r.pages, ElementsAre(0u, 18446744073709551615u));
}

TEST_F(TraceRecordTest, EmptyHashIdsIsARecordWithNoPages) {
  curve::Request r = MustParse(R"({"hash_ids": []})");
  EXPECT_THAT(r.pages, IsEmpty());
}

TEST_F(TraceRecordTest, FieldOrderDoesNotMatterAndUnknownFieldsAreIgnored) {
  curve::Request r = MustParse(R"({"hash_ids": [5, 6], "extra": {"nested": [1, {"x": null}]}, "note": "hi",)"
                               R"( "output_length": 7, "timestamp": 1500})");
  EXPECT_THAT(r.pages, ElementsAre(5u, 6u));
  EXPECT_EQ(r.output_tokens, 7);
  EXPECT_DOUBLE_EQ(r.timestamp_s, 1.5);
}

TEST_F(TraceRecordTest, BlankLinesAreDistinctFromErrors) {
  curve::Request request;
  for (std::string_view line : {"", "   ", "\t \r", " \r\n"}) {
    auto result = parser_.Parse(line, &request);
    ASSERT_TRUE(result.ok()) << '"' << line << '"';
    EXPECT_EQ(result.value(), ParseOutcome::kBlank);
  }
}

TEST_F(TraceRecordTest, TrailingCarriageReturnIsTolerated) {
  curve::Request r = MustParse("{\"hash_ids\": [1, 2]}\r");
  EXPECT_THAT(r.pages, ElementsAre(1u, 2u));
}

TEST_F(TraceRecordTest, TenantFieldPriorityIsTenantThenClassThenType) {
  EXPECT_EQ(MustParse(R"({"type": "file", "class": "gold", "tenant": "acme", "hash_ids": []})").tenant, "acme");
  EXPECT_EQ(MustParse(R"({"type": "file", "class": "gold", "hash_ids": []})").tenant, "gold");
  EXPECT_EQ(MustParse(R"({"hash_ids": [], "type": "image"})").tenant, "image");
  EXPECT_EQ(MustParse(R"({"hash_ids": [], "class": 3})").tenant, "3");
  EXPECT_EQ(MustParse(R"({"hash_ids": [], "tenant": "a\"b\u00e9"})").tenant, "a\"b\xc3\xa9");
}

TEST_F(TraceRecordTest, RequestClassIsClassThenType) {
  auto both = MustParse(R"({"type": "file", "class": "gold", "tenant": "acme", "hash_ids": []})");
  EXPECT_EQ(both.tenant, "acme");
  EXPECT_EQ(both.request_class, "gold");
  auto type_only = MustParse(R"({"tenant": "acme", "hash_ids": [], "type": "image"})");
  EXPECT_EQ(type_only.request_class, "image");
  EXPECT_EQ(type_only.tenant, "acme");
  // One field read once gives both labels when it is a candidate for both.
  auto shared = MustParse(R"({"hash_ids": [], "type": 7})");
  EXPECT_EQ(shared.tenant, "7");
  EXPECT_EQ(shared.request_class, "7");
  EXPECT_THAT(MustParse(R"({"hash_ids": [], "class": {"x": 1}})").request_class, IsEmpty());
  curve::Request copy;
  copy.CopyFactsFrom(both);
  EXPECT_EQ(copy.request_class, "gold");
}

TEST_F(TraceRecordTest, TenantOfAnotherTypeFallsThroughToTheNextName) {
  EXPECT_EQ(MustParse(R"({"tenant": {"id": 1}, "class": "gold", "hash_ids": []})").tenant, "gold");
  EXPECT_EQ(MustParse(R"({"tenant": true, "hash_ids": []})").tenant, "");
}

TEST_F(TraceRecordTest, TenantFieldsAreConfigurable) {
  TraceRecordParser parser({.tenant_fields = {"user", "tenant"}});
  curve::Request r;
  ASSERT_TRUE(parser.Parse(R"({"tenant": "t", "user": "u", "hash_ids": []})", &r).ok());
  EXPECT_EQ(r.tenant, "u");
  ASSERT_TRUE(parser.Parse(R"({"type": "text", "hash_ids": []})", &r).ok());
  EXPECT_EQ(r.tenant, "");
}

TEST_F(TraceRecordTest, RequestIsOverwrittenCompletely) {
  curve::Request r;
  ASSERT_TRUE(
      parser_
          .Parse(R"({"timestamp": 5, "tenant": "a", "input_length": 3, "output_length": 4, "hash_ids": [1, 2, 3]})", &r)
          .ok());
  ASSERT_TRUE(parser_.Parse(R"({"hash_ids": [9]})", &r).ok());
  EXPECT_FALSE(r.has_timestamp());
  EXPECT_EQ(r.tenant, "");
  EXPECT_EQ(r.input_tokens, -1);
  EXPECT_EQ(r.output_tokens, -1);
  EXPECT_THAT(r.pages, ElementsAre(9u));
}

TEST_F(TraceRecordTest, NullOptionalFieldsCountAsAbsent) {
  curve::Request r = MustParse(R"({"timestamp": null, "input_length": null, "output_length": null, "hash_ids": [1]})");
  EXPECT_FALSE(r.has_timestamp());
  EXPECT_EQ(r.input_tokens, -1);
  EXPECT_EQ(r.output_tokens, -1);
}

TEST_F(TraceRecordTest, FloatTokenCountsWithoutFractionAreAccepted) {
  curve::Request r = MustParse(R"({"input_length": 6758.0, "hash_ids": [1]})");
  EXPECT_EQ(r.input_tokens, 6758);
}

TEST_F(TraceRecordTest, AutoUnitWaitsForTheFirstNonZeroTimestamp) {
  curve::Request r = MustParse(R"({"timestamp": 0, "hash_ids": [1]})");
  EXPECT_EQ(r.timestamp_s, 0.0);
  EXPECT_EQ(parser_.resolved_unit(), TimestampUnit::kAuto);
  r = MustParse(R"({"timestamp": 0.5, "hash_ids": [1]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 0.5);
  EXPECT_EQ(parser_.resolved_unit(), TimestampUnit::kSeconds);
  // The decision sticks for the rest of the trace.
  r = MustParse(R"({"timestamp": 3, "hash_ids": [1]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 3.0);
}

TEST_F(TraceRecordTest, AutoUnitTreatsWholeFloatsAsMilliseconds) {
  curve::Request r = MustParse(R"({"timestamp": 14000.0, "hash_ids": [1]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 14.0);
  EXPECT_EQ(parser_.resolved_unit(), TimestampUnit::kMilliseconds);
  // A later fractional value does not flip the decision.
  r = MustParse(R"({"timestamp": 14500.5, "hash_ids": [1]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 14.5005);
}

TEST_F(TraceRecordTest, ResetForgetsTheAutoDecision) {
  (void)MustParse(R"({"timestamp": 2000, "hash_ids": [1]})");
  EXPECT_EQ(parser_.resolved_unit(), TimestampUnit::kMilliseconds);
  parser_.Reset();
  EXPECT_EQ(parser_.resolved_unit(), TimestampUnit::kAuto);
  curve::Request r = MustParse(R"({"timestamp": 2.25, "hash_ids": [1]})");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 2.25);
}

TEST_F(TraceRecordTest, ForcedUnitsOverrideTheRule) {
  curve::Request r;
  TraceRecordParser seconds({.timestamp_unit = TimestampUnit::kSeconds});
  ASSERT_TRUE(seconds.Parse(R"({"timestamp": 1500, "hash_ids": [1]})", &r).ok());
  EXPECT_DOUBLE_EQ(r.timestamp_s, 1500.0);
  TraceRecordParser millis({.timestamp_unit = TimestampUnit::kMilliseconds});
  ASSERT_TRUE(millis.Parse(R"({"chat_id": 3, "timestamp": 61.5, "hash_ids": [1]})", &r).ok());
  EXPECT_DOUBLE_EQ(r.timestamp_s, 0.0615);
}

TEST_F(TraceRecordTest, TimestampUnitNamesRoundTrip) {
  for (TimestampUnit unit : {TimestampUnit::kAuto, TimestampUnit::kMilliseconds, TimestampUnit::kSeconds}) {
    EXPECT_EQ(ParseTimestampUnit(TimestampUnitName(unit)), unit);
  }
  EXPECT_EQ(ParseTimestampUnit("seconds"), TimestampUnit::kSeconds);
  EXPECT_EQ(ParseTimestampUnit("minutes"), std::nullopt);
}

TEST_F(TraceRecordTest, NotJsonIsAnError) {
  EXPECT_THAT(ErrorOf("hello"), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1, 2)"), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1, 2]} x)"), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1, 2]}})"), HasSubstr("column 21: trailing content"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1 2]})"), HasSubstr("hash_ids[1]: not valid JSON"));
}

TEST_F(TraceRecordTest, NonObjectRootSaysWhatWasExpected) {
  EXPECT_THAT(ErrorOf("[1, 2, 3]"), HasSubstr("expected a JSON object with \"hash_ids\", found an array"));
  EXPECT_THAT(ErrorOf("42"), HasSubstr("found a number"));
}

TEST_F(TraceRecordTest, MissingHashIds) {
  EXPECT_THAT(ErrorOf(R"({"timestamp": 1, "input_length": 5})"), HasSubstr("missing \"hash_ids\""));
}

TEST_F(TraceRecordTest, HashIdsMustBeAnArray) {
  std::string error = ErrorOf(R"({"hash_ids": "1,2"})");
  EXPECT_THAT(error, HasSubstr("\"hash_ids\" is a string; expected an array of non-negative integers"));
  EXPECT_THAT(error, HasSubstr("column 14"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": {"a": 1}})"), HasSubstr("\"hash_ids\" is an object"));
}

TEST_F(TraceRecordTest, NegativeIdIsReportedWithIndexAndColumn) {
  std::string error = ErrorOf(R"({"hash_ids": [1, 2, -7, 4]})");
  EXPECT_THAT(error, HasSubstr("column 21: hash_ids[2] is negative (-7); expected a non-negative integer"));
}

TEST_F(TraceRecordTest, NonIntegerIdsAreReported) {
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1.5]})"), HasSubstr("hash_ids[0] is not an integer (1.5)"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [3, 1e3]})"), HasSubstr("hash_ids[1] is not an integer (1e3)"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [3, "x"]})"), HasSubstr("hash_ids[1] is a string (\"x\")"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [null]})"), HasSubstr("hash_ids[0] is null"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [[1]]})"), HasSubstr("hash_ids[0] is an array"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [01]})"), HasSubstr("hash_ids[0] is not a valid number (01)"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [18446744073709551616]})"), HasSubstr("hash_ids[0] is larger than 2^64-1"));
}

// hash_ids in the common shape are read straight from the text (ReadIdList);
// every other spelling goes through simdjson. Both must give the same ids, and
// the fields after the array must still be read.
TEST_F(TraceRecordTest, IdListsInEveryJsonSpellingOfIntegers) {
  EXPECT_THAT(MustParse(R"({"hash_ids": []})").pages, IsEmpty());
  EXPECT_THAT(MustParse("{\"hash_ids\": [ \t\r ]}").pages, IsEmpty());
  EXPECT_THAT(MustParse(R"({"hash_ids":[0,1,2]})").pages, ElementsAre(0u, 1u, 2u));
  EXPECT_THAT(MustParse("{\"hash_ids\": [\t7 ,\r8\t, 9 ] }").pages, ElementsAre(7u, 8u, 9u));
  EXPECT_THAT(MustParse(R"({"hash_ids": [18446744073709551615, 10]})").pages, ElementsAre(18446744073709551615u, 10u));
  // Only ids of 20 digits and more are checked for overflow: the longest that
  // cannot overflow, the shortest that can, and one that must.
  EXPECT_THAT(MustParse(R"({"hash_ids": [9999999999999999999, 10000000000000000000]})").pages,
              ElementsAre(9999999999999999999u, 10000000000000000000u));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [100000000000000000000]})"), HasSubstr("hash_ids[0] is larger than 2^64-1"));
  curve::Request r = MustParse(R"({"hash_ids": [5, 6], "input_length": 40, "tenant": "a", "timestamp": 2.5})");
  EXPECT_THAT(r.pages, ElementsAre(5u, 6u));
  EXPECT_EQ(r.input_tokens, 40);
  EXPECT_EQ(r.tenant, "a");
  EXPECT_DOUBLE_EQ(r.timestamp_s, 2.5);
  // A second hash_ids replaces the first, whichever way each is read.
  EXPECT_THAT(MustParse(R"({"hash_ids": [1, 2], "hash_ids": [3]})").pages, ElementsAre(3u));
  EXPECT_THAT(MustParse(R"({"hash_ids": [1, 2], "hash_ids": [ 3 , 4 ]})").pages, ElementsAre(3u, 4u));
  // Errors after a list read from the text are found as before.
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1, 2], "timestamp": "x"})"), HasSubstr("\"timestamp\" is a string"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1, 2]]})"), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1, 2,]})"), HasSubstr("hash_ids[2]"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1, 00]})"), HasSubstr("hash_ids[1] is not a valid number (00)"));
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [99999999999999999999]})"), HasSubstr("hash_ids[0] is larger than 2^64-1"));
}

TEST_F(TraceRecordTest, BadOptionalFieldsAreReported) {
  EXPECT_THAT(ErrorOf(R"({"timestamp": "noon", "hash_ids": []})"),
              HasSubstr("\"timestamp\" is a string (\"noon\"); expected a number"));
  EXPECT_THAT(ErrorOf(R"({"input_length": -3, "hash_ids": []})"),
              HasSubstr("\"input_length\" is -3; expected a non-negative integer"));
  EXPECT_THAT(ErrorOf(R"({"output_length": 2.5, "hash_ids": []})"),
              HasSubstr("\"output_length\" is 2.5; expected a non-negative integer"));
}

TEST_F(TraceRecordTest, ParseInPlaceReadsWithoutCopy) {
  std::string buffer = R"({"hash_ids": [7, 8]})";
  const std::size_t size = buffer.size();
  buffer.append(TraceRecordParser::kPaddingBytes, 'x');  // content of the padding is irrelevant
  curve::Request r;
  auto result = parser_.ParseInPlace(std::string_view(buffer.data(), size), TraceRecordParser::kPaddingBytes, &r);
  ASSERT_TRUE(result.ok()) << result.error();
  EXPECT_THAT(r.pages, ElementsAre(7u, 8u));
  // Too little padding falls back to a copy and still works.
  std::string exact = R"({"hash_ids": [9]})";
  ASSERT_TRUE(parser_.ParseInPlace(exact, 0, &r).ok());
  EXPECT_THAT(r.pages, ElementsAre(9u));
}

TEST_F(TraceRecordTest, ParserRecoversAfterAnError) {
  EXPECT_THAT(ErrorOf(R"({"hash_ids": [1, -2]})"), HasSubstr("negative"));
  curve::Request r = MustParse(R"({"hash_ids": [3]})");
  EXPECT_THAT(r.pages, ElementsAre(3u));
}

}  // namespace
}  // namespace kvwatch::collectors
