// `kiln llm`: one prompt through one profile, through the same gateway a run uses, so that a
// user can check a provider, key, model and prices before a long run.

#include <chrono>
#include <cstdio>
#include <iostream>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/llm_gateway.hpp"
#include "config/config.hpp"
#include "gpu/json_text.hpp"
#include "messages/error.hpp"
#include "messages/register.hpp"
#include "tools/cli.hpp"

namespace kiln::cli {

int llm(const llm_args& args) {
  config cfg;
  try {
    cfg = load_config(args.config);
  } catch (const std::exception& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 2;
  }
  auto it = cfg.llm.find(args.profile);
  if (it == cfg.llm.end()) {
    std::string known;
    for (auto& [name, p] : cfg.llm)
      known += (known.empty() ? "" : ", ") + name;
    std::cerr << "kiln: " << args.config << " has no [llm." << args.profile << "] profile"
              << (known.empty() ? "" : " (it has: " + known + ")") << "\n";
    return 2;
  }
  const llm_profile_config profile = it->second;
  try {
    check_provider(profile);
  } catch (const std::exception& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 2;
  }
  quiet_logging();

  llm_request req;
  req.task = "kiln-llm";
  req.role = "user";
  req.kind = prompt_kind::brainstorm;
  req.prompt = args.prompt;
  req.system = args.system;
  req.max_tokens = static_cast<int32_t>(args.max_tokens);

  caf::actor_system_config sys_cfg;
  add_message_types(sys_cfg);
  int code = 0;
  {
    caf::actor_system sys{sys_cfg};
    auto gw = sys.spawn(llm_gateway, profile, archive_actor{});
    caf::scoped_actor self{sys};
    // The profile's own timeouts and retries bound the wait; this is only a backstop.
    auto backstop = std::chrono::seconds(
        static_cast<int64_t>(profile.timeout_s * static_cast<double>(profile.max_retries + 1)
                             + profile.retry_max_s * static_cast<double>(profile.max_retries))
        + 60);
    self->request(gw, backstop, ask_atom::value, req)
        .receive(
            [&](llm_reply& r) {
              if (args.json) {
                std::string out = "{\"text\": \"";
                append_json_escaped(out, r.text);
                out += "\", \"profile\": \"";
                append_json_escaped(out, r.profile);
                out += "\", \"model\": \"";
                append_json_escaped(out, r.model);
                char nums[256];
                std::snprintf(nums, sizeof nums,
                              "\", \"input_tokens\": %lld, \"output_tokens\": %lld, "
                              "\"reasoning_tokens\": %lld, \"cost_usd\": %.6f, "
                              "\"latency_ms\": %.1f}",
                              static_cast<long long>(r.input_tokens),
                              static_cast<long long>(r.output_tokens),
                              static_cast<long long>(r.reasoning_tokens), r.cost_usd, r.latency_ms);
                std::cout << out << nums << "\n";
              } else {
                std::cout << r.text << (r.text.empty() || r.text.back() != '\n' ? "\n" : "");
                std::fprintf(stderr,
                             "-- %s (%s): %lld input, %lld output tokens (%lld reasoning), "
                             "$%.6f, %.0f ms\n",
                             r.profile.c_str(), r.model.c_str(),
                             static_cast<long long>(r.input_tokens),
                             static_cast<long long>(r.output_tokens),
                             static_cast<long long>(r.reasoning_tokens), r.cost_usd, r.latency_ms);
              }
            },
            [&](caf::error& err) {
              std::cerr << "kiln: " << render(err) << "\n";
              code = 1;
            });
    self->send_exit(gw, caf::exit_reason::user_shutdown);
  }
  return code;
}

} // namespace kiln::cli
