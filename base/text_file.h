// Reading a small text file whole: the agent's YAML, a web config file, a model's
// config.json, an engine's /metrics scrape (simulate --calibrate). A path may name something that is not a small
// regular file by mistake (a directory, /dev/zero, a log): reading it must end with an error that says so, not run
// without end or parse a directory as an empty document. Pipes are read (`--config <(envsubst < agent.yaml)` is a real
// use), up to the cap.
//
// Thread safety: pure apart from reading the file; any thread.
#ifndef KVWATCH_BASE_TEXT_FILE_H_
#define KVWATCH_BASE_TEXT_FILE_H_

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <istream>
#include <string>

namespace kvwatch::base {

// Config files are kilobytes; 16 MiB is far beyond any real one.
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{16} << 20;

// Reads all of `in` (opened from path) into *out. "" on success, else the
// problem without the path: "is a directory", "is larger than 16 MiB (not a
// config file?)" (max_bytes and `what` as given), or the read error.
inline std::string ReadBoundedText(const std::string& path, std::istream& in, std::string* out,
                                   std::size_t max_bytes = kMaxConfigFileBytes,
                                   const std::string& what = "a config file") {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return "is a directory, not a file";
  out->clear();
  char chunk[1 << 16];
  while (in) {
    in.read(chunk, sizeof(chunk));
    out->append(chunk, static_cast<std::size_t>(in.gcount()));
    if (out->size() > max_bytes) {
      return "is larger than " + std::to_string(max_bytes >> 20) + " MiB (not " + what + "?)";
    }
  }
  if (in.bad()) return std::string("cannot read the file: ") + std::strerror(errno);
  return "";
}

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_TEXT_FILE_H_
