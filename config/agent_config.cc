// The agent config's driver: the top-level keys (replica, the model keys,
// page_tokens), the dispatch of each section to its parser (sections.h), and the
// rules across sections once the document is read. The key table is in
// config_keys.cc, the shared reading core in field_reader.cc.
#include "config/agent_config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "base/text_file.h"
#include "config/field_reader.h"
#include "config/sections.h"
#include "curve/sizing.h"

namespace kvwatch::config {
namespace internal {
namespace {

using base::Result;
using base::Status;

class Parser {
 public:
  explicit Parser(std::string_view source) : r_(source) {}

  Result<AgentConfig> Parse(std::string_view text) {
    AgentConfig config;
    Status status = ParseText(text, &config);
    if (!status.ok()) return Result<AgentConfig>::Error(status.error());
    return config;
  }

 private:
  Status ParseText(std::string_view text, AgentConfig* config) {
    Result<std::vector<YAML::Node>> loaded = LoadYaml(r_.source(), text);
    if (!loaded.ok()) return loaded.status();
    const std::vector<YAML::Node>& documents = loaded.value();
    if (documents.size() > 1) {
      return r_.Fail("(top level)", documents[1].Mark(),
                     "expected one YAML document, found " + std::to_string(documents.size()));
    }
    if (documents.empty()) return Resolve(config);
    Entry root{"", "", ConfigType::kMap, documents[0], documents[0].Mark(), documents[0].Mark()};
    if (root.node.IsNull()) return Resolve(config);
    if (!root.node.IsMap()) {
      return r_.Fail("(top level)", root.mark, "expected a map of keys, got " + Got(root.node));
    }
    try {
      Status status = ParseTop(root, config);
      if (!status.ok()) return status;
    } catch (const YAML::Exception& ex) {  // not expected: every access is checked first
      return r_.Fail("(top level)", ex.mark, "unexpected YAML error: " + ex.msg);
    }
    return Resolve(config);
  }

  // Calls visit for each key of the map e in document order, after checking that

  Status ParseTop(const Entry& root, AgentConfig* c) {
    return r_.ForEachKey(root, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "replica") return r_.ReadString(e, &c->replica);
      if (k == "model_label") return r_.ReadString(e, &c->model_label);
      if (k == "model" || k == "model_config" || k == "bytes_per_token") {
        return ParseModelSource(e, c);
      }
      if (k == "kv_dtype") return ParseKvDtype(e, c);
      if (k == "tensor_parallel") {
        return r_.ReadInt(e, 1, std::numeric_limits<int>::max(), &c->tensor_parallel);
      }
      if (k == "page_tokens") {
        return r_.ReadInt(e, 1, std::numeric_limits<int>::max(), &c->page_tokens);
      }
      if (k == "engine") return ParseEngineSection(r_, e, &c->engine);
      if (k == "curve") return ParseCurveSection(r_, e, &c->curve, &curve_notes_);
      if (k == "web") return ParseWebSection(r_, e, &c->web);
      if (k == "state") return ParseStateSection(r_, e, &c->state);
      if (k == "collectors") return ParseCollectorsSection(r_, e, &c->collectors);
      if (k == "alerts") return ParseAlertsSection(r_, e, &c->alerts);
      if (k == "tenants") return ParseTenantsSection(r_, e, &c->tenants);
      return r_.Unhandled(e);
    });
  }

  // model, model_config, bytes_per_token: at most one (the second one is the error).
  Status ParseModelSource(const Entry& e, AgentConfig* c) {
    if (!model_source_.empty()) {
      return r_.FailAtKey(
          e, "at most one of model, model_config and bytes_per_token may be set; " + model_source_ + " is already set");
    }
    if (e.pattern == "bytes_per_token") {
      std::uint64_t bytes = 0;
      if (Status s = r_.ReadSize(e, 1, std::numeric_limits<std::uint64_t>::max(), &bytes); !s.ok()) {
        return s;
      }
      c->bytes_per_token = bytes;
      model_source_ = e.path;
      return Status::Ok();
    }
    std::string* target = e.pattern == "model" ? &c->model : &c->model_config;
    if (Status s = r_.ReadString(e, target); !s.ok()) return s;
    if (target->empty()) return Status::Ok();  // "" is the default: not a source
    if (e.pattern == "model") {
      Result<curve::ModelSpec> preset = curve::LookupModelPreset(*target);
      if (!preset.ok()) return r_.Fail(e, preset.error());
    }
    model_source_ = e.path;
    return Status::Ok();
  }

  Status ParseKvDtype(const Entry& e, AgentConfig* c) {
    if (Status s = r_.ReadString(e, &c->kv_dtype); !s.ok()) return s;
    if (c->kv_dtype.empty()) return Status::Ok();
    Result<int> bytes = curve::DtypeBytes(c->kv_dtype);
    if (!bytes.ok()) return r_.Fail(e, bytes.error());
    return Status::Ok();
  }

  Status Resolve(AgentConfig* c) {
    if (Status s = ResolveCurve(r_, curve_notes_, c); !s.ok()) return s;
    if (Status s = ResolveAlertWindows(r_, *c); !s.ok()) return s;
    if (Status s = ResolveTenants(r_, c); !s.ok()) return s;
    if (Status s = ResolveModel(*c); !s.ok()) return s;
    ResolveCollectors(c);
    return Status::Ok();
  }

  Status ResolveModel(const AgentConfig& c) {
    const bool from_spec = !c.model.empty() || !c.model_config.empty();
    const std::string why = c.bytes_per_token ? "does not apply to bytes_per_token, which is per rank as given"
                                              : "applies to model or model_config, and neither is set";
    if (!from_spec && !c.kv_dtype.empty()) return r_.FailAtPath("kv_dtype", why);
    if (!from_spec && c.tensor_parallel != 1) return r_.FailAtPath("tensor_parallel", why);
    if (c.model.empty()) return Status::Ok();
    Result<curve::ModelSpec> spec = curve::LookupModelPreset(c.model);
    if (!spec.ok()) return r_.FailAtPath("model", spec.error());
    Result<std::uint64_t> bytes = curve::BytesPerTokenPerRank(spec.value(), c.tensor_parallel);
    if (!bytes.ok()) {
      return r_.FailAtPath(c.tensor_parallel != 1 ? "tensor_parallel" : "model", bytes.error());
    }
    return Status::Ok();
  }

  FieldReader r_;
  std::string model_source_;  // the model key already set, if any
  CurveNotes curve_notes_;
};

}  // namespace
}  // namespace internal

using base::Result;

curve::EngineOptions ToEngineOptions(const EngineSettings& engine) {
  curve::EngineOptions options;
  options.max_pages = engine.max_pages;
  options.touch_order = engine.touch_order;
  options.remembered_evictions = engine.remembered_evictions;
  return options;
}

AgentConfig DefaultAgentConfig() {
  // The empty document is valid: what the parser fills in is every default,
  // the agent's synthetic replica included.
  return ParseAgentConfig("", "(default)").value();
}

Result<AgentConfig> ParseAgentConfig(std::string_view yaml_text, std::string_view source_name) {
  return internal::Parser(source_name).Parse(yaml_text);
}

Result<AgentConfig> LoadAgentConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Result<AgentConfig>::Error(path + ": cannot open the agent config: " + std::strerror(errno));
  }
  std::string text;
  if (std::string problem = base::ReadBoundedText(path, in, &text); !problem.empty()) {
    return Result<AgentConfig>::Error(path + ": the agent config " + problem);
  }
  return ParseAgentConfig(text, path);
}

std::string_view EngineLogKindName(base::EngineLogKind engine) {
  return internal::ChoiceName(base::kEngineLogKindSpellings, engine);
}

}  // namespace kvwatch::config
