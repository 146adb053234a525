#pragma once

// Prompt templates are text with named slots written `{{name}}`. Rendering fills them from an
// agent request; a template that names an unknown slot is an error found at load time.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "messages/agent.hpp"

namespace kiln {

/// Fills every `{{slot}}` of `tmpl` from `slots`; throws std::invalid_argument naming the first
/// slot that has no value.
std::string render_template(std::string_view tmpl, const std::map<std::string, std::string>& slots);

/// The slot names a template uses, in order of first use.
std::vector<std::string> template_slots(std::string_view tmpl);

/// The slots an agent request provides: `reference` (task source), `task`, `idea`, `code`,
/// `status`, `reason`, `stdout_tail`, `stderr_tail`, `diffs`, `device_facts`, `max_ideas`,
/// `example_reference`, `example_candidate`.
std::map<std::string, std::string> request_slots(const agent_request& req);

/// Renders a request with the built-in template of its kind, or with `override_text` when not
/// empty.
std::string render_request(const agent_request& req, std::string_view override_text = {});

} // namespace kiln
