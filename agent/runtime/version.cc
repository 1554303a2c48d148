#include "agent/runtime/version.h"

namespace kvwatch {

const char* Version() { return KVWATCH_VERSION; }
const char* Revision() { return KVWATCH_REVISION; }

}  // namespace kvwatch
