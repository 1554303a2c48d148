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

}  // namespace

std::string RenderSimulateSvg(const SimulateResult& r) {
  double min_load = 0, max_load = 1, max_tokens = 1;
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
  std::vector<double> ticks;
  for (const SimulateRun& run : r.runs) ticks.push_back(run.load);
  std::sort(ticks.begin(), ticks.end());
  ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
  if (ticks.size() > 8 || ticks.size() < 2) {
    ticks.clear();
    for (int i = 0; i <= 4; ++i) ticks.push_back(min_load + (max_load - min_load) * i / 4);
  }
  auto x_of = [&](int panel, double load) {
    return kSvgLeft[panel] + (load - min_load) / (max_load - min_load) * kPanelWidth;
  };
  auto y_of = [&](double v, double top) {
    return kSvgTop + kPanelHeight - std::clamp(v / top, 0.0, 1.0) * kPanelHeight;
  };

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kSvgWidth << "\" height=\"" << kSvgHeight
      << "\" viewBox=\"0 0 " << kSvgWidth << " " << kSvgHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const char* titles[2] = {"lowest tier SLA attainment", "output tokens per second"};
  for (int p = 0; p < 2; ++p) {
    const double top = p == 0 ? 1.0 : max_tokens;
    out << "<text x=\"" << kSvgLeft[p] + kPanelWidth / 2 << "\" y=\"" << kSvgTop - 20 << "\" text-anchor=\"middle\" "
        << "font-size=\"14\">" << titles[p] << "</text>\n";
    out << "<rect x=\"" << kSvgLeft[p] << "\" y=\"" << kSvgTop << "\" width=\"" << kPanelWidth << "\" height=\""
        << kPanelHeight << "\" fill=\"none\" stroke=\"#444\"/>\n";
    for (int i = 0; i <= 4; ++i) {
      const double v = top * i / 4;
      const double y = y_of(v, top);
      out << "<line x1=\"" << kSvgLeft[p] << "\" y1=\"" << y << "\" x2=\"" << kSvgLeft[p] + kPanelWidth << "\" y2=\""
          << y << "\" stroke=\"#ddd\"/>\n";
      out << "<text x=\"" << kSvgLeft[p] - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
          << (p == 0 ? Significant4(v) : Significant4(std::round(v))) << "</text>\n";
    }
    for (double load : ticks) {
      out << "<text x=\"" << x_of(p, load) << "\" y=\"" << kSvgTop + kPanelHeight + 16 << "\" text-anchor=\"middle\">"
          << Significant4(load) << "</text>\n";
    }
    out << "<text x=\"" << kSvgLeft[p] + kPanelWidth / 2 << "\" y=\"" << kSvgTop + kPanelHeight + 34
        << "\" text-anchor=\"middle\">load factor (arrival rate x)</text>\n";
    if (p == 0) {
      const double y = y_of(r.settings.sla_target, 1.0);
      out << "<line x1=\"" << kSvgLeft[0] << "\" y1=\"" << y << "\" x2=\"" << kSvgLeft[0] + kPanelWidth << "\" y2=\""
          << y << "\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\n";
      out << "<text x=\"" << kSvgLeft[0] + kPanelWidth - 4 << "\" y=\"" << y - 4 << "\" text-anchor=\"end\">target "
          << Significant4(r.settings.sla_target) << "</text>\n";
    }
  }
  // One polyline per combination and panel, in load order.
  std::size_t color = 0;
  double legend_y = kSvgTop + kPanelHeight + 60;
  double legend_x = kSvgLeft[0];
  for (const SimulateCombination& c : r.combinations) {
    std::vector<const SimulateRun*> runs;
    for (const SimulateRun& run : r.runs) {
      if (run.admission == c.admission && run.policy == c.policy) runs.push_back(&run);
    }
    std::sort(runs.begin(), runs.end(), [](const SimulateRun* a, const SimulateRun* b) { return a->load < b->load; });
    const char* stroke = kColors[color++ % (sizeof(kColors) / sizeof(kColors[0]))];
    for (int p = 0; p < 2; ++p) {
      const double top = p == 0 ? 1.0 : max_tokens;
      out << "<polyline fill=\"none\" stroke=\"" << stroke << "\" stroke-width=\"2\" points=\"";
      for (const SimulateRun* run : runs) {
        const double v = p == 0 ? MinAttainment(run->summary) : run->summary.output_tokens_per_s;
        out << x_of(p, run->load) << "," << y_of(std::isfinite(v) ? v : 0, top) << " ";
      }
      out << "\"/>\n";
      for (const SimulateRun* run : runs) {
        const double v = p == 0 ? MinAttainment(run->summary) : run->summary.output_tokens_per_s;
        out << "<circle cx=\"" << x_of(p, run->load) << "\" cy=\"" << y_of(std::isfinite(v) ? v : 0, top)
            << "\" r=\"3\" fill=\"" << stroke << "\"/>\n";
      }
    }
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

}  // namespace

std::string RenderTimelineSvg(const SimulateResult& r) {
  double span = 0;
  for (const SimulateTimeline& t : r.timelines) {
    if (!t.steps.empty()) span = std::max(span, t.steps.back().start_s + t.steps.back().seconds);
  }
  if (!(span > 0)) span = 1;
  const double bin_s = BinSeconds(span);
  const std::size_t bins = static_cast<std::size_t>(std::ceil(span / bin_s));
  const double pool = static_cast<double>(std::max<std::uint64_t>(r.settings.pool_blocks, 1));
  // Time ticks: a 1-2-5 step giving at most 8 of them.
  double tick_s = 1e-3;
  for (int k = 0; tick_s * 8 < bins * bin_s; ++k) tick_s *= (k % 3 == 1) ? 2.5 : 2;
  auto x_of = [&](double t) { return kPlotLeft + std::clamp(t / (bins * bin_s), 0.0, 1.0) * kSvgPlotWidth; };

  // Per run: its bins; and the shared tops of the rate and preemption strips.
  std::vector<std::vector<Bin>> binned(r.timelines.size(), std::vector<Bin>(bins));
  double max_rate = 0, max_preempted = 0;
  for (std::size_t i = 0; i < r.timelines.size(); ++i) {
    for (const TimelineStep& s : r.timelines[i].steps) {
      Bin& b = binned[i][std::min(bins - 1, static_cast<std::size_t>(s.start_s / bin_s))];
      b.weighted_held += static_cast<double>(s.held_blocks) * s.seconds;
      b.weighted_cached += static_cast<double>(s.cached_blocks) * s.seconds;
      b.seconds += s.seconds;
      b.finished += s.finished;
      b.preempted += s.preempted;
    }
    for (const Bin& b : binned[i]) {
      max_rate = std::max(max_rate, static_cast<double>(b.finished) / bin_s);
      max_preempted = std::max(max_preempted, static_cast<double>(b.preempted));
    }
  }
  max_rate = std::max(max_rate * 1.1, 1e-9);
  max_preempted = std::max(max_preempted, 1.0);

  const double height = 40 + kRowHeight * static_cast<double>(std::max<std::size_t>(r.timelines.size(), 1)) + 40;
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kTimelineWidth << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << kTimelineWidth << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << kPlotLeft << "\" y=\"24\" font-size=\"13\">KV blocks of " << Grouped(pool)
      << " held by running requests (blue) and cached (grey); requests finished per second (green); preemptions "
         "(red); per "
      << Significant4(bin_s) << " s</text>\n";
  for (std::size_t i = 0; i < r.timelines.size(); ++i) {
    const SimulateTimeline& t = r.timelines[i];
    const SimulateRun* run = nullptr;
    for (const SimulateRun& candidate : r.runs) {
      if (candidate.admission == t.admission && candidate.policy == t.policy && candidate.load == t.load)
        run = &candidate;
    }
    std::uint64_t finished = 0, preempted = 0, bursts = 0, last_preempting = 0;
    for (std::size_t k = 0; k < t.steps.size(); ++k) {
      const TimelineStep& s = t.steps[k];
      finished += s.finished;
      preempted += s.preempted;
      if (s.preempted > 0) {
        if (bursts == 0 || k - last_preempting >= kBurstGapSteps) ++bursts;
        last_preempting = k;
      }
    }
    const double top = 40 + kRowHeight * static_cast<double>(i);
    const double kv_top = top + kTitleHeight, rate_top = kv_top + kKvHeight + kStripGap,
                 preempt_top = rate_top + kRateHeight + kStripGap;
    out << "<g data-admission=\"" << EscapeMarkup(t.admission) << "\" data-policy=\"" << EscapeMarkup(t.policy)
        << "\" data-load=\"" << Significant4(t.load) << "\" data-steps=\"" << t.steps.size() << "\" data-finished=\""
        << finished << "\" data-preemptions=\"" << preempted << "\" data-bursts=\"" << bursts << "\">\n";
    std::string title = t.admission + " / " + t.policy + " at load " + Significant4(t.load);
    if (run != nullptr) {
      title +=
          ": " + Fixed(run->summary.requests_per_s, 3) + " requests/s, " +
          Grouped(static_cast<double>(run->summary.preemptions)) + " preemptions" +
          (bursts == 0 ? std::string(", ")
                       : " in " + Grouped(static_cast<double>(bursts)) + (bursts == 1 ? " burst, " : " bursts, ")) +
          Grouped(static_cast<double>(run->summary.recomputed_tokens)) + " tokens recomputed";
    }
    out << "<text x=\"" << kPlotLeft << "\" y=\"" << top + 14 << "\" font-size=\"13\" font-weight=\"bold\">"
        << EscapeMarkup(title) << "</text>\n";
    // The three strips' frames and left labels.
    const double strip_top[3] = {kv_top, rate_top, preempt_top};
    const double strip_height[3] = {kKvHeight, kRateHeight, kPreemptHeight};
    const std::string strip_label[3] = {"blocks", "finished/s", "preempted"};
    const double strip_max[3] = {pool, max_rate, max_preempted};
    for (int k = 0; k < 3; ++k) {
      out << "<rect x=\"" << kPlotLeft << "\" y=\"" << strip_top[k] << "\" width=\"" << kSvgPlotWidth << "\" height=\""
          << strip_height[k] << "\" fill=\"none\" stroke=\"#444\"/>\n";
      out << "<text x=\"" << kPlotLeft - 6 << "\" y=\"" << strip_top[k] + 10 << "\" text-anchor=\"end\">"
          << (k == 1 ? Significant4(strip_max[k]) : Grouped(strip_max[k])) << "</text>\n";
      out << "<text x=\"" << kPlotLeft - 6 << "\" y=\"" << strip_top[k] + strip_height[k] / 2 + 4
          << "\" text-anchor=\"end\" fill=\"#666\">" << strip_label[k] << "</text>\n";
    }
    auto y_in = [&](int k, double v) {
      return strip_top[k] + strip_height[k] - std::clamp(v / strip_max[k], 0.0, 1.0) * strip_height[k];
    };
    // KV: held and cached, time-weighted means per bin (bins without a step: none).
    const char* kv_class[2] = {"held", "cached"};
    const char* kv_color[2] = {"#1f77b4", "#999"};
    for (int series = 0; series < 2; ++series) {
      out << "<polyline class=\"" << kv_class[series] << "\" fill=\"none\" stroke=\"" << kv_color[series]
          << "\" stroke-width=\"1.5\" points=\"";
      for (std::size_t b = 0; b < bins; ++b) {
        const Bin& bin = binned[i][b];
        if (!(bin.seconds > 0)) continue;
        const double v = (series == 0 ? bin.weighted_held : bin.weighted_cached) / bin.seconds;
        out << x_of((static_cast<double>(b) + 0.5) * bin_s) << "," << y_in(0, v) << " ";
      }
      out << "\"/>\n";
    }
    // Finished per second, every bin up to the run's end.
    out << "<polyline class=\"throughput\" fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"1.5\" points=\"";
    const double end = t.steps.empty() ? 0 : t.steps.back().start_s + t.steps.back().seconds;
    for (std::size_t b = 0; b < bins && static_cast<double>(b) * bin_s < end; ++b) {
      out << x_of((static_cast<double>(b) + 0.5) * bin_s) << ","
          << y_in(1, static_cast<double>(binned[i][b].finished) / bin_s) << " ";
    }
    out << "\"/>\n";
    // Preemptions: one bar per bin that has any.
    const double bar = std::max(1.0, kSvgPlotWidth / static_cast<double>(bins) - 0.5);
    for (std::size_t b = 0; b < bins; ++b) {
      const std::uint64_t n = binned[i][b].preempted;
      if (n == 0) continue;
      const double y = y_in(2, static_cast<double>(n));
      out << "<rect class=\"preemptions\" data-count=\"" << n << "\" x=\"" << x_of(static_cast<double>(b) * bin_s)
          << "\" y=\"" << y << "\" width=\"" << bar << "\" height=\"" << preempt_top + kPreemptHeight - y
          << "\" fill=\"#d62728\"/>\n";
    }
    // The time axis under the last strip.
    for (double tick = 0; tick <= bins * bin_s + 1e-9; tick += tick_s) {
      out << "<text x=\"" << x_of(tick) << "\" y=\"" << preempt_top + kPreemptHeight + 14
          << "\" text-anchor=\"middle\">" << Significant4(tick) << (tick + tick_s > bins * bin_s ? " s" : "")
          << "</text>\n";
    }
    out << "</g>\n";
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace kvwatch::agent
