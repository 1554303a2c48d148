#include "base/json_type_name.h"

namespace kvwatch::base {

std::string_view JsonTypeName(simdjson::ondemand::json_type type) {
  using simdjson::ondemand::json_type;
  switch (type) {
    case json_type::array:
      return "an array";
    case json_type::object:
      return "an object";
    case json_type::number:
      return "a number";
    case json_type::string:
      return "a string";
    case json_type::boolean:
      return "a boolean";
    case json_type::null:
      return "null";
  }
  return "an unknown JSON type";
}

}  // namespace kvwatch::base
