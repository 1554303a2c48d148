// The time a simulated engine step takes (sim/: the serving-replica simulator).
//
// One step of a continuous-batching engine runs one forward pass over the batch:
// the prefill chunks scheduled this step (new prompt tokens, and the tokens of
// preempted requests being recomputed) and one decode token for each running
// sequence past its prefill. A StepTimeModel turns what the step does into
// seconds. The scheduler (sim/replica.h) builds a StepWork per step; the models
// (sim/time_model.h: the roofline from a model and a GPU preset, coefficients
// given directly, or coefficients fitted from an engine's /metrics) price it.
//
// Thread safety: models are immutable after construction; StepSeconds is const and
// may be called from several threads.
#ifndef KVWATCH_SIM_STEP_TIME_H_
#define KVWATCH_SIM_STEP_TIME_H_

#include <cstdint>

namespace kvwatch::sim {

// What one engine step computes. Token counts, not pages.
struct StepWork {
  // Prompt tokens computed this step (prefill chunks plus recomputation after a
  // preemption); cached prefix tokens are not computed and do not count.
  std::uint64_t prefill_tokens = 0;
  // Sum over this step's prefill chunks of (tokens of context already in KV before
  // the chunk) x (chunk tokens): the attention term of chunked prefill.
  std::uint64_t prefill_attention_token_pairs = 0;
  // Sequences that generate one token this step.
  std::uint32_t decode_sequences = 0;
  // Sum over those sequences of their KV length in tokens (prompt plus tokens
  // generated so far): the KV the decode step reads.
  std::uint64_t decode_context_tokens = 0;
};

class StepTimeModel {
 public:
  virtual ~StepTimeModel() = default;
  // Seconds the step takes; > 0 for a step with any work, 0 for an empty one.
  virtual double StepSeconds(const StepWork& work) const = 0;
};

// t = fixed_s + per_prefill_token_s * prefill_tokens
//   + per_attention_pair_s * prefill_attention_token_pairs
//   + per_decode_sequence_s * decode_sequences
//   + per_context_token_s * decode_context_tokens          (for a non-empty step)
// The linear form every model here reduces to (the roofline's compute-bound and
// memory-bound terms are added, not maxed, see sim/time_model.h); also what
// `--step-coefficients` gives directly and what `--calibrate` fits.
struct LinearStepCoefficients {
  double fixed_s = 0;
  double per_prefill_token_s = 0;
  double per_attention_pair_s = 0;
  double per_decode_sequence_s = 0;
  double per_context_token_s = 0;
};

class LinearStepTime final : public StepTimeModel {
 public:
  explicit LinearStepTime(const LinearStepCoefficients& c) : c_(c) {}
  double StepSeconds(const StepWork& w) const override {
    if (w.prefill_tokens == 0 && w.decode_sequences == 0) return 0;
    return c_.fixed_s + c_.per_prefill_token_s * static_cast<double>(w.prefill_tokens) +
           c_.per_attention_pair_s * static_cast<double>(w.prefill_attention_token_pairs) +
           c_.per_decode_sequence_s * static_cast<double>(w.decode_sequences) +
           c_.per_context_token_s * static_cast<double>(w.decode_context_tokens);
  }
  const LinearStepCoefficients& coefficients() const { return c_; }

 private:
  LinearStepCoefficients c_;
};

}  // namespace kvwatch::sim

#endif  // KVWATCH_SIM_STEP_TIME_H_
