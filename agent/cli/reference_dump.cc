#include "agent/cli/reference_dump.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "curve/policy.h"

namespace kvwatch::agent {

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

void Put(std::uint8_t* at, auto value) { std::memcpy(at, &value, sizeof(value)); }

}  // namespace

base::Status WriteOracleGeneral(curve::StoredTrace& trace, curve::TouchOrder order, const std::string& path) {
  const auto fail = [&](const char* what) {
    return base::Status::Error("--dump-references: cannot " + std::string(what) + " '" + path +
                               "': " + std::strerror(errno));
  };
  if (trace.size() > 0 && trace.At(0).next_use.empty()) trace.ComputeNextUse(order);
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (!file) return fail("create");
  constexpr std::size_t kRecords = 1 << 14;
  std::vector<std::uint8_t> buffer(kRecords * kOracleGeneralRecordBytes);
  std::size_t used = 0;
  const auto flush = [&] {
    const bool ok = std::fwrite(buffer.data(), 1, used, file.get()) == used;
    used = 0;
    return ok;
  };
  for (std::size_t r = 0; r < trace.size(); ++r) {
    const curve::SimRequest request = trace.At(r);
    const std::size_t n = request.pages.size();
    const auto time = static_cast<std::uint32_t>(r + 1);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = order == curve::TouchOrder::kTailFirst ? n - 1 - k : k;
      const std::uint64_t next = request.next_use[i];
      std::uint8_t* at = buffer.data() + used;
      Put(at, time);
      Put(at + 4, request.pages[i]);
      Put(at + 12, std::uint32_t{1});
      Put(at + 16, next == curve::kNeverUsed ? std::int64_t{-1} : static_cast<std::int64_t>(next));
      used += kOracleGeneralRecordBytes;
      if (used == buffer.size() && !flush()) return fail("write");
    }
  }
  if (!flush()) return fail("write");
  if (std::fclose(file.release()) != 0) return fail("write");
  return base::Status::Ok();
}

}  // namespace kvwatch::agent
