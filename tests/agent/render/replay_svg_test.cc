// The `kvwatch replay --svg` layout (agent/render/replay_svg.h): labels never overlap
// (the boxes written into the SVG are checked pairwise), and the x axis starts
// near the first capacity where the curve rises. Synthetic traces, and the shared
// Mooncake conversation trace (where 0.9 and 0.95 used to collide and the axis
// spent half its width on a flat curve) when it is present.
#include "agent/render/replay_svg.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "agent/cli/replay_command.h"
#include "collectors/trace_reader.h"

namespace kvwatch::agent {
namespace {

namespace fs = std::filesystem;

// Every data-box="x y width height" in the SVG.
std::vector<LabelBox> Boxes(const std::string& svg) {
  std::vector<LabelBox> out;
  const std::string key = "data-box=\"";
  for (std::size_t at = svg.find(key); at != std::string::npos; at = svg.find(key, at + 1)) {
    std::istringstream in(svg.substr(at + key.size(), svg.find('"', at + key.size()) - at - key.size()));
    LabelBox b;
    in >> b.x >> b.y >> b.width >> b.height;
    EXPECT_FALSE(in.fail()) << svg.substr(at, 60);
    out.push_back(b);
  }
  return out;
}

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void ExpectDisjoint(const std::vector<LabelBox>& boxes) {
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    for (std::size_t j = i + 1; j < boxes.size(); ++j) {
      EXPECT_FALSE(boxes[i].Intersects(boxes[j]))
          << "box " << i << " (" << boxes[i].x << ", " << boxes[i].y << ", " << boxes[i].width << " x "
          << boxes[i].height << ") and box " << j << " (" << boxes[j].x << ", " << boxes[j].y << ", " << boxes[j].width
          << " x " << boxes[j].height << ")";
    }
  }
}

// The x axis' first capacity, from data-x-min="1,000".
std::uint64_t AxisStart(const std::string& svg) {
  const std::string key = "data-x-min=\"";
  const std::size_t at = svg.find(key);
  if (at == std::string::npos) return 0;
  std::string digits;
  for (std::size_t i = at + key.size(); i < svg.size() && svg[i] != '"'; ++i) {
    if (svg[i] != ',') digits += svg[i];
  }
  return std::stoull(digits);
}

// The smallest capacity at which the page hit ratio has gained 1% of its rise
// from capacity 1 to unlimited, found on the curve itself (not the plot's samples).
std::uint64_t FirstRise(const curve::CurveAccumulator& acc) {
  const double lo = acc.PageHitRatio(1), hi = acc.UnlimitedPageHitRatio();
  const double threshold = lo + 0.01 * (hi - lo);
  std::uint64_t a = 1, b = std::max<std::uint64_t>(1, acc.MaxCapacity());
  while (a < b) {
    const std::uint64_t m = a + (b - a) / 2;
    if (acc.PageHitRatio(m) >= threshold) {
      b = m;
    } else {
      a = m + 1;
    }
  }
  return a;
}

struct Replayed {
  std::unique_ptr<Replayer> replayer;
  ReplayResult result;
};

Replayed Replay(const std::vector<std::vector<curve::PageId>>& requests, std::uint64_t page_tokens = 16) {
  ReplayOptions o;
  o.page_tokens = page_tokens;
  o.model.bytes_per_token = 1000;
  auto resolved = ResolveReplayOptions(o);
  EXPECT_TRUE(resolved.ok()) << resolved.error();
  Replayed out;
  out.replayer = std::make_unique<Replayer>(resolved.value());
  for (const auto& pages : requests) {
    curve::Request r;
    r.pages = pages;
    out.replayer->Add(r);
  }
  out.result = out.replayer->Result();
  return out;
}

const std::vector<double> kTargets = {0.9, 0.95, 0.99};

TEST(ReplaySvgTest, LabelsPlacedAtOnePointNeverOverlap) {
  const LabelBox area{80, 70, 840, 400};
  std::vector<LabelBox> taken = {{92, 406, 250, 44}};  // a legend
  for (int i = 0; i < 40; ++i) {
    const LabelBox b = PlaceLabel(500, 270, LabelWidth("0.95: 31,435"), 14, area, taken);
    EXPECT_GE(b.x, area.x);
    EXPECT_LE(b.x + b.width, area.x + area.width);
    taken.push_back(b);
  }
  ExpectDisjoint(taken);
}

TEST(ReplaySvgTest, LabelsNeverOverlapEvenWithoutRoom) {
  // Scattered points, then more labels than the area can hold: the ones that do
  // not fit go below everything, still on no other label.
  const LabelBox area{0, 0, 300, 100};
  std::vector<LabelBox> taken;
  std::uint64_t x = 3;
  for (int i = 0; i < 60; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double px = static_cast<double>((x >> 33) % 300), py = static_cast<double>((x >> 13) % 100);
    taken.push_back(PlaceLabel(px, py, 70, 14, area, taken));
  }
  ExpectDisjoint(taken);
}

TEST(ReplaySvgTest, WorkingSetLabelsAtOneCapacityDoNotOverlap) {
  // A loop over 200 single-page requests, 20 times, then 15,000 pages never seen
  // again: every target's working set is 200 pages and the unlimited page hit
  // ratio is 0.2, so the markers stand one above the other 3 to 4 px apart.
  std::vector<std::vector<curve::PageId>> requests;
  for (int round = 0; round < 20; ++round) {
    for (curve::PageId p = 0; p < 200; ++p) requests.push_back({p});
  }
  for (curve::PageId p = 0; p < 15000; ++p) requests.push_back({1000 + p});
  const Replayed r = Replay(requests);
  for (const auto& e : r.result.total.working_set) {
    if (e.target == "page_hit" && e.fraction >= 0.9) {
      EXPECT_EQ(e.capacity_pages, 200u) << e.fraction;
    }
  }
  const std::string svg = RenderSvg(r.result, kTargets);
  EXPECT_EQ(Count(svg, "class=\"label target-label\""), 3u);
  const auto boxes = Boxes(svg);
  EXPECT_EQ(boxes.size(), 5u);  // three targets, the knee, the legend
  ExpectDisjoint(boxes);
}

TEST(ReplaySvgTest, AxisStartsNearTheFirstRise) {
  // A loop over 1,000 pages (no hit below 1,000 pages), then 50,000 cold pages
  // and the loop again (the curve goes on to about 51,000).
  std::vector<std::vector<curve::PageId>> requests;
  for (int round = 0; round < 10; ++round) {
    for (curve::PageId p = 0; p < 1000; ++p) requests.push_back({p});
  }
  for (curve::PageId p = 0; p < 50000; ++p) requests.push_back({100000 + p});
  for (curve::PageId p = 0; p < 1000; ++p) requests.push_back({p});
  const Replayed r = Replay(requests);
  const std::uint64_t rise = FirstRise(r.replayer->total());
  EXPECT_EQ(rise, 1000u);
  const std::string svg = RenderSvg(r.result, kTargets);
  const std::uint64_t start = AxisStart(svg);
  EXPECT_EQ(start, PlotStartCapacity(r.result, kTargets));
  EXPECT_LE(start, rise);
  EXPECT_GE(start, rise / 10);
  // The curves start at the axis' left edge.
  EXPECT_NE(svg.find("class=\"page-hit-ratio\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" d=\"M80,"),
            std::string::npos);
  EXPECT_NE(svg.find("from " + std::to_string(start) + ": below"), std::string::npos);
  ExpectDisjoint(Boxes(svg));
}

TEST(ReplaySvgTest, AxisStartsAtOnePageWhenTheCurveRisesAtOnce) {
  // Requests for one of 200 pages at random: reuse at every distance, so the
  // curve gains from the first pages of capacity on.
  std::vector<std::vector<curve::PageId>> requests;
  std::uint64_t x = 5;
  for (int i = 0; i < 5000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    requests.push_back({(x >> 33) % 200});
  }
  const Replayed r = Replay(requests);
  const std::string svg = RenderSvg(r.result, kTargets);
  EXPECT_EQ(AxisStart(svg), 1u);
  EXPECT_EQ(svg.find(": below, the curves gain"), std::string::npos);
  ExpectDisjoint(Boxes(svg));
}

TEST(ReplaySvgTest, MooncakeConversationLabelsAndAxis) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent";
  std::vector<std::vector<curve::PageId>> requests;
  collectors::TraceCallbacks cb;
  cb.on_request = [&](curve::Request& r) { requests.push_back(r.pages); };
  auto summary = collectors::ReadTrace(path, {}, cb);
  ASSERT_TRUE(summary.ok()) << summary.error();
  const Replayed r = Replay(requests, 512);
  const std::string svg = RenderSvg(r.result, kTargets);
  EXPECT_EQ(Count(svg, "class=\"label target-label\""), 3u);
  ExpectDisjoint(Boxes(svg));
  // The curve is flat (a shared first page) up to some hundreds of pages.
  const std::uint64_t rise = FirstRise(r.replayer->total());
  const std::uint64_t start = AxisStart(svg);
  EXPECT_GE(rise, 100u);
  EXPECT_LE(start, rise);
  EXPECT_GE(start, rise / 10);
}

}  // namespace
}  // namespace kvwatch::agent
