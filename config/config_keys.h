// The agent config's key table: one descriptor per key (dotted path, type,
// default, meaning), defined in config_keys.cc. The parser (field_reader.h)
// rejects any key not in it and reads each value as its type; the reference in
// docs/configuration.md is rendered from it (ConfigReferenceMarkdown). Apart from
// agent_config.h so that the parser's core needs only the table, not the settings.
// The web config file's keys are described with the same ConfigKey (web_config.cc)
// and read by the same walker.
//
// Thread safety: immutable tables and pure functions.
#ifndef KVWATCH_CONFIG_CONFIG_KEYS_H_
#define KVWATCH_CONFIG_CONFIG_KEYS_H_

#include <span>
#include <string>
#include <string_view>

namespace kvwatch::config {

// ------------------------------------------------------------------ Schema table

enum class ConfigType {
  kString,
  kBool,
  kInt,
  kNumber,
  kDuration,
  kSize,
  kStringList,
  kIntList,
  kNumberList,
  kDurationList,
  kMap,
  kMapList,
  kStringMap,  // a map whose keys the user names (web config's basic_auth_users)
};

// One key of the config file.
struct ConfigKey {
  std::string_view path;  // e.g. "engine.max_pages", "collectors.trace_files[].name"
  ConfigType type;
  // The default: YAML text of the value when default_is_literal ("1048576",
  // "\"127.0.0.1\"", "[\"5m\", \"1h\", \"24h\"]"), else markdown words ("required",
  // "unset", "off", "`engine.max_pages`").
  std::string_view default_text;
  bool default_is_literal;
  std::string_view description;  // one or two sentences, markdown
};

// Every key, parents before children, in the order of the reference.
std::span<const ConfigKey> ConfigKeys();
// The descriptor of a table path, or nullptr.
const ConfigKey* FindConfigKey(std::string_view path);
// "string", "integer", "list of durations", ...
std::string_view ConfigTypeName(ConfigType type);

// The reference table rendered from ConfigKeys() plus a short legend of the value
// syntax; ends with a newline. This is the text docs/configuration.md holds between the lines
// "<!-- config-reference:begin -->" and "<!-- config-reference:end -->".
std::string ConfigReferenceMarkdown();

}  // namespace kvwatch::config

#endif  // KVWATCH_CONFIG_CONFIG_KEYS_H_
