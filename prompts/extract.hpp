#pragma once

// Parsing LLM replies: the program to evaluate, or a list of ideas.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The candidate program in a reply: the fenced block that defines `class ModelNew` (a leading
/// CUDA or C++ block never becomes the program); failing that, an unfenced reply that defines
/// it; otherwise nothing. Handles CRLF and unterminated final fences.
std::optional<std::string> extract_code(std::string_view reply);

/// Ideas from a brainstorm reply: bulleted (`-`, `*`, `•`) or numbered (`1.`, `2)`) items,
/// continuation lines joined, at most `max` of them.
std::vector<std::string> extract_ideas(std::string_view reply, size_t max);

} // namespace kiln
