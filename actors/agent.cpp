#include "actors/agent.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "config/defaults.hpp"
#include "messages/error.hpp"
#include "prompts/extract.hpp"
#include "prompts/render.hpp"

namespace kiln {

std::string load_role_template(const agent_config& role) {
  if (role.template_path.empty())
    return {};
  std::ifstream in{role.template_path};
  if (!in)
    throw std::runtime_error("[agents." + role.name + "] cannot read template "
                             + role.template_path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto text = ss.str();
  // Render against a request with every slot filled so an unknown slot fails now.
  try {
    render_request(agent_request{}, text);
  } catch (const std::exception& e) {
    throw std::runtime_error("[agents." + role.name + "] template " + role.template_path + ": "
                             + e.what());
  }
  return text;
}

agent_actor::behavior_type agent(agent_actor::stateful_pointer<agent_state> self, agent_config role,
                                 std::string template_text, llm_gateway_actor llm) {
  self->state.role = std::move(role);
  self->state.template_text = std::move(template_text);
  self->state.llm = std::move(llm);
  return {
      [self](ask_atom, agent_request& req) -> caf::result<agent_reply> {
        auto& st = self->state;
        llm_request q;
        q.task = req.task.name;
        q.role = st.role.name;
        q.kind = req.kind;
        q.seed = req.seed;
        try {
          q.prompt = render_request(req, st.template_text);
        } catch (const std::exception& e) {
          return make_error(ec::bad_config, "agent " + st.role.name + ": " + e.what());
        }
        auto rp = self->make_response_promise<agent_reply>();
        auto kind = req.kind;
        auto max_ideas = static_cast<size_t>(req.max_ideas > 0 ? req.max_ideas : 1);
        self->request(st.llm, defaults::request_timeout, ask_atom::value, std::move(q))
            .then(
                [rp, kind, max_ideas](llm_reply& r) mutable {
                  agent_reply out;
                  out.profile = r.profile;
                  out.input_tokens = r.input_tokens;
                  out.output_tokens = r.output_tokens;
                  out.cost_usd = r.cost_usd;
                  if (kind == prompt_kind::brainstorm)
                    out.ideas = extract_ideas(r.text, max_ideas);
                  else if (auto code = extract_code(r.text))
                    out.code = std::move(*code);
                  out.raw = std::move(r.text);
                  rp.deliver(std::move(out));
                },
                [self, rp](caf::error& err) mutable {
                  spdlog::warn("agent {}: llm query failed: {}", self->state.role.name,
                               render(err));
                  rp.deliver(std::move(err));
                });
        return rp;
      },
  };
}

} // namespace kiln
