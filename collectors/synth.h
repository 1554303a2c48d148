// Synthetic workload generator behind `kvwatch synth` and the agent's synthetic
// source: a deterministic stream of requests (curve::Request plus a session label)
// shaped like multi-tenant chat traffic, with a known working set and knee.
//
// Model.
//   - `tenants` tenants; tenant k gets a share of arrivals proportional to
//     1 / (k+1)^tenant_zipf_exponent and a system prompt of a fixed length drawn
//     uniformly from [system_prompt_min_pages, system_prompt_max_pages]: a chain of
//     pages common to ALL its requests.
//   - Arrivals are Poisson at rate_per_s; each is a one-shot request with
//     probability one_shot_fraction, otherwise the next turn of one of
//     `active_sessions` open sessions (picked uniformly). A session belongs to one
//     tenant and lasts a geometric number of turns (mean mean_session_turns); when
//     it ends, or its prompt would pass max_session_pages, a new session with a
//     newly drawn tenant takes its place, so about active_sessions are always open.
//   - Turn 0's prompt = system prompt + first message pages. Turn k's prompt = turn
//     k-1's prompt + pages for turn k-1's answer + pages for the new message, so
//     every turn's pages extend the previous turn's (a prefix-extension).
//   - A one-shot request = system prompt + pages of its own.
//   - Page ids are structured, never hashed: (namespace << 20) | index, where the
//     namespace is 1 + tenant index for a system prompt and a fresh number (>= 2^16)
//     for each session or one-shot request, and index < 2^20 counts the pages after
//     the system prompt. Ids are therefore prefix-chained and never collide, and
//     stay below 2^53 (exact in JSON readers that use doubles) for the first 2^33
//     sessions.
//   - Token counts: input_tokens = pages * page_tokens; output_tokens = the
//     answer's pages * page_tokens, which are exactly the pages the session's next
//     turn appends for that answer.
//   - Timestamps are in seconds, whole milliseconds (so the Mooncake-style JSON
//     line, in integer ms, reads back to the identical double).
//   - Optional shift: for arrivals in [shift.start_s, shift.end_s) a share of the
//     traffic goes to an extra tenant with a big system prompt and its own pool of
//     longer sessions; at shift.end_s that pool is dropped and the base mix
//     continues as before.
//
// Determinism: the stream is a pure function of the options (seed included). Raw
// draws come from std::mt19937_64 (whose sequence the C++ standard fixes); the
// uniform, exponential, geometric and Zipf draws are implemented here, not taken
// from <random>'s distributions, and use only std::log1p from the math library.
//
// Thread safety: a SynthGenerator is a plain value; one thread at a time.
#ifndef KVWATCH_COLLECTORS_SYNTH_H_
#define KVWATCH_COLLECTORS_SYNTH_H_

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "collectors/collector_options.h"  // SynthOptions, SynthShift
#include "curve/request.h"

namespace kvwatch::collectors {

// One generated request and where it comes from.
struct SynthRequest {
  curve::Request request;  // timestamp_s, tenant, token counts, pages
  std::string session;     // "s<N>" for a multi-turn session, "o<N>" for a one-shot
  int turn = 0;            // 0-based turn within the session (0 for a one-shot)
};

// The name each option goes by in the caller's messages, by field name
// ({"rate_per_s", "--rate"}: kvwatch synth passes its flags); a field not listed,
// or no names at all, keeps its field name.
using SynthOptionNames = std::span<const std::pair<std::string_view, std::string_view>>;

// Ok, or what is wrong with the options ("synth options: rate_per_s must be in
// [1e-06, 1000000000], got 0"; with names: "--rate must be in ...").
[[nodiscard]] base::Status ValidateSynthOptions(const SynthOptions& options, SynthOptionNames names = {});

// The streaming generator: Next() produces the requests in timestamp order, one at
// a time, so a live agent can pace them in real time.
class SynthGenerator {
 public:
  // Fails when ValidateSynthOptions(options) fails.
  [[nodiscard]] static base::Result<SynthGenerator> Create(SynthOptions options);

  // Overwrites *out with the next request (reusing its buffers). Returns false,
  // leaving *out unspecified, once the duration or request limit is reached; an
  // unbounded stream never returns false.
  // REQUIRES: out != nullptr.
  bool Next(SynthRequest* out);

  // Requests produced so far.
  std::uint64_t generated() const { return generated_; }
  const SynthOptions& options() const { return options_; }
  // The system prompt length in pages of tenant `index` (0 .. tenants-1; index
  // `tenants` is the shift tenant).
  int system_prompt_pages(int index) const { return tenants_[index].system_pages; }

 private:
  struct Tenant {
    std::string name;
    int system_pages = 0;
  };
  struct Session {
    std::uint64_t id = 0;  // page namespace and label number
    int tenant = 0;
    int planned_turns = 1;
    int turns_done = 0;
    std::int64_t pending_answer_pages = 0;
    std::vector<curve::PageId> prompt;  // the last turn's pages
  };

  explicit SynthGenerator(SynthOptions options);

  // Raw-draw distributions.
  double Uniform01();
  std::uint64_t UniformInt(std::uint64_t n);  // in [0, n)
  double Exponential(double mean);
  int Geometric(double mean);  // in [1, inf), mean `mean`
  int PickBaseTenant();

  bool InShift(double t) const;
  // A fresh session of the base pool (tenant drawn) or of the shift pool.
  Session NewSession(bool shift_pool);
  // The next turn of a session picked uniformly from the base or shift pool.
  void EmitTurn(bool shift_pool, SynthRequest* out);
  void EmitOneShot(int tenant, SynthRequest* out);
  void AppendSystemPrompt(int tenant, std::vector<curve::PageId>* pages) const;
  // Appends `count` pages of `name_space` after the pages already in *pages.
  void AppendOwnPages(std::uint64_t name_space, int tenant, std::int64_t count,
                      std::vector<curve::PageId>* pages) const;
  // Sets tenant and token counts from out->request.pages and the answer length.
  void Fill(int tenant, std::int64_t answer_pages, SynthRequest* out) const;

  SynthOptions options_;
  std::mt19937_64 rng_;
  std::vector<Tenant> tenants_;            // base tenants, then the shift tenant
  std::vector<double> tenant_cumulative_;  // Zipf weights, cumulative
  std::vector<Session> sessions_;
  std::vector<Session> shift_sessions_;  // open only during the shift
  std::uint64_t next_namespace_;
  std::uint64_t generated_ = 0;
  double now_s_ = 0;
  bool done_ = false;
};

// Generates the whole bounded workload, calling `on_request` for each request in
// timestamp order. Returns the number of requests, or an error for invalid options
// or an unbounded workload (duration_s and max_requests both 0).
[[nodiscard]] base::Result<std::uint64_t> GenerateSynth(const SynthOptions& options,
                                                        const std::function<void(const SynthRequest&)>& on_request);

// The fixed shape (`kvwatch synth --shape fixed`): the workload of Ao, Dong, Luo and
// Simchi-Levi's homogeneous and coprime cases. Every request has prompt_tokens
// prompt tokens and output_tokens[i % size] output tokens (so several lengths
// alternate), pages of its own (no prefix sharing: request i's pages are
// ((2^16 + i) << 20) | k, k < ceil(prompt_tokens / page_tokens)), session "o<i>",
// turn 0, and the class and tenant "out<N>" for its output length N (both, so
// the line reads back identical: a trace's tenant defaults to its class). Arrivals at
// rate_per_s of `base`: Poisson, or evenly spaced (request i at i / rate) with
// even_arrivals; timestamps in whole milliseconds as the chat shape's. The stream
// ends as the chat shape's (base.duration_s, base.max_requests); base.seed drives
// the Poisson gaps; base.page_tokens sizes the pages; the chat shape's other
// options are ignored.
struct FixedShapeOptions {
  std::uint32_t prompt_tokens = 512;
  std::vector<std::uint32_t> output_tokens = {512};
  bool even_arrivals = false;
};

// Ok, or what is wrong (a count of 0, no output length, a prompt beyond 2^20 pages).
[[nodiscard]] base::Status ValidateFixedShape(const SynthOptions& base, const FixedShapeOptions& shape,
                                              SynthOptionNames names = {});

// Generates the fixed-shape workload; returns the number of requests, or an error
// for invalid options or an unbounded workload.
[[nodiscard]] base::Result<std::uint64_t> GenerateFixedShape(
    const SynthOptions& base, const FixedShapeOptions& shape,
    const std::function<void(const SynthRequest&)>& on_request);

// Appends `request` as one Mooncake-style JSON line ending in "\n":
//   {"timestamp": <ms, integer>, "input_length": N, "output_length": M,
//    "hash_ids": [...], "tenant": "...", "class": "...", "session": "...", "turn": k}
// Absent facts (no timestamp, token count -1, empty tenant) are left out.
// TraceRecordParser reads the line back to an identical curve::Request.
void AppendSynthJsonLine(const SynthRequest& request, std::string* out);

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_SYNTH_H_
