#include "agent/web/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <vector>

namespace kvwatch::agent {
namespace {

using base::Result;

// The decoy's password never matters: only the time its hash takes to check.
constexpr char kDecoyPassword[] = "kvwatch decoy password";

// "$2?$NN$" + 53 characters; the cost, or -1 when hash is not shaped so.
int BcryptCost(const std::string& hash) {
  if (hash.size() != 60 || hash.compare(0, 2, "$2") != 0 || hash[3] != '$' || hash[6] != '$') {
    return -1;
  }
  if (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') return -1;
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9') return -1;
  int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  return cost >= 4 && cost <= 31 ? cost : -1;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with mandatory padding (Go's base64.StdEncoding, which
// net/http's BasicAuth uses).
std::optional<std::string> DecodeBase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int pad = 0;
    if (last && text[i + 3] == '=') pad = text[i + 2] == '=' ? 2 : 1;
    std::uint32_t group = 0;
    for (int j = 0; j < 4; ++j) {
      int v = j >= 4 - pad ? 0 : Base64Value(text[i + j]);
      if (v < 0) return std::nullopt;
      group = (group << 6) | static_cast<std::uint32_t>(v);
    }
    out.push_back(static_cast<char>(group >> 16));
    if (pad < 2) out.push_back(static_cast<char>((group >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(group & 0xff));
  }
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

void AppendField(std::vector<unsigned char>* buffer, std::string_view field) {
  std::uint64_t size = field.size();
  for (int i = 0; i < 8; ++i) buffer->push_back(static_cast<unsigned char>(size >> (8 * i)));
  buffer->insert(buffer->end(), field.begin(), field.end());
}

}  // namespace

std::optional<BasicCredentials> ParseBasicAuthorization(std::string_view value) {
  while (!value.empty() && IsSpace(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsSpace(value.back())) value.remove_suffix(1);
  constexpr std::string_view kScheme = "basic";
  if (value.size() <= kScheme.size() || !IsSpace(value[kScheme.size()])) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return std::nullopt;
  }
  value.remove_prefix(kScheme.size());
  while (!value.empty() && IsSpace(value.front())) value.remove_prefix(1);
  std::optional<std::string> decoded = DecodeBase64(value);
  if (!decoded) return std::nullopt;
  std::size_t colon = decoded->find(':');
  if (colon == std::string::npos) return std::nullopt;
  return BasicCredentials{decoded->substr(0, colon), decoded->substr(colon + 1)};
}

bool CheckPassword(std::string_view password, const std::string& bcrypt_hash) {
  if (password.find('\0') != std::string_view::npos) return false;
  std::string pw(password);
  auto data = std::make_unique<crypt_data>();  // value-initialized: zeroed, as crypt_r wants
  const char* computed = crypt_r(pw.c_str(), bcrypt_hash.c_str(), data.get());
  OPENSSL_cleanse(pw.data(), pw.size());
  // libxcrypt returns a failure token starting with '*' for a setting it rejects.
  bool ok = computed != nullptr && computed[0] != '*' && std::strlen(computed) == bcrypt_hash.size() &&
            CRYPTO_memcmp(computed, bcrypt_hash.data(), bcrypt_hash.size()) == 0;
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  return ok;
}

Result<std::string> HashPassword(std::string_view password, int cost) {
  if (cost < 4 || cost > 31) {
    return Result<std::string>::Error("bcrypt cost must be 4 to 31, got " + std::to_string(cost));
  }
  if (password.find('\0') != std::string_view::npos) {
    return Result<std::string>::Error("a password may not contain NUL");
  }
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  // nullptr random bytes: libxcrypt draws the salt from the OS (getentropy).
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, setting, sizeof(setting)) == nullptr) {
    return Result<std::string>::Error(std::string("crypt_gensalt_rn($2b$) failed: ") + std::strerror(errno));
  }
  std::string pw(password);
  auto data = std::make_unique<crypt_data>();
  const char* hash = crypt_r(pw.c_str(), setting, data.get());
  OPENSSL_cleanse(pw.data(), pw.size());
  if (hash == nullptr || hash[0] == '*') {
    return Result<std::string>::Error("crypt_r does not support bcrypt ($2b$) here");
  }
  return std::string(hash);
}

std::size_t BasicAuthenticator::DigestHash::operator()(const Digest& d) const {
  std::size_t h = 0;
  std::memcpy(&h, d.data(), sizeof(h));  // the digest is already uniformly random
  return h;
}

Result<std::unique_ptr<BasicAuthenticator>> BasicAuthenticator::Create(
    const std::map<std::string, std::string>& users) {
  using R = Result<std::unique_ptr<BasicAuthenticator>>;
  if (users.empty()) return R::Error("basic auth needs at least one user");
  int max_cost = 4;
  for (const auto& [user, hash] : users) {
    int cost = BcryptCost(hash);
    if (cost < 0 || crypt_checksalt(hash.c_str()) != CRYPT_SALT_OK) {
      return R::Error("basic_auth_users." + user + ": not a bcrypt hash libcrypt accepts");
    }
    max_cost = std::max(max_cost, cost);
  }
  Result<std::string> decoy = HashPassword(kDecoyPassword, max_cost);
  if (!decoy.ok()) return R::Error("cannot make the decoy bcrypt hash: " + decoy.error());
  return std::unique_ptr<BasicAuthenticator>(new BasicAuthenticator(users, std::move(decoy).value(), max_cost));
}

BasicAuthenticator::BasicAuthenticator(std::map<std::string, std::string> users, std::string decoy_hash, int decoy_cost)
    : users_(std::move(users)), decoy_hash_(std::move(decoy_hash)), decoy_cost_(decoy_cost) {}

std::optional<std::string> BasicAuthenticator::Authenticate(std::string_view header) {
  std::optional<BasicCredentials> credentials = ParseBasicAuthorization(header);
  if (!credentials) return std::nullopt;
  bool ok = Verify(credentials->user, credentials->password);
  OPENSSL_cleanse(credentials->password.data(), credentials->password.size());
  if (!ok) return std::nullopt;
  return credentials->user;
}

bool BasicAuthenticator::Verify(const std::string& user, std::string_view password) {
  auto it = users_.find(user);
  bool known = it != users_.end();
  const std::string& hash = known ? it->second : decoy_hash_;

  std::vector<unsigned char> material;
  AppendField(&material, user);
  AppendField(&material, hash);
  AppendField(&material, password);
  Digest key{};
  unsigned int key_size = 0;
  bool digested = EVP_Digest(material.data(), material.size(), key.data(), &key_size, EVP_sha256(), nullptr) == 1 &&
                  key_size == key.size();
  OPENSSL_cleanse(material.data(), material.size());

  if (digested) {
    base::MutexLock lock(cache_mutex_);
    auto cached = cache_.find(key);
    if (cached != cache_.end()) return cached->second && known;
  }
  bool matches;
  {
    base::MutexLock lock(bcrypt_mutex_);
    ++bcrypt_runs_;
    matches = CheckPassword(password, hash);
  }
  bool ok = matches && known;  // the decoy never admits anyone, whatever it matched
  if (digested) {
    base::MutexLock lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_[key] = ok;
  }
  return ok;
}

}  // namespace kvwatch::agent
