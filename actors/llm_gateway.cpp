#include "actors/llm_gateway.hpp"

#include <chrono>
#include <stdexcept>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "prompts/rules.hpp"

namespace kiln {

void check_provider(const llm_profile_config& profile) {
  if (profile.provider == "rules")
    return;
  throw std::runtime_error("[llm." + profile.name + "] provider '" + profile.provider
                           + "' is not available in this build yet; use provider = \"rules\"");
}

llm_gateway_actor::behavior_type
llm_gateway(llm_gateway_actor::stateful_pointer<llm_gateway_state> self, llm_profile_config profile,
            archive_actor archive) {
  self->state.profile = std::move(profile);
  self->state.archive = std::move(archive);
  return {
      [self](ask_atom, llm_request& req) -> caf::result<llm_reply> {
        auto& st = self->state;
        if (req.temperature < 0)
          req.temperature = st.profile.temperature;
        if (req.max_tokens <= 0)
          req.max_tokens = static_cast<int32_t>(st.profile.max_tokens);
        if (req.system.empty())
          req.system = st.profile.system_prompt;
        auto start = std::chrono::steady_clock::now();
        llm_reply reply;
        reply.profile = st.profile.name;
        reply.model = st.profile.model.empty() ? st.profile.provider : st.profile.model;
        // The rules provider is not a language model: it reports no tokens and costs nothing.
        reply.text = rules_answer(req);
        reply.latency_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        ++st.calls;
        spdlog::debug("llm-gateway {}: {} query for {} ({}) answered in {:.1f} ms", st.profile.name,
                      to_string(req.kind), req.task, req.role, reply.latency_ms);
        if (st.archive)
          self->send(st.archive, put_atom::value, llm_call_record{req, reply, {}});
        return reply;
      },
  };
}

} // namespace kiln
