#include <catch2/catch.hpp>

#include <simdjson.h>

#include <functional>
#include <string>
#include <vector>

#include "actors/llm_wire.hpp"

using namespace kiln::llm;

namespace {

const std::string key = "sk-TEST-key-0123456789";

wire_query sample_query() {
  wire_query q;
  q.base_url = "https://api.example.test/v1/";
  q.model = "model-x";
  q.api_key = key;
  q.system = "You optimise PyTorch programs.";
  q.prompt = "Make \"this\" faster:\n\tdef f(x): return x @ x.T";
  q.temperature = 0.7;
  q.max_tokens = 4096;
  q.stop = {"</code>", "END"};
  q.stream = false;
  return q;
}

/// A parsed request body; the parser owns the document.
struct json_doc {
  explicit json_doc(const std::string& text) : padded(text) {
    auto err = parser.parse(padded).get(root);
    INFO(text);
    REQUIRE(!err);
  }
  simdjson::padded_string padded;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
};

bool has(simdjson::dom::element e, const char* k) {
  return !e[k].error();
}

std::string str(simdjson::simdjson_result<simdjson::dom::element> e) {
  std::string_view v;
  REQUIRE(!e.get(v));
  return std::string{v};
}

int64_t num(simdjson::simdjson_result<simdjson::dom::element> e) {
  int64_t v = 0;
  REQUIRE(!e.get(v));
  return v;
}

double real(simdjson::simdjson_result<simdjson::dom::element> e) {
  double v = 0;
  REQUIRE(!e.get(v));
  return v;
}

bool flag(simdjson::simdjson_result<simdjson::dom::element> e) {
  bool v = false;
  REQUIRE(!e.get(v));
  return v;
}

size_t count(simdjson::simdjson_result<simdjson::dom::element> e) {
  simdjson::dom::array a;
  REQUIRE(!e.get(a));
  return a.size();
}

/// The key is in exactly one header, never in the URL or the body.
void check_key_only_in(const http_request& r, const std::string& header) {
  CHECK(r.url.find(key) == std::string::npos);
  CHECK(r.body.find(key) == std::string::npos);
  int with_key = 0;
  for (const auto& h : r.headers)
    if (h.find(key) != std::string::npos) {
      ++with_key;
      CHECK(h == header);
    }
  CHECK(with_key == 1);
}

bool has_header(const http_request& r, const std::string& h) {
  for (const auto& x : r.headers)
    if (x == h)
      return true;
  return false;
}

struct decoded {
  parsed_reply reply;
  bool done;
};

bool same(const decoded& a, const decoded& b) {
  return a.reply.text == b.reply.text && a.reply.model == b.reply.model
         && a.reply.finish_reason == b.reply.finish_reason
         && a.reply.input_tokens == b.reply.input_tokens
         && a.reply.output_tokens == b.reply.output_tokens
         && a.reply.reasoning_tokens == b.reply.reasoning_tokens
         && a.reply.complete == b.reply.complete && a.done == b.done;
}

decoded decode(wire w, const std::vector<std::string_view>& pieces) {
  sse_decoder d{w};
  for (auto p : pieces)
    d.feed(p);
  return {d.reply(), d.done()};
}

std::string crlf(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n')
      out += '\r';
    out += c;
  }
  return out;
}

/// Decodes `stream` whole, one byte at a time and split in two at every position (each `\r\n`
/// split included), with `\n` and with `\r\n` line ends; every way gives the same result.
decoded decode_every_way(wire w, const std::string& lf_stream) {
  decoded whole = decode(w, {lf_stream});
  for (const std::string& s : {lf_stream, crlf(lf_stream)}) {
    std::string_view v{s};
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < v.size(); ++i)
      bytes.push_back(v.substr(i, 1));
    CHECK(same(decode(w, bytes), whole));
    size_t splits = 0;
    size_t crlf_splits = 0;
    for (size_t k = 0; k <= v.size(); ++k) {
      decoded two = decode(w, {v.substr(0, k), v.substr(k)});
      splits += same(two, whole);
      crlf_splits += k > 0 && v[k - 1] == '\r' && same(two, whole);
    }
    CHECK(splits == v.size() + 1); // every split gives the same reply
    CHECK((crlf_splits > 0) == (s != lf_stream));
  }
  return whole;
}

// Sample streams --------------------------------------------------------------------------

const std::string openai_stream =
    ": keep-alive\n"
    "\n"
    "data: "
    R"({"id":"chatcmpl-7Qx","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null})"
    "\n\n"
    "data: "
    R"({"id":"chatcmpl-7Qx","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"Use torch."},"finish_reason":null}],"usage":null})"
    "\n\n"
    ":\n"
    "data: "
    R"({"id":"chatcmpl-7Qx","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"compile\n\u00e9"},"finish_reason":null}],"usage":null})"
    "\n\n"
    "data: "
    R"({"id":"chatcmpl-7Qx","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null})"
    "\n\n"
    "data: "
    R"({"id":"chatcmpl-7Qx","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":812,"completion_tokens":344,"total_tokens":1156,"completion_tokens_details":{"reasoning_tokens":128}}})"
    "\n\n"
    "data: [DONE]\n"
    "\n";

const std::string anthropic_stream =
    "event: message_start\n"
    "data: "
    R"({"type":"message_start","message":{"id":"msg_01Abc","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1530,"cache_read_input_tokens":0,"output_tokens":2}}})"
    "\n\n"
    "event: content_block_start\n"
    "data: "
    R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}})"
    "\n\n"
    "event: content_block_delta\n"
    "data: "
    R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The loop is memory bound."}})"
    "\n\n"
    "event: content_block_delta\n"
    "data: "
    R"({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa"}})"
    "\n\n"
    "event: content_block_stop\n"
    "data: "
    R"({"type":"content_block_stop","index":0})"
    "\n\n"
    "event: ping\n"
    "data: {\"type\": \"ping\"}\n"
    "\n"
    "event: content_block_start\n"
    "data: "
    R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})"
    "\n\n"
    "event: content_block_delta\n"
    "data: "
    R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Fuse the two "}})"
    "\n\n"
    ": still here\n"
    "event: content_block_delta\n"
    "data:"
    R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"matmuls."}})"
    "\n\n"
    "event: content_block_stop\n"
    "data: "
    R"({"type":"content_block_stop","index":1})"
    "\n\n"
    "event: message_delta\n"
    "data: "
    R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":215}})"
    "\n\n"
    "event: message_stop\n"
    "data: "
    R"({"type":"message_stop"})"
    "\n\n";

const std::string gemini_stream =
    "data: "
    R"({"candidates":[{"content":{"parts":[{"text":"Weighing a fused kernel.","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":640,"totalTokenCount":640},"modelVersion":"gemini-2.5-flash","responseId":"r1"})"
    "\n\n"
    "data: "
    R"({"candidates":[{"content":{"parts":[{"text":"Replace the loop "}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":640,"candidatesTokenCount":4,"thoughtsTokenCount":90,"totalTokenCount":734},"modelVersion":"gemini-2.5-flash","responseId":"r1"})"
    "\n\n"
    "data: "
    R"({"candidates":[{"content":{"parts":[{"text":"with torch.bmm."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":640,"candidatesTokenCount":9,"thoughtsTokenCount":90,"totalTokenCount":739},"modelVersion":"gemini-2.5-flash","responseId":"r1"})"
    "\n\n";

template <class F> void check_provider_error(F&& f, bool retryable, const std::string& part) {
  try {
    f();
    FAIL("no provider_error");
  } catch (const provider_error& e) {
    INFO(e.what());
    CHECK(e.retryable == retryable);
    CHECK(std::string{e.what()}.find(part) != std::string::npos);
  }
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Names

TEST_CASE("wire_of names the three wire formats and refuses the offline providers", "[wire]") {
  CHECK(wire_of("openai") == wire::openai);
  CHECK(wire_of("anthropic") == wire::anthropic);
  CHECK(wire_of("gemini") == wire::gemini);
  CHECK_THROWS_AS(wire_of("rules"), std::invalid_argument);
  CHECK_THROWS_AS(wire_of("replay"), std::invalid_argument);
  CHECK(std::string{to_string(wire::openai)} == "openai");
  CHECK(std::string{to_string(wire::anthropic)} == "anthropic");
  CHECK(std::string{to_string(wire::gemini)} == "gemini");
}

// ---------------------------------------------------------------------------------------------
// Requests

TEST_CASE("openai requests", "[wire]") {
  wire_query q = sample_query();

  SECTION("a plain request") {
    http_request r = build_request(wire::openai, q);
    CHECK(r.url == "https://api.example.test/v1/chat/completions");
    CHECK(has_header(r, "Content-Type: application/json"));
    CHECK(r.headers.size() == 2);
    check_key_only_in(r, "Authorization: Bearer " + key);
    json_doc d{r.body};
    CHECK(str(d.root["model"]) == "model-x");
    REQUIRE(count(d.root["messages"]) == 2);
    CHECK(str(d.root["messages"].at(0)["role"]) == "system");
    CHECK(str(d.root["messages"].at(0)["content"]) == q.system);
    CHECK(str(d.root["messages"].at(1)["role"]) == "user");
    CHECK(str(d.root["messages"].at(1)["content"]) == q.prompt);
    CHECK(real(d.root["temperature"]) == 0.7);
    CHECK(r.body.find("\"temperature\":0.7,") != std::string::npos); // short and readable
    CHECK(num(d.root["max_tokens"]) == 4096);
    CHECK_FALSE(has(d.root, "max_completion_tokens"));
    CHECK_FALSE(has(d.root, "reasoning_effort"));
    REQUIRE(count(d.root["stop"]) == 2);
    CHECK(str(d.root["stop"].at(1)) == "END");
    CHECK(flag(d.root["stream"]) == false);
    CHECK_FALSE(has(d.root, "stream_options"));
  }

  SECTION("no system prompt, no stop, streamed, a reasoning effort") {
    q.system.clear();
    q.stop.clear();
    q.stream = true;
    q.reasoning_effort = "high";
    q.temperature = 0.1 + 0.2; // needs 17 digits to read back
    http_request r = build_request(wire::openai, q);
    json_doc d{r.body};
    REQUIRE(count(d.root["messages"]) == 1);
    CHECK(str(d.root["messages"].at(0)["role"]) == "user");
    CHECK_FALSE(has(d.root, "stop"));
    CHECK_FALSE(has(d.root, "max_tokens"));
    CHECK(num(d.root["max_completion_tokens"]) == 4096);
    CHECK(str(d.root["reasoning_effort"]) == "high");
    CHECK(real(d.root["temperature"]) == 0.1 + 0.2);
    CHECK(flag(d.root["stream"]) == true);
    CHECK(flag(d.root["stream_options"]["include_usage"]) == true);
  }

  SECTION("a local server without a key gets no Authorization header") {
    q.api_key.clear();
    q.base_url = "http://127.0.0.1:8000/v1";
    http_request r = build_request(wire::openai, q);
    CHECK(r.url == "http://127.0.0.1:8000/v1/chat/completions");
    REQUIRE(r.headers.size() == 1);
    CHECK(r.headers[0] == "Content-Type: application/json");
  }

  SECTION("a key with a line break could inject headers: refused") {
    q.api_key = "sk-abc\r\nX-Evil: 1";
    CHECK_THROWS_AS(build_request(wire::openai, q), std::invalid_argument);
  }
}

TEST_CASE("anthropic requests", "[wire]") {
  wire_query q = sample_query();
  q.base_url = "https://api.anthropic.example/v1";

  SECTION("a plain request") {
    http_request r = build_request(wire::anthropic, q);
    CHECK(r.url == "https://api.anthropic.example/v1/messages");
    CHECK(has_header(r, "Content-Type: application/json"));
    CHECK(has_header(r, "anthropic-version: 2023-06-01"));
    CHECK(r.headers.size() == 3);
    check_key_only_in(r, "x-api-key: " + key);
    json_doc d{r.body};
    CHECK(str(d.root["model"]) == "model-x");
    CHECK(num(d.root["max_tokens"]) == 4096);
    CHECK(str(d.root["system"]) == q.system);
    REQUIRE(count(d.root["messages"]) == 1);
    CHECK(str(d.root["messages"].at(0)["role"]) == "user");
    CHECK(str(d.root["messages"].at(0)["content"]) == q.prompt);
    CHECK(real(d.root["temperature"]) == 0.7);
    REQUIRE(count(d.root["stop_sequences"]) == 2);
    CHECK(str(d.root["stop_sequences"].at(0)) == "</code>");
    CHECK(flag(d.root["stream"]) == false);
    CHECK_FALSE(has(d.root, "thinking"));
    CHECK_FALSE(has(d.root, "stop"));
  }

  SECTION("extended thinking leaves the temperature out") {
    q.thinking_budget = 2048;
    q.system.clear();
    q.stop.clear();
    q.stream = true;
    http_request r = build_request(wire::anthropic, q);
    json_doc d{r.body};
    CHECK_FALSE(has(d.root, "temperature"));
    CHECK_FALSE(has(d.root, "system"));
    CHECK_FALSE(has(d.root, "stop_sequences"));
    CHECK(str(d.root["thinking"]["type"]) == "enabled");
    CHECK(num(d.root["thinking"]["budget_tokens"]) == 2048);
    CHECK(flag(d.root["stream"]) == true);
  }
}

TEST_CASE("gemini requests", "[wire]") {
  wire_query q = sample_query();
  q.base_url = "https://generativelanguage.example/v1beta//";
  q.model = "gemini-2.5-pro";

  SECTION("a plain request") {
    http_request r = build_request(wire::gemini, q);
    CHECK(r.url
          == "https://generativelanguage.example/v1beta/models/gemini-2.5-pro:generateContent");
    CHECK(has_header(r, "Content-Type: application/json"));
    CHECK(r.headers.size() == 2);
    check_key_only_in(r, "x-goog-api-key: " + key);
    json_doc d{r.body};
    REQUIRE(count(d.root["contents"]) == 1);
    CHECK(str(d.root["contents"].at(0)["role"]) == "user");
    REQUIRE(count(d.root["contents"].at(0)["parts"]) == 1);
    CHECK(str(d.root["contents"].at(0)["parts"].at(0)["text"]) == q.prompt);
    CHECK(str(d.root["systemInstruction"]["parts"].at(0)["text"]) == q.system);
    auto g = d.root["generationConfig"];
    CHECK(real(g["temperature"]) == 0.7);
    CHECK(num(g["maxOutputTokens"]) == 4096);
    REQUIRE(count(g["stopSequences"]) == 2);
    CHECK(str(g["stopSequences"].at(1)) == "END");
    CHECK(g["thinkingConfig"].error());
    CHECK_FALSE(has(d.root, "model"));
  }

  SECTION("streamed, with a thinking budget, no system prompt") {
    q.stream = true;
    q.thinking_budget = 1024;
    q.system.clear();
    q.stop.clear();
    http_request r = build_request(wire::gemini, q);
    CHECK(r.url
          == "https://generativelanguage.example/v1beta/models/"
             "gemini-2.5-pro:streamGenerateContent?alt=sse");
    json_doc d{r.body};
    CHECK_FALSE(has(d.root, "systemInstruction"));
    auto g = d.root["generationConfig"];
    CHECK(num(g["thinkingConfig"]["thinkingBudget"]) == 1024);
    CHECK(g["stopSequences"].error());
  }

  SECTION("the model name is made safe for the URL path") {
    q.model = "models/gemini-2.5-flash";
    CHECK(build_request(wire::gemini, q).url
          == "https://generativelanguage.example/v1beta/models/gemini-2.5-flash:generateContent");
    q.model = "tuned model?x=1#a/b";
    CHECK(build_request(wire::gemini, q).url
          == "https://generativelanguage.example/v1beta/models/"
             "tuned%20model%3Fx%3D1%23a%2Fb:generateContent");
  }
}

TEST_CASE("request bodies carry any text as valid JSON", "[wire]") {
  wire_query q = sample_query();
  q.prompt = std::string{"quote \" backslash \\ nul "} + '\0'
             + " bell \a ctrl \x1f unicode \xc3\xa9\xe2\x82\xac";
  q.system = "bad utf-8: \xff\xfe and a cut \xe2\x82";
  for (wire w : {wire::openai, wire::anthropic, wire::gemini}) {
    http_request r = build_request(w, q);
    json_doc d{r.body}; // simdjson validates UTF-8 too
    std::string prompt = w == wire::gemini
                             ? str(d.root["contents"].at(0)["parts"].at(0)["text"])
                             : str(d.root["messages"].at(w == wire::openai ? 1 : 0)["content"]);
    CHECK(prompt == q.prompt);
    std::string system = w == wire::openai ? str(d.root["messages"].at(0)["content"])
                         : w == wire::anthropic
                             ? str(d.root["system"])
                             : str(d.root["systemInstruction"]["parts"].at(0)["text"]);
    CHECK(system == "bad utf-8: \xef\xbf\xbd\xef\xbf\xbd and a cut \xef\xbf\xbd\xef\xbf\xbd");
  }
}

// ---------------------------------------------------------------------------------------------
// Whole replies

TEST_CASE("openai replies", "[wire]") {
  SECTION("a finished reply with reasoning tokens") {
    auto r = parse_body(wire::openai, R"({
      "id": "chatcmpl-B1x", "object": "chat.completion", "created": 1731000000,
      "model": "o4-mini-2025-04-16",
      "choices": [{"index": 0, "message": {"role": "assistant",
                   "content": "```python\nimport torch\n```", "refusal": null},
                   "logprobs": null, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 1203, "completion_tokens": 911, "total_tokens": 2114,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 640}},
      "system_fingerprint": null})");
    CHECK(r.text == "```python\nimport torch\n```");
    CHECK(r.model == "o4-mini-2025-04-16");
    CHECK(r.finish_reason == "stop");
    CHECK(r.complete);
    CHECK(r.input_tokens == 1203);
    CHECK(r.output_tokens == 911);
    CHECK(r.reasoning_tokens == 640);
  }

  SECTION("null content, no usage, no finish reason (a local server)") {
    auto r = parse_body(wire::openai, R"({"model":"qwen2.5-coder","choices":[{"index":0,
      "message":{"role":"assistant","content":null},"finish_reason":null}]})");
    CHECK(r.text.empty());
    CHECK_FALSE(r.complete);
    CHECK(r.finish_reason.empty());
    CHECK(r.input_tokens == 0);
    CHECK(r.output_tokens == 0);
    CHECK(r.reasoning_tokens == 0);
  }

  SECTION("cut by the token limit") {
    auto r = parse_body(wire::openai, R"({"model":"m","choices":[{"index":0,
      "message":{"role":"assistant","content":"def f("},"finish_reason":"length"}],
      "usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}})");
    CHECK(r.text == "def f(");
    CHECK(r.finish_reason == "length");
    CHECK(r.complete);
    CHECK(r.reasoning_tokens == 0);
  }

  SECTION("errors inside a 200 reply") {
    check_provider_error(
        [] {
          parse_body(wire::openai, R"({"error":{"message":"Rate limit reached for requests",
            "type":"requests","param":null,"code":"rate_limit_exceeded"}})");
        },
        true, "Rate limit reached");
    check_provider_error(
        [] {
          parse_body(wire::openai, R"({"error":{"message":"The server had an error",
            "type":"server_error","param":null,"code":null}})");
        },
        true, "server_error");
    check_provider_error(
        [] {
          parse_body(wire::openai, R"({"error":{"message":"You exceeded your current quota",
            "type":"insufficient_quota","param":null,"code":"insufficient_quota"}})");
        },
        false, "quota");
    check_provider_error(
        [] {
          parse_body(wire::openai, R"({"object":"error","message":"model busy",
            "type":"ServiceUnavailableError","code":503})");
        },
        true, "model busy");
  }

  SECTION("malformed replies") {
    CHECK_THROWS_AS(parse_body(wire::openai, R"({"choices":[{"message":)"), malformed_reply);
    CHECK_THROWS_AS(parse_body(wire::openai, "<html>502 Bad Gateway</html>"), malformed_reply);
    CHECK_THROWS_AS(parse_body(wire::openai, ""), malformed_reply);
    CHECK_THROWS_AS(parse_body(wire::openai, R"({"id":"x","model":"m"})"), malformed_reply);
    CHECK_THROWS_AS(parse_body(wire::openai, R"([1,2])"), malformed_reply);
    try {
      parse_body(wire::openai, "{\"choices\": [" + std::string(5000, 'x'));
      FAIL("no malformed_reply");
    } catch (const malformed_reply& e) {
      CHECK(std::string{e.what()}.size() < 250); // no body dump
    }
  }
}

TEST_CASE("anthropic replies", "[wire]") {
  SECTION("thinking blocks are left out of the text") {
    auto r = parse_body(wire::anthropic, R"({
      "id": "msg_01XYZ", "type": "message", "role": "assistant",
      "model": "claude-opus-4-20250514",
      "content": [
        {"type": "thinking", "thinking": "Transposes are free here.", "signature": "Ev0BCkYIBB"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "text", "text": "Here is the faster version:\n"},
        {"type": "text", "text": "y = x.mT @ w"}],
      "stop_reason": "end_turn", "stop_sequence": null,
      "usage": {"input_tokens": 2210, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0, "output_tokens": 1388}})");
    CHECK(r.text == "Here is the faster version:\ny = x.mT @ w");
    CHECK(r.model == "claude-opus-4-20250514");
    CHECK(r.finish_reason == "end_turn");
    CHECK(r.complete);
    CHECK(r.input_tokens == 2210);
    CHECK(r.output_tokens == 1388);
    CHECK(r.reasoning_tokens == 0);
  }

  SECTION("stopped by a stop sequence; an unfinished reply") {
    auto r = parse_body(wire::anthropic, R"({"type":"message","model":"m","content":
      [{"type":"text","text":"<code>x"}],"stop_reason":"stop_sequence","stop_sequence":"</code>",
      "usage":{"input_tokens":5,"output_tokens":2}})");
    CHECK(r.finish_reason == "stop_sequence");
    CHECK(r.complete);
    auto u = parse_body(wire::anthropic, R"({"type":"message","content":[],"stop_reason":null})");
    CHECK_FALSE(u.complete);
    CHECK(u.text.empty());
  }

  SECTION("errors inside a 200 reply") {
    for (const char* type : {"overloaded_error", "rate_limit_error", "api_error"})
      check_provider_error(
          [type] {
            parse_body(wire::anthropic, std::string{R"({"type":"error","error":{"type":")"} + type
                                            + R"(","message":"Try later"}})");
          },
          true, "Try later");
    check_provider_error(
        [] {
          parse_body(wire::anthropic, R"({"type":"error","error":{"type":
            "invalid_request_error","message":"max_tokens: must be greater than thinking.budget_tokens"}})");
        },
        false, "budget_tokens");
  }

  SECTION("malformed replies") {
    CHECK_THROWS_AS(parse_body(wire::anthropic, R"({"type":"message","content":[{"type":)"),
                    malformed_reply);
    CHECK_THROWS_AS(parse_body(wire::anthropic, R"({"type":"message","model":"m"})"),
                    malformed_reply);
  }
}

TEST_CASE("gemini replies", "[wire]") {
  SECTION("thought parts are left out; thoughts count as output") {
    auto r = parse_body(wire::gemini, R"({
      "candidates": [{
        "content": {"role": "model", "parts": [
          {"text": "**Planning** the fusion.", "thought": true},
          {"text": "Fuse the ", "thoughtSignature": "CiQB0e2Kb"},
          {"text": "elementwise ops.", "thought": false}]},
        "finishReason": "STOP", "index": 0}],
      "usageMetadata": {"promptTokenCount": 905, "candidatesTokenCount": 57,
                        "thoughtsTokenCount": 311, "totalTokenCount": 1273,
                        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 905}]},
      "modelVersion": "gemini-2.5-pro", "responseId": "abc123"})");
    CHECK(r.text == "Fuse the elementwise ops.");
    CHECK(r.model == "gemini-2.5-pro");
    CHECK(r.finish_reason == "STOP");
    CHECK(r.complete);
    CHECK(r.input_tokens == 905);
    CHECK(r.output_tokens == 57 + 311);
    CHECK(r.reasoning_tokens == 311);
  }

  SECTION("missing counts; a candidate blocked for safety") {
    auto r = parse_body(wire::gemini, R"({"candidates":[{"content":{"role":"model","parts":
      [{"text":"partial"}]},"finishReason":"SAFETY","safetyRatings":[]}],
      "usageMetadata":{"promptTokenCount":12,"totalTokenCount":12},"modelVersion":"gemini-x"})");
    CHECK(r.text == "partial");
    CHECK(r.finish_reason == "SAFETY");
    CHECK(r.complete);
    CHECK(r.output_tokens == 0);
    CHECK(r.reasoning_tokens == 0);
    auto b = parse_body(wire::gemini,
                        R"({"candidates":[{"finishReason":"SAFETY","index":0}],"usageMetadata":
      {"promptTokenCount":3,"candidatesTokenCount":0}})");
    CHECK(b.text.empty());
    CHECK(b.complete);
    auto p = parse_body(wire::gemini, R"({"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},
      "usageMetadata":{"promptTokenCount":40,"totalTokenCount":40},"modelVersion":"gemini-x"})");
    CHECK(p.text.empty());
    CHECK(p.finish_reason == "PROHIBITED_CONTENT");
    CHECK(p.complete);
    CHECK(p.input_tokens == 40);
  }

  SECTION("errors inside a 200 reply") {
    check_provider_error(
        [] {
          parse_body(wire::gemini, R"({"error":{"code":429,"message":"Quota exceeded for metric",
            "status":"RESOURCE_EXHAUSTED"}})");
        },
        true, "Quota exceeded");
    check_provider_error(
        [] {
          parse_body(wire::gemini, R"([{"error":{"code":503,"message":"The model is overloaded.",
            "status":"UNAVAILABLE"}}])");
        },
        true, "overloaded");
    check_provider_error(
        [] {
          parse_body(wire::gemini, R"({"error":{"code":400,"message":"API key not valid.",
            "status":"INVALID_ARGUMENT"}})");
        },
        false, "INVALID_ARGUMENT");
  }

  SECTION("malformed replies") {
    CHECK_THROWS_AS(parse_body(wire::gemini, R"({"candidates":[)"), malformed_reply);
    CHECK_THROWS_AS(parse_body(wire::gemini, R"({"usageMetadata":{}})"), malformed_reply);
  }
}

// ---------------------------------------------------------------------------------------------
// Streams

TEST_CASE("openai streams", "[wire]") {
  SECTION("a whole stream, any split") {
    decoded d = decode_every_way(wire::openai, openai_stream);
    CHECK(d.done);
    CHECK(d.reply.text == "Use torch.compile\n\xc3\xa9");
    CHECK(d.reply.model == "gpt-4o-mini-2024-07-18");
    CHECK(d.reply.finish_reason == "stop");
    CHECK(d.reply.complete);
    CHECK(d.reply.input_tokens == 812);
    CHECK(d.reply.output_tokens == 344);
    CHECK(d.reply.reasoning_tokens == 128);
  }

  SECTION("a stream cut before its end keeps the text so far") {
    std::string cut = openai_stream.substr(0, openai_stream.find("compile\\n") + 20);
    decoded d = decode_every_way(wire::openai, cut);
    CHECK_FALSE(d.done);
    CHECK_FALSE(d.reply.complete);
    CHECK(d.reply.text == "Use torch.");
    CHECK(d.reply.output_tokens == 0);
  }

  SECTION("an event's data over several lines, fields without a space") {
    decoded d = decode(wire::openai,
                       {"data:{\"choices\":[{\"delta\":\n", "data: {\"content\":\"ab\"}}]}\n\n",
                        "event: message\nid: 7\nretry: 100\ndata:[DONE]\n\n"});
    CHECK(d.reply.text == "ab");
    CHECK(d.done);
  }

  SECTION("an error chunk") {
    sse_decoder d{wire::openai};
    d.feed("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n");
    check_provider_error(
        [&] {
          d.feed("data: {\"error\":{\"message\":\"The server is overloaded\",\"type\":"
                 "\"server_error\",\"code\":null}}\n\n");
        },
        true, "overloaded");
    CHECK(d.reply().text == "x");
  }

  SECTION("malformed chunk JSON") {
    sse_decoder d{wire::openai};
    CHECK_THROWS_AS(d.feed("data: {\"choices\":[{\"delta\n\n"), malformed_reply);
  }
}

TEST_CASE("anthropic streams", "[wire]") {
  SECTION("a whole stream, any split") {
    decoded d = decode_every_way(wire::anthropic, anthropic_stream);
    CHECK(d.done);
    CHECK(d.reply.text == "Fuse the two matmuls.");
    CHECK(d.reply.model == "claude-sonnet-4-20250514");
    CHECK(d.reply.finish_reason == "end_turn");
    CHECK(d.reply.complete);
    CHECK(d.reply.input_tokens == 1530);
    CHECK(d.reply.output_tokens == 215); // cumulative: assigned, not added
    CHECK(d.reply.reasoning_tokens == 0);
  }

  SECTION("a stream cut before message_stop") {
    std::string cut = anthropic_stream.substr(0, anthropic_stream.find("event: message_delta"));
    decoded d = decode_every_way(wire::anthropic, cut);
    CHECK_FALSE(d.done);
    CHECK_FALSE(d.reply.complete);
    CHECK(d.reply.text == "Fuse the two matmuls.");
    CHECK(d.reply.output_tokens == 2);
  }

  SECTION("the event type comes from the JSON, or from the event line") {
    decoded d = decode(wire::anthropic,
                       {"event: ping\n"
                        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
                        "{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n"
                        "event: content_block_delta\n"
                        "data: {\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"b\"}}\n\n"
                        "event: message_stop\ndata: {}\n\n"});
    CHECK(d.reply.text == "ab");
    CHECK(d.done);
  }

  SECTION("error events") {
    sse_decoder d{wire::anthropic};
    d.feed(anthropic_stream.substr(0, anthropic_stream.find("event: content_block_stop\ndata: "
                                                            "{\"type\":\"content_block_stop\","
                                                            "\"index\":1}")));
    check_provider_error(
        [&] {
          d.feed("event: error\r\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                 "\"overloaded_error\",\"message\":\"Overloaded\"}}\r\n\r\n");
        },
        true, "Overloaded");
    CHECK(d.reply().text == "Fuse the two matmuls.");
    CHECK_FALSE(d.done());
    sse_decoder e{wire::anthropic};
    check_provider_error(
        [&] {
          e.feed("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                 "\"invalid_request_error\",\"message\":\"prompt is too long\"}}\n\n");
        },
        false, "too long");
  }

  SECTION("malformed event JSON") {
    sse_decoder d{wire::anthropic};
    CHECK_THROWS_AS(d.feed("event: message_start\ndata: {\"type\":\"message_start\",\n\n"),
                    malformed_reply);
  }
}

TEST_CASE("gemini streams", "[wire]") {
  SECTION("a whole stream, any split") {
    decoded d = decode_every_way(wire::gemini, gemini_stream);
    CHECK(d.done);
    CHECK(d.reply.text == "Replace the loop with torch.bmm.");
    CHECK(d.reply.model == "gemini-2.5-flash");
    CHECK(d.reply.finish_reason == "STOP");
    CHECK(d.reply.complete);
    CHECK(d.reply.input_tokens == 640);
    CHECK(d.reply.output_tokens == 99);
    CHECK(d.reply.reasoning_tokens == 90);
  }

  SECTION("a stream cut before its finishing chunk") {
    size_t last = gemini_stream.rfind("data: ");
    std::string cut = gemini_stream.substr(0, last + 40); // the last chunk half sent
    decoded d = decode_every_way(wire::gemini, cut);
    CHECK_FALSE(d.done);
    CHECK_FALSE(d.reply.complete);
    CHECK(d.reply.text == "Replace the loop ");
    CHECK(d.reply.output_tokens == 94);
    CHECK(d.reply.finish_reason.empty());
  }

  SECTION("an error chunk") {
    sse_decoder d{wire::gemini};
    check_provider_error(
        [&] {
          d.feed("data: {\"error\":{\"code\":500,\"message\":\"An internal error has occurred.\","
                 "\"status\":\"INTERNAL\"}}\n\n");
        },
        true, "internal error");
  }

  SECTION("malformed chunk JSON") {
    sse_decoder d{wire::gemini};
    CHECK_THROWS_AS(d.feed("data: {\"candidates\": nope}\n\n"), malformed_reply);
  }
}

// ---------------------------------------------------------------------------------------------
// Error replies

TEST_CASE("error_message gives the status and the provider's message", "[wire]") {
  CHECK(error_message(wire::anthropic, 401,
                      R"({"type":"error","error":{"type":"authentication_error",
                          "message":"invalid x-api-key"}})")
        == "HTTP 401: invalid x-api-key");
  CHECK(error_message(wire::openai, 429,
                      R"({"error":{"message":"Rate limit reached for gpt-4o.\nRetry later.",
                          "type":"requests","param":null,"code":"rate_limit_exceeded"}})")
        == "HTTP 429: Rate limit reached for gpt-4o. Retry later.");
  CHECK(error_message(
            wire::gemini, 400,
            R"({"error":{"code":400,"message":"API key not valid. Please pass a valid API key.",
                          "status":"INVALID_ARGUMENT"}})")
        == "HTTP 400: API key not valid. Please pass a valid API key.");
  CHECK(error_message(wire::openai, 404, "") == "HTTP 404");
  CHECK(error_message(wire::openai, 502, "<html>\r\n<title>502 Bad\tGateway</title>\r\n</html>")
        == "HTTP 502: <html> <title>502 Bad Gateway</title> </html>");
  std::string long_body(1000, 'z');
  std::string m = error_message(wire::gemini, 500, long_body);
  CHECK(m == "HTTP 500: " + std::string(200, 'z'));
}
