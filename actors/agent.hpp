#pragma once

// One generic LLM agent, parameterised by its role's config: the brainstormer, the optimizer
// and the error fixer are all this actor with another template, profile and parser. The parser
// follows from the prompt kind: a brainstorm yields ideas, every other kind a program.

#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "messages/actors.hpp"

namespace kiln {

struct agent_state {
  static inline const char* name = "agent";
  agent_config role;
  /// The role's own templates, read at start: by prompt kind, and under "" the one for every
  /// kind; none means the built-in template of each kind.
  std::map<std::string, std::string> templates;
  /// The gateways of the role's profiles and their weights, in the order of the config.
  std::vector<llm_gateway_actor> llms;
  std::vector<double> weights;
};

agent_actor::behavior_type agent(agent_actor::stateful_pointer<agent_state> self, agent_config role,
                                 std::map<std::string, std::string> templates,
                                 std::vector<llm_gateway_actor> llms);

/// Which of `weights` a query with `seed` goes to: a draw that depends only on the seed and the
/// role, so that a run with a fixed seed sends the same queries to the same profiles.
size_t pick_profile(const std::vector<double>& weights, uint64_t seed, const std::string& role);

/// Reads a role's template files (`template` under "", `templates.<kind>` under the kind) and
/// checks their slots, so that a bad template fails the run at start. Throws
/// std::runtime_error naming the role and file.
std::map<std::string, std::string> load_role_templates(const agent_config& role);

} // namespace kiln
