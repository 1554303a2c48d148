// JsonTypeName: a simdjson On Demand value's type as an error message says it
// ("an array", "a number", "null"), for every reader of JSON text (config's
// model config.json, collectors' trace records), so their errors name what they
// found alike.
//
// Its own library, kvwatch_base_json (base/CMakeLists.txt): base/ is what every
// folder may use, the pure libraries too, and they must not link simdjson; the
// two folders that parse JSON share no library below base/ but base/ itself.
//
// Thread safety: a pure function.
#ifndef KVWATCH_BASE_JSON_TYPE_NAME_H_
#define KVWATCH_BASE_JSON_TYPE_NAME_H_

#include <simdjson.h>

#include <string_view>

namespace kvwatch::base {

std::string_view JsonTypeName(simdjson::ondemand::json_type type);

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_JSON_TYPE_NAME_H_
