#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "config/log_sink.hpp"
#include "config/secrets.hpp"

using kiln::secrets::redact;

TEST_CASE("a known secret is masked wherever it appears", "[secrets]") {
  kiln::secrets::add("sk-test-0123456789abcdef");
  CHECK(redact("key sk-test-0123456789abcdef, again:sk-test-0123456789abcdef.")
        == "key <redacted>, again:<redacted>.");
  CHECK(kiln::secrets::contains_secret("x sk-test-0123456789abcdef"));
  CHECK_FALSE(kiln::secrets::contains_secret("x sk-test-0123"));
  // Short values would match ordinary words: not remembered.
  kiln::secrets::add("short");
  CHECK(redact("a short word") == "a short word");
}

TEST_CASE("credential headers and bearer tokens are masked even when unknown", "[secrets]") {
  CHECK(redact("got Authorization: Bearer abc.def-123456789 from you")
        == "got Authorization: Bearer <redacted> from you");
  CHECK(redact("{\"x-api-key\": \"anthropic-unknown-key-value\"}")
        == "{\"x-api-key\": \"<redacted>\"}");
  CHECK(redact("X-Goog-Api-Key:AIzaUnknownKeyValue") == "X-Goog-Api-Key:<redacted>");
  CHECK(redact("authorization: basic dXNlcjpwYXNz") == "authorization: basic <redacted>");
  CHECK(redact("echo: bearer eyJhbGciOiJIUzI1NiJ9 end") == "echo: bearer <redacted> end");
  // English is left alone: a short word after "bearer" is no token.
  CHECK(redact("the bearer of bad news") == "the bearer of bad news");
  CHECK(redact("nothing secret here: 3.2 ms") == "nothing secret here: 3.2 ms");
}

TEST_CASE("credential-named variables of the environment become secrets", "[secrets]") {
  ::setenv("KILN_SECRETS_TEST_TOKEN", "tok-planted-value-42", 1);
  ::setenv("kiln_secrets_test_password", "hunter2-but-longer", 1);
  ::setenv("KILN_SECRETS_TEST_PATH", "/not/a/secret/path", 1);
  kiln::secrets::add_from_environment();
  CHECK(redact("tok-planted-value-42 hunter2-but-longer /not/a/secret/path")
        == "<redacted> <redacted> /not/a/secret/path");
}

TEST_CASE("the redacting logger masks before any sink sees the line", "[secrets]") {
  kiln::secrets::add("sk-logged-key-0000111122223333");
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%v");
  auto quiet = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  quiet->set_level(spdlog::level::err);
  auto logger = kiln::redacting_logger("secrets-test", std::vector<spdlog::sink_ptr>{sink, quiet});
  logger->warn("retrying: {{\"error\": \"bad key sk-logged-key-0000111122223333\"}}");
  logger->flush();
  auto text = out.str();
  CHECK(text.find("sk-logged-key") == std::string::npos);
  CHECK(text.find("bad key <redacted>") != std::string::npos);
  // Each sink keeps its own level: the error-only one wrote nothing for a warning.
  CHECK(text.find("<redacted>", text.find("<redacted>") + 1) == std::string::npos);
}

TEST_CASE("untrusted text keeps its lines and loses its terminal control sequences", "[secrets]") {
  kiln::secrets::add("sk-clean-test-0123456789");
  auto text = kiln::secrets::clean("line one\n\tindented \x1b[2J\x1b]0;title\x07\rfake\x7f "
                                   "sk-clean-test-0123456789");
  CHECK(text == "line one\n\tindented \\x1b[2J\\x1b]0;title\\x07\\x0dfake\\x7f <redacted>");
  CHECK(kiln::secrets::clean("plain, unicode \xc3\xa9 kept") == "plain, unicode \xc3\xa9 kept");
}
