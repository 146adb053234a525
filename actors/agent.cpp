#include "actors/agent.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "config/defaults.hpp"
#include "messages/error.hpp"
#include "prompts/extract.hpp"
#include "prompts/render.hpp"

namespace kiln {

namespace {

std::string read_template(const agent_config& role, const std::string& path) {
  std::ifstream in{path};
  if (!in)
    throw std::runtime_error("[agents." + role.name + "] cannot read template " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto text = ss.str();
  // Render against a request with every slot filled so an unknown slot fails now.
  try {
    render_request(agent_request{}, text);
  } catch (const std::exception& e) {
    throw std::runtime_error("[agents." + role.name + "] template " + path + ": " + e.what());
  }
  return text;
}

} // namespace

std::map<std::string, std::string> load_role_templates(const agent_config& role) {
  std::map<std::string, std::string> out;
  if (!role.template_path.empty())
    out[""] = read_template(role, role.template_path);
  for (auto& [kind, path] : role.template_paths)
    out[kind] = read_template(role, path);
  // A `fix` template written before wrong outputs got their own prompt kind keeps covering
  // every fix, unless `fix_correctness` has one of its own.
  if (auto fix = out.find("fix"); fix != out.end() && out.count("fix_correctness") == 0)
    out["fix_correctness"] = fix->second;
  return out;
}

size_t pick_profile(const std::vector<double>& weights, uint64_t seed, const std::string& role) {
  if (weights.size() <= 1)
    return 0;
  // splitmix64 of the seed mixed with the role's name: a uniform draw in [0, 1).
  uint64_t z = seed ^ std::hash<std::string>{}(role);
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  double u = static_cast<double>(z >> 11) / static_cast<double>(uint64_t{1} << 53);
  double total = 0;
  for (double w : weights)
    total += w;
  double acc = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    acc += weights[i] / total;
    if (u < acc)
      return i;
  }
  return weights.size() - 1;
}

agent_actor::behavior_type agent(agent_actor::stateful_pointer<agent_state> self, agent_config role,
                                 std::map<std::string, std::string> templates,
                                 std::vector<llm_gateway_actor> llms) {
  for (auto& [name, weight] : weighted_profiles(role))
    self->state.weights.push_back(weight);
  self->state.role = std::move(role);
  self->state.templates = std::move(templates);
  self->state.llms = std::move(llms);
  return {
      [self](ask_atom, agent_request& req) -> caf::result<agent_reply> {
        auto& st = self->state;
        llm_request q;
        q.task = req.task.name;
        q.role = st.role.name;
        q.kind = req.kind;
        q.seed = req.seed;
        try {
          // The kind's own template, else the role's template for every kind, else built-in.
          auto kind = st.templates.find(to_string(req.kind));
          if (kind == st.templates.end())
            kind = st.templates.find("");
          q.prompt =
              render_request(req, kind == st.templates.end() ? std::string_view{}
                                                             : std::string_view{kind->second});
        } catch (const std::exception& e) {
          return make_error(ec::bad_config, "agent " + st.role.name + ": " + e.what());
        }
        auto rp = self->make_response_promise<agent_reply>();
        auto kind = req.kind;
        auto max_ideas = static_cast<size_t>(req.max_ideas > 0 ? req.max_ideas : 1);
        const auto& parser = st.role.parser;
        bool want_ideas =
            parser == "ideas" || (parser == "auto" && kind == prompt_kind::brainstorm);
        bool want_code = parser == "code" || (parser == "auto" && kind != prompt_kind::brainstorm);
        auto pick = pick_profile(st.weights, req.seed, st.role.name);
        auto& llm = st.llms.at(std::min(pick, st.llms.size() - 1));
        self->request(llm, defaults::request_timeout, ask_atom::value, std::move(q))
            .then(
                [rp, want_ideas, want_code, max_ideas](llm_reply& r) mutable {
                  agent_reply out;
                  out.profile = r.profile;
                  out.input_tokens = r.input_tokens;
                  out.output_tokens = r.output_tokens;
                  out.cost_usd = r.cost_usd;
                  if (want_ideas)
                    out.ideas = extract_ideas(r.text, max_ideas);
                  if (want_code)
                    if (auto code = extract_code(r.text))
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
