#pragma once

// API keys: where they come from, and keeping them out of everything kiln writes.

#include <string>

#include "config/config.hpp"

namespace kiln::llm {

/// The key of `profile`: the value of its `api_key_env` variable, or the first line of its
/// `api_key_file` (which must be a regular file that only its owner can read); empty when the
/// profile names neither (local servers need no key). Throws std::runtime_error that names the
/// profile and the variable or file, never the key.
std::string load_api_key(const llm_profile_config& profile);

/// `text` with every occurrence of `key` replaced by `<redacted>` (keys shorter than 8
/// characters are not searched for: they would match ordinary words), then through
/// `kiln::secrets::redact` (every secret kiln knows of, credential headers).
std::string redact(std::string text, const std::string& key);

} // namespace kiln::llm
