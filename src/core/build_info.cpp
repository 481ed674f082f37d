#include "core/build_info.hpp"

#include <curl/curlver.h>
#include <curl/curl.h>
#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <pqxx/version.hxx>
#include <spdlog/version.h>
#include <sqlite3.h>
#include <toml++/toml.h>

#include <algorithm>

#include "core/embedded.hpp"

#ifndef REWARDCTL_COMMIT
#define REWARDCTL_COMMIT "unknown"
#endif

namespace rc {

BuildInfo build_info() {
  BuildInfo b;
  b.version = REWARDCTL_VERSION;
  b.commit = REWARDCTL_COMMIT;
  for (auto& m : embedded::migrations()) b.schema_version = std::max(b.schema_version, m.version);
  auto v3 = [](int a, int b, int c) { return std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(c); };
  int pq = PQlibVersion();  // 150005 -> 15.5
  b.libraries = {
      {"sqlite", sqlite3_libversion()},
      {"libpq", std::to_string(pq / 10000) + "." + std::to_string(pq % 100)},
      {"libpqxx", PQXX_VERSION},
      {"libcurl", curl_version_info(CURLVERSION_NOW)->version},
      {"openssl", OpenSSL_version(OPENSSL_VERSION_STRING)},
      {"spdlog", v3(SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH)},
      {"toml++", v3(TOML_LIB_MAJOR, TOML_LIB_MINOR, TOML_LIB_PATCH)},
      {"nlohmann_json",
       v3(NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH)},
  };
  return b;
}

}  // namespace rc
