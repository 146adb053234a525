#pragma once

// One generic LLM agent, parameterised by its role's config: the brainstormer, the optimizer
// and the error fixer are all this actor with another template, profile and parser. The parser
// follows from the prompt kind: a brainstorm yields ideas, every other kind a program.

#include <string>
#include <vector>

#include "config/config.hpp"
#include "messages/actors.hpp"

namespace kiln {

struct agent_state {
  static inline const char* name = "agent";
  agent_config role;
  /// The role's own template, read at spawn; empty means the built-in one of each kind.
  std::string template_text;
  /// The gateways of the role's profiles and their weights, in the order of the config.
  std::vector<llm_gateway_actor> llms;
  std::vector<double> weights;
};

agent_actor::behavior_type agent(agent_actor::stateful_pointer<agent_state> self, agent_config role,
                                 std::string template_text, std::vector<llm_gateway_actor> llms);

/// Which of `weights` a query with `seed` goes to: a draw that depends only on the seed and the
/// role, so that a run with a fixed seed sends the same queries to the same profiles.
size_t pick_profile(const std::vector<double>& weights, uint64_t seed, const std::string& role);

/// Reads a role's template file (if it names one) and checks its slots, so that a bad
/// template fails the run at start. Throws std::runtime_error naming the role and file.
std::string load_role_template(const agent_config& role);

} // namespace kiln
