// The key table (ConfigKeys()): the single source of truth of the agent config's
// keys, types, defaults and meanings, and the reference (docs/configuration.md) rendered from it.
#include "config/config_keys.h"

#include <string>
#include <string_view>

namespace kvwatch::config {
namespace {

using Type = ConfigType;

// The single source of truth: every key the parser accepts, with its type, its
// default and its meaning. Parents come before their children.
constexpr ConfigKey kKeys[] = {
    {"replica", Type::kString, R"("")", true, "Label of this replica on metrics and alerts (`replica=\"...\"`)."},
    {"model_label", Type::kString, R"("")", true, "Model label on alerts."},
    {"model", Type::kString, R"("")", true,
     "A built-in model preset such as `llama-3-70b` (an unknown name's error lists them), "
     "to turn pages into bytes. At most one of `model`, `model_config` and "
     "`bytes_per_token`; with none of them, sizes are in pages only. A hybrid model (KV cache groups: "
     "sliding-window, chunked-local or linear layers, e.g. `gpt-oss-120b`) also gets its curve under "
     "the hybrid rule (`kvwatch_hybrid_*`, exact engine only)."},
    {"model_config", Type::kString, R"("")", true,
     "Path of the model's Hugging Face `config.json`, read at start-up (its hybrid layers as for `model`)."},
    {"bytes_per_token", Type::kSize, "unset", false,
     "KV-cache bytes per token on one GPU rank, used as is (`kv_dtype` and "
     "`tensor_parallel` do not apply)."},
    {"kv_dtype", Type::kString, R"("")", true,
     "KV-cache element type overriding the model's (`fp16`, `bf16`, `fp8`, `fp32`, ...); "
     "with `model` or `model_config` only."},
    {"tensor_parallel", Type::kInt, "1", true,
     "Tensor-parallel ranks the KV heads are split over, >= 1; other than 1 only with "
     "`model` or `model_config`."},
    {"page_tokens", Type::kInt, "16", true, "Tokens per KV-cache page (the engine's block size), >= 1."},

    {"engine", Type::kMap, "{}", true, "The stack-distance engine."},
    {"engine.max_pages", Type::kInt, "1048576", true,
     "Distinct pages tracked, 1 to 2147483648: the largest capacity of interest. Curves are "
     "exact up to it; memory grows with it. A hybrid model's curve tracks the bytes of as many pages "
     "of the full-attention count."},
    {"engine.touch_order", Type::kString, R"("tail-first")", true,
     "Order in which a request's pages are referenced after their distances are read: "
     "`tail-first` (the prefix's head becomes most recent) or `head-first`."},
    {"engine.coverage_share", Type::kNumber, "1.0", true,
     "Share of a request's reusable prefix, in (0, 1], that must hit for the request to "
     "count as covered."},
    {"engine.remembered_evictions", Type::kInt, "`engine.max_pages`", false,
     "Pages evicted from tracking that are remembered, so that their reuse counts as beyond "
     "tracked rather than cold; 0 means unlimited (memory grows with every distinct page)."},

    {"engine.sample_rate", Type::kNumber, "1.0", true,
     "Spatial sampling rate in (0, 1] (SHARDS): only pages whose hashed id falls in this share "
     "go through the engine, whose distances and counts are scaled back by 1 / rate (with the "
     "SHARDS-adj correction). 1 is exact. Memory shrinks by about the rate."},
    {"engine.sample_max_pages", Type::kInt, "0", true,
     "Fixed-size sampling: when > 0, the rate adapts down from `engine.sample_rate` so that at "
     "most this many sampled pages are kept (SHARDS fixed-size); memory then stays flat however "
     "many distinct pages arrive. 0 turns it off. The rate is exported as "
     "`kvwatch_engine_sample_rate`."},

    {"curve", Type::kMap, "{}", true, "The live curves."},
    {"curve.windows", Type::kDurationList, R"(["5m", "1h", "24h"])", true,
     "Time windows the curves are kept over, each > 0 and distinct; labelled as written "
     "(`window=\"5m\"`)."},
    {"curve.buckets_per_octave", Type::kInt, "8", true,
     "Log-spaced capacity buckets per doubling, 4 to 64; a capacity read off a curve is "
     "within 2^(1/n) - 1 of the exact one (9.1% at 8)."},
    {"curve.page_hit_targets", Type::kNumberList, "[0.5, 0.9, 0.95, 0.99]", true,
     "Page-hit ratios in (0, 1] whose working set (the smallest capacity reaching them) is "
     "exported."},
    {"curve.coverage_targets", Type::kNumberList, "[0.5, 0.9, 0.95, 0.99]", true,
     "Request-coverage fractions in (0, 1] whose working set is exported."},
    {"curve.capacities", Type::kIntList, "[]", true,
     "The replica's real cache sizes in pages, each 1 to `engine.max_pages`, for hit-ratio "
     "gauges at those sizes."},
    {"curve.knee_sensitivity", Type::kNumber, "1.0", true,
     "Kneedle sensitivity S, > 0: larger values wait for a sharper knee."},
    {"curve.knee_window_min_requests", Type::kInt, "100", true,
     "A window with fewer requests than this (>= 0) has no knee."},
    {"curve.policies", Type::kStringList, "[]", true,
     "Eviction policies run as live canaries at each of `curve.capacities` over the curve's "
     "windows: lru, fifo, lfu, arc, s3fifo, sglang, vllm, priority, workload-aware, sieve (belady needs the "
     "future: replay only). At most 64 canaries (policies x capacities)."},
    {"curve.engine_policy", Type::kString, R"("lru")", true,
     "The policy the engine itself runs (`vllm` for vLLM, `sglang` for SGLang's radix cache); "
     "`kvwatch_policy_gain_ratio` compares every canary with it, and it runs as a canary too."},
    {"curve.decode_tokens_per_second", Type::kNumber, "50", true,
     "Decode rate per sequence in tokens/s, > 0: it gives the sglang and vllm canaries' "
     "request lifetimes (output tokens / rate), and the KV load factor's "
     "(`kvwatch_kv_load_factor`) when no engine `/metrics` collector reports one."},
    {"curve.prefill_seconds", Type::kNumber, "0", true,
     "Prefill time per request in seconds, >= 0: the KV load factor charges each prompt's KV for it "
     "on top of the decode time, when no engine `/metrics` collector reports one (0: prefill "
     "is not charged)."},
    {"curve.policy_priorities", Type::kString, R"("")", true,
     "Retention priorities for the priority canary: `tenant:NAME=P,class:NAME=P` (higher kept "
     "longer; others 0; classes: first, turn2, turn3-4, turn5-8, turn9+)."},
    {"curve.s3fifo_promotion_hits", Type::kInt, "1", true,
     "The s3fifo canaries' promotion threshold, 1 to 3: hits a page needs while in the small FIFO "
     "to move to the main FIFO (1: the S3-FIFO paper; libCacheSim's S3FIFO defaults to 2)."},

    {"curve.max_clock_skew", Type::kDuration, R"("5m")", true,
     "How far ahead of the agent's clock a record's timestamp may be, > 0. A record further "
     "ahead (a trace line, a KV event) is bad input: counted in "
     "`kvwatch_collector_errors_total{reason=\"future_timestamp\"}`, logged with where it came "
     "from, and left out, since one would move every window past all later records."},

    {"web", Type::kMap, "{}", true, "The HTTP server: `/metrics`, the API and the web page."},
    {"web.listen_address", Type::kString, R"("127.0.0.1")", true,
     "Address to listen on (`0.0.0.0`: every IPv4 interface)."},
    {"web.port", Type::kInt, "8477", true, "TCP port, 0 to 65535 (0: any free port)."},
    {"web.config_file", Type::kString, R"("")", true,
     "A Prometheus exporter-toolkit web config file (TLS, basic auth, headers); empty: "
     "plain HTTP without authentication. Re-read on SIGHUP: its TLS certificate, key, client CA "
     "and settings, `basic_auth_users` and headers take effect for new connections and requests "
     "(TLS cannot be turned on or off without a restart; a file that fails keeps the previous "
     "one, `kvwatch_web_config_last_reload_successful` 0). Nothing else is reloaded."},
    {"web.refresh_seconds", Type::kInt, "5", true, "Seconds between redraws of the web page, >= 1."},
    {"web.max_connections", Type::kInt, "1024", true,
     "Open HTTP connections at most, 1 to 1048576; a new one closes the one that has waited "
     "longest for its request or TLS handshake. Each needs a file descriptor."},

    {"state", Type::kMap, "{}", true, "State kept across restarts."},
    {"state.path", Type::kString, R"("")", true,
     "Directory of the agent's state (curves, tail positions); empty: nothing is kept "
     "across restarts. One agent per directory: `state.bin.lock` in it is locked for the "
     "agent's life (with its pid), and a second agent is refused at start-up."},
    {"state.interval", Type::kDuration, R"("60s")", true, "How often the state is saved, > 0."},

    {"collectors", Type::kMap, "{}", true,
     "Where requests come from. With no collector configured at all, the agent runs "
     "`synth` with its defaults."},
    {"collectors.synth", Type::kMap, "off", false,
     "The built-in synthetic replica, for trying kvwatch out: `synth: {}` turns it on with "
     "the defaults below. With no collector configured at all, it runs with its defaults."},
    {"collectors.synth.rate", Type::kNumber, "5", true, "Requests per second, at least 0.000001 and at most 1000000."},
    {"collectors.synth.seed", Type::kInt, "1", true, "Seed of the random stream, >= 0."},
    {"collectors.synth.tenants", Type::kInt, "4", true, "Tenants, 1 to 60000."},
    {"collectors.synth.sessions", Type::kInt, "50", true, "Multi-turn sessions open at any time, 1 to 1000000."},
    {"collectors.synth.one_shot_fraction", Type::kNumber, "0.3", true,
     "Share of requests that are one-shot, in [0, 1]."},
    {"collectors.synth.shift_start", Type::kDuration, "unset", false,
     "Start of a workload shift (an extra tenant with a long prompt), counted from the "
     "agent's start; set together with `shift_end`."},
    {"collectors.synth.shift_end", Type::kDuration, "unset", false, "End of the workload shift, after `shift_start`."},

    {"collectors.trace_files", Type::kMapList, "[]", true,
     "Request traces (Mooncake or Qwen-Bailian JSON Lines) tailed from files."},
    {"collectors.trace_files[].name", Type::kString, "required", false,
     "Collector name, the `collector` label: 1 to 64 of `A-Z a-z 0-9 _ . -`, unique among "
     "all collectors (`synth` is reserved)."},
    {"collectors.trace_files[].paths", Type::kStringList, "required", false, "Files or globs to tail, at least one."},
    {"collectors.trace_files[].start_at", Type::kString, R"("end")", true,
     "Where to start in a file without a saved position: `end` or `beginning`."},
    {"collectors.trace_files[].timestamp_unit", Type::kString, R"("auto")", true,
     "Unit of the records' `timestamp`: `auto` (decided once per trace), `ms` or `s`."},
    {"collectors.trace_files[].tenant_fields", Type::kStringList, R"(["tenant", "class", "type"])", true,
     "Record fields tried in order for the tenant label."},
    {"collectors.trace_files[].max_line_bytes", Type::kSize, R"("1MiB")", true,
     "Longer lines are skipped and counted; 1 byte to 1GiB."},
    {"collectors.trace_files[].poll_interval", Type::kDuration, R"("250ms")", true,
     "How often files are checked for new lines and rotation, > 0."},

    {"collectors.kv_events", Type::kMapList, "[]", true, "KV-cache event streams (vLLM or SGLang ZeroMQ publishers)."},
    {"collectors.kv_events[].name", Type::kString, "required", false, "Collector name, as for `trace_files`."},
    {"collectors.kv_events[].endpoints", Type::kStringList, "required", false,
     "ZeroMQ endpoints (`tcp://`, `ipc://` or `inproc://`), at least one."},
    {"collectors.kv_events[].topic", Type::kString, R"("")", true, "Subscription topic prefix; empty: every message."},
    {"collectors.kv_events[].replay_endpoint", Type::kString, R"("")", true,
     "The publisher's replay endpoint, to fetch missed events; empty: none."},
    {"collectors.kv_events[].replay_timeout", Type::kDuration, R"("100ms")", true,
     "Per poll, how long fetching missed batches from `replay_endpoint` may take (for all its publishers "
     "together; a gap takes as many polls as it needs), >= 1ms."},
    {"collectors.kv_events[].replay_give_up", Type::kDuration, R"("5s")", true,
     "After this long without an answer from `replay_endpoint`, the batches still missing count as lost; "
     ">= `replay_timeout`."},
    {"collectors.kv_events[].bind", Type::kBool, "false", true, "Bind the endpoints instead of connecting to them."},
    {"collectors.kv_events[].tenant_source", Type::kString, R"("none")", true,
     "Where a request's tenant comes from in KV events: `none`, `lora` (the LoRA adapter "
     "name), `cache_salt` (vLLM's cache salt of the chain's root block), `lora_or_salt`, "
     "`session_id` (the session an event names, where the engine publishes one)."},
    {"collectors.kv_events[].request_group", Type::kInt, "unset", false,
     "The KV cache group (`group_idx`, 0 to 255) whose stores become requests. Unset: the group "
     "that announces full attention (`kv_cache_spec_kind`), else group 0. Set it only for an engine "
     "that publishes `group_idx` without kinds and whose full-attention group is not 0."},

    {"collectors.engine_log", Type::kMapList, "[]", true,
     "Serving-engine log files (vLLM stats lines, SGLang prefill lines)."},
    {"collectors.engine_log[].name", Type::kString, "required", false, "Collector name, as for `trace_files`."},
    {"collectors.engine_log[].paths", Type::kStringList, "required", false, "Files or globs to tail, at least one."},
    {"collectors.engine_log[].engine", Type::kString, R"("auto")", true,
     "Log format: `vllm`, `sglang` or `auto` (recognized line by line)."},

    {"collectors.engine_metrics", Type::kMapList, "[]", true, "Serving-engine Prometheus endpoints, scraped."},
    {"collectors.engine_metrics[].name", Type::kString, "required", false, "Collector name, as for `trace_files`."},
    {"collectors.engine_metrics[].url", Type::kString, "required", false,
     "`http://` or `https://` URL, e.g. `http://127.0.0.1:8000/metrics`."},
    {"collectors.engine_metrics[].interval", Type::kDuration, R"("15s")", true, "Time between scrapes, > 0."},
    {"collectors.engine_metrics[].timeout", Type::kDuration, R"("5s")", true,
     "Scrape timeout, > 0 and at most `interval`."},

    {"alerts", Type::kMap, "{}", true, "Alerts raised by the agent's detectors."},
    {"alerts.enabled", Type::kBool, "true", true, "Run the detectors and raise alerts."},
    {"alerts.alertmanagers", Type::kStringList, "[]", true,
     "Alertmanager base URLs (`http://host:9093`) that alerts are pushed to."},
    {"alerts.webhooks", Type::kStringList, "[]", true, "URLs that receive Alertmanager-compatible webhook payloads."},
    {"alerts.resend_interval", Type::kDuration, R"("60s")", true,
     "How often firing alerts are sent again, > 0; a firing alert's `endsAt` is 4 intervals "
     "ahead, and a resolved one is sent again on this interval for 15 minutes."},
    {"alerts.evaluation_interval", Type::kDuration, R"("15s")", true, "How often the detectors are evaluated, > 0."},
    {"alerts.timeout", Type::kDuration, R"("10s")", true,
     "Connection and read timeout of each notification request, > 0. Sending runs on its "
     "own threads, with retries and exponential backoff; a notifier that is down never "
     "slows ingestion."},
    {"alerts.short_window", Type::kDuration, R"("1h")", true,
     "The recent window the detectors compare with the baseline, in whole seconds. When "
     "written, it must be one of `curve.windows` (the knee and the working set are read from "
     "that curve)."},
    {"alerts.baseline_window", Type::kDuration, R"("24h")", true,
     "The baseline window, longer than `short_window`; when written, one of `curve.windows`. "
     "Rates are computed over both windows from the engine's counters."},
    {"alerts.knee_shift", Type::kMap, "{}", true,
     "`KVWatchKneeShift`: the knee of the short window's curve moved away from the "
     "baseline's. On a stationary workload it must not fire."},
    {"alerts.knee_shift.enabled", Type::kBool, "true", true, "Run this detector."},
    {"alerts.knee_shift.fire_threshold", Type::kNumber, "0.25", true,
     "Relative knee change, abs(short - baseline) / baseline, at which the alert goes "
     "pending, > 0."},
    {"alerts.knee_shift.clear_threshold", Type::kNumber, "0.15", true,
     "Relative change below which a firing alert resolves, >= 0 and at most "
     "`fire_threshold` (hysteresis)."},
    {"alerts.knee_shift.min_shift_pages", Type::kNumber, "32", true,
     "The knee must also have moved by this many pages, >= 0."},
    {"alerts.knee_shift.min_requests", Type::kInt, "500", true,
     "Requests needed in the short window, >= 0; with fewer the detector stays quiet."},
    {"alerts.knee_shift.min_baseline_requests", Type::kInt, "5000", true,
     "Requests needed in the baseline window, >= 0."},
    {"alerts.knee_shift.for", Type::kDuration, R"("15m")", true,
     "How long the change must hold before the alert fires, whole seconds >= 0."},
    {"alerts.over_capacity", Type::kMap, "{}", true,
     "`KVWatchWorkingSetOverCapacity`: the short window's working set exceeds the cache, "
     "the largest of `curve.capacities` (no capacity: no data)."},
    {"alerts.over_capacity.enabled", Type::kBool, "true", true, "Run this detector."},
    {"alerts.over_capacity.target", Type::kString, R"("page_hit")", true,
     "What the working set keeps: `page_hit` (a fraction of the unlimited page hits) or "
     "`request_coverage` (a fraction of requests)."},
    {"alerts.over_capacity.fraction", Type::kNumber, "0.95", true, "The target's fraction, in (0, 1]."},
    {"alerts.over_capacity.fire_threshold", Type::kNumber, "1.0", true,
     "Working set / capacity at which the alert goes pending, > 0."},
    {"alerts.over_capacity.clear_threshold", Type::kNumber, "0.9", true,
     "Working set / capacity below which a firing alert resolves, >= 0 and at most "
     "`fire_threshold`."},
    {"alerts.over_capacity.min_requests", Type::kInt, "500", true, "Requests needed in the short window, >= 0."},
    {"alerts.over_capacity.for", Type::kDuration, R"("15m")", true,
     "How long the working set must stay over before the alert fires, whole seconds >= 0."},
    {"alerts.rate_shift", Type::kMap, "{}", true,
     "`KVWatchEvictionRateShift`, `KVWatchRejectionRateShift`, `KVWatchPreemptionRateShift`: "
     "the engine counter's rate over the short window against the baseline's, floored at 1 "
     "evicted block/s and 0.05 rejections or preemptions/s. Quiet without engine counters."},
    {"alerts.rate_shift.enabled", Type::kBool, "true", true, "Run these detectors."},
    {"alerts.rate_shift.fire_threshold", Type::kNumber, "2.0", true, "Rate ratio at which an alert goes pending, > 0."},
    {"alerts.rate_shift.clear_threshold", Type::kNumber, "1.5", true,
     "Rate ratio below which a firing alert resolves, >= 0 and at most `fire_threshold`."},
    {"alerts.rate_shift.min_requests", Type::kInt, "500", true, "Requests needed in the short window, >= 0."},
    {"alerts.rate_shift.for", Type::kDuration, R"("15m")", true, "How long the ratio must hold, whole seconds >= 0."},
    {"alerts.drift", Type::kMap, "{}", true,
     "`KVWatchEvictionRateDrift`: a CUSUM test on the per-minute eviction rate, against a "
     "baseline learned over its first 2 hours; catches small sustained rises."},
    {"alerts.drift.enabled", Type::kBool, "true", true, "Run this detector."},
    {"alerts.drift.fire_threshold", Type::kNumber, "10", true,
     "CUSUM statistic, in standard deviations, at which the alert goes pending, > 0."},
    {"alerts.drift.clear_threshold", Type::kNumber, "5", true,
     "Statistic below which a firing alert resolves, >= 0 and at most `fire_threshold`."},
    {"alerts.drift.relearn_after", Type::kDuration, R"("1h")", true,
     "After an alarm this long the new rate becomes the baseline, whole seconds; 0s: never."},
    {"alerts.drift.min_requests", Type::kInt, "500", true,
     "Requests needed in the short window for a sample to count, >= 0."},
    {"alerts.drift.for", Type::kDuration, R"("5m")", true, "How long the statistic must hold, whole seconds >= 0."},
    {"alerts.capacity_miss_share", Type::kMap, "{}", true,
     "`KVWatchCapacityMissesRising`: the share of page references that are capacity misses "
     "(they would hit in an unlimited cache but miss at the smallest of `curve.capacities`) "
     "over the short window against the baseline window's; the annotations name the top "
     "evicting class and tenant. Needs `curve.capacities`."},
    {"alerts.capacity_miss_share.enabled", Type::kBool, "true", true, "Run this detector."},
    {"alerts.capacity_miss_share.fire_threshold", Type::kNumber, "2.0", true,
     "Share ratio, short / max(baseline, `share_floor`), at which the alert goes pending, > 0."},
    {"alerts.capacity_miss_share.clear_threshold", Type::kNumber, "1.5", true,
     "Share ratio below which a firing alert resolves, >= 0 and at most `fire_threshold`."},
    {"alerts.capacity_miss_share.share_floor", Type::kNumber, "0.01", true,
     "Floor of the baseline share, in [0, 1], so a cache that almost never misses does not "
     "\"double\" on a handful of misses."},
    {"alerts.capacity_miss_share.every_capacity", Type::kBool, "false", true,
     "Compare at every one of `curve.capacities` (the largest ratio counts) instead of the "
     "smallest only."},
    {"alerts.capacity_miss_share.min_requests", Type::kInt, "500", true, "Requests needed in the short window, >= 0."},
    {"alerts.capacity_miss_share.for", Type::kDuration, R"("15m")", true,
     "How long the ratio must hold, whole seconds >= 0."},
    {"alerts.kv_load", Type::kMap, "{}", true,
     "`KVWatchKvLoadHigh`: the KV load factor (arrival rate x mean KV token-seconds per request / "
     "KV capacity in tokens, `kvwatch_kv_load_factor`) holds at or above a threshold: admission "
     "is outrunning memory and preemptions follow. Needs requests with prompt and output token "
     "counts and a KV capacity (no data otherwise)."},
    {"alerts.kv_load.enabled", Type::kBool, "true", true, "Run this detector."},
    {"alerts.kv_load.window", Type::kDuration, R"("5m")", true,
     "The curve window the load factor is read over; when written, one of `curve.windows`."},
    {"alerts.kv_load.fire_threshold", Type::kNumber, "0.9", true, "Load factor at which the alert goes pending, > 0."},
    {"alerts.kv_load.clear_threshold", Type::kNumber, "0.8", true,
     "Load factor below which a firing alert resolves, >= 0 and at most `fire_threshold`."},
    {"alerts.kv_load.min_requests", Type::kInt, "50", true, "Requests with token counts needed in the window, >= 0."},
    {"alerts.kv_load.for", Type::kDuration, R"("10m")", true,
     "How long the load factor must hold at or above `fire_threshold` before the alert fires, "
     "whole seconds >= 0."},

    {"tenants", Type::kMap, "{}", true,
     "Per-tenant and per-class accounting in the one shared cache: hit ratios, capacity "
     "misses, who evicts whom, request footprints (docs/tenants.md). "
     "Needs the exact engine (`engine.sample_rate` 1, `engine.sample_max_pages` 0)."},
    {"tenants.enabled", Type::kBool, "true", true,
     "Keep the accounting. When not written and the engine samples, it is off."},
    {"tenants.top_k", Type::kInt, "8", true,
     "Tenants with their own label (the top K by page references), 1 to 254; the others are "
     "`other`."},
    {"tenants.class_top_k", Type::kInt, "8", true,
     "Request classes with their own label, 1 to 254; the others are `other`."},
    {"tenants.isolated", Type::kBool, "false", true,
     "Also keep each tenant group alone in an LRU cache of its own (isolated curves), so that "
     "the hits lost to other tenants can be read; costs one more engine per tenant group."},
};

std::string EscapeCell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::span<const ConfigKey> ConfigKeys() { return kKeys; }

const ConfigKey* FindConfigKey(std::string_view path) {
  for (const ConfigKey& key : kKeys) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

std::string_view ConfigTypeName(ConfigType type) {
  switch (type) {
    case Type::kString:
      return "string";
    case Type::kBool:
      return "boolean";
    case Type::kInt:
      return "integer";
    case Type::kNumber:
      return "number";
    case Type::kDuration:
      return "duration";
    case Type::kSize:
      return "size";
    case Type::kStringList:
      return "list of strings";
    case Type::kIntList:
      return "list of integers";
    case Type::kNumberList:
      return "list of numbers";
    case Type::kDurationList:
      return "list of durations";
    case Type::kMap:
      return "map";
    case Type::kMapList:
      return "list of maps";
    case Type::kStringMap:
      return "map of strings";
  }
  return "?";
}

std::string ConfigReferenceMarkdown() {
  std::string out =
      "| key | type | default | meaning |\n"
      "|---|---|---|---|\n";
  for (const ConfigKey& key : kKeys) {
    std::string default_cell(key.default_text);
    if (key.default_is_literal) default_cell = "`" + default_cell + "`";
    out.append("| `").append(key.path).append("` | ").append(ConfigTypeName(key.type));
    out.append(" | ").append(EscapeCell(default_cell));
    out.append(" | ").append(EscapeCell(key.description)).append(" |\n");
  }
  out +=
      "\n"
      "`a[].b` is key `b` of every item of the list `a`. Durations are numbers with units\n"
      "`us`, `ms`, `s`, `m`, `h` or `d`, summed when several, such as `250ms`, `30s` or `1h30m`.\n"
      "Sizes are a whole number of bytes, or a number with a unit `B`, `KiB`, `MiB`, `GiB`, `TiB`\n"
      "(powers of 1024) or `KB`, `MB`, `GB`, `TB` (powers of 1000), such as `64KiB` or `1.5MiB`.\n"
      "The command line's duration and size flags read the same forms (and a bare number of\n"
      "seconds as a duration). Unknown keys, values of the wrong type and values out of range\n"
      "are errors that name the key and its line.\n";
  return out;
}

}  // namespace kvwatch::config
