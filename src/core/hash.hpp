#pragma once
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

}  // namespace rc
