#pragma once

// HTTP for one LLM profile: libcurl's multi interface on a thread of its own, so that no actor
// ever blocks on the network. It owns the profile's limits (requests in flight, requests and
// tokens per minute), timeouts, streaming, and retries with backoff; the gateway only submits
// queries and receives one final outcome per query.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/llm_wire.hpp"

namespace kiln::llm {

struct transport_limits {
  int64_t max_concurrency = 8;
  double requests_per_minute = 0; ///< 0 = no limit
  double tokens_per_minute = 0;   ///< 0 = no limit; each request counts its estimate
  double connect_timeout_s = 10;
  double timeout_s = 600;      ///< one attempt, from connect to the last byte
  double idle_timeout_s = 300; ///< no byte received for this long ends the attempt
  int64_t max_retries = 6;     ///< attempts after the first
  double retry_initial_s = 1;  ///< backoff before the first retry, doubled per retry
  double retry_max_s = 60;     ///< backoff cap; a longer Retry-After is still honoured
};

/// How a query ended, after every retry.
struct outcome {
  bool ok = false;
  parsed_reply reply;
  std::string error; ///< one line, when not ok
  /// The profile cannot work (401, 403, 404: bad key, unknown model, wrong base URL): every
  /// later query fails at once with this error instead of retrying forever.
  bool fatal = false;
  bool cancelled = false;
  int32_t attempts = 0;
  long http_status = 0;  ///< of the last attempt, 0 when no response came
  double latency_ms = 0; ///< from submit to the outcome, backoff and queueing included
};

class transport {
public:
  using callback = std::function<void(outcome)>;

  /// `name` is the profile's, for logs. Starts the thread.
  transport(std::string name, transport_limits limits);
  /// Cancels everything still pending (their callbacks run with cancelled = true) and joins.
  ~transport();
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  /// Queues one query; `done` runs exactly once, on the transport's thread. `token_estimate`
  /// counts against tokens_per_minute. `group` (a task) decides whose turn it is when queries
  /// wait for the profile's limits: groups take turns, oldest query first within a group.
  /// Thread-safe. Returns an id for cancel().
  uint64_t submit(wire w, http_request request, bool stream, int64_t token_estimate, callback done,
                  std::string group = {});

  /// Ends a query early (its callback runs with cancelled = true); unknown ids are ignored.
  void cancel(uint64_t id);

  /// Whether a 401/403/404 has stopped the profile, and why.
  bool stopped(std::string* why = nullptr) const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Seconds to wait before retry number `retry` (1 for the first): exponential from `initial`,
/// capped at `cap`, with full jitter in [half, whole] drawn from `unit` (0..1).
double backoff_s(int retry, double initial, double cap, double unit);

/// Seconds from a Retry-After header value: delta-seconds or an HTTP date (relative to now);
/// negative when it is absent or unreadable.
double retry_after_s(const std::string& value);

} // namespace kiln::llm
