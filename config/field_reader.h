// The config parsers' shared YAML walker (internal to config/): where a value is
// in the document (Entry), the value syntax, LoadYaml (yaml-cpp behind the hang
// guard of yaml_guard.h), and FieldReader, which walks maps and lists against a
// key table and reads each value as the type the table gives, with errors
// "SOURCE:LINE: KEY: message". Two documents are read with it, each with its own
// table: the agent config (ConfigKeys(), config_keys.cc; the section parsers of
// sections.h: curve_section.cc, collectors_section.cc, alerts_section.cc,
// web_state_section.cc, driven by agent_config.cc) and the exporter-toolkit web
// config file (web_config.cc's table). The collector registry
// (agent/runtime/collector_registry.cc) reads collectors.* values with it too, so
// that each collector's defaults stay in collectors/.
//
// Thread safety: a FieldReader belongs to one parse; the free functions are pure.
#ifndef KVWATCH_CONFIG_FIELD_READER_H_
#define KVWATCH_CONFIG_FIELD_READER_H_

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/source_kinds.h"
#include "base/status.h"
#include "config/config_keys.h"

namespace kvwatch::config::internal {

// ------------------------------------------------------------------ Value syntax

// Durations and sizes: base/quantity_text.h, the grammar the command line reads too.
std::optional<std::int64_t> ParseIntText(std::string_view text);
std::optional<double> ParseNumberText(std::string_view text);  // finite only
// "1 to 10", ">= 1".
std::string RangeText(std::int64_t lo, std::int64_t hi);
// Short, exact text of a double (no trailing zeros): 0.5, 300, 1e+30.
std::string NumberText(double value);

// Ranges of numbers.
bool Positive(double v);
bool InZeroOne(double v);
bool Fraction(double v);
bool NonNegative(double v);

// text starts with prefix and has more after it.
bool HasPrefixAndRest(std::string_view text, std::string_view prefix);
bool HasWhitespace(std::string_view text);
bool IsHttpUrl(std::string_view url);

// A spelling of an enum value in the file.
template <class V>
using Choice = base::Spelling<V>;

template <class V, std::size_t N>
std::string_view ChoiceName(const Choice<V> (&choices)[N], V value) {
  for (const Choice<V>& choice : choices) {
    if (choice.value == value) return choice.name;
  }
  return "?";
}

// ------------------------------------------------------------------ Loading

// The documents of text, parsed by yaml-cpp once RunawayYamlMark (yaml_guard.h)
// has found that the parse ends: all of them, or only the first when only_first
// (as YAML::Load, which neither reads nor checks the others). Errors read
// "SOURCE:LINE: invalid YAML: ...". An empty text has no document (only_first:
// one null node).
base::Result<std::vector<YAML::Node>> LoadYaml(std::string_view source, std::string_view text, bool only_first = false);

// ------------------------------------------------------------------ Key tables

// A key a table leaves out on purpose, refused with its own message rather than
// "unknown key" (a removed key and what replaces it, a setting not implemented).
struct RefusedKey {
  std::string_view pattern;  // table path, as ConfigKey::path
  std::string_view message;
};

// The keys a document may hold (parents before children) and the refused ones.
struct KeyTable {
  std::span<const ConfigKey> keys;
  std::span<const RefusedKey> refused;
};

// The agent config's: ConfigKeys() and the keys earlier versions took.
KeyTable AgentConfigKeyTable();

// ------------------------------------------------------------------ The reader

// A value in the document: where it is and what the table says it is.
struct Entry {
  std::string path;                    // concrete: "collectors.trace_files[0].paths[1]"
  std::string pattern;                 // table path: "collectors.trace_files[].paths"
  ConfigType type = ConfigType::kMap;  // for a list item, the element type
  YAML::Node node;
  YAML::Mark mark;      // the value's; the key's when the value is empty
  YAML::Mark key_mark;  // the key's (the value's for a list item)
};

std::string Join(const std::string& parent, const std::string& key);
// How a value was written, for "got ..." in messages.
std::string Got(const YAML::Node& node);

class FieldReader {
 public:
  using Visitor = std::function<base::Status(const Entry&)>;

  explicit FieldReader(std::string_view source, KeyTable table = AgentConfigKeyTable())
      : source_(source), table_(table) {}

  // ---------------------------------------------------------------- errors

  base::Status Fail(const std::string& key, const YAML::Mark& mark, const std::string& message) const;
  base::Status Fail(const Entry& e, const std::string& message) const;
  base::Status FailAtKey(const Entry& e, const std::string& message) const;
  base::Status Expected(const Entry& e, const std::string& what) const;
  // A reader called for a key whose table type is another: a bug in a section parser.
  base::Status CheckType(const Entry& e, ConfigType reader) const;
  // A key of the table that no section parser reads.
  base::Status Unhandled(const Entry& e) const;
  // Where the key (or list item) at a concrete path is; fallback when not written.
  YAML::Mark MarkOf(const std::string& path, const YAML::Mark& fallback) const;
  base::Status FailAtPath(const std::string& path, const std::string& message) const;
  // Whether the key at a concrete path was written in the document.
  bool Written(const std::string& path) const { return key_marks_.count(path) > 0; }
  const std::string& source() const { return source_; }

  // ---------------------------------------------------------------- walking

  // Calls visit for each key of the map e in document order, after checking that
  // the key is a unique plain scalar described in the table.
  base::Status ForEachKey(const Entry& e, const Visitor& visit);
  // Calls visit for each key of the map of strings e (a kStringMap: its keys are
  // names the user chooses) in document order, after checking that the key is a
  // unique plain scalar; each value is typed kString, with pattern "<e>.*".
  base::Status ForEachNamedKey(const Entry& e, const Visitor& visit);
  // The items of the list e, each typed as the list's element type.
  base::Result<std::vector<Entry>> Items(const Entry& e);
  // A list of maps, each parsed by parse_item into a default-constructed Item.
  template <class Item, class ParseItem>
  base::Status ReadMapList(const Entry& e, std::vector<Item>* out, ParseItem parse_item) {
    if (base::Status s = CheckType(e, ConfigType::kMapList); !s.ok()) return s;
    base::Result<std::vector<Entry>> items = Items(e);
    if (!items.ok()) return items.status();
    out->clear();
    for (const Entry& entry : items.value()) {
      if (!entry.node.IsMap()) return Expected(entry, "a map");
      Item item;
      if (base::Status s = parse_item(entry, &item); !s.ok()) return s;
      out->push_back(std::move(item));
    }
    return base::Status::Ok();
  }
  // Errors for the required keys of a list item that were not given.
  base::Status RequireKeys(const Entry& item, std::initializer_list<std::string_view> keys) const;
  base::Status RequireNonEmptyList(const Entry& e, bool empty) const;

  // ---------------------------------------------------------------- values

  base::Status ReadString(const Entry& e, std::string* out) const;
  // true or false as yaml-cpp spells them (also yes/no, on/off); a quoted value is
  // refused unless allow_quoted (the web config file takes "true").
  base::Status ReadBool(const Entry& e, bool* out, bool allow_quoted = false) const;
  template <class I>
  base::Status ReadInt(const Entry& e, std::int64_t lo, std::int64_t hi, I* out) const {
    if (base::Status s = CheckType(e, ConfigType::kInt); !s.ok()) return s;
    std::string what = "an integer " + RangeText(lo, hi);
    base::Result<std::string> text = PlainScalar(e, what);
    if (!text.ok()) return text.status();
    std::optional<std::int64_t> value = ParseIntText(text.value());
    if (!value || *value < lo || *value > hi) return Expected(e, what);
    *out = static_cast<I>(*value);
    return base::Status::Ok();
  }
  // A finite number; in_range says whether it is acceptable, range describes it.
  base::Status ReadNumber(const Entry& e, bool (*in_range)(double), const std::string& range, double* out) const;
  base::Status ReadFraction(const Entry& e, double* out) const;  // in (0, 1]
  // A duration in seconds; positive says whether 0 is refused.
  base::Status ReadDuration(const Entry& e, bool positive, double* out) const;
  // A duration that is a whole number of seconds >= min_seconds.
  base::Status ReadWholeSeconds(const Entry& e, std::int64_t min_seconds, std::int64_t* out) const;
  base::Status ReadWholeSeconds(const Entry& e, std::int64_t min_seconds, std::chrono::seconds* out) const;
  base::Status ReadSize(const Entry& e, std::uint64_t lo, std::uint64_t hi, std::uint64_t* out) const;
  template <class V, std::size_t N>
  base::Status ReadChoice(const Entry& e, const Choice<V> (&choices)[N], V* out) const {
    std::string text;
    if (base::Status s = ReadString(e, &text); !s.ok()) return s;
    std::string names;
    for (const Choice<V>& choice : choices) {
      if (choice.name == text && e.node.IsScalar()) {
        *out = choice.value;
        return base::Status::Ok();
      }
      names += (names.empty() ? "" : ", ") + std::string(choice.name);
    }
    return Expected(e, "one of " + names);
  }
  // A list of strings; check (when given) returns an error message for a bad item.
  base::Status ReadStringList(const Entry& e, std::vector<std::string>* out,
                              const std::function<std::string(const std::string&)>& check = {});
  // A list of fractions in (0, 1], distinct, returned sorted.
  base::Status ReadFractionList(const Entry& e, std::vector<double>* out);

 private:
  // The text of a scalar that must not be quoted (integers, numbers, booleans).
  base::Result<std::string> PlainScalar(const Entry& e, const std::string& what) const;

  const ConfigKey* FindKey(std::string_view pattern) const;
  std::string UnknownKeyMessage(const std::string& parent_pattern) const;
  // ForEachKey (keys from the table) or ForEachNamedKey (named: any key).
  base::Status WalkMap(const Entry& e, bool named, const Visitor& visit);

  std::string source_;
  KeyTable table_;
  std::map<std::string, YAML::Mark> key_marks_;  // concrete path -> where its key is
};

}  // namespace kvwatch::config::internal

#endif  // KVWATCH_CONFIG_FIELD_READER_H_
