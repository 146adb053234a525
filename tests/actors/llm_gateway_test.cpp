// The LLM gateway against a real HTTP server of our own (tests/fake_llm) on 127.0.0.1: the
// three wire formats, streamed and not, injected faults, limits, keys, and the transcript.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "actors/archive.hpp"
#include "actors/llm_gateway.hpp"
#include "actors/llm_secrets.hpp"
#include "actors/sqlite.hpp"
#include "messages/error.hpp"
#include "tests/actors/fake_llm.hpp"

using namespace kiln;
using kiln::test::fake_llm;

namespace {

struct gateway_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  gateway_fixture() {
    add_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

llm_request question(const std::string& prompt = "Make this faster, please.") {
  llm_request r;
  r.task = "1_MLP";
  r.role = "optimizer";
  r.kind = prompt_kind::optimize;
  r.prompt = prompt;
  return r;
}

/// Asks once; returns the reply or the error's text in `error`.
llm_reply ask(caf::actor_system& sys, const llm_gateway_actor& gw, const llm_request& req,
              std::string& error) {
  caf::scoped_actor self{sys};
  llm_reply out;
  self->request(gw, std::chrono::seconds(60), ask_atom::value, req)
      .receive([&](llm_reply& r) { out = std::move(r); },
               [&](caf::error& e) { error = render(e); });
  return out;
}

/// Waits for a transport's outcomes in tests that use it directly.
struct outcomes {
  std::mutex m;
  std::condition_variable cv;
  std::vector<llm::outcome> got;
  llm::transport::callback sink() {
    return [this](llm::outcome o) {
      std::lock_guard<std::mutex> lock{m};
      got.push_back(std::move(o));
      cv.notify_all();
    };
  }
  bool wait_for(size_t n, std::chrono::seconds limit = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> lock{m};
    return cv.wait_for(lock, limit, [&] { return got.size() >= n; });
  }
};

llm::http_request request_for(const fake_llm& server, const std::string& provider, bool stream) {
  auto p = server.profile(provider);
  p.stream = stream;
  return llm::build_request(llm::wire_of(provider), query_of(p, question(), server.key()));
}

} // namespace

TEST_CASE("each wire format answers through the gateway, streamed and not", "[llm]") {
  fake_llm server{"formats"};
  gateway_fixture f;
  for (std::string provider : {"openai", "anthropic", "gemini"}) {
    for (bool stream : {true, false}) {
      INFO(provider << (stream ? " streamed" : " whole"));
      auto p = server.profile(provider);
      p.stream = stream;
      p.usd_per_mtok_input = 2;
      p.usd_per_mtok_output = 10;
      auto gw = f.sys->spawn(llm_gateway, p, archive_actor{});
      std::string error;
      auto r = ask(*f.sys, gw, question(), error);
      REQUIRE(error.empty());
      CHECK(r.text.find("class ModelNew") != std::string::npos);
      CHECK(r.input_tokens > 0);
      CHECK(r.output_tokens > 0);
      CHECK(r.cost_usd == Approx((r.input_tokens * 2.0 + r.output_tokens * 10.0) / 1e6));
      CHECK(r.profile == "p");
      caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
    }
  }
  CHECK(server.stat("requests") == 6);
  CHECK(server.stat("key_in_url") == 0);
}

TEST_CASE("the gateway recovers from 429, 5xx, cut streams and broken bodies", "[llm]") {
  fake_llm server{"recover"};
  gateway_fixture f;
  for (std::string provider : {"openai", "anthropic", "gemini"}) {
    for (bool stream : {true, false}) {
      INFO(provider << (stream ? " streamed" : " whole"));
      server.http("/_control/reset", new std::string{"{}"});
      server.faults({"429@0", "500", "cut", "truncated", "garbage", "503"});
      auto p = server.profile(provider);
      p.stream = stream;
      auto gw = f.sys->spawn(llm_gateway, p, archive_actor{});
      std::string error;
      auto r = ask(*f.sys, gw, question(), error);
      REQUIRE(error.empty());
      CHECK(r.text.find("class ModelNew") != std::string::npos);
      CHECK(server.stat("requests") == 7); // six faults, then the answer
      caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
    }
  }
}

TEST_CASE("retries stop at max_retries with the last error", "[llm]") {
  fake_llm server{"giveup"};
  server.faults({"500", "500", "500", "500"});
  gateway_fixture f;
  auto p = server.profile("openai");
  p.max_retries = 2;
  auto gw = f.sys->spawn(llm_gateway, p, archive_actor{});
  std::string error;
  ask(*f.sys, gw, question(), error);
  CHECK(error.find("HTTP 500") != std::string::npos);
  CHECK(error.find("gave up after 3 attempts") != std::string::npos);
  CHECK(server.stat("requests") == 3);
  caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
}

TEST_CASE("Retry-After is honoured", "[llm]") {
  fake_llm server{"retry-after"};
  server.faults({"429@1"});
  outcomes done;
  llm::transport_limits lim;
  lim.retry_initial_s = 0.01;
  lim.retry_max_s = 0.02; // the header, not the backoff, sets the wait
  auto t0 = std::chrono::steady_clock::now();
  {
    llm::transport t{"p", lim};
    t.submit(llm::wire::openai, request_for(server, "openai", true), true, 10, done.sink());
    REQUIRE(done.wait_for(1));
  }
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(done.got[0].ok);
  CHECK(done.got[0].attempts == 2);
  CHECK(waited >= 0.95);
}

TEST_CASE("a wrong key, an unknown model or a wrong URL stops the profile at once", "[llm]") {
  gateway_fixture f;
  SECTION("wrong key") {
    fake_llm server{"badkey"};
    for (std::string provider : {"openai", "anthropic", "gemini"}) {
      INFO(provider);
      server.http("/_control/reset", new std::string{"{}"});
      auto p = server.profile(provider);
      ::setenv("KILN_TEST_KEY", "sk-wrong-key-000000000", 1);
      auto gw = f.sys->spawn(llm_gateway, p, archive_actor{});
      std::string error;
      ask(*f.sys, gw, question(), error);
      CHECK(error.find("HTTP 401") != std::string::npos);
      CHECK(error.find("check the key") != std::string::npos);
      CHECK(error.find("sk-wrong-key-000000000") == std::string::npos);
      // The next query fails without another request.
      std::string again;
      ask(*f.sys, gw, question(), again);
      CHECK(again.find("HTTP 401") != std::string::npos);
      CHECK(server.stat("requests") == 1);
      caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
    }
  }
  SECTION("unknown model") {
    fake_llm server{"badmodel", {"--models", "real-model"}};
    auto gw = f.sys->spawn(llm_gateway, server.profile("anthropic"), archive_actor{});
    std::string error;
    ask(*f.sys, gw, question(), error);
    CHECK(error.find("HTTP 404") != std::string::npos);
    CHECK(error.find("check model and base_url") != std::string::npos);
    CHECK(server.stat("requests") == 1);
    caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
  }
  SECTION("403") {
    fake_llm server{"forbidden", {"--faults", "403"}};
    auto gw = f.sys->spawn(llm_gateway, server.profile("gemini"), archive_actor{});
    std::string error;
    ask(*f.sys, gw, question(), error);
    CHECK(error.find("HTTP 403") != std::string::npos);
    CHECK(server.stat("requests") == 1);
    caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("a stalled stream is abandoned after idle_timeout_s and retried", "[llm]") {
  fake_llm server{"stall", {"--faults", "stall@5"}};
  outcomes done;
  llm::transport_limits lim;
  lim.idle_timeout_s = 1;
  lim.retry_initial_s = 0.01;
  auto t0 = std::chrono::steady_clock::now();
  llm::transport t{"p", lim};
  t.submit(llm::wire::anthropic, request_for(server, "anthropic", true), true, 10, done.sink());
  REQUIRE(done.wait_for(1));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(done.got[0].ok);
  CHECK(done.got[0].attempts == 2);
  CHECK(took < 4.5); // not the 5 s the stall would have cost
}

TEST_CASE("max_concurrency bounds the requests in flight", "[llm]") {
  std::vector<std::string> slow(16, "slow@0.2");
  fake_llm server{"concurrency"};
  server.faults(slow);
  outcomes done;
  llm::transport_limits lim;
  lim.max_concurrency = 4;
  llm::transport t{"p", lim};
  for (int i = 0; i < 16; ++i)
    t.submit(llm::wire::openai, request_for(server, "openai", i % 2 == 0), i % 2 == 0, 10,
             done.sink());
  REQUIRE(done.wait_for(16));
  for (auto& o : done.got)
    CHECK(o.ok);
  CHECK(server.stat("max_in_flight") == 4);
  CHECK(server.stat("requests") == 16);
}

TEST_CASE("queries waiting for a profile take turns by task", "[llm]") {
  fake_llm server{"turns"};
  server.faults({"slow@0.5"}); // the first query holds the only slot while the rest queue
  std::mutex m;
  std::vector<std::string> order;
  outcomes done;
  llm::transport_limits lim;
  lim.max_concurrency = 1;
  llm::transport t{"p", lim};
  auto submit = [&](const std::string& task, const std::string& label) {
    auto sink = done.sink();
    t.submit(
        llm::wire::openai, request_for(server, "openai", false), false, 10,
        [&, label, sink](llm::outcome o) {
          {
            std::lock_guard<std::mutex> lock{m};
            order.push_back(label);
          }
          sink(std::move(o));
        },
        task);
  };
  submit("1_MLP", "a1");
  submit("1_MLP", "a2");
  submit("1_MLP", "a3");
  submit("1_MLP", "a4");
  submit("2_Other", "b1");
  REQUIRE(done.wait_for(5));
  // First in, first out would answer b1 last; 2_Other has not been served yet, so it goes
  // right after the query in flight.
  CHECK(order == std::vector<std::string>{"a1", "b1", "a2", "a3", "a4"});
}

TEST_CASE("requests_per_minute holds back what exceeds it; cancel ends it", "[llm]") {
  fake_llm server{"rpm"};
  outcomes done;
  llm::transport_limits lim;
  lim.requests_per_minute = 2;
  {
    llm::transport t{"p", lim};
    uint64_t third = 0;
    for (int i = 0; i < 3; ++i)
      third =
          t.submit(llm::wire::gemini, request_for(server, "gemini", false), false, 10, done.sink());
    REQUIRE(done.wait_for(2));
    // The third may not start within this minute: no third request reaches the server.
    CHECK_FALSE(done.wait_for(3, std::chrono::seconds(1)));
    CHECK(server.stat("requests") == 2);
    t.cancel(third);
    REQUIRE(done.wait_for(3));
    CHECK(done.got[2].cancelled);
  }
}

TEST_CASE("tokens_per_minute counts each request's estimate", "[llm]") {
  fake_llm server{"tpm"};
  outcomes done;
  llm::transport_limits lim;
  lim.tokens_per_minute = 1000;
  llm::transport t{"p", lim};
  t.submit(llm::wire::openai, request_for(server, "openai", true), true, 600, done.sink());
  t.submit(llm::wire::openai, request_for(server, "openai", true), true, 600, done.sink());
  REQUIRE(done.wait_for(1));
  CHECK_FALSE(done.wait_for(2, std::chrono::seconds(1)));
  CHECK(server.stat("requests") == 1);
}

TEST_CASE("keys stay out of the archive, the log and errors", "[llm]") {
  fake_llm server{"secrets"};
  server.faults({"500", "cut"});
  auto dir = kiln::test::fresh_dir("llm-secrets");
  gateway_fixture f;
  auto db = dir + "/archive.sqlite";
  {
    auto archive = spawn_archive(*f.sys, db);
    auto p = server.profile("anthropic");
    auto gw = f.sys->spawn(llm_gateway, p, archive);
    std::string error;
    auto r = ask(*f.sys, gw, question(), error);
    REQUIRE(error.empty());
    ::setenv("KILN_TEST_KEY", "sk-another-wrong-key-42", 1);
    auto bad = f.sys->spawn(llm_gateway, server.profile("openai", "q"), archive);
    // profile() reset the variable: set the wrong key again for the second gateway's load.
    ask(*f.sys, bad, question(), error);
    caf::scoped_actor self{*f.sys};
    self->request(archive, std::chrono::seconds(10), flush_atom::value)
        .receive([](ok_atom) {}, [](caf::error&) {});
    caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(bad, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(archive, caf::exit_reason::user_shutdown);
  }
  std::ifstream in{db, std::ios::binary};
  std::string bytes{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  CHECK(bytes.find(server.key()) == std::string::npos);
  CHECK(kiln::test::read_text(server.dir() + "/log.jsonl").find(server.key()) == std::string::npos);
  sqlite::database rdb{db, sqlite::open_mode::read_only};
  auto st = rdb.prepare("SELECT count(*) FROM llm_calls");
  REQUIRE(st.step());
  CHECK(st.column_int64(0) >= 1);
}

TEST_CASE("redact hides a key wherever it appears", "[llm]") {
  CHECK(llm::redact("key sk-abcdef123456 and again sk-abcdef123456.", "sk-abcdef123456")
        == "key <redacted> and again <redacted>.");
  CHECK(llm::redact("short keys are not searched: abc", "abc")
        == "short keys are not searched: abc");
}

TEST_CASE("a key file must be private and hold a key", "[llm]") {
  auto dir = kiln::test::fresh_dir("llm-keyfile");
  llm_profile_config p;
  p.name = "k";
  p.provider = "openai";
  p.api_key_file = dir + "/key";
  {
    std::ofstream out{p.api_key_file};
    out << "  sk-from-file-0001  \n";
  }
  ::chmod(p.api_key_file.c_str(), 0644);
  try {
    llm::load_api_key(p);
    FAIL("a world-readable key file was accepted");
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    CHECK(what.find("chmod 600") != std::string::npos);
    CHECK(what.find("sk-from-file") == std::string::npos);
  }
  ::chmod(p.api_key_file.c_str(), 0600);
  CHECK(llm::load_api_key(p) == "sk-from-file-0001");
  p.api_key_file = dir + "/missing";
  CHECK_THROWS_WITH(llm::load_api_key(p), Catch::Contains("api_key_file"));
  p.api_key_file.clear();
  p.api_key_env = "KILN_TEST_UNSET_VARIABLE";
  ::unsetenv("KILN_TEST_UNSET_VARIABLE");
  CHECK_THROWS_WITH(llm::load_api_key(p), Catch::Contains("KILN_TEST_UNSET_VARIABLE is not set"));
}

TEST_CASE("backoff doubles with jitter and Retry-After reads seconds and dates", "[llm]") {
  CHECK(llm::backoff_s(1, 1, 60, 1.0) == Approx(1));
  CHECK(llm::backoff_s(3, 1, 60, 1.0) == Approx(4));
  CHECK(llm::backoff_s(3, 1, 60, 0.0) == Approx(2));
  CHECK(llm::backoff_s(10, 1, 60, 1.0) == Approx(60));
  CHECK(llm::retry_after_s(" 7 ") == Approx(7));
  CHECK(llm::retry_after_s("") < 0);
  CHECK(llm::retry_after_s("soon") < 0);
  CHECK(llm::retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == Approx(0));
}
