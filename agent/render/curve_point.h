// One point of a capacity curve, listed once for every format that writes it: the
// agent's GET /api/v1/curve and `kvwatch replay --format json` (the contract of
// docs/semantics.md section 7: fields may be added, none renamed), the replay
// CSV's columns, and the `--policy` rows of both (a policy's totals at one
// capacity, PolicyCurvePoint). CurvePointFields is the one list: names, values
// and the CSV's column order; the writers below only choose from it.
//
// Pure functions: no I/O, no state.
#ifndef KVWATCH_AGENT_RENDER_CURVE_POINT_H_
#define KVWATCH_AGENT_RENDER_CURVE_POINT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

#include "base/json_writer.h"
#include "curve/policy_replay.h"
#include "curve/report.h"

namespace kvwatch::agent {

struct CurvePointField {
  enum class Role {
    kCapacity,  // capacity_pages: an unsigned count, first in every format
    kHits,      // page_hits ... reused_tokens: in every point
    kOptional,  // bytes, FLOPs, seconds: with a model (and a prefill rate) only
  };
  std::string_view name;
  Role role = Role::kHits;
  std::uint64_t count = 0;      // kCapacity
  std::optional<double> value;  // the others; nullopt: absent
};

// The fields in the CSV's column order: capacity_pages, capacity_bytes,
// page_hits, page_hit_ratio, request_coverage, reused_tokens,
// avoided_prefill_flops, avoided_prefill_seconds.
std::array<CurvePointField, 8> CurvePointFields(const curve::CurvePoint& p);

// A policy's totals at one capacity as a curve point (no bytes, FLOPs or
// seconds: the --policy rows never had them); reused tokens are its page hits
// times page_tokens.
curve::CurvePoint PolicyCurvePoint(std::uint64_t capacity_pages, const curve::PolicyTotals& t,
                                   std::uint64_t page_tokens);

// The point as a JSON object: capacity_pages and the hit fields, then the
// optional fields present (the order the contract grew in).
void WriteCurvePoint(base::JsonWriter& w, const curve::CurvePoint& p);
// The hit fields alone, into the object being written (the --policy results,
// whose objects carry requests and page references between capacity and hits).
void WriteCurvePointHits(base::JsonWriter& w, const curve::CurvePoint& p);

// The CSV columns' names, comma-separated, and one point's fields in them (an
// absent field empty), with the stream's precision; no newline.
std::string_view CurvePointCsvHeader();
void WriteCurvePointCsv(std::ostream& out, const curve::CurvePoint& p);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RENDER_CURVE_POINT_H_
