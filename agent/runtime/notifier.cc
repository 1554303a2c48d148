#include "agent/runtime/notifier.h"

#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "agent/runtime/version.h"
#include "alerts/format.h"
#include "base/json_writer.h"
#include "base/mutex.h"

namespace kvwatch::agent {

struct Notifier::Worker {
  struct Item {
    alerts::PostableAlert alert;
    bool resolved = false;
    std::uint64_t seq = 0;  // enqueue order: the oldest go first when the outbox is full
  };

  NotifierTarget target;
  std::string scheme_host_port;  // "http://am:9093"
  std::string path;              // "/api/v2/alerts"

  mutable base::Mutex mu;
  base::CondVar cv;  // signalled when the outbox gains items or stopping is set
  // State below is protected by mu.
  std::map<alerts::Labels, Item> outbox GUARDED_BY(mu);
  std::uint64_t next_seq GUARDED_BY(mu) = 0;
  bool stopping GUARDED_BY(mu) = false;
  NotifierStats stats GUARDED_BY(mu);

  std::thread thread;
};

namespace {

// "http://host:port/a/b" -> ("http://host:port", "/a/b"); false when not an
// http(s) URL with a host.
bool SplitUrl(const std::string& url, std::string* scheme_host_port, std::string* path) {
  std::size_t scheme_end = 0;
  if (url.rfind("http://", 0) == 0) {
    scheme_end = 7;
  } else if (url.rfind("https://", 0) == 0) {
    scheme_end = 8;
  } else {
    return false;
  }
  const std::size_t slash = url.find('/', scheme_end);
  *scheme_host_port = url.substr(0, slash);
  *path = slash == std::string::npos ? "" : url.substr(slash);
  const bool bad_char = url.find_first_of(" \t\r\n") != std::string::npos || url.find('?', scheme_end) < slash;
  return scheme_host_port->size() > scheme_end && !bad_char;
}

std::string TargetPath(const NotifierTarget& target, std::string path) {
  if (target.kind == NotifierKind::kWebhook) return path.empty() ? "/" : path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  return path + "/api/v2/alerts";
}

void AppendMap(const std::map<std::string, std::string>& map, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (const auto& [key, value] : map) {
    if (!first) out->push_back(',');
    first = false;
    *out += base::JsonQuote(key) + ":" + base::JsonQuote(value);
  }
  out->push_back('}');
}

// The pairs that every map in `maps` holds.
std::map<std::string, std::string> Common(const std::vector<const std::map<std::string, std::string>*>& maps) {
  if (maps.empty()) return {};
  std::map<std::string, std::string> common = *maps.front();
  for (const auto* map : maps) {
    for (auto it = common.begin(); it != common.end();) {
      auto found = map->find(it->first);
      it = (found == map->end() || found->second != it->second) ? common.erase(it) : std::next(it);
    }
  }
  return common;
}

// FNV-1a 64, as Prometheus' model package adds strings and bytes to it.
constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

std::uint64_t FnvAdd(std::uint64_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= kFnvPrime;
  }
  return hash;
}

std::uint64_t FnvAddByte(std::uint64_t hash, unsigned char byte) {
  hash ^= byte;
  hash *= kFnvPrime;
  return hash;
}

}  // namespace

std::string_view NotifierKindName(NotifierKind kind) {
  return kind == NotifierKind::kAlertmanager ? "alertmanager" : "webhook";
}

std::string LabelsFingerprint(const alerts::Labels& labels) {
  std::uint64_t hash = kFnvOffset;
  for (const auto& [name, value] : labels) {  // std::map: sorted by name
    hash = FnvAddByte(FnvAdd(hash, name), 0xff);
    hash = FnvAddByte(FnvAdd(hash, value), 0xff);
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::string EncodeWebhookPayload(const std::vector<alerts::PostableAlert>& items, alerts::TimePoint now,
                                 std::string_view receiver, std::string_view external_url) {
  std::vector<const std::map<std::string, std::string>*> labels, annotations;
  bool any_firing = false;
  std::string list = "[";
  for (const alerts::PostableAlert& item : items) {
    const bool firing = item.ends_at > now;
    any_firing = any_firing || firing;
    labels.push_back(&item.labels);
    annotations.push_back(&item.annotations);
    if (list.size() > 1) list.push_back(',');
    list += "{\"status\":";
    list += firing ? "\"firing\"" : "\"resolved\"";
    list += ",\"labels\":";
    AppendMap(item.labels, &list);
    list += ",\"annotations\":";
    AppendMap(item.annotations, &list);
    list += ",\"startsAt\":" + base::JsonQuote(alerts::FormatRfc3339(item.starts_at));
    list += ",\"endsAt\":" + base::JsonQuote(alerts::FormatRfc3339(item.ends_at));
    list += ",\"generatorURL\":" + base::JsonQuote(item.generator_url);
    list += ",\"fingerprint\":" + base::JsonQuote(LabelsFingerprint(item.labels)) + "}";
  }
  list.push_back(']');
  std::string out = "{\"version\":\"4\",\"groupKey\":\"{}:{}\",\"truncatedAlerts\":0,\"status\":";
  out += any_firing ? "\"firing\"" : "\"resolved\"";
  out += ",\"receiver\":" + base::JsonQuote(receiver) + ",\"groupLabels\":{},\"commonLabels\":";
  AppendMap(Common(labels), &out);
  out += ",\"commonAnnotations\":";
  AppendMap(Common(annotations), &out);
  out += ",\"externalURL\":" + base::JsonQuote(external_url) + ",\"alerts\":" + list + "}";
  return out;
}

base::Status Notifier::ValidateOptions(const NotifierOptions& options) {
  using base::Status;
  if (options.timeout.count() <= 0) return Status::Error("alerts.timeout: expected a duration > 0");
  if (options.initial_backoff.count() <= 0 || options.max_backoff < options.initial_backoff) {
    return Status::Error("notifier backoff: expected 0 < initial_backoff <= max_backoff");
  }
  if (options.queue_capacity == 0) return Status::Error("notifier queue_capacity: expected at least 1");
  for (const NotifierTarget& target : options.targets) {
    std::string origin, path;
    if (!SplitUrl(target.url, &origin, &path)) {
      return Status::Error(
          std::string(target.kind == NotifierKind::kAlertmanager ? "alerts.alertmanagers" : "alerts.webhooks") +
          ": \"" + target.url + "\": expected an http:// or https:// URL with a host");
    }
  }
  return Status::Ok();
}

base::Result<std::unique_ptr<Notifier>> Notifier::Create(NotifierOptions options) {
  using R = base::Result<std::unique_ptr<Notifier>>;
  if (base::Status s = ValidateOptions(options); !s.ok()) return R::Error(s.error());
  std::vector<std::unique_ptr<Worker>> workers;
  for (const NotifierTarget& target : options.targets) {
    auto worker = std::make_unique<Worker>();
    worker->target = target;
    std::string path;
    SplitUrl(target.url, &worker->scheme_host_port, &path);  // checked by ValidateOptions
    worker->path = TargetPath(target, path);
    {
      base::MutexLock lock(worker->mu);  // no thread yet; for the analysis
      worker->stats.kind = target.kind;
      worker->stats.url = target.url;
    }
    workers.push_back(std::move(worker));
  }
  if (!options.clock) options.clock = [] { return std::chrono::system_clock::now(); };
  std::unique_ptr<Notifier> notifier(new Notifier(std::move(options)));
  notifier->workers_ = std::move(workers);
  for (auto& worker : notifier->workers_) {
    Worker* w = worker.get();
    w->thread = std::thread([n = notifier.get(), w] { n->Run(w); });
  }
  return notifier;
}

Notifier::Notifier(NotifierOptions options) : options_(std::move(options)) {}

Notifier::~Notifier() { Stop(); }

void Notifier::Stop() {
  for (auto& worker : workers_) {
    {
      base::MutexLock lock(worker->mu);
      worker->stopping = true;
      worker->outbox.clear();
      worker->stats.queued = 0;
    }
    worker->cv.NotifyAll();
  }
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
}

void Notifier::Enqueue(const std::vector<alerts::PostableAlert>& items, alerts::TimePoint now) {
  if (items.empty()) return;
  for (auto& worker : workers_) {
    {
      base::MutexLock lock(worker->mu);
      if (worker->stopping) continue;
      for (const alerts::PostableAlert& item : items) {
        worker->outbox[item.labels] = Worker::Item{item, item.ends_at <= now, worker->next_seq++};
      }
      while (worker->outbox.size() > options_.queue_capacity) {
        auto oldest = std::min_element(worker->outbox.begin(), worker->outbox.end(),
                                       [](const auto& a, const auto& b) { return a.second.seq < b.second.seq; });
        worker->outbox.erase(oldest);
        ++worker->stats.dropped_queue_full;
      }
      worker->stats.queued = worker->outbox.size();
    }
    worker->cv.NotifyAll();
  }
}

std::vector<NotifierStats> Notifier::Stats() const {
  std::vector<NotifierStats> out;
  for (const auto& worker : workers_) {
    base::MutexLock lock(worker->mu);
    out.push_back(worker->stats);
  }
  return out;
}

void Notifier::Run(Worker* w) {
  int failures = 0;  // consecutive
  w->mu.Lock();      // held except around the POST
  while (true) {
    while (!w->stopping && w->outbox.empty()) w->cv.Wait(w->mu);
    if (w->stopping) break;
    // A firing item that waited past its endsAt would resolve the alert: drop it.
    const alerts::TimePoint now = options_.clock();
    for (auto it = w->outbox.begin(); it != w->outbox.end();) {
      const bool expired = !it->second.resolved && it->second.alert.ends_at <= now;
      w->stats.dropped_expired += expired ? 1 : 0;
      it = expired ? w->outbox.erase(it) : std::next(it);
    }
    w->stats.queued = w->outbox.size();
    if (w->outbox.empty()) continue;

    std::vector<alerts::PostableAlert> items;
    std::map<alerts::Labels, std::uint64_t> sent;  // labels -> seq of the item sent
    for (const auto& [labels, item] : w->outbox) {
      items.push_back(item.alert);
      sent[labels] = item.seq;
    }
    w->mu.Unlock();
    const std::string body =
        w->target.kind == NotifierKind::kAlertmanager
            ? alerts::EncodeAlertmanagerPayload(items)
            : EncodeWebhookPayload(items, options_.clock(), options_.receiver, options_.external_url);
    bool rejected = false;
    std::string error;
    const bool ok = Post(*w, body, &rejected, &error);
    w->mu.Lock();

    if (ok || rejected) {
      std::uint64_t removed = 0;
      for (const auto& [labels, seq] : sent) {
        auto it = w->outbox.find(labels);
        if (it == w->outbox.end() || it->second.seq != seq) continue;  // replaced meanwhile
        w->outbox.erase(it);
        ++removed;
      }
      w->stats.queued = w->outbox.size();
      if (ok) {
        ++w->stats.requests_ok;
        w->stats.alerts_sent += items.size();
        w->stats.last_error.clear();
        failures = 0;
        continue;
      }
      w->stats.dropped_rejected += removed;
    }
    ++w->stats.requests_failed;
    w->stats.last_error = error;
    if (rejected) continue;
    auto delay = options_.initial_backoff;
    for (int i = 0; i < failures && delay < options_.max_backoff; ++i) delay *= 2;
    delay = std::min(delay, options_.max_backoff);
    ++failures;
    const auto deadline = std::chrono::steady_clock::now() + delay;
    while (!w->stopping && w->cv.WaitUntil(w->mu, deadline)) {
    }
  }
  w->mu.Unlock();
}

bool Notifier::Post(const Worker& worker, const std::string& body, bool* rejected, std::string* error) {
  httplib::Client client(worker.scheme_host_port);
  const auto seconds = static_cast<time_t>(options_.timeout.count() / 1000);
  const auto micros = static_cast<time_t>((options_.timeout.count() % 1000) * 1000);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
  client.set_keep_alive(false);
  const httplib::Headers headers = {{"User-Agent", std::string("kvwatch/") + Version()}};
  auto result = client.Post(worker.path.c_str(), headers, body, "application/json");
  if (!result) {
    *error = worker.target.url + ": " + httplib::to_string(result.error());
    return false;
  }
  if (result->status >= 200 && result->status < 300) return true;
  std::string answer = result->body.substr(0, 200);
  while (!answer.empty() && (answer.back() == '\n' || answer.back() == '\r')) answer.pop_back();
  *error = worker.target.url + ": HTTP " + std::to_string(result->status) + (answer.empty() ? "" : ": " + answer);
  *rejected = result->status >= 400 && result->status < 500 && result->status != 408 && result->status != 429;
  return false;
}

}  // namespace kvwatch::agent
