#include "actors/llm_transport.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <tuple>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <spdlog/spdlog.h>

namespace kiln::llm {

namespace {

using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;

constexpr size_t max_body_bytes = size_t{64} << 20; // a 200 reply; far above any real answer
constexpr size_t max_error_bytes = size_t{64} << 10;

double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

clock_type::duration from_seconds(double s) {
  return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool retryable_status(long status) {
  return status == 408 || status == 409 || status == 425 || status == 429 || status >= 500;
}

bool fatal_status(long status) {
  return status == 401 || status == 403 || status == 404;
}

} // namespace

double backoff_s(int retry, double initial, double cap, double unit) {
  double full = initial * std::pow(2.0, std::max(0, retry - 1));
  full = std::min(full, cap);
  return full * (0.5 + 0.5 * std::clamp(unit, 0.0, 1.0));
}

double retry_after_s(const std::string& value) {
  std::string v = value;
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back())))
    v.pop_back();
  size_t b = 0;
  while (b < v.size() && std::isspace(static_cast<unsigned char>(v[b])))
    ++b;
  v = v.substr(b);
  if (v.empty())
    return -1;
  if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return v.size() > 9 ? 1e9 : static_cast<double>(std::stol(v));
  // An HTTP date, e.g. `Wed, 21 Oct 2015 07:28:00 GMT`.
  std::tm tm{};
  if (::strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S", &tm) == nullptr)
    return -1;
  time_t at = ::timegm(&tm);
  return std::max(0.0, std::difftime(at, std::time(nullptr)));
}

struct transport::impl {
  struct job {
    uint64_t id = 0;
    std::string group; ///< whose turn it is decides the order among waiting queries
    wire w = wire::openai;
    http_request request;
    bool stream = true;
    int64_t tokens = 0;
    callback done;
    int32_t attempts = 0;
    time_point submitted;
    time_point not_before;
    std::string last_error;
    long last_status = 0;
    // The attempt in flight:
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    long status = 0;
    std::string body;
    std::string retry_after;
    std::unique_ptr<sse_decoder> decoder;
    std::string decode_error;
    bool decode_retryable = false;
    time_point last_activity; ///< the attempt's start or its latest byte
  };

  std::string name;
  transport_limits limits;
  std::mutex mutex;
  std::deque<std::shared_ptr<job>> incoming; // guarded by mutex
  std::vector<uint64_t> cancels;             // guarded by mutex
  bool stopping = false;                     // guarded by mutex
  std::atomic<uint64_t> next_id{1};
  mutable std::mutex stop_mutex;
  std::string fatal_error; // guarded by stop_mutex; non-empty once the profile is stopped
  CURLM* multi = nullptr;
  std::thread thread;

  // The thread's own state:
  std::vector<std::shared_ptr<job>> waiting; // not started, or between attempts
  std::map<CURL*, std::shared_ptr<job>> running;
  std::deque<std::pair<time_point, int64_t>> window; // starts of the last minute
  std::map<std::string, uint64_t> last_turn;         // group -> `turns` at its latest start
  uint64_t turns = 0;
  std::mt19937_64 rng{std::random_device{}()};

  impl(std::string n, transport_limits l) : name(std::move(n)), limits(l) {
    global_init();
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(l.max_concurrency));
    thread = std::thread([this] { loop(); });
  }

  ~impl() {
    {
      std::lock_guard<std::mutex> lock{mutex};
      stopping = true;
    }
    curl_multi_wakeup(multi);
    thread.join();
    curl_multi_cleanup(multi);
  }

  std::string fatal() const {
    std::lock_guard<std::mutex> lock{stop_mutex};
    return fatal_error;
  }

  static size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* j = static_cast<job*>(user);
    j->last_activity = clock_type::now();
    std::string line{data, size * n};
    auto colon = line.find(':');
    if (line.rfind("HTTP/", 0) == 0) {
      j->retry_after.clear(); // a new response (after 100 Continue or a redirect)
    } else if (colon != std::string::npos && lower(line.substr(0, colon)) == "retry-after") {
      j->retry_after = line.substr(colon + 1);
    }
    return size * n;
  }

  static size_t on_data(char* data, size_t size, size_t n, void* user) {
    auto* j = static_cast<job*>(user);
    j->last_activity = clock_type::now();
    const size_t bytes = size * n;
    if (j->status == 0)
      curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &j->status);
    if (j->status == 200 && j->stream) {
      try {
        j->decoder->feed(std::string_view{data, bytes});
      } catch (const provider_error& e) {
        j->decode_error = e.what();
        j->decode_retryable = e.retryable;
        return 0; // aborts the transfer
      } catch (const std::exception& e) {
        j->decode_error = e.what();
        j->decode_retryable = true;
        return 0;
      }
      return bytes;
    }
    const size_t cap = j->status == 200 ? max_body_bytes : max_error_bytes;
    if (j->body.size() < cap)
      j->body.append(data, std::min(bytes, cap - j->body.size()));
    return bytes;
  }

  bool window_allows(const job& j, time_point now) {
    while (!window.empty() && now - window.front().first >= std::chrono::minutes(1))
      window.pop_front();
    if (limits.requests_per_minute > 0
        && static_cast<double>(window.size()) >= limits.requests_per_minute)
      return false;
    if (limits.tokens_per_minute > 0 && !window.empty()) {
      int64_t used = 0;
      for (auto& w : window)
        used += w.second;
      if (static_cast<double>(used + j.tokens) > limits.tokens_per_minute)
        return false;
    }
    return true;
  }

  /// When the oldest start leaves the window (the earliest a refused start can go).
  time_point window_frees() const {
    return window.empty() ? clock_type::now() : window.front().first + std::chrono::minutes(1);
  }

  void start(const std::shared_ptr<job>& j, time_point now) {
    ++j->attempts;
    j->status = 0;
    j->body.clear();
    j->retry_after.clear();
    j->decode_error.clear();
    j->decoder = j->stream ? std::make_unique<sse_decoder>(j->w) : nullptr;
    j->easy = curl_easy_init();
    j->headers = nullptr;
    for (auto& h : j->request.headers)
      j->headers = curl_slist_append(j->headers, h.c_str());
    // Without this curl waits for `100 Continue` before sending a large prompt.
    j->headers = curl_slist_append(j->headers, "Expect:");
    if (j->stream)
      j->headers = curl_slist_append(j->headers, "Accept: text/event-stream");
    CURL* e = j->easy;
    curl_easy_setopt(e, CURLOPT_URL, j->request.url.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, j->headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, j->request.body.c_str());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(j->request.body.size()));
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(limits.connect_timeout_s * 1000));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(limits.timeout_s * 1000));
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &impl::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, j.get());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &impl::on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, j.get());
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_multi_add_handle(multi, e);
    j->last_activity = now;
    running[e] = j;
    window.emplace_back(now, j->tokens);
  }

  void release(job& j) {
    if (j.easy) {
      curl_multi_remove_handle(multi, j.easy);
      curl_easy_cleanup(j.easy);
      j.easy = nullptr;
    }
    if (j.headers) {
      curl_slist_free_all(j.headers);
      j.headers = nullptr;
    }
  }

  void finish(const std::shared_ptr<job>& j, outcome o) {
    o.attempts = j->attempts;
    o.latency_ms = seconds(clock_type::now() - j->submitted) * 1000.0;
    if (o.http_status == 0)
      o.http_status = j->last_status;
    try {
      j->done(std::move(o));
    } catch (const std::exception& e) {
      spdlog::error("llm {}: a completion callback threw: {}", name, e.what());
    } catch (...) {
      spdlog::error("llm {}: a completion callback threw", name);
    }
  }

  /// Judges a finished attempt: done, retried later, or failed for good.
  void completed(const std::shared_ptr<job>& j, CURLcode rc) {
    long status = 0;
    curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &status);
    release(*j);
    j->last_status = status;
    outcome o;
    o.http_status = status;
    bool retry = false;
    double wait_hint = -1;
    std::string error;
    if (!j->decode_error.empty()) {
      error =
          rc == CURLE_OPERATION_TIMEDOUT ? j->decode_error : "unusable reply: " + j->decode_error;
      retry = j->decode_retryable;
    } else if (rc != CURLE_OK) {
      error = std::string{"network: "} + curl_easy_strerror(rc);
      retry = true;
    } else if (status == 200) {
      try {
        parsed_reply reply = j->stream ? j->decoder->reply() : parse_body(j->w, j->body);
        if (j->stream && !j->decoder->done()) {
          error = "the stream ended before its end marker (" + std::to_string(reply.text.size())
                  + " characters received)";
          retry = true;
        } else {
          o.ok = true;
          o.reply = std::move(reply);
          return finish(j, std::move(o));
        }
      } catch (const provider_error& e) {
        error = std::string{"provider error: "} + e.what();
        retry = e.retryable;
      } catch (const std::exception& e) {
        error = std::string{"unusable reply: "} + e.what();
        retry = true;
      }
    } else {
      error = error_message(j->w, status, j->body);
      if (fatal_status(status)) {
        error += status == 404 ? " (check model and base_url)"
                               : " (check the key: api_key_env or api_key_file)";
        {
          std::lock_guard<std::mutex> lock{stop_mutex};
          if (fatal_error.empty())
            fatal_error = error;
        }
        spdlog::error("llm {}: {}; the profile takes no more queries", name, error);
        o.error = error;
        o.fatal = true;
        return finish(j, std::move(o));
      }
      retry = retryable_status(status);
      wait_hint = retry_after_s(j->retry_after);
    }
    j->last_error = error;
    if (retry && j->attempts <= limits.max_retries) {
      std::uniform_real_distribution<double> unit{0.0, 1.0};
      double wait = backoff_s(j->attempts, limits.retry_initial_s, limits.retry_max_s, unit(rng));
      if (wait_hint >= 0)
        wait = wait_hint; // the server knows when it will have room again
      spdlog::warn("llm {}: attempt {} failed ({}); retrying in {:.1f} s", name, j->attempts, error,
                   wait);
      j->not_before = clock_type::now() + from_seconds(wait);
      waiting.push_back(j);
      return;
    }
    o.error = error;
    if (j->attempts > 1)
      o.error += " (gave up after " + std::to_string(j->attempts) + " attempts)";
    finish(j, std::move(o));
  }

  /// Ends attempts that received nothing for idle_timeout_s (a stalled stream or a server that
  /// never answers); they are retried like a network error. curl's own low-speed limit
  /// averages over the transfer and misses a stream that stalls after a good start. Returns
  /// when the next attempt would turn idle.
  time_point end_idle(time_point now) {
    const auto idle = from_seconds(limits.idle_timeout_s);
    time_point next = now + std::chrono::seconds(1);
    std::vector<std::shared_ptr<job>> stalled;
    for (auto& [easy, j] : running) {
      if (now - j->last_activity >= idle)
        stalled.push_back(j);
      else
        next = std::min(next, j->last_activity + idle);
    }
    for (auto& j : stalled) {
      running.erase(j->easy);
      j->decode_error = "no data for " + std::to_string(static_cast<int>(limits.idle_timeout_s))
                        + " s (idle_timeout_s)";
      j->decode_retryable = true;
      completed(j, CURLE_OPERATION_TIMEDOUT);
    }
    return next;
  }

  void cancel_job(const std::shared_ptr<job>& j, const std::string& why) {
    release(*j);
    outcome o;
    o.cancelled = true;
    o.error = why;
    finish(j, std::move(o));
  }

  void take_requests() {
    std::vector<uint64_t> cancel_ids;
    {
      std::lock_guard<std::mutex> lock{mutex};
      for (auto& j : incoming)
        waiting.push_back(std::move(j));
      incoming.clear();
      cancel_ids.swap(cancels);
    }
    for (uint64_t id : cancel_ids) {
      auto w = std::find_if(waiting.begin(), waiting.end(), [&](auto& j) { return j->id == id; });
      if (w != waiting.end()) {
        auto j = *w;
        waiting.erase(w);
        cancel_job(j, "cancelled");
        continue;
      }
      for (auto it = running.begin(); it != running.end(); ++it)
        if (it->second->id == id) {
          auto j = it->second;
          running.erase(it);
          cancel_job(j, "cancelled");
          break;
        }
    }
  }

  /// Orders `waiting` so that groups take turns: every group's oldest query first, the group
  /// served longest ago leading, then every group's second query, and so on. Within a group
  /// the oldest query goes first, so a retry keeps its place ahead of later queries.
  void order_by_turns() {
    std::sort(waiting.begin(), waiting.end(), [](auto& a, auto& b) { return a->id < b->id; });
    std::map<std::string, int64_t> rank_in_group;
    std::vector<std::tuple<int64_t, uint64_t, uint64_t, std::shared_ptr<job>>> keyed;
    keyed.reserve(waiting.size());
    for (auto& j : waiting) {
      auto served = last_turn.find(j->group);
      keyed.emplace_back(rank_in_group[j->group]++, served == last_turn.end() ? 0 : served->second,
                         j->id, j);
    }
    std::sort(keyed.begin(), keyed.end(), [](auto& a, auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a))
             < std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
    });
    for (size_t i = 0; i < keyed.size(); ++i)
      waiting[i] = std::move(std::get<3>(keyed[i]));
  }

  /// Starts what the limits allow; returns the next time something waiting could start.
  time_point start_ready(time_point now) {
    time_point next = now + std::chrono::seconds(1);
    if (auto why = fatal(); !why.empty()) {
      auto jobs = std::move(waiting);
      waiting.clear();
      for (auto& j : jobs) {
        outcome o;
        o.error = why;
        o.fatal = true;
        finish(j, std::move(o));
      }
      return next;
    }
    order_by_turns();
    for (auto it = waiting.begin(); it != waiting.end();) {
      auto& j = *it;
      if (static_cast<int64_t>(running.size()) >= limits.max_concurrency)
        break;
      if (j->not_before > now) {
        next = std::min(next, j->not_before);
        ++it;
        continue;
      }
      if (!window_allows(*j, now)) {
        next = std::min(next, window_frees());
        break; // in order: a later query must not overtake one held back by the limits
      }
      last_turn[j->group] = ++turns;
      start(j, now);
      it = waiting.erase(it);
    }
    return next;
  }

  void loop() {
    for (;;) {
      bool stop = false;
      {
        std::lock_guard<std::mutex> lock{mutex};
        stop = stopping;
      }
      if (stop)
        break;
      take_requests();
      auto now = clock_type::now();
      time_point next = start_ready(now);
      int still_running = 0;
      curl_multi_perform(multi, &still_running);
      int left = 0;
      while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
        if (m->msg != CURLMSG_DONE)
          continue;
        auto it = running.find(m->easy_handle);
        if (it == running.end())
          continue;
        auto j = it->second;
        running.erase(it);
        completed(j, m->data.result);
      }
      next = std::min(next, end_idle(clock_type::now()));
      if (!waiting.empty() && static_cast<int64_t>(running.size()) < limits.max_concurrency)
        next = std::min(next, start_ready(clock_type::now()));
      long curl_ms = -1;
      curl_multi_timeout(multi, &curl_ms);
      auto until_next =
          std::chrono::duration_cast<std::chrono::milliseconds>(next - clock_type::now()).count();
      long wait_ms = std::clamp<long>(static_cast<long>(until_next), 0, 1000);
      if (curl_ms >= 0)
        wait_ms = std::min(wait_ms, curl_ms);
      curl_multi_poll(multi, nullptr, 0, static_cast<int>(wait_ms), nullptr);
    }
    for (auto& [easy, j] : running)
      cancel_job(j, "the gateway stopped");
    running.clear();
    {
      std::lock_guard<std::mutex> lock{mutex};
      for (auto& j : incoming)
        waiting.push_back(std::move(j));
      incoming.clear();
    }
    for (auto& j : waiting)
      cancel_job(j, "the gateway stopped");
    waiting.clear();
  }
};

transport::transport(std::string name, transport_limits limits)
    : impl_{std::make_unique<impl>(std::move(name), limits)} {}

transport::~transport() = default;

uint64_t transport::submit(wire w, http_request request, bool stream, int64_t token_estimate,
                           callback done, std::string group) {
  auto j = std::make_shared<impl::job>();
  j->id = impl_->next_id++;
  j->group = std::move(group);
  j->w = w;
  j->request = std::move(request);
  j->stream = stream;
  j->tokens = token_estimate;
  j->done = std::move(done);
  j->submitted = clock_type::now();
  j->not_before = j->submitted;
  uint64_t id = j->id;
  {
    std::lock_guard<std::mutex> lock{impl_->mutex};
    impl_->incoming.push_back(std::move(j));
  }
  curl_multi_wakeup(impl_->multi);
  return id;
}

void transport::cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock{impl_->mutex};
    impl_->cancels.push_back(id);
  }
  curl_multi_wakeup(impl_->multi);
}

bool transport::stopped(std::string* why) const {
  auto f = impl_->fatal();
  if (why)
    *why = f;
  return !f.empty();
}

} // namespace kiln::llm
