#pragma once

// The fake LLM server (tests/fake_llm/fake_llm_server.py) as a real process on 127.0.0.1, for
// the gateway tests: start it with options, point a profile at it, read its statistics.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <simdjson.h>

#include "gpu/process.hpp"
#include "tests/actors/fixture.hpp"

namespace kiln::test {

class fake_llm {
public:
  /// `args` go to the server after the port and key options; `name` names its scratch folder.
  explicit fake_llm(const std::string& name, std::vector<std::string> args = {},
                    std::string key = "sk-fake-0123456789abcdef")
      : key_{std::move(key)} {
    dir_ = fresh_dir("fake-llm-" + name);
    auto port_file = dir_ + "/port";
    process_options o;
    o.argv = {"python3",     std::string{KILN_SOURCE_DIR} + "/tests/fake_llm/fake_llm_server.py",
              "--port",      "0",
              "--port-file", port_file,
              "--key",       key_,
              "--log",       dir_ + "/log.jsonl"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    const char* path = std::getenv("PATH");
    o.env = {std::string{"PATH="} + (path ? path : "/usr/bin:/bin")};
    o.stdout_path = dir_ + "/stdout.txt";
    o.stderr_path = dir_ + "/stderr.txt";
    o.timeout_s = 0;
    proc_ = start_process(o);
    if (!proc_.running())
      throw std::runtime_error("fake LLM server: " + proc_.error());
    // Readiness: the server writes its port once it listens.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (port_ == 0) {
      std::ifstream in{port_file};
      if (in >> port_)
        break;
      if (!proc_.alive() || std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("fake LLM server did not start: " + read_text(o.stderr_path));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  const std::string& key() const { return key_; }
  int port() const { return port_; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  const std::string& dir() const { return dir_; }

  /// A profile of `provider` pointed at this server, its key in `KILN_TEST_KEY`.
  llm_profile_config profile(const std::string& provider, const std::string& name = "p") const {
    ::setenv("KILN_TEST_KEY", key_.c_str(), 1);
    llm_profile_config p;
    p.name = name;
    p.provider = provider;
    p.base_url = url(provider == "gemini" ? "/v1beta" : "/v1");
    p.model = "fake-model";
    p.api_key_env = "KILN_TEST_KEY";
    p.max_tokens = 1000;
    p.retry_initial_s = 0.01;
    p.retry_max_s = 0.05;
    p.timeout_s = 20;
    return p;
  }

  /// GET or POST (when `body` is given) to the control endpoints.
  std::string http(const std::string& path, const std::string* body = nullptr) const {
    std::string out;
    CURL* c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url(path).c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(
        c, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
          static_cast<std::string*>(u)->append(d, s * n);
          return s * n;
        });
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    curl_slist* h = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
      curl_easy_setopt(c, CURLOPT_COPYPOSTFIELDS, body->c_str());
    auto rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK)
      throw std::runtime_error(std::string{"fake LLM control: "} + curl_easy_strerror(rc));
    return out;
  }

  /// Replaces the fault queue, e.g. {"429@0", "500", "cut"}.
  void faults(const std::vector<std::string>& queue) const {
    std::string body = "{\"queue\": [";
    for (size_t i = 0; i < queue.size(); ++i)
      body += (i ? ", \"" : "\"") + queue[i] + "\"";
    body += "]}";
    http("/_control/faults", &body);
  }

  /// A number from /_stats, e.g. `requests` or `max_in_flight`.
  int64_t stat(const std::string& field) const {
    simdjson::dom::parser parser;
    auto text = http("/_stats");
    simdjson::dom::element doc;
    if (parser.parse(text).get(doc))
      throw std::runtime_error("fake LLM stats: not JSON: " + text);
    int64_t v = 0;
    if (doc[field].get(v))
      return 0;
    return v;
  }

private:
  std::string key_;
  std::string dir_;
  int port_ = 0;
  child_process proc_;
};

} // namespace kiln::test
