#include "config/secrets.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <vector>

extern char** environ;

namespace kiln::secrets {

namespace {

constexpr size_t min_length = 8;
const std::string mask = "<redacted>";

// Written at start-up and when a gateway loads its key, read by every log line: a mutex is
// cheap next to the formatting around it.
std::mutex mtx;
std::vector<std::string>& known() {
  static std::vector<std::string> values;
  return values;
}

std::string lower(std::string_view s) {
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool credential_name(std::string_view name) {
  auto n = lower(name);
  return ends_with(n, "_key") || ends_with(n, "_token") || ends_with(n, "_secret")
         || ends_with(n, "_password") || n == "password" || n == "token";
}

bool token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_.~+/=:", c) != nullptr;
}

size_t skip_spaces(const std::string& text, size_t at) {
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '"'))
    ++at;
  return at;
}

// Masks the run of token characters at `at` when it is at least `min` long.
void mask_token(std::string& text, size_t at, size_t min) {
  size_t end = at;
  while (end < text.size() && token_char(text[end]))
    ++end;
  if (end - at >= std::max<size_t>(min, 1))
    text.replace(at, end - at, mask);
}

// The credential after a header name that carries one (the value whole, or what follows its
// scheme), and after "Bearer " anywhere: the ones a provider's error body may echo.
void mask_credentials(std::string& text) {
  // As a header line ("X-Api-Key: v") or as a JSON member ("x-api-key": "v").
  static const char* headers[] = {"authorization", "x-api-key", "api-key", "x-goog-api-key"};
  static const char* schemes[] = {"bearer ", "basic ", "token "};
  for (const char* h : headers) {
    size_t n = std::strlen(h);
    for (size_t at = lower(text).find(h); at != std::string::npos;
         at = lower(text).find(h, at + 1)) {
      size_t from = at + n;
      if (from < text.size() && text[from] == '"')
        ++from;
      if (from >= text.size() || (text[from] != ':' && text[from] != '='))
        continue;
      from = skip_spaces(text, from + 1);
      auto word = lower(std::string_view{text}.substr(from, 7));
      for (const char* sch : schemes)
        if (word.rfind(sch, 0) == 0) {
          from = skip_spaces(text, from + std::strlen(sch));
          break;
        }
      mask_token(text, from, 1);
    }
  }
  // Outside a header only a long token counts: "the bearer of" is English.
  for (size_t at = lower(text).find("bearer "); at != std::string::npos;
       at = lower(text).find("bearer ", at + 1))
    mask_token(text, skip_spaces(text, at + 7), min_length);
}

} // namespace

void add(std::string value) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
    value.pop_back();
  if (value.size() < min_length)
    return;
  std::lock_guard<std::mutex> guard{mtx};
  auto& v = known();
  if (std::find(v.begin(), v.end(), value) == v.end())
    v.push_back(std::move(value));
  // Longest first, so that a secret that contains another is masked whole.
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
}

void add_from_environment() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr && credential_name(std::string_view{*e, static_cast<size_t>(eq - *e)}))
      add(eq + 1);
  }
}

std::string clean(std::string text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return redact(std::move(out));
}

std::string redact(std::string text) {
  {
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& s : known())
      for (size_t at = text.find(s); at != std::string::npos; at = text.find(s, at + mask.size()))
        text.replace(at, s.size(), mask);
  }
  mask_credentials(text);
  return text;
}

bool contains_secret(std::string_view text) {
  std::lock_guard<std::mutex> guard{mtx};
  for (const auto& s : known())
    if (text.find(s) != std::string_view::npos)
      return true;
  return false;
}

} // namespace kiln::secrets
