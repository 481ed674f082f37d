#pragma once
// Hashing, message authentication, secure randomness and identifiers (OpenSSL underneath). Pure
// functions except secure_random/new_id (the system's random source) and sha256_fd (reads a file).
#include <cstdint>
#include <string>

namespace rc {

std::string sha256_hex(const std::string& data);
std::string hmac_sha256_hex(const std::string& key, const std::string& message);
// Constant-time comparison of two hex digests.
bool digest_equal(const std::string& a, const std::string& b);
// Cryptographically secure random bytes (OpenSSL RAND_bytes).
void secure_random(void* out, size_t n);
// A new globally unique, time-ordered identifier: prefix + 26 Crockford base32 characters
// (48-bit millisecond time + 80 random bits, as in ULID).
std::string new_id(const std::string& prefix, int64_t now_ms);
// FNV-1a 64-bit: a stable hash for picking stock buckets by user.
uint64_t stable_hash(const std::string& s);

// Incremental SHA-256 (e.g. the file checksum an import records to find a run to resume).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const char* p, size_t n);
  std::string hex();  // the digest of everything since construction or reset()
  void reset();

 private:
  void* ctx_;
};
// The SHA-256 of a regular file from offset `from` to its end, read by offset (the descriptor's position is kept).
// Throws Error(no_input).
std::string sha256_fd(int fd, uint64_t from, const std::string& name);

}  // namespace rc
