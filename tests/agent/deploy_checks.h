// Test support for the deployment files under packaging/: small checkers for a
// Dockerfile, a systemd unit, a Grafana dashboard and its PromQL, and a real
// Prometheus that loads rule files.
//
// Dockerfile: ParseDockerfile splits the text into instructions (parser
// directives, comments, blank lines and `\` continuations handled as Docker's
// default escape does; heredocs are not supported) and CheckDockerfile reports
// what breaks the house rules: an unknown instruction, a first instruction other
// than FROM (ARG excepted), a duplicate stage name, COPY/ADD --from naming no
// earlier stage, JSON-form CMD/ENTRYPOINT that is not an array of strings, and a
// final stage without a USER or whose last USER is root.
//
// Systemd: ParseUnit reads an INI unit file into (section, key, value) entries,
// in order, with `\` continuations joined.
//
// Grafana: CheckDashboard walks a dashboard (simdjson DOM) and reports problems
// (duplicate panel ids, a datasource that is not the `datasource` variable, a
// `$var` no template variable defines, a panel without unit or description, a
// range that is not $__rate_interval/$__range/$__interval, a metric selector
// without job and instance matchers, a counter outside rate/increase) and
// collects every PromQL query: panel targets and query-variable definitions.
// SubstituteVariables replaces $name, ${name}, ${name:format} and [[name]].
//
// PrometheusWithRules runs Prometheus on 127.0.0.1 (a port picked at run time)
// scraping the given targets every second and evaluating the given rule files
// every second; Query answers an instant query with its status, error, result
// type and series; LabelValues and RuleHealth read the HTTP API.
//
// Every checker returns a list of problems (empty: fine), each naming where.
// Thread safety: none; everything belongs to the test's thread.
#ifndef KVWATCH_TESTS_AGENT_DEPLOY_CHECKS_H_
#define KVWATCH_TESTS_AGENT_DEPLOY_CHECKS_H_

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent::deploy_checks {

using testing_support::ChildProcess;
using testing_support::HttpGet;
using testing_support::HttpPostForm;
using testing_support::HttpResult;
using testing_support::Millis;
using testing_support::PickFreePort;
using testing_support::PollUntil;
using testing_support::Tail;
using testing_support::WriteFile;

inline std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

inline std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

inline std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whitespace-separated words.
inline std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> out;
  std::string word;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) out.push_back(word);
      word.clear();
    } else {
      word.push_back(c);
    }
  }
  if (!word.empty()) out.push_back(word);
  return out;
}

// ------------------------------------------------------------------ Dockerfile

struct DockerInstruction {
  std::string keyword;  // upper case
  std::string args;     // continuation lines joined with a space
  int line = 0;         // 1-based line of the keyword
};

struct DockerStage {
  std::string image;
  std::string name;                             // lower case; empty when unnamed
  std::vector<DockerInstruction> instructions;  // after FROM
};

inline const std::set<std::string>& DockerKeywords() {
  static const std::set<std::string> kKeywords = {"FROM",    "RUN", "CMD",     "LABEL",      "MAINTAINER",  "EXPOSE",
                                                  "ENV",     "ADD", "COPY",    "ENTRYPOINT", "VOLUME",      "USER",
                                                  "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"};
  return kKeywords;
}

// Instructions of a Dockerfile; an error for a line that starts no instruction
// or a continuation that never ends.
inline base::Result<std::vector<DockerInstruction>> ParseDockerfile(const std::string& text) {
  using R = base::Result<std::vector<DockerInstruction>>;
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::vector<DockerInstruction> out;
  bool directives = true;  // parser directives come first, before any other line
  DockerInstruction current;
  bool continuing = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string trimmed = Trim(line);
    if (directives && std::regex_match(trimmed, std::regex(R"(#\s*[a-zA-Z]+\s*=.*)"))) continue;
    directives = false;
    if (trimmed.empty() || trimmed[0] == '#') continue;  // also inside continuations, as Docker does
    std::string body = trimmed;
    const bool continues = !body.empty() && body.back() == '\\';
    if (continues) body = Trim(body.substr(0, body.size() - 1));
    if (!continuing) {
      const auto space = body.find_first_of(" \t");
      current = DockerInstruction{};
      current.keyword = Upper(body.substr(0, space));
      current.args = space == std::string::npos ? "" : Trim(body.substr(space));
      current.line = static_cast<int>(i + 1);
    } else {
      current.args += (current.args.empty() || body.empty() ? "" : " ") + body;
    }
    continuing = continues;
    if (!continuing) out.push_back(current);
  }
  if (continuing) return R::Error("line " + std::to_string(current.line) + ": continuation never ends");
  return out;
}

// Splits instructions into stages (instructions before the first FROM are dropped).
inline std::vector<DockerStage> DockerStages(const std::vector<DockerInstruction>& instructions) {
  std::vector<DockerStage> stages;
  for (const DockerInstruction& in : instructions) {
    if (in.keyword == "FROM") {
      DockerStage stage;
      std::vector<std::string> words = Words(in.args);
      words.erase(
          std::remove_if(words.begin(), words.end(), [](const std::string& w) { return w.rfind("--", 0) == 0; }),
          words.end());
      if (!words.empty()) stage.image = words[0];
      if (words.size() >= 3 && Upper(words[1]) == "AS") stage.name = Lower(words[2]);
      stages.push_back(stage);
    } else if (!stages.empty()) {
      stages.back().instructions.push_back(in);
    }
  }
  return stages;
}

// Whether s is a JSON array of strings (the exec form of CMD, ENTRYPOINT, ...).
inline bool IsJsonStringArray(const std::string& s, std::vector<std::string>* items = nullptr) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array array;
  if (parser.parse(s).get(doc) || doc.get(array)) return false;
  for (simdjson::dom::element e : array) {
    std::string_view v;
    if (e.get(v)) return false;
    if (items) items->emplace_back(v);
  }
  return true;
}

inline std::vector<std::string> CheckDockerfile(const std::vector<DockerInstruction>& instructions) {
  std::vector<std::string> problems;
  auto where = [](const DockerInstruction& in) { return "line " + std::to_string(in.line) + " (" + in.keyword + ")"; };
  bool seen_from = false;
  for (const DockerInstruction& in : instructions) {
    if (DockerKeywords().count(in.keyword) == 0) problems.push_back(where(in) + ": unknown instruction");
    if (!seen_from && in.keyword != "FROM" && in.keyword != "ARG") {
      problems.push_back(where(in) + ": the first instruction must be FROM (or ARG)");
    }
    seen_from = seen_from || in.keyword == "FROM";
    if (in.keyword == "FROM") {
      const std::vector<std::string> words = Words(in.args);
      std::size_t n = 0;
      for (const std::string& w : words) n += w.rfind("--", 0) != 0;
      if (n != 1 && n != 3) problems.push_back(where(in) + ": expected FROM [--platform=P] IMAGE [AS NAME]");
    }
    if ((in.keyword == "CMD" || in.keyword == "ENTRYPOINT" || in.keyword == "SHELL") && !in.args.empty() &&
        in.args[0] == '[' && !IsJsonStringArray(in.args)) {
      problems.push_back(where(in) + ": exec form is not a JSON array of strings");
    }
  }
  if (!seen_from) problems.push_back("no FROM instruction");
  const std::vector<DockerStage> stages = DockerStages(instructions);
  std::set<std::string> names;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const DockerStage& stage = stages[s];
    for (const DockerInstruction& in : stage.instructions) {
      if (in.keyword != "COPY" && in.keyword != "ADD") continue;
      for (const std::string& w : Words(in.args)) {
        if (w.rfind("--from=", 0) != 0) continue;
        const std::string from = Lower(w.substr(7));
        const bool index = !from.empty() && std::all_of(from.begin(), from.end(), ::isdigit) && std::stoul(from) < s;
        if (names.count(from) == 0 && !index) {
          problems.push_back(where(in) + ": --from=" + from + " names no earlier stage");
        }
      }
    }
    if (!stage.name.empty() && !names.insert(stage.name).second) {
      problems.push_back("stage name \"" + stage.name + "\" used twice");
    }
  }
  if (!stages.empty()) {
    std::string user;
    for (const DockerInstruction& in : stages.back().instructions) {
      if (in.keyword == "USER") user = Trim(in.args);
    }
    const std::string who = user.substr(0, user.find(':'));
    if (user.empty()) {
      problems.push_back("the final stage sets no USER: it would run as root");
    } else if (who == "root" || who == "0") {
      problems.push_back("the final stage runs as root (USER " + user + ")");
    }
  }
  return problems;
}

// ------------------------------------------------------------------ systemd units

struct UnitEntry {
  std::string section;
  std::string key;
  std::string value;
};

inline std::vector<UnitEntry> ParseUnit(const std::string& text) {
  std::vector<UnitEntry> out;
  std::string section, pending;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = Trim(text.substr(start, end - start));
    start = end + 1;
    if (pending.empty() && (line.empty() || line[0] == '#' || line[0] == ';')) continue;
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    line = pending + line;
    pending.clear();
    if (line.size() > 2 && line.front() == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    out.push_back({section, Trim(line.substr(0, eq)), Trim(line.substr(eq + 1))});
  }
  return out;
}

// Every value of section/key, in order.
inline std::vector<std::string> UnitValues(const std::vector<UnitEntry>& unit, const std::string& section,
                                           const std::string& key) {
  std::vector<std::string> out;
  for (const UnitEntry& e : unit) {
    if (e.section == section && e.key == key) out.push_back(e.value);
  }
  return out;
}

// ------------------------------------------------------------------ Grafana

// Grafana's own variables, which no template defines.
inline bool IsGrafanaBuiltin(const std::string& name) { return name.rfind("__", 0) == 0; }

// Names of every variable referenced in s: $name, ${name}, ${name:fmt}, [[name]].
inline std::vector<std::string> VariableReferences(const std::string& s) {
  static const std::regex kRef(
      R"(\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\])");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kRef); it != std::sregex_iterator(); ++it) {
    for (int g = 1; g <= 3; ++g) {
      if ((*it)[g].matched) out.push_back((*it)[g].str());
    }
  }
  return out;
}

// s with every reference to a variable in values replaced by its value;
// references to other variables are left as they are.
inline std::string SubstituteVariables(const std::string& s, const std::map<std::string, std::string>& values) {
  static const std::regex kRef(
      R"(\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\])");
  std::string out;
  auto last = s.cbegin();
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kRef); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    std::string name;
    for (int g = 1; g <= 3; ++g) {
      if (m[g].matched) name = m[g].str();
    }
    out.append(last, m[0].first);
    const auto value = values.find(name);
    out += value != values.end() ? value->second : m[0].str();
    last = m[0].second;
  }
  out.append(last, s.cend());
  return out;
}

// label_values(SELECTOR, LABEL) or label_values(LABEL): {selector, label}; nullopt otherwise.
inline std::optional<std::pair<std::string, std::string>> ParseLabelValues(const std::string& query) {
  static const std::regex kWithSelector(R"(^\s*label_values\s*\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$)");
  static const std::regex kLabelOnly(R"(^\s*label_values\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$)");
  std::smatch m;
  if (std::regex_match(query, m, kLabelOnly)) return std::make_pair(std::string(), m[1].str());
  if (std::regex_match(query, m, kWithSelector)) return std::make_pair(Trim(m[1].str()), m[2].str());
  return std::nullopt;
}

struct DashboardQuery {
  std::string where;  // "panel 3 \"Knee\" target B" or "variable window"
  std::string expr;
  bool variable = false;  // a label_values(...) variable query, not PromQL
};

struct DashboardCheck {
  std::vector<std::string> problems;
  std::vector<DashboardQuery> queries;
  std::set<std::string> variables;  // names of the template variables
};

namespace internal {

inline std::string Str(simdjson::dom::element e, const char* key) {
  std::string_view v;
  if (e[key].get(v)) return "";
  return std::string(v);
}

inline bool IsDatasourceVariable(const std::string& uid) { return uid == "${datasource}" || uid == "$datasource"; }

// Every string in e, recursively, with a path; datasource objects and strings checked on the way.
inline void WalkStrings(simdjson::dom::element e, const std::string& path,
                        std::vector<std::pair<std::string, std::string>>* strings, std::vector<std::string>* problems) {
  switch (e.type()) {
    case simdjson::dom::element_type::STRING:
      strings->emplace_back(path, std::string(std::string_view(e)));
      break;
    case simdjson::dom::element_type::ARRAY: {
      std::size_t i = 0;
      for (simdjson::dom::element item : simdjson::dom::array(e)) {
        WalkStrings(item, path + "[" + std::to_string(i++) + "]", strings, problems);
      }
      break;
    }
    case simdjson::dom::element_type::OBJECT:
      for (auto field : simdjson::dom::object(e)) {
        const std::string key(field.key);
        const std::string sub = path + "." + key;
        if (key == "datasource") {
          std::string_view text;
          simdjson::dom::object object;
          if (field.value.get(text) == simdjson::SUCCESS) {
            if (!IsDatasourceVariable(std::string(text))) {
              problems->push_back(sub + ": datasource \"" + std::string(text) + "\" is not ${datasource}");
            }
          } else if (field.value.get(object) == simdjson::SUCCESS) {
            const std::string uid = Str(field.value, "uid");
            if (!IsDatasourceVariable(uid)) {
              problems->push_back(sub + ".uid: \"" + uid + "\" is hard-coded, not ${datasource}");
            }
          }
        }
        WalkStrings(field.value, sub, strings, problems);
      }
      break;
    default:
      break;
  }
}

// PromQL rules the dashboard's targets follow.
inline void CheckPromQL(const std::string& where, const std::string& expr, std::vector<std::string>* problems) {
  static const std::regex kRange(R"(\[([^\]]*)\])");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kRange); it != std::sregex_iterator(); ++it) {
    const std::string range = (*it)[1].str();
    if (range != "$__rate_interval" && range != "$__range" && range != "$__interval") {
      problems->push_back(where + ": range [" + range + "] is hard-coded (use $__rate_interval or $__range)");
    }
  }
  // Metric names: kvwatch_*, process_*, ALERTS. Each must carry both matchers.
  static const std::regex kMetric(R"((^|[^A-Za-z0-9_:])((kvwatch_|process_|ALERTS)[A-Za-z0-9_:]*)(\{[^}]*\})?)");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kMetric); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[2].str();
    const std::string matchers = (*it)[4].str();
    if (matchers.find("job=~\"$job\"") == std::string::npos ||
        matchers.find("instance=~\"$instance\"") == std::string::npos) {
      problems->push_back(where + ": " + name + " lacks job=~\"$job\" and instance=~\"$instance\" matchers");
    }
    const bool counter = std::regex_search(name, std::regex("_(total|bucket|count|sum)$"));
    const std::size_t at = static_cast<std::size_t>((*it).position(2));
    const std::string before = expr.substr(0, at);
    if (counter && !std::regex_search(before, std::regex(R"((rate|irate|increase)\($)"))) {
      problems->push_back(where + ": counter " + name + " outside rate()/increase()");
    }
  }
}

inline void CheckPanel(simdjson::dom::element panel, std::set<int64_t>* ids, DashboardCheck* check) {
  int64_t id = 0;
  const std::string title = Str(panel, "title");
  const std::string type = Str(panel, "type");
  if (panel["id"].get(id)) {
    check->problems.push_back("panel \"" + title + "\": no id");
  } else if (!ids->insert(id).second) {
    check->problems.push_back("panel \"" + title + "\": id " + std::to_string(id) + " used twice");
  }
  const std::string where = "panel " + std::to_string(id) + " \"" + title + "\"";
  if (type == "row") {
    simdjson::dom::array nested;
    if (panel["panels"].get(nested) == simdjson::SUCCESS) {
      for (simdjson::dom::element p : nested) CheckPanel(p, ids, check);
    }
    return;
  }
  if (title.empty()) check->problems.push_back(where + ": no title");
  if (Str(panel, "description").empty()) check->problems.push_back(where + ": no description");
  std::string_view unit;
  if (panel["fieldConfig"]["defaults"]["unit"].get(unit) || unit.empty()) {
    check->problems.push_back(where + ": no unit (fieldConfig.defaults.unit)");
  }
  simdjson::dom::object datasource;
  if (panel["datasource"].get(datasource)) check->problems.push_back(where + ": no datasource");
  simdjson::dom::array targets;
  if (panel["targets"].get(targets) || targets.size() == 0) {
    check->problems.push_back(where + ": no targets");
    return;
  }
  std::set<std::string> refs;
  for (simdjson::dom::element t : targets) {
    const std::string ref = Str(t, "refId");
    const std::string expr = Str(t, "expr");
    const std::string twhere = where + " target " + ref;
    if (ref.empty() || !refs.insert(ref).second) check->problems.push_back(twhere + ": missing or repeated refId");
    simdjson::dom::object tds;
    if (t["datasource"].get(tds)) check->problems.push_back(twhere + ": no datasource");
    if (expr.empty()) {
      check->problems.push_back(twhere + ": no expr");
      continue;
    }
    CheckPromQL(twhere, expr, &check->problems);
    check->queries.push_back({twhere, expr, false});
  }
}

}  // namespace internal

inline DashboardCheck CheckDashboard(simdjson::dom::element dash) {
  DashboardCheck check;
  bool editable = true;
  if (dash["editable"].get(editable) || editable) check.problems.push_back("editable must be false");
  int64_t schema = 0;
  if (dash["schemaVersion"].get(schema) || schema < 36 || schema > 39) {
    check.problems.push_back("schemaVersion " + std::to_string(schema) + " is not 36-39 (Grafana 9.x-10.x)");
  }
  if (internal::Str(dash, "uid").empty() || internal::Str(dash, "title").empty()) {
    check.problems.push_back("the dashboard needs a uid and a title");
  }
  // Template variables.
  simdjson::dom::array vars;
  if (dash["templating"]["list"].get(vars)) {
    check.problems.push_back("no templating.list");
  } else {
    for (simdjson::dom::element v : vars) {
      const std::string name = internal::Str(v, "name");
      const std::string type = internal::Str(v, "type");
      if (!check.variables.insert(name).second) check.problems.push_back("variable " + name + " defined twice");
      if (name == "datasource") {
        if (type != "datasource" || internal::Str(v, "query") != "prometheus") {
          check.problems.push_back("variable datasource must have type datasource and query prometheus");
        }
        continue;
      }
      if (type != "query") continue;
      std::string query = internal::Str(v, "definition");
      std::string_view q;
      if (v["query"]["query"].get(q) == simdjson::SUCCESS) query = std::string(q);
      if (query.empty()) {
        check.problems.push_back("variable " + name + ": no query");
      } else {
        check.queries.push_back({"variable " + name, query, true});
      }
      int64_t refresh = 0;
      if (v["refresh"].get(refresh) || refresh != 2) {
        check.problems.push_back("variable " + name + ": refresh must be 2 (on time range change)");
      }
    }
    for (const char* needed : {"datasource", "job", "instance", "window"}) {
      if (check.variables.count(needed) == 0) check.problems.push_back(std::string("no variable ") + needed);
    }
  }
  // Panels.
  simdjson::dom::array panels;
  std::set<int64_t> ids;
  if (dash["panels"].get(panels) || panels.size() == 0) {
    check.problems.push_back("no panels");
  } else {
    for (simdjson::dom::element p : panels) internal::CheckPanel(p, &ids, &check);
  }
  // Every string: datasources, and every $variable defined.
  std::vector<std::pair<std::string, std::string>> strings;
  internal::WalkStrings(dash, "$", &strings, &check.problems);
  for (const auto& [path, text] : strings) {
    for (const std::string& ref : VariableReferences(text)) {
      if (!IsGrafanaBuiltin(ref) && check.variables.count(ref) == 0) {
        check.problems.push_back(path + ": $" + ref + " is not a template variable");
      }
    }
  }
  return check;
}

// ------------------------------------------------------------------ Prometheus

// Percent-encodes everything but unreserved characters (RFC 3986).
inline std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

struct QueryAnswer {
  bool success = false;
  std::string error;        // Prometheus' error, or why the answer was unusable
  std::string result_type;  // vector, scalar, matrix, string
  std::size_t series = 0;   // vector/matrix entries (1 for a scalar)
  std::size_t finite = 0;   // of which with a finite value
};

struct RuleState {
  std::string group;
  std::string name;
  std::string health;  // ok, err, unknown
  std::string last_error;
};

class PrometheusWithRules {
 public:
  // Starts Prometheus in dir on a free port of 127.0.0.1, scraping every target
  // (host:port) as job `job` and evaluating rule_files, every second; waits for
  // /-/ready. nullptr on failure with *error (and its log).
  static std::unique_ptr<PrometheusWithRules> Start(const std::string& dir, const std::string& job,
                                                    const std::vector<std::string>& targets,
                                                    const std::vector<std::string>& rule_files, Millis timeout,
                                                    std::string* error) {
    const std::string binary = testing_support::FindProgram("prometheus");
    if (binary.empty()) {
      *error = "prometheus is not installed";
      return nullptr;
    }
    std::string yaml = "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n";
    if (!rule_files.empty()) {
      yaml += "rule_files:\n";
      for (const std::string& f : rule_files) yaml += "  - '" + f + "'\n";
    }
    yaml += "scrape_configs:\n  - job_name: '" + job + "'\n    static_configs:\n      - targets: [";
    for (std::size_t i = 0; i < targets.size(); ++i) yaml += (i ? ", '" : "'") + targets[i] + "'";
    yaml += "]\n";
    const std::filesystem::path base(dir);
    const std::string config = (base / "prometheus.yml").string();
    if (!WriteFile(config, yaml)) {
      *error = "cannot write " + config;
      return nullptr;
    }
    std::unique_ptr<PrometheusWithRules> prom(new PrometheusWithRules());
    for (int attempt = 0; attempt < 3; ++attempt) {  // the picked port may be taken meanwhile
      prom->port_ = PickFreePort();
      const std::string log = (base / ("prometheus-" + std::to_string(attempt) + ".log")).string();
      prom->process_ = ChildProcess::Start(
          {binary, "--config.file=" + config, "--storage.tsdb.path=" + (base / "prometheus-data").string(),
           "--web.listen-address=127.0.0.1:" + std::to_string(prom->port_), "--log.level=warn"},
          log + ".out", log, error);
      if (!prom->process_) return nullptr;
      const bool ready = PollUntil(
          [&] { return !prom->process_->Running() || HttpGet(prom->port_, "/-/ready", Millis(1000)).status == 200; },
          timeout, Millis(20));
      if (ready && prom->process_->Running()) return prom;
      *error = "prometheus did not become ready on 127.0.0.1:" + std::to_string(prom->port_) + "; log:\n" +
               Tail(prom->process_->Stderr());
      if (prom->process_->Running()) return nullptr;
    }
    return nullptr;
  }

  int port() const { return port_; }
  std::string Log() const { return process_->Stderr(); }
  bool Running() { return process_->Running(); }

  QueryAnswer Query(const std::string& expr) const {
    QueryAnswer a;
    const HttpResult r = HttpPostForm(port_, "/api/v1/query", {{"query", expr}});
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view status, type, error;
    if (r.status == 0 || parser.parse(r.body).get(doc) || doc["status"].get(status)) {
      a.error = "no usable answer: " + (r.status ? std::to_string(r.status) + " " + Tail(r.body, 300) : r.error);
      return a;
    }
    if (status != "success") {
      if (doc["error"].get(error) == simdjson::SUCCESS) a.error = std::string(error);
      return a;
    }
    if (doc["data"]["resultType"].get(type)) {
      a.error = "no resultType in " + Tail(r.body, 300);
      return a;
    }
    a.success = true;
    a.result_type = std::string(type);
    auto finite = [](simdjson::dom::element pair) {
      std::string_view text;
      if (pair.at(1).get(text)) return false;
      return std::isfinite(std::strtod(std::string(text).c_str(), nullptr));
    };
    if (a.result_type == "scalar") {
      a.series = 1;
      a.finite = finite(doc["data"]["result"].value_unsafe()) ? 1 : 0;
      return a;
    }
    simdjson::dom::array result;
    if (doc["data"]["result"].get(result) == simdjson::SUCCESS) {
      for (simdjson::dom::element item : result) {
        ++a.series;
        simdjson::dom::element value;
        if (item["value"].get(value) == simdjson::SUCCESS && finite(value)) ++a.finite;
      }
    }
    return a;
  }

  // /api/v1/label/NAME/values?match[]=SELECTOR (no selector: every series).
  base::Result<std::vector<std::string>> LabelValues(const std::string& label, const std::string& selector) const {
    using R = base::Result<std::vector<std::string>>;
    std::string path = "/api/v1/label/" + label + "/values";
    if (!selector.empty()) path += "?match%5B%5D=" + UrlEncode(selector);
    const HttpResult r = HttpGet(port_, path);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view status;
    simdjson::dom::array values;
    if (r.status != 200 || parser.parse(r.body).get(doc) || doc["status"].get(status) || status != "success" ||
        doc["data"].get(values)) {
      return R::Error("label values of " + label + " for " + selector + ": " +
                      (r.status ? std::to_string(r.status) + " " + Tail(r.body, 300) : r.error));
    }
    std::vector<std::string> out;
    for (simdjson::dom::element v : values) {
      std::string_view s;
      if (v.get(s) == simdjson::SUCCESS) out.emplace_back(s);
    }
    return out;
  }

  // Every loaded rule with its health.
  base::Result<std::vector<RuleState>> Rules() const {
    using R = base::Result<std::vector<RuleState>>;
    const HttpResult r = HttpGet(port_, "/api/v1/rules");
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array groups;
    if (r.status != 200 || parser.parse(r.body).get(doc) || doc["data"]["groups"].get(groups)) {
      return R::Error("GET /api/v1/rules: " +
                      (r.status ? std::to_string(r.status) + " " + Tail(r.body, 300) : r.error));
    }
    std::vector<RuleState> out;
    for (simdjson::dom::element g : groups) {
      simdjson::dom::array rules;
      if (g["rules"].get(rules)) continue;
      for (simdjson::dom::element rule : rules) {
        out.push_back({internal::Str(g, "name"), internal::Str(rule, "name"), internal::Str(rule, "health"),
                       internal::Str(rule, "lastError")});
      }
    }
    return out;
  }

  std::optional<int> Stop(Millis timeout) { return process_->Terminate(timeout); }

 private:
  PrometheusWithRules() = default;
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

}  // namespace kvwatch::agent::deploy_checks

#endif  // KVWATCH_TESTS_AGENT_DEPLOY_CHECKS_H_
