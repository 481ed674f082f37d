#pragma once
// Identifiers that come from outside: user ids and the callers' idempotency keys (biz ids, request
// ids). They are checked once, at the edge where they enter (command-line flags, CSV rows, the
// lists of a definition, list-issue items), with the same rules whatever the backend, so that the
// database never sees one that only one backend would store: PostgreSQL refuses invalid UTF-8 and
// index rows over ~2.7 kB, SQLite stores both. An identifier is valid when, after trimming:
//   - it is not empty (an empty biz id would block every other caller's empty key);
//   - it is valid UTF-8;
//   - it holds no control character (C0, DEL, C1);
//   - it is at most kMaxUserIdBytes (user) or kMaxKeyBytes (biz id, request id) bytes.
#include <cstddef>
#include <string>

namespace rc {

enum class IdKind {
  user,  // a user id: at most kMaxUserIdBytes
  key,   // an idempotency key (--biz-id, --request-id): at most kMaxKeyBytes
};

constexpr size_t kMaxUserIdBytes = 64;
constexpr size_t kMaxKeyBytes = 128;
size_t max_identifier_bytes(IdKind k);

// Strips ASCII white space and the Unicode spaces that exports add (U+00A0, U+3000, U+FEFF) at
// both ends. Inner spaces are kept ("u 1" is a valid id).
std::string trim_identifier(const std::string& s);

// The reason `id` (already trimmed) is not a valid identifier of kind k, or "" when it is. `name`
// is how the reason names it: "--user is empty", "user_id is 65 bytes, at most 64".
std::string identifier_error(const std::string& id, IdKind k, const std::string& name);

// For command-line flags: the trimmed identifier, or Error(usage) (exit 64) naming the flag.
std::string require_identifier(const std::string& raw, IdKind k, const std::string& flag);

}  // namespace rc
