#ifndef PROTOCOL_RUNNER_BASE_BUILD_INFO_H_
#define PROTOCOL_RUNNER_BASE_BUILD_INFO_H_

namespace protocol {

// Facts about this binary, fixed at build time (see cmake/build_info.cmake).
struct BuildInfoData {
  const char* version;       // project version, e.g. "0.1.0"
  const char* git_revision;  // short sha, "-dirty" suffix for local edits, or "unknown"
  const char* build_type;    // CMAKE_BUILD_TYPE
  const char* compiler;      // e.g. "GNU-12.2.0"
};

const BuildInfoData& BuildInfo();

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_BUILD_INFO_H_
