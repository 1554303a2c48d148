// Basic auth for the agent's HTTP server, as exporter-toolkit does it: users map
// to bcrypt hashes (the web config's basic_auth_users), and a request carries
// "Authorization: Basic base64(user:password)". See exporter-toolkit's
// web/handler.go (github.com/prometheus/exporter-toolkit: a dummy hash for unknown
// users, 401 with WWW-Authenticate: Basic; CVE-2022-46146 for its cache key) and
// docs/web-configuration.md.
//
// bcrypt comes from libcrypt (libxcrypt 4.4 on Debian 12, package libcrypt1 /
// libcrypt-dev), which verifies $2a$, $2b$ and $2y$ hashes with crypt_r and makes
// new ones with crypt_gensalt_rn.
//
// Verification guards against the known attacks on this scheme:
//   - an unknown user is checked against a decoy hash made at Create() time with
//     the highest cost among the configured users, so the time taken does not
//     tell which users exist;
//   - the computed hash is compared with the stored one in constant time
//     (CRYPTO_memcmp);
//   - results are cached (bcrypt at cost 10 costs ~70 ms, and Prometheus sends
//     the same credentials every scrape) under a SHA-256 of the length-prefixed
//     (user, stored hash, password) triple, so an entry can only answer for
//     exactly that triple (the CVE-2022-46146 lesson). The cache holds at most
//     kCacheCapacity entries and is emptied when full.
//   - bcrypt runs one at a time, so a flood of bad passwords costs one core.
//
// Thread safety: BasicAuthenticator's methods may be called concurrently. The
// free functions are thread-safe.
#ifndef KVWATCH_AGENT_BASIC_AUTH_H_
#define KVWATCH_AGENT_BASIC_AUTH_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"

namespace kvwatch::agent {

// The challenge sent with a 401.
inline constexpr char kBasicAuthChallenge[] = "Basic realm=\"kvwatch\"";

struct BasicCredentials {
  std::string user;
  std::string password;
};

// Parses an Authorization header value: the scheme "Basic" (any case), spaces,
// then standard base64 with padding of "user:password" (split at the first ':').
// nullopt for any other scheme or malformed value.
std::optional<BasicCredentials> ParseBasicAuthorization(std::string_view header_value);

// True when password hashes to bcrypt_hash; the comparison is constant-time.
// False for a hash libcrypt rejects and for a password containing NUL.
bool CheckPassword(std::string_view password, const std::string& bcrypt_hash);

// A new $2b$ bcrypt hash of password with a random salt. cost: 4 to 31.
base::Result<std::string> HashPassword(std::string_view password, int cost = 10);

class BasicAuthenticator {
 public:
  static constexpr std::size_t kCacheCapacity = 256;

  // users: user -> bcrypt hash (config::WebConfig::basic_auth_users). Fails when
  // users is empty, when libcrypt does not accept a hash (the error names the
  // user, not the hash), or when the decoy hash cannot be made.
  static base::Result<std::unique_ptr<BasicAuthenticator>> Create(const std::map<std::string, std::string>& users);

  // The user named by an Authorization header value when its password is right.
  std::optional<std::string> Authenticate(std::string_view authorization_header);

  // True when user is configured and password is theirs.
  bool Verify(const std::string& user, std::string_view password);

  // For tests: bcrypt computations so far (cache misses), and the decoy's cost.
  std::uint64_t bcrypt_runs() const { return bcrypt_runs_.load(); }
  int decoy_cost() const { return decoy_cost_; }

 private:
  using Digest = std::array<unsigned char, 32>;
  struct DigestHash {
    std::size_t operator()(const Digest& d) const;
  };

  BasicAuthenticator(std::map<std::string, std::string> users, std::string decoy_hash, int decoy_cost);

  // Constant after construction.
  const std::map<std::string, std::string> users_;
  const std::string decoy_hash_;
  const int decoy_cost_;

  base::Mutex bcrypt_mutex_;  // serializes crypt_r
  base::Mutex cache_mutex_;
  std::unordered_map<Digest, bool, DigestHash> cache_ GUARDED_BY(cache_mutex_);
  std::atomic<std::uint64_t> bcrypt_runs_{0};
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_BASIC_AUTH_H_
