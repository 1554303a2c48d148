#include "agent/render/replay_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <utility>

#include "agent/render/text_format.h"

namespace kvwatch::agent {

namespace {

constexpr double kWidth = 960, kHeight = 540, kLeft = 80, kRight = 40, kTop = 70, kBottom = 70;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;
constexpr double kLabelHeight = 14;  // one line of 12 px text
// A curve has started to rise once it has gained this share of its range.
constexpr double kRiseShare = 0.01;

// The 1-2-5 value at or below c (1 for c < 1).
std::uint64_t Floor125(double c) {
  if (!(c >= 1)) return 1;
  std::uint64_t decade = 1;
  while (static_cast<double>(decade) * 10 <= c) decade *= 10;
  for (std::uint64_t m : {5, 2}) {
    if (static_cast<double>(m * decade) <= c) return m * decade;
  }
  return decade;
}

// The first capacity of a series (capacity, value), by ascending capacity, at
// which the value has risen by kRiseShare of its range above the first value;
// nullopt when the series is flat.
std::optional<double> RiseCapacity(const std::vector<std::pair<double, double>>& series) {
  if (series.size() < 2) return std::nullopt;
  const double lo = series.front().second;
  double hi = lo;
  for (const auto& point : series) hi = std::max(hi, point.second);
  if (!(hi - lo > 1e-12)) return std::nullopt;
  const double threshold = lo + kRiseShare * (hi - lo);
  for (const auto& point : series) {
    if (point.second >= threshold) return point.first;
  }
  return std::nullopt;
}

bool Inside(const LabelBox& b, const LabelBox& area) {
  return b.x >= area.x && b.y >= area.y && b.x + b.width <= area.x + area.width &&
         b.y + b.height <= area.y + area.height;
}

bool Free(const LabelBox& b, const std::vector<LabelBox>& taken) {
  return std::none_of(taken.begin(), taken.end(), [&](const LabelBox& t) { return b.Intersects(t); });
}

struct Point {
  double x, y;
};

// How many segments of the lines pass through the box (each sampled at 9 points).
std::size_t HiddenSegments(const LabelBox& b, const std::vector<std::vector<Point>>& lines) {
  std::size_t n = 0;
  for (const auto& line : lines) {
    for (std::size_t i = 1; i < line.size(); ++i) {
      for (int k = 0; k <= 8; ++k) {
        const double x = line[i - 1].x + (line[i].x - line[i - 1].x) * k / 8;
        const double y = line[i - 1].y + (line[i].y - line[i - 1].y) * k / 8;
        if (x >= b.x && x <= b.x + b.width && y >= b.y && y <= b.y + b.height) {
          ++n;
          break;
        }
      }
    }
  }
  return n;
}

std::string BoxAttribute(const LabelBox& b) {
  std::ostringstream s;
  s.precision(6);
  s << " data-box=\"" << b.x << ' ' << b.y << ' ' << b.width << ' ' << b.height << '"';
  return s.str();
}

}  // namespace

double LabelWidth(std::string_view text) { return 7.0 * static_cast<double>(text.size()); }

LabelBox PlaceLabel(double px, double py, double width, double height, const LabelBox& area,
                    const std::vector<LabelBox>& taken) {
  constexpr double kGapX = 6, kGapY = 4;
  const double right = px + kGapX, left = px - kGapX - width;
  const double below = py + kGapY, above = py - kGapY - height;
  const int steps = static_cast<int>(area.height / height) + 1;
  for (int k = 0; k <= steps; ++k) {
    const double down = below + k * height, up = above - k * height;
    for (const LabelBox& b : {LabelBox{right, down, width, height}, LabelBox{right, up, width, height},
                              LabelBox{left, down, width, height}, LabelBox{left, up, width, height}}) {
      if (Inside(b, area) && Free(b, taken)) return b;
    }
  }
  // Nothing free inside the area: below everything taken, so still on no label.
  double bottom = std::max(below, area.y);
  for (const LabelBox& t : taken) bottom = std::max(bottom, t.y + t.height);
  const double x = std::clamp(right, area.x, std::max(area.x, area.x + area.width - width));
  return LabelBox{x, bottom + 1, width, height};
}

std::uint64_t PlotStartCapacity(const ReplayResult& r, const std::vector<double>& targets) {
  const curve::CurveReport& t = r.total;
  std::optional<double> rise;
  auto consider = [&](std::optional<double> c) {
    if (c && (!rise || *c < *rise)) rise = c;
  };
  std::vector<std::pair<double, double>> hits, coverage;
  for (const curve::CurvePoint& p : t.plot) {
    hits.emplace_back(static_cast<double>(p.capacity_pages), p.page_hit_ratio);
    coverage.emplace_back(static_cast<double>(p.capacity_pages), p.request_coverage);
  }
  consider(RiseCapacity(hits));
  consider(RiseCapacity(coverage));
  if (r.policies) {
    const PolicyReplayResult& pr = *r.policies;
    const std::size_t nc = pr.capacities.size();
    for (std::size_t p = 0; p < pr.policies.size(); ++p) {
      std::vector<std::pair<double, double>> series;
      for (std::size_t c = 0; c < nc; ++c) {
        const curve::PolicyRunResult& run = pr.runs[p * nc + c];
        series.emplace_back(static_cast<double>(run.capacity), run.total.PageHitRatio());
      }
      std::sort(series.begin(), series.end());
      consider(RiseCapacity(series));
    }
  }
  // Half the rise, so a little of the flat part shows to the left of it.
  double start = rise ? *rise / 2 : 1;
  if (t.knee) start = std::min(start, static_cast<double>(t.knee->capacity_pages));
  for (double f : targets) {
    for (const auto& e : t.working_set) {
      if (e.target == "page_hit" && std::fabs(e.fraction - f) < 1e-12 && e.capacity_pages) {
        start = std::min(start, static_cast<double>(*e.capacity_pages));
      }
    }
  }
  const double max_c = std::max<double>(2, static_cast<double>(t.max_capacity));
  start = std::min(start, max_c / 10);
  return Floor125(start);
}

namespace {

// One plot being drawn: the axes' mapping, the SVG so far, the boxes taken (the
// legend, the markers, the labels, as placed) and the lines' vertices (for the
// legend's corner).
struct ReplayPlot {
  const ReplayResult& r;
  const curve::CurveReport& t;
  double min_c, max_c, log_min, log_span;
  std::ostringstream s;
  std::vector<LabelBox> taken;
  std::vector<std::vector<Point>> lines;

  ReplayPlot(const ReplayResult& result, double start, double end)
      : r(result),
        t(result.total),
        min_c(start),
        max_c(end),
        log_min(std::log10(start)),
        log_span(std::max(1e-9, std::log10(end) - log_min)) {
    s.precision(6);
  }
  // Capacities below the axis' start are drawn at its start.
  double X(double c) const { return kLeft + kPlotWidth * (std::log10(std::max(c, min_c)) - log_min) / log_span; }
  double Y(double v) const { return kTop + kPlotHeight * (1 - v); }
};

// A policy's line colour and name, for the legend.
struct LegendEntry {
  std::string name, color;
};

// A working set's marker: its point and label.
struct Marker {
  double x, y;
  std::string text;
};

void WriteTitle(ReplayPlot& p) {
  std::ostringstream& s = p.s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << kLeft << "\" y=\"24\" font-size=\"16\">Capacity to hit rate (LRU, " << p.r.settings.touch_order
    << ")</text>\n";
  s << "<text x=\"" << kLeft << "\" y=\"42\" fill=\"#555\">" << p.t.requests << " requests, " << Grouped(p.t.page_refs)
    << " page references; unlimited page hit ratio " << Fixed(p.t.unlimited_page_hit_ratio, 3) << "</text>\n";
}

// Grid and axes: a tick at every power of ten in range, and at the start; bytes
// above the plot when known.
void WriteAxes(ReplayPlot& p) {
  std::ostringstream& s = p.s;
  const ReplaySettings& settings = p.r.settings;
  for (int k = 0; k <= 10; k += 2) {
    const double v = k / 10.0;
    s << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotWidth << "\" y1=\"" << p.Y(v) << "\" y2=\"" << p.Y(v)
      << "\" stroke=\"#e5e5e5\"/>\n";
    s << "<text x=\"" << kLeft - 8 << "\" y=\"" << p.Y(v) + 4 << "\" text-anchor=\"end\">" << Fixed(v, 1)
      << "</text>\n";
  }
  std::vector<double> ticks = {p.min_c};
  for (double c = 1; c <= p.max_c * 1.0001; c *= 10) {
    if (c > p.min_c * 1.0001) ticks.push_back(c);
  }
  for (double c : ticks) {
    s << "<line x1=\"" << p.X(c) << "\" x2=\"" << p.X(c) << "\" y1=\"" << kTop << "\" y2=\"" << kTop + kPlotHeight
      << "\" stroke=\"#e5e5e5\"/>\n";
    s << "<text x=\"" << p.X(c) << "\" y=\"" << kTop + kPlotHeight + 16 << "\" text-anchor=\"middle\">" << Grouped(c)
      << "</text>\n";
    if (settings.bytes_per_token) {
      const double b = c * static_cast<double>(settings.page_tokens) * *settings.bytes_per_token;
      s << "<text x=\"" << p.X(c) << "\" y=\"" << kTop - 6 << "\" text-anchor=\"middle\" fill=\"#555\">"
        << HumanBytes(b) << "</text>\n";
    }
  }
  s << "<rect class=\"plot-area\" data-x-min=\"" << Grouped(p.min_c) << "\" data-x-max=\"" << Grouped(p.max_c)
    << "\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kPlotWidth << "\" height=\"" << kPlotHeight
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  s << "<text x=\"" << kLeft + kPlotWidth / 2 << "\" y=\"" << kHeight - 24
    << "\" text-anchor=\"middle\">capacity (pages, log scale";
  if (p.min_c > 1) {
    s << "; from " << Grouped(p.min_c) << ": below, the curves gain less than " << Fixed(100 * kRiseShare, 0)
      << "% of their range";
  }
  s << ")</text>\n";
  if (settings.bytes_per_token) {
    s << "<text x=\"" << kLeft + kPlotWidth << "\" y=\"" << kTop - 22
      << "\" text-anchor=\"end\" fill=\"#555\">capacity per GPU rank (bytes)</text>\n";
  }
}

// One curve as steps between the log-spaced samples, from the axis' start (at
// the value of the last sample at or below it); its vertices are kept.
template <typename Value>
void WriteStepCurve(ReplayPlot& p, Value value, const char* color, const char* cls) {
  const std::vector<curve::CurvePoint>& plot = p.t.plot;
  std::vector<Point> v;
  if (!plot.empty()) {
    double last_y = p.Y(value(plot.front()));
    for (const auto& point : plot) {
      if (static_cast<double>(point.capacity_pages) > p.min_c) break;
      last_y = p.Y(value(point));
    }
    v.push_back({p.X(p.min_c), last_y});
    for (const auto& point : plot) {
      const double c = static_cast<double>(point.capacity_pages);
      if (c <= p.min_c) continue;
      const double x = p.X(c), y = p.Y(value(point));
      v.push_back({x, last_y});
      v.push_back({x, y});
      last_y = y;
    }
  }
  p.s << "<path class=\"" << cls << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" d=\"";
  for (std::size_t i = 0; i < v.size(); ++i) p.s << (i == 0 ? "M" : " L") << v[i].x << ',' << v[i].y;
  p.s << "\"/>\n";
  p.lines.push_back(std::move(v));
}

// Page hit ratio and request coverage, and the unlimited page hit ratio dashed.
void WriteCurves(ReplayPlot& p) {
  WriteStepCurve(
      p, [](const curve::CurvePoint& point) { return point.page_hit_ratio; }, "#1f77b4", "page-hit-ratio");
  WriteStepCurve(
      p, [](const curve::CurvePoint& point) { return point.request_coverage; }, "#ff7f0e", "request-coverage");
  const double y = p.Y(p.t.unlimited_page_hit_ratio);
  p.s << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotWidth << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#1f77b4\" stroke-dasharray=\"4 4\"/>\n";
}

// With --policy: one line per policy through its page hit ratio at the simulated
// capacities from the axis' start (belady dashed: the offline reference), with a
// dot at each; gives the legend's entries.
std::vector<LegendEntry> WritePolicyLines(ReplayPlot& p) {
  static const char* kPolicyColors[] = {"#17becf", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
                                        "#7f7f7f", "#2ca02c", "#d62728", "#000000"};
  std::vector<LegendEntry> legend;
  if (!p.r.policies || p.r.policies->capacities.empty()) return legend;
  std::ostringstream& s = p.s;
  const PolicyReplayResult& pr = *p.r.policies;
  const std::size_t nc = pr.capacities.size();
  for (std::size_t k = 0; k < pr.policies.size(); ++k) {
    const char* color = kPolicyColors[k % std::size(kPolicyColors)];
    const bool belady = pr.policies[k] == "belady";
    s << "<polyline class=\"policy policy-" << pr.policies[k] << "\" fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"1.5\"" << (belady ? " stroke-dasharray=\"5 3\"" : "") << " points=\"";
    std::vector<Point> v;
    for (std::size_t c = 0; c < nc; ++c) {
      const curve::PolicyRunResult& run = pr.runs[k * nc + c];
      if (static_cast<double>(run.capacity) < p.min_c) continue;
      v.push_back({p.X(static_cast<double>(run.capacity)), p.Y(run.total.PageHitRatio())});
      s << (v.size() == 1 ? "" : " ") << v.back().x << ',' << v.back().y;
    }
    s << "\"/>\n";
    for (const Point& point : v) {
      s << "<circle cx=\"" << point.x << "\" cy=\"" << point.y << "\" r=\"2.5\" fill=\"" << color << "\"/>\n";
    }
    p.lines.push_back(std::move(v));
    legend.push_back({pr.policies[k], color});
  }
  return legend;
}

// The legend's box: the corner where it hides the least of the lines (bottom
// left when that is none).
LabelBox LegendCorner(const ReplayPlot& p, std::size_t policy_rows) {
  const double width = 250, height = 44 + 16 * static_cast<double>(policy_rows);
  const double right = kLeft + kPlotWidth - 6 - width, bottom = kTop + kPlotHeight - 6 - height;
  LabelBox legend;
  std::size_t least = SIZE_MAX;
  for (const LabelBox& corner :
       {LabelBox{kLeft + 6, bottom, width, height}, LabelBox{kLeft + 6, kTop + 6, width, height},
        LabelBox{right, bottom, width, height}, LabelBox{right, kTop + 6, width, height}}) {
    const std::size_t hidden = HiddenSegments(corner, p.lines);
    if (hidden < least) {
      least = hidden;
      legend = corner;
    }
  }
  return legend;
}

void WriteLegend(ReplayPlot& p, const std::vector<LegendEntry>& policies) {
  std::ostringstream& s = p.s;
  const LabelBox legend = LegendCorner(p, policies.size());
  const double lx = legend.x + 6, ly = legend.y + 14;
  p.taken.push_back(legend);
  s << "<rect class=\"legend\"" << BoxAttribute(legend) << " x=\"" << legend.x << "\" y=\"" << legend.y << "\" width=\""
    << legend.width << "\" height=\"" << legend.height << "\" fill=\"white\" stroke=\"#ccc\"/>\n";
  for (std::size_t k = 0; k < policies.size(); ++k) {
    const double y = ly + 32 + 16 * static_cast<double>(k);
    s << "<line x1=\"" << lx << "\" x2=\"" << lx + 24 << "\" y1=\"" << y - 4 << "\" y2=\"" << y - 4 << "\" stroke=\""
      << policies[k].color << "\" stroke-width=\"2\"/><text x=\"" << lx + 30 << "\" y=\"" << y << "\">policy "
      << policies[k].name << " (page hit ratio)</text>\n";
  }
  s << "<line x1=\"" << lx << "\" x2=\"" << lx + 24 << "\" y1=\"" << ly - 4 << "\" y2=\"" << ly - 4
    << "\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"" << lx + 30 << "\" y=\"" << ly
    << "\">page hit ratio</text>\n";
  s << "<line x1=\"" << lx << "\" x2=\"" << lx + 24 << "\" y1=\"" << ly + 14 << "\" y2=\"" << ly + 14
    << "\" stroke=\"#ff7f0e\" stroke-width=\"2\"/><text x=\"" << lx + 30 << "\" y=\"" << ly + 18
    << "\">request coverage (share " << FractionLabel(p.r.settings.coverage_share) << ")</text>\n";
}

// The page-hit working sets of `targets`, in their order.
std::vector<Marker> WorkingSetMarkers(const ReplayPlot& p, const std::vector<double>& targets) {
  std::vector<Marker> markers;
  for (double f : targets) {
    for (const auto& e : p.t.working_set) {
      if (e.target != "page_hit" || std::fabs(e.fraction - f) > 1e-12 || !e.capacity_pages) continue;
      const double c = static_cast<double>(*e.capacity_pages);
      markers.push_back({p.X(c), p.Y(f * p.t.unlimited_page_hit_ratio), FractionLabel(f) + ": " + Grouped(c)});
    }
  }
  return markers;
}

// A label at its first free spot near (px, py), with a leader line when it had
// to move away from its point.
void WriteLabel(ReplayPlot& p, double px, double py, const std::string& text, const char* cls, const char* color) {
  const LabelBox area{kLeft, kTop, kPlotWidth, kPlotHeight};
  const LabelBox b = PlaceLabel(px, py, LabelWidth(text), kLabelHeight, area, p.taken);
  p.taken.push_back(b);
  const double nx = std::clamp(px, b.x, b.x + b.width), ny = std::clamp(py, b.y, b.y + b.height);
  if (std::hypot(nx - px, ny - py) > 12) {
    p.s << "<line x1=\"" << px << "\" y1=\"" << py << "\" x2=\"" << nx << "\" y2=\"" << ny << "\" stroke=\"" << color
        << "\" stroke-width=\"0.75\"/>\n";
  }
  p.s << "<text class=\"label " << cls << "\"" << BoxAttribute(b) << " x=\"" << b.x << "\" y=\""
      << b.y + kLabelHeight - 3 << "\" fill=\"" << color << "\">" << text << "</text>\n";
}

// The markers' boxes first (so no label covers one), then the labels: the
// knee's, then the working sets' in the order of `targets`.
void WriteKneeAndWorkingSets(ReplayPlot& p, const std::vector<double>& targets) {
  const std::vector<Marker> markers = WorkingSetMarkers(p, targets);
  for (const Marker& m : markers) p.taken.push_back(LabelBox{m.x - 5, m.y - 5, 10, 10});
  if (p.t.knee) {
    const double pages = static_cast<double>(p.t.knee->capacity_pages);
    const double x = p.X(pages);
    p.s << "<line class=\"knee\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << kTop << "\" y2=\""
        << kTop + kPlotHeight << "\" stroke=\"#d62728\" stroke-dasharray=\"6 3\"/>\n";
    WriteLabel(p, x, kTop, "knee " + Grouped(pages) + " pages", "knee-label", "#d62728");
  }
  for (const Marker& m : markers) {
    p.s << "<circle class=\"target\" cx=\"" << m.x << "\" cy=\"" << m.y << "\" r=\"4\" fill=\"#2ca02c\"/>\n";
    WriteLabel(p, m.x, m.y, m.text, "target-label", "#2ca02c");
  }
}

}  // namespace

std::string RenderSvg(const ReplayResult& r, const std::vector<double>& targets) {
  const double max_c = std::max<double>(2, static_cast<double>(r.total.max_capacity));
  const double min_c = static_cast<double>(PlotStartCapacity(r, targets));
  ReplayPlot p(r, min_c, max_c);
  WriteTitle(p);
  WriteAxes(p);
  WriteCurves(p);
  const std::vector<LegendEntry> policies = WritePolicyLines(p);
  // The legend before the labels, which are placed around it.
  WriteLegend(p, policies);
  WriteKneeAndWorkingSets(p, targets);
  p.s << "</svg>\n";
  return p.s.str();
}

}  // namespace kvwatch::agent
