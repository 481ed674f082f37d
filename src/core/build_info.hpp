#pragma once
// What this binary is: its version, the build commit, the schema version it expects and the
// versions of the libraries it runs with (the linked runtime's, where the library can say).
#include <string>
#include <utility>
#include <vector>

namespace rc {

struct BuildInfo {
  std::string version;     // rewardctl's own, from CMakeLists.txt
  std::string commit;      // git commit of the source tree at configure time ("unknown" outside git)
  int schema_version = 0;  // the newest embedded migration: `db migrate` brings a database to it
  std::vector<std::pair<std::string, std::string>> libraries;  // name -> version, in a fixed order
};

BuildInfo build_info();

}  // namespace rc
