#include "util/hash.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

#include "base/error.hpp"

namespace rc {

static std::string to_hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = d[p[i] >> 4];
    s[2 * i + 1] = d[p[i] & 15];
  }
  return s;
}

std::string sha256_hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr))
    throw Error(Errc::internal, "SHA-256 failed");
  return to_hex(md, len);
}

std::string hmac_sha256_hex(const std::string& key, const std::string& message) {
  unsigned char md[EVP_MAX_MD_SIZE];
  size_t len = 0;
  if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                 reinterpret_cast<const unsigned char*>(message.data()), message.size(), md, sizeof md, &len))
    throw Error(Errc::internal, "HMAC-SHA256 failed");
  return to_hex(md, len);
}

bool digest_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void secure_random(void* out, size_t n) {
  if (RAND_bytes(static_cast<unsigned char*>(out), int(n)) != 1)
    throw Error(Errc::internal, "the secure random source failed");
}

std::string new_id(const std::string& prefix, int64_t now_ms) {
  static const char* b32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  unsigned char r[10];
  secure_random(r, sizeof r);
  std::string s = prefix;
  s.reserve(prefix.size() + 26);
  uint64_t t = uint64_t(now_ms) & ((uint64_t(1) << 48) - 1);
  for (int i = 9; i >= 0; --i) s += b32[(t >> (i * 5)) & 31];  // 50 bits, top 2 zero
  // 80 random bits -> 16 characters
  uint64_t hi = 0, lo = 0;
  for (int i = 0; i < 5; ++i) hi = (hi << 8) | r[i];
  for (int i = 5; i < 10; ++i) lo = (lo << 8) | r[i];
  for (int i = 7; i >= 0; --i) s += b32[(hi >> (i * 5)) & 31];
  for (int i = 7; i >= 0; --i) s += b32[(lo >> (i * 5)) & 31];
  return s;
}

uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { reset(); }
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256::reset() { EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr); }
void Sha256::update(const char* p, size_t n) { EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), p, n); }
std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, static_cast<EVP_MD_CTX*>(ctx_));
  EVP_DigestFinal_ex(copy, md, &n);
  EVP_MD_CTX_free(copy);
  return to_hex(md, n);
}

std::string sha256_fd(int fd, uint64_t from, const std::string& name) {
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (off_t off = off_t(from);;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(Errc::input_unreadable, "cannot read " + name + ": " + strerror(errno));
    if (n == 0) break;
    h.update(buf.data(), size_t(n));
    off += n;
  }
  return h.hex();
}

}  // namespace rc
