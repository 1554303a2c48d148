// RenderSimulateSvg (agent/cli/simulate_output.h): two panels side by side, the
// lowest tier attainment against load (with the SLA target as a dashed line) and
// output tokens per second against load, one coloured line per admission x policy
// with a legend below.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "agent/cli/simulate_output.h"

namespace kvwatch::agent {

namespace {

constexpr double kWidth = 1000, kHeight = 520, kPanelWidth = 400, kPanelHeight = 300;
constexpr double kTop = 60, kLeft[2] = {80, 570};
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                               "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a"};

double MinAttainment(const sim::SimSummary& s) {
  double m = 1;
  for (const sim::TierScore& t : s.tiers) m = std::min(m, t.attainment);
  return m;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// Text escaped for XML (names come from the command line).
std::string Xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderSimulateSvg(const SimulateResult& r) {
  double min_load = 0, max_load = 1, max_tokens = 1;
  bool first = true;
  for (const SimulateRun& run : r.runs) {
    if (first || run.load < min_load) min_load = run.load;
    if (first || run.load > max_load) max_load = run.load;
    first = false;
    if (std::isfinite(run.summary.output_tokens_per_s)) max_tokens = std::max(max_tokens, run.summary.output_tokens_per_s);
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
  auto x_of = [&](int panel, double load) { return kLeft[panel] + (load - min_load) / (max_load - min_load) * kPanelWidth; };
  auto y_of = [&](double v, double top) { return kTop + kPanelHeight - std::clamp(v / top, 0.0, 1.0) * kPanelHeight; };

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const char* titles[2] = {"lowest tier SLA attainment", "output tokens per second"};
  for (int p = 0; p < 2; ++p) {
    const double top = p == 0 ? 1.0 : max_tokens;
    out << "<text x=\"" << kLeft[p] + kPanelWidth / 2 << "\" y=\"" << kTop - 20 << "\" text-anchor=\"middle\" "
        << "font-size=\"14\">" << titles[p] << "</text>\n";
    out << "<rect x=\"" << kLeft[p] << "\" y=\"" << kTop << "\" width=\"" << kPanelWidth << "\" height=\""
        << kPanelHeight << "\" fill=\"none\" stroke=\"#444\"/>\n";
    for (int i = 0; i <= 4; ++i) {
      const double v = top * i / 4;
      const double y = y_of(v, top);
      out << "<line x1=\"" << kLeft[p] << "\" y1=\"" << y << "\" x2=\"" << kLeft[p] + kPanelWidth << "\" y2=\"" << y
          << "\" stroke=\"#ddd\"/>\n";
      out << "<text x=\"" << kLeft[p] - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
          << (p == 0 ? Num(v) : Num(std::round(v))) << "</text>\n";
    }
    for (double load : ticks) {
      out << "<text x=\"" << x_of(p, load) << "\" y=\"" << kTop + kPanelHeight + 16
          << "\" text-anchor=\"middle\">" << Num(load) << "</text>\n";
    }
    out << "<text x=\"" << kLeft[p] + kPanelWidth / 2 << "\" y=\"" << kTop + kPanelHeight + 34
        << "\" text-anchor=\"middle\">load factor (arrival rate x)</text>\n";
    if (p == 0) {
      const double y = y_of(r.settings.sla_target, 1.0);
      out << "<line x1=\"" << kLeft[0] << "\" y1=\"" << y << "\" x2=\"" << kLeft[0] + kPanelWidth << "\" y2=\"" << y
          << "\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\n";
      out << "<text x=\"" << kLeft[0] + kPanelWidth - 4 << "\" y=\"" << y - 4 << "\" text-anchor=\"end\">target "
          << Num(r.settings.sla_target) << "</text>\n";
    }
  }
  // One polyline per combination and panel, in load order.
  std::size_t color = 0;
  double legend_y = kTop + kPanelHeight + 60;
  double legend_x = kLeft[0];
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
    out << "<text x=\"" << legend_x + 26 << "\" y=\"" << legend_y << "\">" << Xml(c.admission + " / " + c.policy)
        << "</text>\n";
    legend_x += 220;
    if (legend_x > kWidth - 200) {
      legend_x = kLeft[0];
      legend_y += 18;
    }
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace kvwatch::agent
