#pragma once
// Identifiers that come from outside: user ids and the callers' idempotency keys (biz ids, request
// ids). They are checked once, at the edge where they enter (command-line flags, CSV rows, the
// lists of a definition, list-issue items), with the same rules whatever the backend, so that the
// database never sees one that only one backend would store: PostgreSQL refuses invalid UTF-8 and
// index rows over ~2.7 kB, SQLite stores both. An identifier is valid when, after trimming:
//   - it is not empty (an empty biz id would block every other caller's empty key);
//   - it is valid UTF-8;
//   - it holds no control character (C0, DEL, C1);
//   - it is at most kMaxUserIdBytes (user) or kMaxKeyBytes (biz id, request id) bytes;
//   - it holds no invisible character: no code point of Unicode general category Cf (format:
//     zero-width spaces and joiners, bidi controls, word joiners, soft hyphen, tags, an inner
//     U+FEFF) and no other Default_Ignorable_Code_Point (variation selectors, Hangul fillers, ...);
//   - it is in Unicode NFC. Text in another normal form is refused, never rewritten: what is stored
//     is what the caller sent, and two spellings of one name cannot both exist (docs/design.md §4.1).
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// True when s is valid UTF-8, holds none of refused_code_point_ranges() and is in NFC: the text
// rules of an identifier without the length and trimming rules (and without the control-character
// rule, which is part of the refused set). For checks over rows already stored (the SQLite
// function rc_identifier_clean calls it).
bool identifier_text_clean(std::string_view s);

// Every code point an identifier may not hold, as inclusive [first, last] ranges, sorted and
// merged: the control characters (C0, DEL, C1), general category Cf and the other
// Default_Ignorable_Code_Point characters, computed once from ICU at first use. A PostgreSQL
// pattern can be generated from the same set.
const std::vector<std::pair<char32_t, char32_t>>& refused_code_point_ranges();

}  // namespace rc
