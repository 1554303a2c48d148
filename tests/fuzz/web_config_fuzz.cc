// libFuzzer target: the exporter-toolkit web config file (config/web_config.h),
// parsed from memory (ParseWebConfig reads no file: paths are only joined to the
// base directory). Invariants: an error has a message; a config with TLS has
// both files; every header is one of the toolkit's names with no CR or LF in its
// value; every user has a bcrypt hash of 60 characters and no ':' in the name.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/web_config.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const char* base_dir : {"", "/etc/kvwatch"}) {
    auto parsed = kvwatch::config::ParseWebConfig(text, base_dir);
    if (!parsed.ok()) {
      Check(!parsed.error().empty());
      continue;
    }
    const kvwatch::config::WebConfig& c = parsed.value();
    if (c.tls) {
      Check(!c.tls->cert_file.empty() && !c.tls->key_file.empty());
      Check(c.tls->min_version <= c.tls->max_version);
    }
    for (const auto& [name, value] : c.http.headers) {
      Check(!name.empty());
      Check(value.find('\r') == std::string_view::npos && value.find('\n') == std::string_view::npos);
    }
    for (const auto& [user, hash] : c.basic_auth_users) {
      Check(user.find(':') == std::string_view::npos);
      Check(hash.size() == 60);
    }
  }
  return 0;
}
