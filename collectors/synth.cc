#include "collectors/synth.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace kvwatch::collectors {

namespace {

using base::Status;
using curve::PageId;

constexpr int kIndexBits = 20;
constexpr std::uint64_t kMaxIndex = (std::uint64_t{1} << kIndexBits) - 1;
// Namespaces below this are system prompts (1 + tenant index); above, sessions.
constexpr std::uint64_t kFirstSessionNamespace = std::uint64_t{1} << 16;
constexpr int kMaxTenants = 60000;
constexpr int kMaxActiveSessions = 1000000;
constexpr int kMaxDrawnCount = std::numeric_limits<int>::max() / 4;
// Arrival rates and times: beyond these the millisecond timestamps written would
// overflow (or every request would share one), and no trace reader takes them.
constexpr double kMinRate = 1e-6;
constexpr double kMaxRate = 1e9;
constexpr double kMaxSeconds = 1e10;  // about 317 years

PageId MakePageId(std::uint64_t name_space, std::uint64_t index) { return (name_space << kIndexBits) | index; }

// A number as %.15g writes it (1e+10, 0.5, 1048576).
std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", value);
  return text;
}

// The problems found, each naming its option as the caller does (names), else by
// its field name.
class Problems {
 public:
  explicit Problems(SynthOptionNames names) : names_(names) {}

  std::string Name(std::string_view field) const {
    for (const auto& [from, to] : names_) {
      if (from == field) return std::string(to);
    }
    return std::string(field);
  }
  void Add(const std::string& problem) { text_.append(text_.empty() ? "" : "; ").append(problem); }
  // Checks that `value` is finite and within [low, high].
  void Range(std::string_view field, double value, double low, double high) {
    if (std::isfinite(value) && value >= low && value <= high) return;
    Add(Name(field) + " must be in [" + Number(low) + ", " + Number(high) + "], got " + Number(value));
  }
  // Ok, or the problems: after "synth options: " when they carry field names.
  Status ToStatus() const {
    if (text_.empty()) return Status::Ok();
    return Status::Error((names_.empty() ? "synth options: " : "") + text_);
  }

 private:
  SynthOptionNames names_;
  std::string text_;
};

// The arrival rate, the span and the shift's times: bounded so that every
// timestamp is a whole number of milliseconds that fits 64 bits.
void CheckTimes(const SynthOptions& o, Problems* p) {
  p->Range("rate_per_s", o.rate_per_s, kMinRate, kMaxRate);
  p->Range("duration_s", o.duration_s, 0, kMaxSeconds);
  if (o.duration_s <= 0 && o.max_requests > 0 && std::isfinite(o.rate_per_s) && o.rate_per_s > 0 &&
      static_cast<double>(o.max_requests) / o.rate_per_s > kMaxSeconds) {
    p->Add(p->Name("max_requests") + " at " + p->Name("rate_per_s") + " " + Number(o.rate_per_s) + " would span " +
           Number(static_cast<double>(o.max_requests) / o.rate_per_s) + " s, more than " + Number(kMaxSeconds) +
           " (set " + p->Name("duration_s") + ", or fewer requests)");
  }
}

bool ShiftEnabled(const SynthShift& shift) { return shift.end_s > shift.start_s; }

void AppendInt(std::int64_t value, std::string* out) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  out->append(digits, end);
}

void AppendUnsigned(std::uint64_t value, std::string* out) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  out->append(digits, end);
}

void AppendJsonString(std::string_view text, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (byte < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[byte >> 4]);
      out->push_back(kHex[byte & 0xf]);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

}  // namespace

Status ValidateSynthOptions(const SynthOptions& o, SynthOptionNames names) {
  Problems p(names);
  CheckTimes(o, &p);
  p.Range("tenants", o.tenants, 1, kMaxTenants);
  p.Range("tenant_zipf_exponent", o.tenant_zipf_exponent, 0, 100);
  p.Range("max_session_pages", o.max_session_pages, 1, static_cast<double>(kMaxIndex));
  p.Range("system_prompt_min_pages", o.system_prompt_min_pages, 0, o.system_prompt_max_pages);
  p.Range("system_prompt_max_pages", o.system_prompt_max_pages, 0, o.max_session_pages);
  p.Range("active_sessions", o.active_sessions, 1, kMaxActiveSessions);
  p.Range("one_shot_fraction", o.one_shot_fraction, 0, 1);
  p.Range("mean_session_turns", o.mean_session_turns, 1, 1e6);
  p.Range("mean_first_message_pages", o.mean_first_message_pages, 1, 1e6);
  p.Range("mean_followup_message_pages", o.mean_followup_message_pages, 1, 1e6);
  p.Range("mean_answer_pages", o.mean_answer_pages, 1, 1e6);
  p.Range("mean_one_shot_pages", o.mean_one_shot_pages, 1, 1e6);
  p.Range("page_tokens", o.page_tokens, 1, 1 << 20);
  if (ShiftEnabled(o.shift)) {
    p.Range("shift.start_s", o.shift.start_s, 0, kMaxSeconds);
    p.Range("shift.end_s", o.shift.end_s, 0, kMaxSeconds);
    p.Range("shift.share", o.shift.share, 0, 1);
    p.Range("shift.system_prompt_pages", o.shift.system_prompt_pages, 0, o.max_session_pages);
    p.Range("shift.active_sessions", o.shift.active_sessions, 1, kMaxActiveSessions);
    p.Range("shift.mean_session_turns", o.shift.mean_session_turns, 1, 1e6);
    if (o.shift.tenant.empty()) p.Add(p.Name("shift.tenant") + " must not be empty");
  }
  return p.ToStatus();
}

base::Result<SynthGenerator> SynthGenerator::Create(SynthOptions options) {
  Status status = ValidateSynthOptions(options);
  if (!status.ok()) return base::Result<SynthGenerator>::Error(status.error());
  return SynthGenerator(std::move(options));
}

SynthGenerator::SynthGenerator(SynthOptions options)
    : options_(std::move(options)), rng_(options_.seed), next_namespace_(kFirstSessionNamespace) {
  const int span = options_.system_prompt_max_pages - options_.system_prompt_min_pages + 1;
  double total_weight = 0;
  for (int i = 0; i < options_.tenants; ++i) {
    const int pages = options_.system_prompt_min_pages + static_cast<int>(UniformInt(span));
    tenants_.push_back({"tenant-" + std::to_string(i), pages});
    total_weight += std::pow(i + 1.0, -options_.tenant_zipf_exponent);
    tenant_cumulative_.push_back(total_weight);
  }
  tenants_.push_back({options_.shift.tenant, options_.shift.system_prompt_pages});
  sessions_.reserve(options_.active_sessions);
  for (int i = 0; i < options_.active_sessions; ++i) sessions_.push_back(NewSession(false));
}

double SynthGenerator::Uniform01() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // 53 random bits in [0, 1)
}

// Lemire's multiply-shift with rejection: exactly uniform.
std::uint64_t SynthGenerator::UniformInt(std::uint64_t n) {
  unsigned __int128 product = static_cast<unsigned __int128>(rng_()) * n;
  auto low = static_cast<std::uint64_t>(product);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      product = static_cast<unsigned __int128>(rng_()) * n;
      low = static_cast<std::uint64_t>(product);
    }
  }
  return static_cast<std::uint64_t>(product >> 64);
}

double SynthGenerator::Exponential(double mean) { return -mean * std::log1p(-Uniform01()); }

// 1 + the number of failures before a success with p = 1 / mean: mean `mean`.
int SynthGenerator::Geometric(double mean) {
  const double u = Uniform01();
  if (mean <= 1.0) return 1;
  const double failures = std::floor(std::log1p(-u) / std::log1p(-1.0 / mean));
  return 1 + static_cast<int>(std::min(failures, static_cast<double>(kMaxDrawnCount)));
}

int SynthGenerator::PickBaseTenant() {
  const double u = Uniform01() * tenant_cumulative_.back();
  const auto it = std::upper_bound(tenant_cumulative_.begin(), tenant_cumulative_.end(), u);
  return static_cast<int>(std::min<std::ptrdiff_t>(it - tenant_cumulative_.begin(), options_.tenants - 1));
}

bool SynthGenerator::InShift(double t) const {
  return ShiftEnabled(options_.shift) && t >= options_.shift.start_s && t < options_.shift.end_s;
}

SynthGenerator::Session SynthGenerator::NewSession(bool shift_pool) {
  Session session;
  session.id = next_namespace_++;
  session.tenant = shift_pool ? options_.tenants : PickBaseTenant();
  session.planned_turns = Geometric(shift_pool ? options_.shift.mean_session_turns : options_.mean_session_turns);
  return session;
}

void SynthGenerator::AppendSystemPrompt(int tenant, std::vector<PageId>* pages) const {
  const auto name_space = static_cast<std::uint64_t>(tenant) + 1;
  for (int i = 0; i < tenants_[tenant].system_pages; ++i) pages->push_back(MakePageId(name_space, i));
}

void SynthGenerator::AppendOwnPages(std::uint64_t name_space, int tenant, std::int64_t count,
                                    std::vector<PageId>* pages) const {
  const auto first = static_cast<std::uint64_t>(pages->size() - tenants_[tenant].system_pages);
  for (std::int64_t i = 0; i < count; ++i) pages->push_back(MakePageId(name_space, first + i));
}

void SynthGenerator::Fill(int tenant, std::int64_t answer_pages, SynthRequest* out) const {
  curve::Request& r = out->request;
  r.tenant = tenants_[tenant].name;
  r.input_tokens = static_cast<std::int64_t>(r.pages.size()) * options_.page_tokens;
  r.output_tokens = answer_pages * options_.page_tokens;
}

void SynthGenerator::EmitTurn(bool shift_pool, SynthRequest* out) {
  std::vector<Session>& pool = shift_pool ? shift_sessions_ : sessions_;
  Session& s = pool[UniformInt(pool.size())];
  const auto max_pages = static_cast<std::size_t>(options_.max_session_pages);
  if (s.turns_done > 0) {
    const std::int64_t added = s.pending_answer_pages + Geometric(options_.mean_followup_message_pages);
    if (s.prompt.size() + added <= max_pages) {
      AppendOwnPages(s.id, s.tenant, added, &s.prompt);
    } else {
      s = NewSession(shift_pool);  // the conversation outgrew the context: a new one starts
    }
  }
  if (s.turns_done == 0) {
    s.prompt.clear();
    AppendSystemPrompt(s.tenant, &s.prompt);
    const std::int64_t first =
        std::min<std::int64_t>(Geometric(options_.mean_first_message_pages), max_pages - s.prompt.size());
    AppendOwnPages(s.id, s.tenant, first, &s.prompt);
  }
  s.pending_answer_pages = Geometric(options_.mean_answer_pages);
  out->request.pages.assign(s.prompt.begin(), s.prompt.end());
  Fill(s.tenant, s.pending_answer_pages, out);
  out->session.assign(1, 's').append(std::to_string(s.id - kFirstSessionNamespace));
  out->turn = s.turns_done;
  if (++s.turns_done >= s.planned_turns) s = NewSession(shift_pool);
}

void SynthGenerator::EmitOneShot(int tenant, SynthRequest* out) {
  const std::uint64_t name_space = next_namespace_++;
  std::vector<PageId>& pages = out->request.pages;
  pages.clear();
  AppendSystemPrompt(tenant, &pages);
  const auto room = static_cast<std::int64_t>(options_.max_session_pages) - static_cast<std::int64_t>(pages.size());
  AppendOwnPages(name_space, tenant, std::min<std::int64_t>(Geometric(options_.mean_one_shot_pages), room), &pages);
  Fill(tenant, Geometric(options_.mean_answer_pages), out);
  out->session.assign(1, 'o').append(std::to_string(name_space - kFirstSessionNamespace));
  out->turn = 0;
}

bool SynthGenerator::Next(SynthRequest* out) {
  if (done_) return false;
  if (options_.max_requests > 0 && generated_ >= options_.max_requests) {
    done_ = true;
    return false;
  }
  const double t = now_s_ + Exponential(1.0 / options_.rate_per_s);
  if (options_.duration_s > 0 && t >= options_.duration_s) {
    done_ = true;
    return false;
  }
  now_s_ = t;
  const bool shift = InShift(t);
  if (!shift && !shift_sessions_.empty()) shift_sessions_.clear();  // the shift is over
  if (shift && Uniform01() < options_.shift.share) {
    if (shift_sessions_.empty()) {
      for (int i = 0; i < options_.shift.active_sessions; ++i) shift_sessions_.push_back(NewSession(true));
    }
    if (Uniform01() < options_.one_shot_fraction) {
      EmitOneShot(options_.tenants, out);
    } else {
      EmitTurn(true, out);
    }
  } else if (Uniform01() < options_.one_shot_fraction) {
    EmitOneShot(PickBaseTenant(), out);
  } else {
    EmitTurn(false, out);
  }
  // Whole milliseconds, computed as the trace parser computes them from integer ms.
  out->request.timestamp_s = static_cast<double>(std::llround(t * 1000.0)) / 1000.0;
  ++generated_;
  return true;
}

base::Result<std::uint64_t> GenerateSynth(const SynthOptions& options,
                                          const std::function<void(const SynthRequest&)>& on_request) {
  if (options.duration_s <= 0 && options.max_requests == 0) {
    return base::Result<std::uint64_t>::Error(
        "synth options: duration_s or max_requests must be set for a finite workload");
  }
  auto generator = SynthGenerator::Create(options);
  if (!generator.ok()) return base::Result<std::uint64_t>::Error(generator.error());
  SynthRequest request;
  while (generator.value().Next(&request)) {
    if (on_request) on_request(request);
  }
  return generator.value().generated();
}

Status ValidateFixedShape(const SynthOptions& base, const FixedShapeOptions& shape, SynthOptionNames names) {
  Problems p(names);
  CheckTimes(base, &p);
  p.Range("page_tokens", base.page_tokens, 1, 1 << 20);
  p.Range("prompt_tokens", shape.prompt_tokens, 1, static_cast<double>(kMaxIndex) * std::max(base.page_tokens, 1));
  if (shape.output_tokens.empty()) p.Add(p.Name("output_tokens") + " must list at least one length");
  for (std::uint32_t n : shape.output_tokens) p.Range("output_tokens", n, 1, 1 << 30);
  return p.ToStatus();
}

base::Result<std::uint64_t> GenerateFixedShape(const SynthOptions& base, const FixedShapeOptions& shape,
                                               const std::function<void(const SynthRequest&)>& on_request) {
  using R = base::Result<std::uint64_t>;
  if (Status s = ValidateFixedShape(base, shape); !s.ok()) return R::Error(s.error());
  if (base.duration_s <= 0 && base.max_requests == 0) {
    return R::Error("synth options: duration_s or max_requests must be set for a finite workload");
  }
  std::mt19937_64 rng(base.seed);
  const std::uint64_t page_tokens = static_cast<std::uint64_t>(base.page_tokens);
  const std::uint64_t pages = (shape.prompt_tokens + page_tokens - 1) / page_tokens;
  SynthRequest out;
  double poisson_s = 0;
  std::uint64_t i = 0;
  for (; base.max_requests == 0 || i < base.max_requests; ++i) {
    double t = 0;
    if (shape.even_arrivals) {
      t = static_cast<double>(i) / base.rate_per_s;
    } else {
      if (i > 0) poisson_s += -std::log1p(-static_cast<double>(rng() >> 11) * 0x1.0p-53) / base.rate_per_s;
      t = poisson_s;
    }
    t = std::round(t * 1000.0) / 1000.0;  // whole milliseconds, as the JSON line writes them
    if (base.duration_s > 0 && t >= base.duration_s) break;
    curve::Request& r = out.request;
    r.timestamp_s = t;
    const std::uint32_t output = shape.output_tokens[i % shape.output_tokens.size()];
    r.request_class.assign("out").append(std::to_string(output));
    r.tenant = r.request_class;
    r.input_tokens = shape.prompt_tokens;
    r.output_tokens = output;
    r.pages.clear();
    const std::uint64_t name_space = kFirstSessionNamespace + i;
    for (std::uint64_t k = 0; k < pages; ++k) r.pages.push_back((name_space << kIndexBits) | k);
    out.session.assign(1, 'o').append(std::to_string(i));
    out.turn = 0;
    if (on_request) on_request(out);
  }
  return i;
}

void AppendSynthJsonLine(const SynthRequest& request, std::string* out) {
  const curve::Request& r = request.request;
  out->push_back('{');
  const char* separator = "";
  if (r.has_timestamp()) {
    out->append("\"timestamp\": ");
    AppendInt(std::llround(r.timestamp_s * 1000.0), out);
    separator = ", ";
  }
  if (r.input_tokens >= 0) {
    out->append(separator).append("\"input_length\": ");
    AppendInt(r.input_tokens, out);
    separator = ", ";
  }
  if (r.output_tokens >= 0) {
    out->append(separator).append("\"output_length\": ");
    AppendInt(r.output_tokens, out);
    separator = ", ";
  }
  out->append(separator).append("\"hash_ids\": [");
  for (std::size_t i = 0; i < r.pages.size(); ++i) {
    if (i > 0) out->append(", ");
    AppendUnsigned(r.pages[i], out);
  }
  out->push_back(']');
  if (!r.tenant.empty()) {
    out->append(", \"tenant\": ");
    AppendJsonString(r.tenant, out);
  }
  if (!r.request_class.empty()) {
    out->append(", \"class\": ");
    AppendJsonString(r.request_class, out);
  }
  if (!request.session.empty()) {
    out->append(", \"session\": ");
    AppendJsonString(request.session, out);
  }
  out->append(", \"turn\": ");
  AppendInt(request.turn, out);
  out->append("}\n");
}

}  // namespace kvwatch::collectors
