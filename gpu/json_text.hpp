#pragma once

// Writing JSON strings: the runner's job files and kiln's own reports. (Reading JSON is
// simdjson's.)

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln {

/// Appends `s` escaped for a JSON string, without the quotes: as Python's json.dumps with
/// ensure_ascii=False writes it (the short escapes, \u00xx for the other control characters,
/// every other byte as it is), which the build cache's key relies on (gpu/build_cache.cpp).
inline void append_json_escaped(std::string& out, std::string_view s) {
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

/// `s` as a quoted JSON string.
inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  append_json_escaped(out, s);
  out += '"';
  return out;
}

/// A number for JSON: six significant digits, `null` for NaN and infinities (which JSON lacks).
inline std::string json_number(double x) {
  if (!std::isfinite(x))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

} // namespace kiln
