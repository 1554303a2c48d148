// The one list of a curve point's fields (agent/render/curve_point.h) and its
// writers: the JSON object of the API and replay, the CSV columns, and a
// --policy row's point.
#include "agent/render/curve_point.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "base/json_writer.h"

namespace kvwatch::agent {
namespace {

curve::CurvePoint Point() {
  curve::CurvePoint p;
  p.capacity_pages = 64;
  p.page_hits = 30;
  p.page_hit_ratio = 0.375;
  p.request_coverage = 0.5;
  p.reused_tokens = 480;
  return p;
}

std::string Json(const curve::CurvePoint& p) {
  base::JsonWriter w;
  WriteCurvePoint(w, p);
  return w.Take();
}

std::string Csv(const curve::CurvePoint& p) {
  std::ostringstream out;
  out.precision(17);
  WriteCurvePointCsv(out, p);
  return out.str();
}

TEST(CurvePointTest, JsonHasTheHitFieldsThenTheOptionalOnesPresent) {
  curve::CurvePoint p = Point();
  EXPECT_EQ(
      Json(p),
      R"({"capacity_pages":64,"page_hits":30,"page_hit_ratio":0.375,"request_coverage":0.5,"reused_tokens":480})");
  p.capacity_bytes = 1024;
  p.avoided_prefill_seconds = 0.25;
  EXPECT_EQ(Json(p),
            R"({"capacity_pages":64,"page_hits":30,"page_hit_ratio":0.375,"request_coverage":0.5,"reused_tokens":480,)"
            R"("capacity_bytes":1024,"avoided_prefill_seconds":0.25})");
}

TEST(CurvePointTest, CsvHasEveryColumnInTheHeadersOrderAbsentOnesEmpty) {
  EXPECT_EQ(CurvePointCsvHeader(),
            "capacity_pages,capacity_bytes,page_hits,page_hit_ratio,request_coverage,reused_tokens,"
            "avoided_prefill_flops,avoided_prefill_seconds");
  curve::CurvePoint p = Point();
  EXPECT_EQ(Csv(p), "64,,30,0.375,0.5,480,,");
  p.capacity_bytes = 1024;
  p.avoided_prefill_flops = 1e15;
  p.page_hit_ratio = 0.1;  // the stream's 17 digits
  EXPECT_EQ(Csv(p), "64,1024,30,0.10000000000000001,0.5,480,1000000000000000,");
}

TEST(CurvePointTest, APolicysTotalsAreAPointWithoutBytes) {
  curve::PolicyTotals t;
  t.requests = 4;
  t.page_refs = 80;
  t.page_hits = 30;
  t.covered_requests = 2;
  const curve::CurvePoint p = PolicyCurvePoint(64, t, 16);
  EXPECT_EQ(p.capacity_pages, 64u);
  EXPECT_EQ(p.page_hits, 30);
  EXPECT_DOUBLE_EQ(p.page_hit_ratio, t.PageHitRatio());
  EXPECT_DOUBLE_EQ(p.request_coverage, t.RequestCoverage());
  EXPECT_EQ(p.reused_tokens, 480);
  EXPECT_FALSE(p.capacity_bytes || p.avoided_prefill_flops || p.avoided_prefill_seconds);
  base::JsonWriter w;
  w.BeginObject();
  WriteCurvePointHits(w, p);
  w.EndObject();
  EXPECT_EQ(w.Take(), R"({"page_hits":30,"page_hit_ratio":0.375,"request_coverage":0.5,"reused_tokens":480})");
}

}  // namespace
}  // namespace kvwatch::agent
