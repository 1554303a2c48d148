#include "config/field_reader.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "base/quantity_text.h"
#include "config/yaml_guard.h"

namespace kvwatch::config::internal {

using base::Result;
using base::Status;
using Type = ConfigType;

// ------------------------------------------------------------------ Value syntax

std::optional<std::int64_t> ParseIntText(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseNumberText(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

// "1 to 10", ">= 1".
std::string RangeText(std::int64_t lo, std::int64_t hi) {
  if (hi == std::numeric_limits<std::int64_t>::max()) return ">= " + std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

// Short, exact text of a double (no trailing zeros): 0.5, 300, 1e+30.
std::string NumberText(double value) {
  std::array<char, 32> buffer;
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return ec == std::errc() ? std::string(buffer.data(), end) : std::to_string(value);
}

namespace {

ConfigType ElementType(ConfigType list) {
  switch (list) {
    case Type::kStringList:
      return Type::kString;
    case Type::kIntList:
      return Type::kInt;
    case Type::kNumberList:
      return Type::kNumber;
    case Type::kDurationList:
      return Type::kDuration;
    case Type::kMapList:
      return Type::kMap;
    default:
      return list;
  }
}

}  // namespace

// Ranges of numbers.
bool Positive(double v) { return v > 0; }
bool InZeroOne(double v) { return v > 0 && v <= 1; }
bool Fraction(double v) { return v >= 0 && v <= 1; }
bool NonNegative(double v) { return v >= 0; }

bool HasPrefixAndRest(std::string_view text, std::string_view prefix) {
  return text.size() > prefix.size() && text.substr(0, prefix.size()) == prefix;
}

bool HasWhitespace(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

bool IsHttpUrl(std::string_view url) {
  return (HasPrefixAndRest(url, "http://") || HasPrefixAndRest(url, "https://")) && !HasWhitespace(url);
}

std::string Join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// How a value was written, for "got ..." in messages.
std::string Got(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "no value";
  if (node.IsSequence()) return node.size() == 0 ? "an empty list" : "a list";
  if (node.IsMap()) return "a map";
  if (node.Tag() == "!") return "the quoted string \"" + node.Scalar() + "\"";
  return "\"" + node.Scalar() + "\"";
}

namespace {

// Keys earlier versions took, with what replaces them: a config that still sets one
// stops start-up with that, rather than with "unknown key".
constexpr RefusedKey kRemovedKeys[] = {
    {"collectors.trace_files[].checkpoint",
     "removed: a collector's read positions are committed with the agent's state file (state.path), in the "
     "same atomic step as the curves; remove this key"},
};

}  // namespace

KeyTable AgentConfigKeyTable() { return KeyTable{ConfigKeys(), kRemovedKeys}; }

Result<std::vector<YAML::Node>> LoadYaml(std::string_view source, std::string_view text, bool only_first) {
  using R = Result<std::vector<YAML::Node>>;
  const std::string copy(text);
  if (std::optional<YAML::Mark> mark = RunawayYamlMark(copy)) {
    return R::Error(std::string(source) + ":" + std::to_string(mark->line + 1) +
                    ": invalid YAML: the parser does not end here (a ',' outside [ ] or { }?)");
  }
  try {
    if (!only_first) return YAML::LoadAll(copy);
    YAML::Node first = YAML::Load(copy);
    return std::vector<YAML::Node>{first};
  } catch (const YAML::Exception& ex) {
    std::string where(source);
    if (!ex.mark.is_null()) where += ":" + std::to_string(ex.mark.line + 1);
    return R::Error(where + ": invalid YAML: " + ex.msg);
  }
}

const ConfigKey* FieldReader::FindKey(std::string_view pattern) const {
  for (const ConfigKey& key : table_.keys) {
    if (key.path == pattern) return &key;
  }
  return nullptr;
}

std::string FieldReader::UnknownKeyMessage(const std::string& parent_pattern) const {
  std::string prefix = parent_pattern.empty() ? "" : parent_pattern + ".";
  std::string names;
  for (const ConfigKey& key : table_.keys) {
    std::string_view path = key.path;
    if (path.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = path.substr(prefix.size());
    if (rest.empty() || rest.find('.') != std::string_view::npos) continue;
    if (rest.find('[') != std::string_view::npos) continue;
    names += (names.empty() ? "" : ", ") + std::string(rest);
  }
  return "unknown key; expected one of: " + names;
}

Status FieldReader::Fail(const std::string& key, const YAML::Mark& mark, const std::string& message) const {
  std::string where = source_;
  if (!mark.is_null() && mark.line >= 0) where += ":" + std::to_string(mark.line + 1);
  return Status::Error(where + ": " + key + ": " + message);
}
Status FieldReader::Fail(const Entry& e, const std::string& message) const { return Fail(e.path, e.mark, message); }
Status FieldReader::FailAtKey(const Entry& e, const std::string& message) const {
  return Fail(e.path, e.key_mark, message);
}
Status FieldReader::Expected(const Entry& e, const std::string& what) const {
  return Fail(e, "expected " + what + ", got " + Got(e.node));
}
// A reader called for a key whose table type is another: a bug in this file.
Status FieldReader::CheckType(const Entry& e, ConfigType reader) const {
  if (e.type == reader) return Status::Ok();
  return Fail(e, "internal error: the key table says " + std::string(ConfigTypeName(e.type)) +
                     " but the parser reads " + std::string(ConfigTypeName(reader)));
}
Status FieldReader::Unhandled(const Entry& e) const {
  return FailAtKey(e, "internal error: described in the key table but not parsed");
}

// Calls visit for each key of the map e in document order, after checking that
// the key is a unique plain scalar described in the table.
Status FieldReader::ForEachKey(const Entry& e, const Visitor& visit) { return WalkMap(e, false, visit); }

Status FieldReader::ForEachNamedKey(const Entry& e, const Visitor& visit) { return WalkMap(e, true, visit); }

Status FieldReader::WalkMap(const Entry& e, bool named, const Visitor& visit) {
  if (Status s = CheckType(e, named ? Type::kStringMap : Type::kMap); !s.ok()) return s;
  if (e.node.IsNull()) return Status::Ok();
  if (!e.node.IsMap()) return Expected(e, "a map");
  std::set<std::string> seen;
  for (const auto& key_value : e.node) {
    const YAML::Node& key = key_value.first;
    if (!key.IsScalar()) {
      return Fail(e.path.empty() ? "(top level)" : e.path, key.Mark(), "expected a plain key, got " + Got(key));
    }
    Entry child;
    child.path = Join(e.path, key.Scalar());
    child.pattern = named ? Join(e.pattern, "*") : Join(e.pattern, key.Scalar());
    child.node = key_value.second;
    child.key_mark = key.Mark();
    child.mark = child.node.IsNull() || child.node.Mark().is_null() ? key.Mark() : child.node.Mark();
    if (named) {
      child.type = Type::kString;
    } else {
      const ConfigKey* described = FindKey(child.pattern);
      if (described == nullptr) {
        for (const RefusedKey& refused : table_.refused) {
          if (child.pattern == refused.pattern) return FailAtKey(child, std::string(refused.message));
        }
        return FailAtKey(child, UnknownKeyMessage(e.pattern));
      }
      child.type = described->type;
    }
    if (!seen.insert(key.Scalar()).second) return FailAtKey(child, "duplicate key");
    key_marks_[child.path] = child.key_mark;
    Status status = visit(child);
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

// The items of the list e, each typed as the list's element type.
Result<std::vector<Entry>> FieldReader::Items(const Entry& e) {
  std::vector<Entry> items;
  if (e.node.IsNull()) return items;
  ConfigType element = ElementType(e.type);
  if (!e.node.IsSequence()) {
    return Result<std::vector<Entry>>::Error(
        Expected(e, "a list of " + std::string(ConfigTypeName(element)) + "s").error());
  }
  for (std::size_t i = 0; i < e.node.size(); ++i) {
    Entry item;
    item.path = e.path + "[" + std::to_string(i) + "]";
    item.pattern = element == Type::kMap ? e.pattern + "[]" : e.pattern;
    item.type = element;
    item.node = e.node[i];
    item.mark = item.node.Mark().is_null() ? e.mark : item.node.Mark();
    item.key_mark = item.mark;
    key_marks_[item.path] = item.mark;
    items.push_back(std::move(item));
  }
  return items;
}

// The text of a scalar that must not be quoted (integers, numbers, booleans).
Result<std::string> FieldReader::PlainScalar(const Entry& e, const std::string& what) const {
  if (!e.node.IsScalar() || e.node.Tag() == "!") {
    return Result<std::string>::Error(Expected(e, what).error());
  }
  return e.node.Scalar();
}

Status FieldReader::ReadString(const Entry& e, std::string* out) const {
  if (Status s = CheckType(e, Type::kString); !s.ok()) return s;
  if (e.node.IsNull()) {
    out->clear();
    return Status::Ok();
  }
  if (!e.node.IsScalar()) return Expected(e, "a string");
  *out = e.node.Scalar();
  return Status::Ok();
}

Status FieldReader::ReadBool(const Entry& e, bool* out, bool allow_quoted) const {
  if (Status s = CheckType(e, Type::kBool); !s.ok()) return s;
  if (!allow_quoted) {
    Result<std::string> text = PlainScalar(e, "true or false");
    if (!text.ok()) return text.status();
  }
  if (!e.node.IsScalar()) return Expected(e, "true or false");
  if (!YAML::convert<bool>::decode(e.node, *out)) return Expected(e, "true or false");
  return Status::Ok();
}

// A finite number; in_range says whether it is acceptable, range describes it.
Status FieldReader::ReadNumber(const Entry& e, bool (*in_range)(double), const std::string& range, double* out) const {
  if (Status s = CheckType(e, Type::kNumber); !s.ok()) return s;
  std::string what = "a number " + range;
  Result<std::string> text = PlainScalar(e, what);
  if (!text.ok()) return text.status();
  std::optional<double> value = ParseNumberText(text.value());
  if (!value || !in_range(*value)) return Expected(e, what);
  *out = *value;
  return Status::Ok();
}

Status FieldReader::ReadFraction(const Entry& e, double* out) const {
  return ReadNumber(e, InZeroOne, "in (0, 1]", out);
}

// A duration in seconds; positive says whether 0 is refused.
Status FieldReader::ReadDuration(const Entry& e, bool positive, double* out) const {
  if (Status s = CheckType(e, Type::kDuration); !s.ok()) return s;
  const std::string what(base::kDurationExamples);
  if (!e.node.IsScalar()) return Expected(e, what);
  // A bare number is refused: the key's unit is written (base/quantity_text.h).
  std::optional<double> seconds = base::ParseDuration(e.node.Scalar(), base::Bare::kRefused);
  if (!seconds) return Expected(e, what);
  if (positive && *seconds <= 0) return Expected(e, "a duration > 0");
  *out = *seconds;
  return Status::Ok();
}

// A duration that is a whole number of seconds >= min_seconds.
Status FieldReader::ReadWholeSeconds(const Entry& e, std::int64_t min_seconds, std::int64_t* out) const {
  double seconds = 0;
  if (Status s = ReadDuration(e, false, &seconds); !s.ok()) return s;
  if (seconds != std::floor(seconds) || seconds < static_cast<double>(min_seconds) || seconds > 1e12) {
    return Expected(e, "a whole number of seconds >= " + std::to_string(min_seconds) + ", such as 30s or 15m");
  }
  *out = static_cast<std::int64_t>(seconds);
  return Status::Ok();
}

Status FieldReader::ReadSize(const Entry& e, std::uint64_t lo, std::uint64_t hi, std::uint64_t* out) const {
  if (Status s = CheckType(e, Type::kSize); !s.ok()) return s;
  const std::string what(base::kSizeExamples);
  if (!e.node.IsScalar()) return Expected(e, what);
  std::optional<std::uint64_t> bytes = base::ParseWholeSize(e.node.Scalar());
  if (!bytes) return Expected(e, what);
  if (*bytes < lo || *bytes > hi) {
    return Fail(
        e, "expected a size from " + std::to_string(lo) + " to " + std::to_string(hi) + " bytes, got " + Got(e.node));
  }
  *out = *bytes;
  return Status::Ok();
}

// A list of strings; check (when given) returns an error message for a bad item.
Status FieldReader::ReadStringList(const Entry& e, std::vector<std::string>* out,
                                   const std::function<std::string(const std::string&)>& check) {
  if (Status s = CheckType(e, Type::kStringList); !s.ok()) return s;
  Result<std::vector<Entry>> items = Items(e);
  if (!items.ok()) return items.status();
  out->clear();
  for (const Entry& item : items.value()) {
    std::string text;
    if (Status s = ReadString(item, &text); !s.ok()) return s;
    if (check) {
      std::string problem = check(text);
      if (!problem.empty()) return Fail(item, problem);
    }
    out->push_back(std::move(text));
  }
  return Status::Ok();
}

// A list of fractions in (0, 1], distinct, returned sorted.
Status FieldReader::ReadFractionList(const Entry& e, std::vector<double>* out) {
  if (Status s = CheckType(e, Type::kNumberList); !s.ok()) return s;
  Result<std::vector<Entry>> items = Items(e);
  if (!items.ok()) return items.status();
  std::map<double, std::string> seen;  // value -> path
  for (const Entry& item : items.value()) {
    double value = 0;
    if (Status s = ReadFraction(item, &value); !s.ok()) return s;
    if (auto [it, added] = seen.emplace(value, item.path); !added) {
      return Fail(item, "duplicate of " + it->second);
    }
  }
  out->clear();
  for (const auto& [value, path] : seen) out->push_back(value);
  return Status::Ok();
}

YAML::Mark FieldReader::MarkOf(const std::string& path, const YAML::Mark& fallback) const {
  auto it = key_marks_.find(path);
  return it == key_marks_.end() ? fallback : it->second;
}

Status FieldReader::FailAtPath(const std::string& path, const std::string& message) const {
  return Fail(path, MarkOf(path, YAML::Mark::null_mark()), message);
}

Status FieldReader::RequireKeys(const Entry& item, std::initializer_list<std::string_view> keys) const {
  for (std::string_view key : keys) {
    if (!item.node[std::string(key)].IsDefined()) {
      return Fail(Join(item.path, std::string(key)), item.mark, "required key missing");
    }
  }
  return Status::Ok();
}

Status FieldReader::RequireNonEmptyList(const Entry& e, bool empty) const {
  return empty ? Expected(e, "at least one item") : Status::Ok();
}

Status FieldReader::ReadWholeSeconds(const Entry& e, std::int64_t min_seconds, std::chrono::seconds* out) const {
  std::int64_t seconds = 0;
  if (Status s = ReadWholeSeconds(e, min_seconds, &seconds); !s.ok()) return s;
  *out = std::chrono::seconds(seconds);
  return Status::Ok();
}

}  // namespace kvwatch::config::internal
