#pragma once

// Secrets kiln knows of (API keys, credential-looking variables of its environment) and the one
// function that takes them out of text. Everything kiln writes where others can read it (logs,
// the archive, verdicts, prompts sent to a provider) goes through `redact`: a provider that echoes
// the key in an error body, or a candidate that prints what it found, must not put it there.

#include <string>
#include <string_view>

namespace kiln::secrets {

/// Remembers `value` as secret from now on. Values shorter than 8 characters are ignored: they
/// would match ordinary words.
void add(std::string value);

/// Adds the value of every variable of this process's environment whose name ends in `_KEY`,
/// `_TOKEN`, `_SECRET` or `_PASSWORD` (any case), or is `PASSWORD`/`TOKEN`.
void add_from_environment();

/// `text` with every known secret replaced by `<redacted>`, and the credential of every
/// `Authorization:`/`x-api-key:`-style header line and every `Bearer <token>` replaced too
/// (whether or not kiln knows that token).
std::string redact(std::string text);

/// Untrusted text (what a candidate printed, raised or made a compiler say) made safe to print,
/// log and store: `redact`ed, and every control character but newline and tab written out as
/// `\xNN`, so that it cannot clear a terminal, move its cursor, retitle its window or hide a line
/// behind a carriage return.
std::string clean(std::string text);

/// True when `text` holds a known secret (the check of tests and of `redact`'s callers that
/// must refuse rather than mask).
bool contains_secret(std::string_view text);

} // namespace kiln::secrets
