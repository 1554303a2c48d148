// Build identity, as reported by `kvwatch --version` and kvwatch_build_info.
#ifndef KVWATCH_AGENT_VERSION_H_
#define KVWATCH_AGENT_VERSION_H_

namespace kvwatch {

const char* Version();   // e.g. "0.1.0"
const char* Revision();  // short git revision of the build, or "unknown"

}  // namespace kvwatch

#endif  // KVWATCH_AGENT_VERSION_H_
