// `kiln llm`: one prompt through one profile, through the same gateway a run uses, so that a
// user can check a provider, key, model and prices before a long run.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include <sys/resource.h>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/llm_gateway.hpp"
#include "config/config.hpp"
#include "gpu/json_text.hpp"
#include "messages/error.hpp"
#include "messages/register.hpp"
#include "tools/cli.hpp"

namespace kiln::cli {

namespace {

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec)
         + static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

long max_rss_kb() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

double percentile(std::vector<double> xs, double q) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(q * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(i, xs.size() - 1)];
}

/// `--repeat N --parallel C`: the same query N times, C at a time, through one gateway; reports
/// what a user sizing a setup wants to know (and what tools/bench-llm compares with curl).
int repeat_queries(caf::actor_system& sys, const llm_gateway_actor& gw, const llm_request& req,
                   const llm_args& args, std::chrono::seconds backstop) {
  caf::scoped_actor self{sys};
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<double> latencies;
  int64_t sent = 0, ok = 0, failed = 0;
  std::string first_error;
  int64_t input = 0, output = 0;
  double cost = 0;
  auto send_one = [&] {
    self->send(gw, ask_atom::value, req);
    ++sent;
  };
  while (sent < args.repeat && sent < args.parallel)
    send_one();
  while (ok + failed < args.repeat) {
    bool timed_out = false;
    self->receive(
        [&](llm_reply& r) {
          ++ok;
          latencies.push_back(r.latency_ms);
          input += r.input_tokens;
          output += r.output_tokens;
          cost += r.cost_usd;
        },
        [&](caf::error& err) {
          ++failed;
          if (first_error.empty())
            first_error = render(err);
        },
        caf::after(backstop) >> [&] { timed_out = true; });
    if (timed_out) {
      std::cerr << "kiln: no answer within " << backstop.count() << " s\n";
      return 1;
    }
    if (sent < args.repeat)
      send_one();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  char line[640];
  double mean = latencies.empty() ? 0 : [&] {
    double s = 0;
    for (double x : latencies)
      s += x;
    return s / static_cast<double>(latencies.size());
  }();
  if (args.json)
    std::snprintf(line, sizeof line,
                  "{\"requests\": %lld, \"ok\": %lld, \"failed\": %lld, \"parallel\": %lld, "
                  "\"wall_s\": %.3f, \"cpu_s\": %.3f, \"max_rss_kb\": %ld, \"latency_ms\": "
                  "{\"mean\": %.2f, \"p50\": %.2f, \"p90\": %.2f, \"p99\": %.2f}, "
                  "\"input_tokens\": %lld, \"output_tokens\": %lld, \"cost_usd\": %.6f}\n",
                  static_cast<long long>(args.repeat), static_cast<long long>(ok),
                  static_cast<long long>(failed), static_cast<long long>(args.parallel), wall, cpu,
                  max_rss_kb(), mean, percentile(latencies, 0.5), percentile(latencies, 0.9),
                  percentile(latencies, 0.99), static_cast<long long>(input),
                  static_cast<long long>(output), cost);
  else
    std::snprintf(line, sizeof line,
                  "%lld queries (%lld ok, %lld failed), %lld in flight: %.2f s wall, %.2f s CPU, "
                  "max RSS %ld KiB; latency ms mean %.1f p50 %.1f p90 %.1f p99 %.1f; "
                  "%lld in / %lld out tokens, $%.6f\n",
                  static_cast<long long>(args.repeat), static_cast<long long>(ok),
                  static_cast<long long>(failed), static_cast<long long>(args.parallel), wall, cpu,
                  max_rss_kb(), mean, percentile(latencies, 0.5), percentile(latencies, 0.9),
                  percentile(latencies, 0.99), static_cast<long long>(input),
                  static_cast<long long>(output), cost);
  std::cout << line;
  if (!first_error.empty())
    std::cerr << "kiln: first failure: " << first_error << "\n";
  return failed == 0 ? 0 : 1;
}

} // namespace

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
    if (args.repeat > 1) {
      code = repeat_queries(sys, gw, req, args, backstop);
      self->send_exit(gw, caf::exit_reason::user_shutdown);
      return code;
    }
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
