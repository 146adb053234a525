#include "actors/llm_gateway.hpp"

#include <chrono>
#include <stdexcept>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/llm_secrets.hpp"
#include "messages/error.hpp"
#include "config/secrets.hpp"
#include "prompts/rules.hpp"

namespace kiln {

namespace {

bool is_http(const std::string& provider) {
  return provider == "openai" || provider == "anthropic" || provider == "gemini";
}

/// Fills the request's defaults from the profile (what is recorded is what was sent).
void apply_defaults(const llm_profile_config& p, llm_request& req) {
  if (req.temperature < 0)
    req.temperature = p.temperature;
  if (req.max_tokens <= 0)
    req.max_tokens = static_cast<int32_t>(p.max_tokens);
  if (req.system.empty())
    req.system = p.system_prompt;
  if (req.stop.empty())
    req.stop = p.stop;
}

} // namespace

void check_provider(const llm_profile_config& profile) {
  if (profile.provider == "rules")
    return;
  if (profile.provider == "replay") {
    llm::replay_store probe{profile.replay_from};
    return;
  }
  if (!is_http(profile.provider))
    throw std::runtime_error("[llm." + profile.name + "] provider '" + profile.provider
                             + "' is unknown");
  (void)llm::load_api_key(profile);
}

llm::transport_limits limits_of(const llm_profile_config& p) {
  llm::transport_limits l;
  l.max_concurrency = p.max_concurrency;
  l.requests_per_minute = p.requests_per_minute;
  l.tokens_per_minute = p.tokens_per_minute;
  l.connect_timeout_s = p.connect_timeout_s;
  l.timeout_s = p.timeout_s;
  l.idle_timeout_s = p.idle_timeout_s;
  l.max_retries = p.max_retries;
  l.retry_initial_s = p.retry_initial_s;
  l.retry_max_s = p.retry_max_s;
  return l;
}

llm::wire_query query_of(const llm_profile_config& p, const llm_request& req,
                         const std::string& key) {
  llm::wire_query q;
  q.base_url = p.base_url;
  q.model = p.model;
  q.api_key = key;
  q.system = req.system.empty() ? p.system_prompt : req.system;
  q.prompt = req.prompt;
  q.temperature = req.temperature < 0 ? p.temperature : req.temperature;
  q.max_tokens = req.max_tokens > 0 ? req.max_tokens : p.max_tokens;
  q.stop = req.stop.empty() ? p.stop : req.stop;
  q.reasoning_effort = p.reasoning_effort;
  q.thinking_budget = p.thinking_budget;
  q.stream = p.stream;
  return q;
}

double cost_of(const llm_profile_config& p, int64_t input_tokens, int64_t output_tokens) {
  return (static_cast<double>(input_tokens) * p.usd_per_mtok_input
          + static_cast<double>(output_tokens) * p.usd_per_mtok_output)
         / 1e6;
}

llm_gateway_actor::behavior_type
llm_gateway(llm_gateway_actor::stateful_pointer<llm_gateway_state> self, llm_profile_config profile,
            archive_actor archive) {
  auto& st = self->state;
  st.profile = std::move(profile);
  st.archive = std::move(archive);
  std::string startup_error;
  try {
    if (is_http(st.profile.provider)) {
      st.key = llm::load_api_key(st.profile);
      secrets::add(st.key);
      st.http = std::make_unique<llm::transport>(st.profile.name, limits_of(st.profile));
    } else if (st.profile.provider == "replay") {
      st.replay = std::make_unique<llm::replay_store>(st.profile.replay_from);
      spdlog::info("llm {}: replaying {} recorded answers from {}", st.profile.name,
                   st.replay->size(), st.profile.replay_from);
    }
  } catch (const std::exception& e) {
    startup_error = llm::redact(e.what(), st.key);
    spdlog::error("llm {}: {}", st.profile.name, startup_error);
  }

  auto record = [self](const llm_request& req, const llm_reply& reply, const std::string& error) {
    auto& st = self->state;
    ++st.calls;
    if (st.archive)
      self->send(st.archive, put_atom::value,
                 llm_call_record{req, reply, llm::redact(error, st.key)});
  };

  return {
      [self, record, startup_error](ask_atom, llm_request& req) -> caf::result<llm_reply> {
        auto& st = self->state;
        apply_defaults(st.profile, req);
        // Prompts carry candidates' output (an error fixer's prompt holds a verdict's tail):
        // nothing secret goes to the provider, or into the archive's copy of the prompt.
        req.system = secrets::redact(std::move(req.system));
        req.prompt = secrets::redact(std::move(req.prompt));
        if (!startup_error.empty())
          return make_error(ec::provider_failed, "[llm." + st.profile.name + "] " + startup_error);
        llm_reply reply;
        reply.profile = st.profile.name;
        reply.model = st.profile.model.empty() ? st.profile.provider : st.profile.model;
        if (st.profile.provider == "rules" || st.replay) {
          auto start = std::chrono::steady_clock::now();
          if (st.replay) {
            auto recorded = st.replay->next(req.prompt);
            if (!recorded) {
              char key[24];
              std::snprintf(key, sizeof key, "%016llx",
                            static_cast<unsigned long long>(llm::replay_store::key(req.prompt)));
              std::string why = "replay: no recorded answer left for this prompt (prompt key "
                                + std::string{key} + ", task " + req.task + ")";
              record(req, reply, why);
              return make_error(ec::provider_failed, why);
            }
            reply.text = std::move(recorded->text);
            reply.input_tokens = recorded->input_tokens;
            reply.output_tokens = recorded->output_tokens;
            reply.reasoning_tokens = recorded->reasoning_tokens;
            reply.model = recorded->model;
            // A replayed answer costs nothing now; the original run paid for it.
          } else {
            // The rules provider is not a language model: it reports no tokens, costs nothing.
            reply.text = rules_answer(req);
          }
          reply.latency_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
          spdlog::debug("llm-gateway {}: {} query for {} ({}) answered in {:.1f} ms",
                        st.profile.name, to_string(req.kind), req.task, req.role, reply.latency_ms);
          record(req, reply, {});
          return reply;
        }

        std::string why;
        if (st.http->stopped(&why))
          return make_error(ec::provider_failed, "[llm." + st.profile.name + "] " + why);
        auto wire = llm::wire_of(st.profile.provider);
        auto http = llm::build_request(wire, query_of(st.profile, req, st.key));
        // For tokens_per_minute: about 4 characters a token, plus the whole reply allowance.
        int64_t estimate =
            static_cast<int64_t>((req.system.size() + req.prompt.size()) / 4) + req.max_tokens;
        uint64_t id = st.next_id++;
        auto promise = self->make_response_promise<llm_reply>();
        st.in_flight.emplace(id, llm_gateway_state::pending{promise, req});
        auto me = caf::actor_cast<llm_gateway_actor>(self);
        st.http->submit(
            wire, std::move(http), st.profile.stream, estimate,
            [me, id](llm::outcome o) {
              // The transport's thread: back into the actor by a message.
              llm_reply r;
              r.text = std::move(o.reply.text);
              r.model = std::move(o.reply.model);
              r.input_tokens = o.reply.input_tokens;
              r.output_tokens = o.reply.output_tokens;
              r.reasoning_tokens = o.reply.reasoning_tokens;
              r.latency_ms = o.latency_ms;
              std::string error = o.ok ? std::string{} : o.error;
              if (o.ok && error.empty() && o.attempts > 1)
                spdlog::info("llm: query answered after {} attempts", o.attempts);
              caf::anon_send(me, done_atom::value, id, std::move(r), std::move(error), o.fatal);
            },
            req.task);
        return promise;
      },
      [self, record](done_atom, uint64_t id, llm_reply& reply, std::string& error, bool fatal) {
        auto& st = self->state;
        auto it = st.in_flight.find(id);
        if (it == st.in_flight.end())
          return;
        auto pending = std::move(it->second);
        st.in_flight.erase(it);
        reply.profile = st.profile.name;
        if (reply.model.empty())
          reply.model = st.profile.model;
        error = llm::redact(error, st.key);
        reply.text = llm::redact(std::move(reply.text), st.key);
        if (!error.empty()) {
          record(pending.request, reply, error);
          spdlog::warn("llm {}: {} query for {} failed: {}", st.profile.name,
                       to_string(pending.request.kind), pending.request.task, error);
          pending.promise.deliver(
              make_error(ec::provider_failed, "[llm." + st.profile.name + "] " + error
                                                  + (fatal ? " (profile stopped)" : "")));
          return;
        }
        reply.cost_usd = cost_of(st.profile, reply.input_tokens, reply.output_tokens);
        spdlog::debug("llm {}: {} query for {} ({}): {} in, {} out, ${:.4f}, {:.0f} ms",
                      st.profile.name, to_string(pending.request.kind), pending.request.task,
                      pending.request.role, reply.input_tokens, reply.output_tokens, reply.cost_usd,
                      reply.latency_ms);
        record(pending.request, reply, {});
        pending.promise.deliver(std::move(reply));
      },
  };
}

} // namespace kiln
