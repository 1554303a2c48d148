// Test support shared by the config tests and the collector registry's: YAML
// documents that write one key of the config's key table (config/config_keys.cc)
// with every parent it needs, so a test can walk the table and write each key.
//
// Thread safety: none; test code.
#ifndef KVWATCH_TESTS_CONFIG_TESTING_CONFIG_DOCUMENTS_H_
#define KVWATCH_TESTS_CONFIG_TESTING_CONFIG_DOCUMENTS_H_

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace kvwatch::config::testing_support {

// Every list-of-maps collector key written once, with realistic values: the
// collectors part of the config tests' full example and of the registry's.
inline constexpr char kCollectorListsExample[] = R"(  trace_files:
    - name: mooncake
      paths: ["/var/log/vllm/requests-*.jsonl"]
      start_at: beginning
      timestamp_unit: ms
      tenant_fields: [tenant]
      max_line_bytes: 4MiB
      poll_interval: 1s
    - name: bailian
      paths:
        - /data/a.jsonl
        - /data/b.jsonl
  kv_events:
    - name: vllm-events
      endpoints: [tcp://127.0.0.1:5557]
      topic: kv
      replay_endpoint: tcp://127.0.0.1:5558
      replay_timeout: 250ms
      replay_give_up: 10s
      bind: true
      tenant_source: lora_or_salt
      request_group: 1
  engine_log:
    - name: vllm-log
      paths: [/var/log/vllm/engine.log]
      engine: vllm
  engine_metrics:
    - name: vllm-metrics
      url: http://127.0.0.1:8000/metrics
      interval: 30s
      timeout: 10s
)";

// The required keys of one item of each list of maps, with valid values.
inline YAML::Node RequiredItem(const std::string& list_path) {
  YAML::Node item(YAML::NodeType::Map);
  item["name"] = "item";
  if (list_path == "collectors.trace_files" || list_path == "collectors.engine_log") {
    item["paths"].push_back("/tmp/a.log");
  } else if (list_path == "collectors.kv_events") {
    item["endpoints"].push_back("tcp://127.0.0.1:5557");
  } else if (list_path == "collectors.engine_metrics") {
    item["url"] = "http://127.0.0.1:8000/metrics";
  } else {
    ADD_FAILURE() << "no required keys known for " << list_path;
  }
  return item;
}

// A document holding the parents of a table path (maps, and lists with one item
// holding the item's required keys), plus the key itself when value is given.
inline std::string DocumentFor(const std::string& table_path, std::optional<YAML::Node> value) {
  YAML::Node root(YAML::NodeType::Map);
  YAML::Node current = root;
  std::string walked;
  std::stringstream segments(table_path);
  std::vector<std::string> parts;
  for (std::string part; std::getline(segments, part, '.');) parts.push_back(part);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::string part = parts[i];
    bool list = part.size() > 2 && part.substr(part.size() - 2) == "[]";
    if (list) part.resize(part.size() - 2);
    walked += (walked.empty() ? "" : ".") + part;
    if (i + 1 == parts.size()) {
      if (value) current[part] = *value;
      break;
    }
    if (!current[part].IsDefined()) {
      if (list) {
        current[part].push_back(RequiredItem(walked));
      } else {
        current[part] = YAML::Node(YAML::NodeType::Map);
      }
    }
    YAML::Node next = list ? current[part][0] : current[part];
    current.reset(next);
  }
  return YAML::Dump(root) + "\n";
}

}  // namespace kvwatch::config::testing_support

#endif  // KVWATCH_TESTS_CONFIG_TESTING_CONFIG_DOCUMENTS_H_
