#include "actors/llm_secrets.hpp"

#include "config/secrets.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <sys/stat.h>

namespace kiln::llm {

namespace {

std::string trimmed(std::string s) {
  const char* space = " \t\r\n";
  auto b = s.find_first_not_of(space);
  if (b == std::string::npos)
    return {};
  auto e = s.find_last_not_of(space);
  return s.substr(b, e - b + 1);
}

} // namespace

std::string load_api_key(const llm_profile_config& p) {
  const std::string who = "[llm." + p.name + "]";
  if (!p.api_key_env.empty()) {
    const char* value = std::getenv(p.api_key_env.c_str());
    if (value == nullptr || trimmed(value).empty())
      throw std::runtime_error(who + " api_key_env: the environment variable " + p.api_key_env
                               + " is not set or empty");
    return trimmed(value);
  }
  if (p.api_key_file.empty())
    return {};
  const std::string& path = p.api_key_file;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::runtime_error(who + " api_key_file " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(who + " api_key_file " + path + " is not a regular file");
  // Like ssh with its private keys: a key that others can read is already half leaked.
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw std::runtime_error(who + " api_key_file " + path + " can be read by others (mode " + mode
                             + "); make it private: chmod 600 " + path);
  }
  std::ifstream in{path};
  std::string line;
  if (!in || !std::getline(in, line))
    throw std::runtime_error(who + " api_key_file " + path + " cannot be read or is empty");
  line = trimmed(line);
  if (line.empty())
    throw std::runtime_error(who + " api_key_file " + path + " holds no key on its first line");
  return line;
}

std::string redact(std::string text, const std::string& key) {
  if (key.size() >= 8) {
    static const std::string mask = "<redacted>";
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + mask.size()))
      text.replace(at, key.size(), mask);
  }
  return secrets::redact(std::move(text));
}

} // namespace kiln::llm
