// Where tests find ../shared (models, reference outputs) and the lifeline binary.
#pragma once

#include <cstdlib>
#include <string>

namespace lifeline::testing {

inline std::string SharedDir() {
  if (const char* env = std::getenv("LIFELINE_SHARED_DIR"); env && *env) return env;
  return LIFELINE_SHARED_DIR_DEFAULT;
}

inline std::string SharedPath(const std::string& rel) { return SharedDir() + "/" + rel; }

inline std::string LifelineBinary() { return LIFELINE_BINARY; }

}  // namespace lifeline::testing
