// The `kvwatch replay --svg` plot: page hit ratio and request coverage against
// capacity on a log axis, bytes on a second axis when known, the knee, the
// working sets and, with --policy, one line per policy.
//
// Two layout rules, each with its helper here so tests can hold them:
// - the x axis starts near the first capacity where a curve rises
//   (PlotStartCapacity), not at 1 page, so a trace whose curve is flat for its
//   first decades does not spend half the plot on them;
// - labels never overlap (PlaceLabel): each takes the first free spot around its
//   point, clear of the labels placed before it and of the legend. Their boxes
//   are written into the SVG (`data-box="x y width height"` on every element of
//   class `label`) so a test can check them.
#ifndef KVWATCH_AGENT_RENDER_REPLAY_SVG_H_
#define KVWATCH_AGENT_RENDER_REPLAY_SVG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/render/replay_result.h"

namespace kvwatch::agent {

// A label's box in SVG coordinates (y grows downwards).
struct LabelBox {
  double x = 0, y = 0, width = 0, height = 0;
  bool Intersects(const LabelBox& o) const {
    return x < o.x + o.width && o.x < x + width && y < o.y + o.height && o.y < y + height;
  }
};

// Width of `text` in the plot's 12 px sans-serif, rounded up (7 px a character;
// digits are about 6.7).
double LabelWidth(std::string_view text);

// The box for a label of width x height near the point (px, py), inside `area`
// and clear of every box in `taken`: right of the point and below it, right and
// above, left and below, left and above, then the same moved away from the point
// a line at a time. When nothing inside the area is free, below every taken box
// (outside the area perhaps, but never on another label).
LabelBox PlaceLabel(double px, double py, double width, double height, const LabelBox& area,
                    const std::vector<LabelBox>& taken);

// The capacity the x axis starts at: the 1-2-5 value at or below half the first
// capacity where a curve (page hit ratio, request coverage, any policy) has risen
// by 1% of its range, lowered to show the knee and the marked working sets, and
// at least a decade below the curve's end. 1 when the curves rise at once.
std::uint64_t PlotStartCapacity(const ReplayResult& r, const std::vector<double>& targets);

// The plot; `targets` are the page-hit working-set fractions to mark.
std::string RenderSvg(const ReplayResult& r, const std::vector<double>& targets);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RENDER_REPLAY_SVG_H_
