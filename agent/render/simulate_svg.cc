// RenderSimulateSvg (agent/render/simulate_output.h): two panels side by side, the
// lowest tier attainment against load (with the SLA target as a dashed line) and
// output tokens per second against load, one coloured line per admission x policy
// with a legend below. RenderTimelineSvg: one row per run over simulated time
// (KV blocks held and cached, requests finished per second, preemptions), the
// steps summed into time bins.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "agent/render/simulate_output.h"
#include "agent/render/text_format.h"

namespace kvwatch::agent {

namespace {

// Named apart from replay_svg.cc's kWidth, kTop, ...: the two files compile in one unity batch.
constexpr double kSvgWidth = 1000, kSvgHeight = 520, kPanelWidth = 400, kPanelHeight = 300;
constexpr double kSvgTop = 60, kSvgLeft[2] = {80, 570};
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                               "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a"};

double MinAttainment(const sim::SimSummary& s) {
  double m = 1;
  for (const sim::TierScore& t : s.tiers) m = std::min(m, t.attainment);
  return m;
}

// The two panels' axes: load across, the panel's top value up (1 for
// attainment, the highest output tokens per second plus a tenth).
struct LoadAxes {
  double min_load = 0, max_load = 1, max_tokens = 1;
  std::vector<double> ticks;

  explicit LoadAxes(const SimulateResult& r) {
    bool first = true;
    for (const SimulateRun& run : r.runs) {
      if (first || run.load < min_load) min_load = run.load;
      if (first || run.load > max_load) max_load = run.load;
      first = false;
      if (std::isfinite(run.summary.output_tokens_per_s))
        max_tokens = std::max(max_tokens, run.summary.output_tokens_per_s);
    }
    if (!(max_load > min_load)) {
      min_load = std::max(0.0, min_load - 0.5);
      max_load = min_load + 1;
    }
    max_tokens *= 1.1;
    // The x ticks: the sweep's loads when there are few, else five even steps.
    for (const SimulateRun& run : r.runs) ticks.push_back(run.load);
    std::sort(ticks.begin(), ticks.end());
    ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
    if (ticks.size() > 8 || ticks.size() < 2) {
      ticks.clear();
      for (int i = 0; i <= 4; ++i) ticks.push_back(min_load + (max_load - min_load) * i / 4);
    }
  }
  double Top(int panel) const { return panel == 0 ? 1.0 : max_tokens; }
  double X(int panel, double load) const {
    return kSvgLeft[panel] + (load - min_load) / (max_load - min_load) * kPanelWidth;
  }
  static double Y(double v, double top) {
    return kSvgTop + kPanelHeight - std::clamp(v / top, 0.0, 1.0) * kPanelHeight;
  }
};

// Panel p's title, frame, value grid, load ticks and (attainment) the SLA target.
void WriteLoadPanel(std::ostringstream& out, const LoadAxes& axes, int p, double sla_target) {
  const char* titles[2] = {"lowest tier SLA attainment", "output tokens per second"};
  const double top = axes.Top(p);
  out << "<text x=\"" << kSvgLeft[p] + kPanelWidth / 2 << "\" y=\"" << kSvgTop - 20 << "\" text-anchor=\"middle\" "
      << "font-size=\"14\">" << titles[p] << "</text>\n";
  out << "<rect x=\"" << kSvgLeft[p] << "\" y=\"" << kSvgTop << "\" width=\"" << kPanelWidth << "\" height=\""
      << kPanelHeight << "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double v = top * i / 4;
    const double y = LoadAxes::Y(v, top);
    out << "<line x1=\"" << kSvgLeft[p] << "\" y1=\"" << y << "\" x2=\"" << kSvgLeft[p] + kPanelWidth << "\" y2=\"" << y
        << "\" stroke=\"#ddd\"/>\n";
    out << "<text x=\"" << kSvgLeft[p] - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
        << (p == 0 ? Significant4(v) : Significant4(std::round(v))) << "</text>\n";
  }
  for (double load : axes.ticks) {
    out << "<text x=\"" << axes.X(p, load) << "\" y=\"" << kSvgTop + kPanelHeight + 16 << "\" text-anchor=\"middle\">"
        << Significant4(load) << "</text>\n";
  }
  out << "<text x=\"" << kSvgLeft[p] + kPanelWidth / 2 << "\" y=\"" << kSvgTop + kPanelHeight + 34
      << "\" text-anchor=\"middle\">load factor (arrival rate x)</text>\n";
  if (p == 0) {
    const double y = LoadAxes::Y(sla_target, 1.0);
    out << "<line x1=\"" << kSvgLeft[0] << "\" y1=\"" << y << "\" x2=\"" << kSvgLeft[0] + kPanelWidth << "\" y2=\"" << y
        << "\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\n";
    out << "<text x=\"" << kSvgLeft[0] + kPanelWidth - 4 << "\" y=\"" << y - 4 << "\" text-anchor=\"end\">target "
        << Significant4(sla_target) << "</text>\n";
  }
}

// A combination's runs in load order.
std::vector<const SimulateRun*> RunsOf(const SimulateResult& r, const SimulateCombination& c) {
  std::vector<const SimulateRun*> runs;
  for (const SimulateRun& run : r.runs) {
    if (run.admission == c.admission && run.policy == c.policy) runs.push_back(&run);
  }
  std::sort(runs.begin(), runs.end(), [](const SimulateRun* a, const SimulateRun* b) { return a->load < b->load; });
  return runs;
}

// One combination's polyline and dots in each panel.
void WriteCombinationLines(std::ostringstream& out, const LoadAxes& axes, const std::vector<const SimulateRun*>& runs,
                           const char* stroke) {
  for (int p = 0; p < 2; ++p) {
    const double top = axes.Top(p);
    out << "<polyline fill=\"none\" stroke=\"" << stroke << "\" stroke-width=\"2\" points=\"";
    for (const SimulateRun* run : runs) {
      const double v = p == 0 ? MinAttainment(run->summary) : run->summary.output_tokens_per_s;
      out << axes.X(p, run->load) << "," << LoadAxes::Y(std::isfinite(v) ? v : 0, top) << " ";
    }
    out << "\"/>\n";
    for (const SimulateRun* run : runs) {
      const double v = p == 0 ? MinAttainment(run->summary) : run->summary.output_tokens_per_s;
      out << "<circle cx=\"" << axes.X(p, run->load) << "\" cy=\"" << LoadAxes::Y(std::isfinite(v) ? v : 0, top)
          << "\" r=\"3\" fill=\"" << stroke << "\"/>\n";
    }
  }
}

}  // namespace

std::string RenderSimulateSvg(const SimulateResult& r) {
  const LoadAxes axes(r);
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kSvgWidth << "\" height=\"" << kSvgHeight
      << "\" viewBox=\"0 0 " << kSvgWidth << " " << kSvgHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (int p = 0; p < 2; ++p) WriteLoadPanel(out, axes, p, r.settings.sla_target);
  // One polyline per combination and panel, in load order, and its legend entry
  // below the panels.
  std::size_t color = 0;
  double legend_y = kSvgTop + kPanelHeight + 60;
  double legend_x = kSvgLeft[0];
  for (const SimulateCombination& c : r.combinations) {
    const char* stroke = kColors[color++ % (sizeof(kColors) / sizeof(kColors[0]))];
    WriteCombinationLines(out, axes, RunsOf(r, c), stroke);
    out << "<line x1=\"" << legend_x << "\" y1=\"" << legend_y - 4 << "\" x2=\"" << legend_x + 20 << "\" y2=\""
        << legend_y - 4 << "\" stroke=\"" << stroke << "\" stroke-width=\"2\"/>\n";
    out << "<text x=\"" << legend_x + 26 << "\" y=\"" << legend_y << "\">"
        << EscapeMarkup(c.admission + " / " + c.policy) << "</text>\n";
    legend_x += 220;
    if (legend_x > kSvgWidth - 200) {
      legend_x = kSvgLeft[0];
      legend_y += 18;
    }
  }
  out << "</svg>\n";
  return out.str();
}

namespace {

// The timeline's layout: rows of three strips sharing the time axis.
constexpr double kTimelineWidth = 1000, kPlotLeft = 90, kSvgPlotWidth = 800;
constexpr double kTitleHeight = 22, kKvHeight = 90, kRateHeight = 55, kPreemptHeight = 40, kStripGap = 8;
constexpr double kRowHeight = kTitleHeight + kKvHeight + kRateHeight + kPreemptHeight + 2 * kStripGap + 30;

// A bin width from 1-2-5 steps (and minutes) giving at most 300 bins over span_s.
double BinSeconds(double span_s) {
  const double widths[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600};
  for (double w : widths) {
    if (span_s / w <= 300) return w;
  }
  return std::ceil(span_s / 300 / 3600) * 3600;
}

// A burst of preemptions: preempting steps, each within this many steps of the last.
constexpr std::size_t kBurstGapSteps = 50;

struct Bin {
  double weighted_held = 0, weighted_cached = 0, seconds = 0;  // held and cached x step seconds
  std::uint64_t finished = 0, preempted = 0;
};

// The shared time axis: the bins and the ticks over the longest run.
struct TimelineAxis {
  double bin_s = 1;
  std::size_t bins = 1;
  double tick_s = 1e-3;

  explicit TimelineAxis(const SimulateResult& r) {
    double span = 0;
    for (const SimulateTimeline& t : r.timelines) {
      if (!t.steps.empty()) span = std::max(span, t.steps.back().start_s + t.steps.back().seconds);
    }
    if (!(span > 0)) span = 1;
    bin_s = BinSeconds(span);
    bins = static_cast<std::size_t>(std::ceil(span / bin_s));
    // Time ticks: a 1-2-5 step giving at most 8 of them.
    for (int k = 0; tick_s * 8 < bins * bin_s; ++k) tick_s *= (k % 3 == 1) ? 2.5 : 2;
  }
  double X(double t) const { return kPlotLeft + std::clamp(t / (bins * bin_s), 0.0, 1.0) * kSvgPlotWidth; }
  double BinMiddle(std::size_t b) const { return (static_cast<double>(b) + 0.5) * bin_s; }
};

// Every run's steps summed into the axis' bins, and the shared tops of the rate
// and preemption strips.
struct TimelineBins {
  std::vector<std::vector<Bin>> runs;
  double max_rate = 0, max_preempted = 0;
};

TimelineBins BinTimelines(const SimulateResult& r, const TimelineAxis& axis) {
  TimelineBins out;
  out.runs.assign(r.timelines.size(), std::vector<Bin>(axis.bins));
  for (std::size_t i = 0; i < r.timelines.size(); ++i) {
    for (const TimelineStep& s : r.timelines[i].steps) {
      Bin& b = out.runs[i][std::min(axis.bins - 1, static_cast<std::size_t>(s.start_s / axis.bin_s))];
      b.weighted_held += static_cast<double>(s.held_blocks) * s.seconds;
      b.weighted_cached += static_cast<double>(s.cached_blocks) * s.seconds;
      b.seconds += s.seconds;
      b.finished += s.finished;
      b.preempted += s.preempted;
    }
    for (const Bin& b : out.runs[i]) {
      out.max_rate = std::max(out.max_rate, static_cast<double>(b.finished) / axis.bin_s);
      out.max_preempted = std::max(out.max_preempted, static_cast<double>(b.preempted));
    }
  }
  out.max_rate = std::max(out.max_rate * 1.1, 1e-9);
  out.max_preempted = std::max(out.max_preempted, 1.0);
  return out;
}

// A run's totals over its steps, and its bursts of preemptions (kBurstGapSteps).
struct TimelineCounts {
  std::uint64_t finished = 0, preempted = 0, bursts = 0;
};

TimelineCounts CountTimeline(const SimulateTimeline& t) {
  TimelineCounts n;
  std::uint64_t last_preempting = 0;
  for (std::size_t k = 0; k < t.steps.size(); ++k) {
    const TimelineStep& s = t.steps[k];
    n.finished += s.finished;
    n.preempted += s.preempted;
    if (s.preempted > 0) {
      if (n.bursts == 0 || k - last_preempting >= kBurstGapSteps) ++n.bursts;
      last_preempting = k;
    }
  }
  return n;
}

// The run summary of the timeline's admission, policy and load (the last such), if any.
const SimulateRun* RunOfTimeline(const SimulateResult& r, const SimulateTimeline& t) {
  const SimulateRun* run = nullptr;
  for (const SimulateRun& candidate : r.runs) {
    if (candidate.admission == t.admission && candidate.policy == t.policy && candidate.load == t.load)
      run = &candidate;
  }
  return run;
}

std::string TimelineTitle(const SimulateTimeline& t, const SimulateRun* run, std::uint64_t bursts) {
  std::string title = t.admission + " / " + t.policy + " at load " + Significant4(t.load);
  if (run != nullptr) {
    title += ": " + Fixed(run->summary.requests_per_s, 3) + " requests/s, " +
             Grouped(static_cast<double>(run->summary.preemptions)) + " preemptions" +
             (bursts == 0 ? std::string(", ")
                          : " in " + Grouped(static_cast<double>(bursts)) + (bursts == 1 ? " burst, " : " bursts, ")) +
             Grouped(static_cast<double>(run->summary.recomputed_tokens)) + " tokens recomputed";
  }
  return title;
}

// A row's three strips (KV blocks, finished per second, preemptions): where
// each is and the value at its top.
struct TimelineStrips {
  double top[3], height[3], max[3];

  TimelineStrips(double row_top, double pool, const TimelineBins& bins)
      : top{row_top + kTitleHeight, row_top + kTitleHeight + kKvHeight + kStripGap,
            row_top + kTitleHeight + kKvHeight + kStripGap + kRateHeight + kStripGap},
        height{kKvHeight, kRateHeight, kPreemptHeight},
        max{pool, bins.max_rate, bins.max_preempted} {}
  double Y(int k, double v) const { return top[k] + height[k] - std::clamp(v / max[k], 0.0, 1.0) * height[k]; }
};

// The strips' frames and left labels.
void WriteStripFrames(std::ostringstream& out, const TimelineStrips& strips) {
  const std::string label[3] = {"blocks", "finished/s", "preempted"};
  for (int k = 0; k < 3; ++k) {
    out << "<rect x=\"" << kPlotLeft << "\" y=\"" << strips.top[k] << "\" width=\"" << kSvgPlotWidth << "\" height=\""
        << strips.height[k] << "\" fill=\"none\" stroke=\"#444\"/>\n";
    out << "<text x=\"" << kPlotLeft - 6 << "\" y=\"" << strips.top[k] + 10 << "\" text-anchor=\"end\">"
        << (k == 1 ? Significant4(strips.max[k]) : Grouped(strips.max[k])) << "</text>\n";
    out << "<text x=\"" << kPlotLeft - 6 << "\" y=\"" << strips.top[k] + strips.height[k] / 2 + 4
        << "\" text-anchor=\"end\" fill=\"#666\">" << label[k] << "</text>\n";
  }
}

// KV: held and cached, time-weighted means per bin (bins without a step: none).
void WriteKvLines(std::ostringstream& out, const TimelineAxis& axis, const TimelineStrips& strips,
                  const std::vector<Bin>& bins) {
  const char* kv_class[2] = {"held", "cached"};
  const char* kv_color[2] = {"#1f77b4", "#999"};
  for (int series = 0; series < 2; ++series) {
    out << "<polyline class=\"" << kv_class[series] << "\" fill=\"none\" stroke=\"" << kv_color[series]
        << "\" stroke-width=\"1.5\" points=\"";
    for (std::size_t b = 0; b < axis.bins; ++b) {
      const Bin& bin = bins[b];
      if (!(bin.seconds > 0)) continue;
      const double v = (series == 0 ? bin.weighted_held : bin.weighted_cached) / bin.seconds;
      out << axis.X(axis.BinMiddle(b)) << "," << strips.Y(0, v) << " ";
    }
    out << "\"/>\n";
  }
}

// Finished per second, every bin up to the run's end.
void WriteThroughputLine(std::ostringstream& out, const TimelineAxis& axis, const TimelineStrips& strips,
                         const std::vector<Bin>& bins, const SimulateTimeline& t) {
  out << "<polyline class=\"throughput\" fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"1.5\" points=\"";
  const double end = t.steps.empty() ? 0 : t.steps.back().start_s + t.steps.back().seconds;
  for (std::size_t b = 0; b < axis.bins && static_cast<double>(b) * axis.bin_s < end; ++b) {
    out << axis.X(axis.BinMiddle(b)) << "," << strips.Y(1, static_cast<double>(bins[b].finished) / axis.bin_s) << " ";
  }
  out << "\"/>\n";
}

// Preemptions: one bar per bin that has any.
void WritePreemptionBars(std::ostringstream& out, const TimelineAxis& axis, const TimelineStrips& strips,
                         const std::vector<Bin>& bins) {
  const double bar = std::max(1.0, kSvgPlotWidth / static_cast<double>(axis.bins) - 0.5);
  for (std::size_t b = 0; b < axis.bins; ++b) {
    const std::uint64_t n = bins[b].preempted;
    if (n == 0) continue;
    const double y = strips.Y(2, static_cast<double>(n));
    out << "<rect class=\"preemptions\" data-count=\"" << n << "\" x=\"" << axis.X(static_cast<double>(b) * axis.bin_s)
        << "\" y=\"" << y << "\" width=\"" << bar << "\" height=\"" << strips.top[2] + kPreemptHeight - y
        << "\" fill=\"#d62728\"/>\n";
  }
}

// The time axis under the last strip.
void WriteTimeAxis(std::ostringstream& out, const TimelineAxis& axis, const TimelineStrips& strips) {
  const double end = axis.bins * axis.bin_s;
  for (double tick = 0; tick <= end + 1e-9; tick += axis.tick_s) {
    out << "<text x=\"" << axis.X(tick) << "\" y=\"" << strips.top[2] + kPreemptHeight + 14
        << "\" text-anchor=\"middle\">" << Significant4(tick) << (tick + axis.tick_s > end ? " s" : "") << "</text>\n";
  }
}

// Run i's row: its counts as data attributes, its title and three strips.
void WriteTimelineRow(std::ostringstream& out, const SimulateResult& r, std::size_t i, const TimelineAxis& axis,
                      const TimelineBins& binned, double pool) {
  const SimulateTimeline& t = r.timelines[i];
  const TimelineCounts n = CountTimeline(t);
  const double top = 40 + kRowHeight * static_cast<double>(i);
  out << "<g data-admission=\"" << EscapeMarkup(t.admission) << "\" data-policy=\"" << EscapeMarkup(t.policy)
      << "\" data-load=\"" << Significant4(t.load) << "\" data-steps=\"" << t.steps.size() << "\" data-finished=\""
      << n.finished << "\" data-preemptions=\"" << n.preempted << "\" data-bursts=\"" << n.bursts << "\">\n";
  out << "<text x=\"" << kPlotLeft << "\" y=\"" << top + 14 << "\" font-size=\"13\" font-weight=\"bold\">"
      << EscapeMarkup(TimelineTitle(t, RunOfTimeline(r, t), n.bursts)) << "</text>\n";
  const TimelineStrips strips(top, pool, binned);
  WriteStripFrames(out, strips);
  WriteKvLines(out, axis, strips, binned.runs[i]);
  WriteThroughputLine(out, axis, strips, binned.runs[i], t);
  WritePreemptionBars(out, axis, strips, binned.runs[i]);
  WriteTimeAxis(out, axis, strips);
  out << "</g>\n";
}

}  // namespace

std::string RenderTimelineSvg(const SimulateResult& r) {
  const TimelineAxis axis(r);
  const TimelineBins binned = BinTimelines(r, axis);
  const double pool = static_cast<double>(std::max<std::uint64_t>(r.settings.pool_blocks, 1));
  const double height = 40 + kRowHeight * static_cast<double>(std::max<std::size_t>(r.timelines.size(), 1)) + 40;
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kTimelineWidth << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << kTimelineWidth << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << kPlotLeft << "\" y=\"24\" font-size=\"13\">KV blocks of " << Grouped(pool)
      << " held by running requests (blue) and cached (grey); requests finished per second (green); preemptions "
         "(red); per "
      << Significant4(axis.bin_s) << " s</text>\n";
  for (std::size_t i = 0; i < r.timelines.size(); ++i) WriteTimelineRow(out, r, i, axis, binned, pool);
  out << "</svg>\n";
  return out.str();
}

}  // namespace kvwatch::agent
