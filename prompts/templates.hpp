#pragma once

#include <string_view>

#include "messages/llm.hpp"

namespace kiln {

/// The built-in template of a prompt kind (from prompts/templates/*.txt, compiled in).
std::string_view builtin_template(prompt_kind kind);

/// A worked example pair, written for kiln, that the templates show the LLM.
std::string_view example_reference();
std::string_view example_candidate();

} // namespace kiln
