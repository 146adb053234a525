#pragma once

// The `rules` provider: kiln's offline proposer. It answers the same prompts a real LLM gets,
// by applying a library of known rewrites to the task's source, chosen by what the runner has.
// The evaluator stays the judge of what it proposes.

#include <string>
#include <vector>

#include "messages/llm.hpp"

namespace kiln {

/// Answers one prompt: a list of ideas for a brainstorm, one fenced Python candidate for an
/// optimize or improve prompt, a repaired or simpler candidate for a fix prompt. Deterministic
/// for a given request (prompt, kind and seed).
std::string rules_answer(const llm_request& req);

/// The names of the rewrites the rules provider knows, for docs and tests.
std::vector<std::string> rules_rewrite_names();

} // namespace kiln
