#include "collectors/engine_log_parser.h"

#include <charconv>

namespace kvwatch::collectors {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::string_view Trim(std::string_view s) {
  s = TrimLeft(s);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// The line without its end-of-line characters.
std::string_view StripEol(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  return line;
}

// A run of digits as an int; nullopt when s is empty, has other characters or overflows.
std::optional<std::int64_t> ExactInt(std::string_view s) {
  std::int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

// Every number these lines print is a count, a rate or a fraction: never
// negative, and no count of one line comes near 2^40 (a trillion). A value
// outside that (a corrupt or hostile line) is unknown, as if the field were
// absent, so that it never reaches a gauge or a running total (nor overflows a
// sum of two of them).
constexpr std::int64_t kMaxLogCount = std::int64_t{1} << 40;
constexpr double kMaxLogNumber = 9007199254740992.0;  // 2^53

// The integer that starts value ("10 reqs" -> 10); nullopt when it is not an
// integer ("1.5", "abc") or is outside 0..kMaxLogCount.
std::optional<std::int64_t> LeadingInt(std::string_view value) {
  value = TrimLeft(value);
  std::int64_t v = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc()) return std::nullopt;
  if (ptr != end && (*ptr == '.' || *ptr == 'e' || *ptr == 'E')) return std::nullopt;
  if (v < 0 || v > kMaxLogCount) return std::nullopt;
  return v;
}

// The number that starts value ("34.9 tokens/s" -> 34.9). A '%' right after it
// ("93.9%") divides by 100, so percentages come back as fractions. nullopt when
// it is negative, NaN, infinite or above 2^53.
std::optional<double> LeadingNumber(std::string_view value) {
  value = TrimLeft(value);
  double v = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc()) return std::nullopt;
  if (!(v >= 0 && v <= kMaxLogNumber)) return std::nullopt;
  std::string_view rest = TrimLeft(std::string_view(ptr, static_cast<std::size_t>(end - ptr)));
  if (!rest.empty() && rest.front() == '%') v /= 100.0;
  return v;
}

// A fraction (a usage, a hit rate: "0.42" or "42.0%"); nullopt outside [0, 1].
std::optional<double> LeadingFraction(std::string_view value) {
  const std::optional<double> v = LeadingNumber(value);
  if (!v || *v > 1) return std::nullopt;
  return v;
}

std::optional<bool> PythonBool(std::string_view value) {
  value = Trim(value);
  if (value == "True" || value == "true") return true;
  if (value == "False" || value == "false") return false;
  return std::nullopt;
}

// Calls fn(key, value) for each "key: value" item of a ", "-separated list.
// Leading dots and spaces are dropped from keys, so an elided "... Running: 10"
// still reads as "Running".
template <typename Fn>
void ForEachKeyValue(std::string_view body, Fn fn) {
  while (!body.empty()) {
    const std::size_t comma = body.find(", ");
    std::string_view item = body.substr(0, comma);
    body = comma == std::string_view::npos ? std::string_view() : body.substr(comma + 2);
    const std::size_t colon = item.find(": ");
    if (colon == std::string_view::npos) continue;
    std::string_view key = item.substr(0, colon);
    while (!key.empty() && (key.front() == '.' || key.front() == ' ')) key.remove_prefix(1);
    fn(Trim(key), Trim(item.substr(colon + 2)));
  }
}

void SetInt(std::string_view value, std::optional<std::int64_t>* out) {
  if (auto v = LeadingInt(value)) *out = v;
}

void SetNumber(std::string_view value, std::optional<double>* out) {
  if (auto v = LeadingNumber(value)) *out = v;
}

void SetFraction(std::string_view value, std::optional<double>* out) {
  if (auto v = LeadingFraction(value)) *out = v;
}

// ---- Prefix -----------------------------------------------------------------------

// "YYYY-MM-DD" or "MM-DD".
bool ParseDate(std::string_view s, LogTimestamp* t) {
  std::optional<std::int64_t> year;
  if (s.size() == 10 && s[4] == '-') {
    year = ExactInt(s.substr(0, 4));
    if (!year) return false;
    s.remove_prefix(5);
  }
  if (s.size() != 5 || s[2] != '-') return false;
  auto month = ExactInt(s.substr(0, 2));
  auto day = ExactInt(s.substr(3, 2));
  if (!month || !day || *month < 1 || *month > 12 || *day < 1 || *day > 31) return false;
  if (year) t->year = static_cast<int>(*year);
  t->month = static_cast<int>(*month);
  t->day = static_cast<int>(*day);
  return true;
}

// "HH:MM:SS", optionally followed by ",mmm" or ".mmm".
bool ParseTime(std::string_view s, LogTimestamp* t) {
  if (s.size() < 8 || s[2] != ':' || s[5] != ':') return false;
  auto h = ExactInt(s.substr(0, 2));
  auto m = ExactInt(s.substr(3, 2));
  auto sec = ExactInt(s.substr(6, 2));
  if (!h || !m || !sec || *h > 23 || *m > 59 || *sec > 60) return false;
  if (s.size() > 8 && s[8] != ',' && s[8] != '.') return false;
  t->hour = static_cast<int>(*h);
  t->minute = static_cast<int>(*m);
  t->second = static_cast<int>(*sec);
  return true;
}

bool IsLevel(std::string_view s) {
  if (!s.empty() && s.back() == ':') s.remove_suffix(1);
  return s == "DEBUG" || s == "INFO" || s == "WARNING" || s == "WARN" || s == "ERROR" || s == "CRITICAL";
}

// "DP2", "TP0", ...: the rank of that kind.
void ParseRankTag(std::string_view s, LogLinePrefix* p) {
  if (s.size() < 3) return;
  auto rank = ExactInt(s.substr(2));
  if (!rank || *rank > 1000000) return;
  const std::string_view kind = s.substr(0, 2);
  const int r = static_cast<int>(*rank);
  if (kind == "DP") p->dp_rank = r;
  if (kind == "TP") p->tp_rank = r;
  if (kind == "EP") p->ep_rank = r;
  if (kind == "PP") p->pp_rank = r;
}

template <typename Fn>
void ForEachToken(std::string_view s, Fn fn) {
  while (true) {
    s = TrimLeft(s);
    if (s.empty()) return;
    const std::size_t space = s.find_first_of(" \t");
    fn(s.substr(0, space));
    if (space == std::string_view::npos) return;
    s.remove_prefix(space);
  }
}

}  // namespace

LogLinePrefix ParseLogLinePrefix(std::string_view head) {
  LogLinePrefix p;
  LogTimestamp t;
  bool have_date = false;
  bool have_time = false;
  head = TrimLeft(head);
  if (!head.empty() && head.front() == '(') {  // vLLM "(APIServer pid=58)"
    const std::size_t close = head.find(')');
    if (close != std::string_view::npos) {
      p.process = std::string(head.substr(1, close - 1));
      head.remove_prefix(close + 1);
    }
  }
  head = TrimLeft(head);
  if (!head.empty() && head.front() == '[') {  // SGLang "[2025-02-14 00:42:22 DP2 TP2]"
    const std::size_t close = head.find(']');
    if (close != std::string_view::npos) {
      ForEachToken(head.substr(1, close - 1), [&](std::string_view tok) {
        if (!have_date && ParseDate(tok, &t)) {
          have_date = true;
        } else if (!have_time && ParseTime(tok, &t)) {
          have_time = true;
        } else {
          ParseRankTag(tok, &p);
        }
      });
      head.remove_prefix(close + 1);
    }
  }
  ForEachToken(head, [&](std::string_view tok) {
    if (p.level.empty() && IsLevel(tok)) {
      p.level = std::string(tok.back() == ':' ? tok.substr(0, tok.size() - 1) : tok);
    } else if (!have_date && ParseDate(tok, &t)) {
      have_date = true;
    } else if (!have_time && ParseTime(tok, &t)) {
      have_time = true;
    }
  });
  if (have_date && have_time) p.timestamp = t;
  return p;
}

namespace {

// Finds "Engine NNN: " or "N Engines Aggregated: " in line. On success sets the
// record's engine fields and returns the offset where the key-value body starts.
std::optional<std::size_t> FindVllmStatsAnchor(std::string_view line, VllmStatsRecord* r, std::size_t* head_end) {
  constexpr std::string_view kAggregated = " Engines Aggregated: ";
  const std::size_t agg = line.find(kAggregated);
  if (agg != std::string_view::npos) {
    std::size_t start = agg;
    while (start > 0 && IsDigit(line[start - 1])) --start;
    if (auto n = ExactInt(line.substr(start, agg - start))) {
      r->aggregated_engines = static_cast<int>(*n);
      *head_end = start;
      return agg + kAggregated.size();
    }
  }
  constexpr std::string_view kEngine = "Engine ";
  for (std::size_t pos = line.find(kEngine); pos != std::string_view::npos; pos = line.find(kEngine, pos + 1)) {
    std::size_t end = pos + kEngine.size();
    while (end < line.size() && IsDigit(line[end])) ++end;
    if (end == pos + kEngine.size() || line.substr(end, 2) != ": ") continue;
    auto index = ExactInt(line.substr(pos + kEngine.size(), end - pos - kEngine.size()));
    if (!index || *index > 1000000) continue;
    r->engine_index = static_cast<int>(*index);
    *head_end = pos;
    return end + 2;
  }
  return std::nullopt;
}

}  // namespace

std::optional<VllmStatsRecord> ParseVllmStatsLine(std::string_view line) {
  line = StripEol(line);
  VllmStatsRecord r;
  std::size_t head_end = 0;
  const std::optional<std::size_t> body = FindVllmStatsAnchor(line, &r, &head_end);
  if (!body) return std::nullopt;
  ForEachKeyValue(line.substr(*body), [&](std::string_view key, std::string_view value) {
    if (key == "Avg prompt throughput") {
      SetNumber(value, &r.prompt_throughput_tokens_per_s);
    } else if (key == "Avg generation throughput") {
      SetNumber(value, &r.generation_throughput_tokens_per_s);
    } else if (key == "Running") {
      SetInt(value, &r.running_reqs);
    } else if (key == "Waiting") {
      SetInt(value, &r.waiting_reqs);
    } else if (key == "Deferred") {
      SetInt(value, &r.deferred_reqs);
    } else if (key == "Preemptions") {
      SetInt(value, &r.preemptions);
    } else if (key == "Corrupted") {
      SetInt(value, &r.corrupted_reqs);
    } else if (key == "GPU KV cache usage" || key == "KV cache usage") {
      SetFraction(value, &r.gpu_kv_cache_usage);
    } else if (key == "Prefix cache hit rate") {
      SetFraction(value, &r.prefix_cache_hit_rate);
    } else if (key == "External prefix cache hit rate") {
      SetFraction(value, &r.external_prefix_cache_hit_rate);
    } else if (key == "MM cache hit rate") {
      SetFraction(value, &r.mm_cache_hit_rate);
    }
  });
  const bool recognised = r.running_reqs || r.waiting_reqs || r.gpu_kv_cache_usage ||
                          r.prompt_throughput_tokens_per_s || r.generation_throughput_tokens_per_s;
  if (!recognised) return std::nullopt;
  r.prefix = ParseLogLinePrefix(line.substr(0, head_end));
  return r;
}

std::optional<VllmV0PreemptionRecord> ParseVllmV0PreemptionLine(std::string_view line) {
  line = StripEol(line);
  constexpr std::string_view kGroup = "Sequence group ";
  constexpr std::string_view kPreempted = " is preempted by ";
  const std::size_t start = line.find(kGroup);
  if (start == std::string_view::npos) return std::nullopt;
  const std::size_t by = line.find(kPreempted, start);
  if (by == std::string_view::npos) return std::nullopt;
  VllmV0PreemptionRecord r;
  r.sequence_group = ExactInt(line.substr(start + kGroup.size(), by - start - kGroup.size()));
  std::string_view rest = line.substr(by + kPreempted.size());
  r.mode = std::string(rest.substr(0, rest.find(' ')));
  constexpr std::string_view kTotal = "total_num_cumulative_preemption=";
  const std::size_t total = line.find(kTotal);
  if (total != std::string_view::npos) r.cumulative_preemptions = LeadingInt(line.substr(total + kTotal.size()));
  r.prefix = ParseLogLinePrefix(line.substr(0, start));
  return r;
}

namespace {

// Finds "<name> batch" followed by an optional " [N]" and then ". " or ", ".
// Returns the offset of the key-value body.
std::optional<std::size_t> FindSglangBatchAnchor(std::string_view line, std::string_view name,
                                                 std::optional<std::int64_t>* iter, std::size_t* head_end) {
  for (std::size_t pos = line.find(name); pos != std::string_view::npos; pos = line.find(name, pos + 1)) {
    std::size_t p = pos + name.size();
    std::optional<std::int64_t> forward_iter;
    if (line.substr(p, 2) == " [") {
      const std::size_t close = line.find(']', p);
      if (close == std::string_view::npos) continue;
      forward_iter = ExactInt(line.substr(p + 2, close - p - 2));
      if (!forward_iter) continue;
      p = close + 1;
    }
    if (p < line.size() && (line[p] == '.' || line[p] == ',') && (p + 1 == line.size() || line[p + 1] == ' ')) {
      *iter = forward_iter;
      *head_end = pos;
      return p + 1;
    }
  }
  return std::nullopt;
}

bool SetUsage(std::string_view key, std::string_view value, SglangTokenUsage* u) {
  if (key == "token usage") {
    SetFraction(value, &u->token_usage);
  } else if (key == "full token usage") {
    SetFraction(value, &u->full_token_usage);
  } else if (key == "swa token usage") {
    SetFraction(value, &u->swa_token_usage);
  } else if (key == "mamba usage") {
    SetFraction(value, &u->mamba_usage);
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::optional<SglangPrefillRecord> ParseSglangPrefillLine(std::string_view line) {
  line = StripEol(line);
  SglangPrefillRecord r;
  std::size_t head_end = 0;
  const auto body = FindSglangBatchAnchor(line, "Prefill batch", &r.forward_iter, &head_end);
  if (!body) return std::nullopt;
  ForEachKeyValue(line.substr(*body), [&](std::string_view key, std::string_view value) {
    if (SetUsage(key, value, &r.usage)) return;
    if (key == "#new-seq")
      SetInt(value, &r.new_seq);
    else if (key == "#new-token")
      SetInt(value, &r.new_token);
    else if (key == "#cached-token")
      SetInt(value, &r.cached_token);
    else if (key == "cache hit rate")
      SetFraction(value, &r.cache_hit_rate);
    else if (key == "#running-req")
      SetInt(value, &r.running_req);
    else if (key == "#queue-req")
      SetInt(value, &r.queue_req);
    else if (key == "#prealloc-req")
      SetInt(value, &r.prealloc_req);
    else if (key == "#inflight-req")
      SetInt(value, &r.inflight_req);
    else if (key == "input throughput (token/s)")
      SetNumber(value, &r.input_throughput_tokens_per_s);
  });
  if (!r.new_seq && !r.new_token) return std::nullopt;
  r.prefix = ParseLogLinePrefix(line.substr(0, head_end));
  return r;
}

std::optional<SglangDecodeRecord> ParseSglangDecodeLine(std::string_view line) {
  line = StripEol(line);
  SglangDecodeRecord r;
  std::size_t head_end = 0;
  const auto body = FindSglangBatchAnchor(line, "Decode batch", &r.forward_iter, &head_end);
  if (!body) return std::nullopt;
  ForEachKeyValue(line.substr(*body), [&](std::string_view key, std::string_view value) {
    if (SetUsage(key, value, &r.usage)) return;
    if (key == "#running-req")
      SetInt(value, &r.running_req);
    else if (key == "#token")
      SetInt(value, &r.num_tokens);
    else if (key == "accept len")
      SetNumber(value, &r.accept_len);
    else if (key == "accept rate")
      SetFraction(value, &r.accept_rate);
    else if (key == "pre-allocated usage")
      SetNumber(value, &r.pre_allocated_usage);
    else if (key == "#prealloc-req")
      SetInt(value, &r.prealloc_req);
    else if (key == "#transfer-req")
      SetInt(value, &r.transfer_req);
    else if (key == "#retracted-req")
      SetInt(value, &r.retracted_req);
    else if (key == "cuda graph")
      r.cuda_graph = PythonBool(value);
    else if (key == "gen throughput (token/s)")
      SetNumber(value, &r.gen_throughput_tokens_per_s);
    else if (key == "#queue-req")
      SetInt(value, &r.queue_req);
  });
  if (!r.running_req && !r.num_tokens) return std::nullopt;
  r.prefix = ParseLogLinePrefix(line.substr(0, head_end));
  return r;
}

std::optional<SglangRetractRecord> ParseSglangRetractLine(std::string_view line) {
  line = StripEol(line);
  constexpr std::string_view kAnchor = "KV cache pool is full. Retract requests.";
  const std::size_t pos = line.find(kAnchor);
  if (pos == std::string_view::npos) return std::nullopt;
  SglangRetractRecord r;
  std::optional<std::int64_t> retracted;
  ForEachKeyValue(line.substr(pos + kAnchor.size()), [&](std::string_view key, std::string_view value) {
    if (key == "#retracted_reqs") {
      SetInt(value, &retracted);
    } else if (key == "#new_token_ratio") {
      const std::size_t arrow = value.find("->");
      SetNumber(value.substr(0, arrow), &r.new_token_ratio_before);
      if (arrow != std::string_view::npos) SetNumber(value.substr(arrow + 2), &r.new_token_ratio_after);
    }
  });
  if (!retracted) return std::nullopt;
  r.retracted_reqs = *retracted;
  r.prefix = ParseLogLinePrefix(line.substr(0, pos));
  return r;
}

std::optional<HttpAccessRecord> ParseHttpAccessLine(std::string_view line) {
  line = StripEol(line);
  constexpr std::string_view kSep = " - \"";
  const std::size_t sep = line.find(kSep);
  if (sep == std::string_view::npos || sep == 0 || line[sep - 1] == ' ') return std::nullopt;
  const std::size_t client_start = line.find_last_of(" \t", sep - 1) + 1;  // npos + 1 == 0
  HttpAccessRecord r;
  r.client = std::string(line.substr(client_start, sep - client_start));
  std::string_view rest = line.substr(sep + kSep.size());
  const std::size_t method_end = rest.find(' ');
  if (method_end == 0 || method_end == std::string_view::npos) return std::nullopt;
  for (char c : rest.substr(0, method_end)) {
    if (c < 'A' || c > 'Z') return std::nullopt;
  }
  r.method = std::string(rest.substr(0, method_end));
  rest.remove_prefix(method_end + 1);
  // The request line ends at the quote that is followed by " NNN".
  std::size_t quote = rest.find('"');
  while (quote != std::string_view::npos &&
         !(rest.size() >= quote + 5 && rest[quote + 1] == ' ' && IsDigit(rest[quote + 2]) && IsDigit(rest[quote + 3]) &&
           IsDigit(rest[quote + 4]))) {
    quote = rest.find('"', quote + 1);
  }
  if (quote == std::string_view::npos) return std::nullopt;
  std::string_view target = rest.substr(0, quote);
  constexpr std::string_view kHttp = " HTTP/";
  const std::size_t http = target.rfind(kHttp);
  if (http == std::string_view::npos || http == 0) return std::nullopt;
  r.path = std::string(target.substr(0, http));
  r.http_version = std::string(target.substr(http + kHttp.size()));
  rest.remove_prefix(quote + 2);
  r.status = static_cast<int>((rest[0] - '0') * 100 + (rest[1] - '0') * 10 + (rest[2] - '0'));
  if (r.status < 100 || (rest.size() > 3 && rest[3] != ' ')) return std::nullopt;
  r.reason = std::string(Trim(rest.substr(3)));
  r.prefix = ParseLogLinePrefix(line.substr(0, client_start));
  return r;
}

std::optional<EngineLogRecord> ParseEngineLogLine(std::string_view line) {
  // Cheap, specific anchors first; the access log last (its anchor is generic).
  if (auto r = ParseVllmStatsLine(line)) return EngineLogRecord(std::move(*r));
  if (auto r = ParseSglangDecodeLine(line)) return EngineLogRecord(std::move(*r));
  if (auto r = ParseSglangPrefillLine(line)) return EngineLogRecord(std::move(*r));
  if (auto r = ParseSglangRetractLine(line)) return EngineLogRecord(std::move(*r));
  if (auto r = ParseVllmV0PreemptionLine(line)) return EngineLogRecord(std::move(*r));
  if (auto r = ParseHttpAccessLine(line)) return EngineLogRecord(std::move(*r));
  return std::nullopt;
}

}  // namespace kvwatch::collectors
