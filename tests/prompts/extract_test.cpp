// Parsing replies: which block is the candidate program, and which lines are ideas.

#include <catch2/catch.hpp>

#include <random>

#include "prompts/extract.hpp"

using namespace kiln;

namespace {

const std::string program = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                            "    def forward(self, x):\n        return x + 1\n";

} // namespace

TEST_CASE("the ModelNew block wins over a leading C++ block") {
  auto reply = "Here is the kernel:\n```cpp\n__global__ void k() {}\n```\nAnd the module:\n"
               "```python\n"
               + program + "```\nDone.";
  auto code = extract_code(reply);
  REQUIRE(code);
  CHECK(*code == program);
}

TEST_CASE("language tags are optional and tilde fences work") {
  for (std::string open : {"```", "```py", "``` python", "~~~python", "````python"}) {
    std::string close = open[0] == '~' ? "~~~" : open.substr(0, open.find_first_not_of('`'));
    INFO(open);
    auto code = extract_code("Answer:\n" + open + "\n" + program + close + "\n");
    REQUIRE(code);
    CHECK(*code == program);
  }
}

TEST_CASE("a reply without fences is taken from its first Python line") {
  auto code = extract_code("Sure, here it is.\n\n" + program);
  REQUIRE(code);
  CHECK(*code == program);
}

TEST_CASE("with several ModelNew blocks the last one wins") {
  auto first = "class ModelNew(nn.Module):\n    pass\n";
  auto reply = "Draft:\n```python\n" + std::string{first} + "```\nCorrected:\n```python\n" + program
               + "```\n```cuda\n// notes\n```\n";
  auto code = extract_code(reply);
  REQUIRE(code);
  CHECK(*code == program);
}

TEST_CASE("CRLF replies are normalised") {
  std::string reply = "```python\r\n";
  for (char c : program) {
    if (c == '\n')
      reply += "\r\n";
    else
      reply += c;
  }
  reply += "```\r\n";
  auto code = extract_code(reply);
  REQUIRE(code);
  CHECK(*code == program);
}

TEST_CASE("an unterminated last fence runs to the end of the reply") {
  auto code = extract_code("Text\n```python\n" + program);
  REQUIRE(code);
  CHECK(*code == program);
}

TEST_CASE("no ModelNew means no program") {
  CHECK_FALSE(extract_code("```python\nclass Model(nn.Module):\n    pass\n```\n"));
  CHECK_FALSE(extract_code("I could not do it."));
  CHECK_FALSE(extract_code(""));
  // A mention in prose is not a definition.
  CHECK_FALSE(extract_code("You should write a class ModelNew yourself."));
}

TEST_CASE("ideas come from bullets and numbers, with bold and continuations") {
  auto reply = "Here are my ideas:\n\n"
               "- **Fuse ops**: merge bias and GELU\n"
               "* use CUDA graphs\n"
               "\xe2\x80\xa2 channels last\n"
               "1. tile the matmul\n"
               "   with 128x128 blocks\n"
               "   and double buffering\n"
               "2) online softmax\n"
               "(3) TF32\n"
               "**4. Autocast**\n"
               "Some closing prose.\n"
               "   indented prose after the list ends nothing\n"
               "-\n"
               "- \n"
               "---\n"
               "```\n- not an idea, code\n```\n"
               "- last one\n";
  auto ideas = extract_ideas(reply, 20);
  CHECK(ideas
        == std::vector<std::string>{"Fuse ops: merge bias and GELU", "use CUDA graphs",
                                    "channels last",
                                    "tile the matmul with 128x128 blocks and double buffering",
                                    "online softmax", "TF32", "Autocast", "last one"});
}

TEST_CASE("nested bullets join their parent idea") {
  auto ideas = extract_ideas("- parent\n  - detail one\n  - detail two\n- next\n", 10);
  CHECK(ideas == std::vector<std::string>{"parent detail one detail two", "next"});
}

TEST_CASE("ideas are capped at max") {
  auto ideas = extract_ideas("- a\n- b\n- c\n- d\n", 2);
  CHECK(ideas == std::vector<std::string>{"a", "b"});
  CHECK(extract_ideas("- a\n", 0).empty());
  CHECK(extract_ideas("1. a\r\n2. b\r\n", 5) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("fuzz: extraction never fails and finds an intact ModelNew block") {
  // Random replies built from prose, decoy blocks, stray and broken fence-like text, CRLF line
  // ends and a possibly cut-off tail. Whenever the ModelNew block was inserted whole, it must
  // come back exactly; otherwise extraction must just not crash.
  std::mt19937_64 rng{20240611};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const std::vector<std::string> prose = {"Here is my answer.",
                                          "The kernel fuses two ops.",
                                          "Use ``` to open code.",
                                          "  indented remark",
                                          "",
                                          "- a bullet",
                                          "1. numbered",
                                          "~~ not a fence",
                                          "`` two ticks",
                                          "# Heading",
                                          "class Model is the reference."};
  const std::vector<std::string> decoys = {
      "```cpp\n__global__ void k(float* x) { x[0] = 1; }\n```", "```\nplain block\n```",
      "~~~text\nlog output\n~~~", "```python\nimport torch\nclass Model(nn.Module):\n    pass\n```",
      "```cuda\n// ```python inside a string\n```"};
  const std::vector<std::string> opens = {"```python", "```py", "```", "~~~python", "```Python"};
  int inserted_count = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string reply;
    bool inserted = pick(4) != 0;
    size_t parts = 1 + pick(6);
    size_t at = pick(parts);
    for (size_t i = 0; i < parts; ++i) {
      if (inserted && i == at) {
        auto open = opens[pick(opens.size())];
        std::string close = open[0] == '~' ? "~~~" : "```";
        reply += open + "\n" + program + close + "\n";
        continue;
      }
      if (pick(2))
        reply += prose[pick(prose.size())] + "\n";
      else
        reply += decoys[pick(decoys.size())] + "\n";
    }
    // A tail cut off mid-block, after the program, as a token limit would leave it.
    bool cut_tail = pick(5) == 0;
    if (cut_tail)
      reply += "```cpp\n// unfinished";
    if (pick(3) == 0) {
      std::string crlf;
      for (char c : reply) {
        if (c == '\n')
          crlf += "\r\n";
        else
          crlf += c;
      }
      reply = crlf;
    }
    if (!inserted && pick(2) == 0 && !reply.empty())
      reply.resize(pick(reply.size())); // random truncation anywhere
    auto code = extract_code(reply);
    auto ideas = extract_ideas(reply, 5);
    CHECK(ideas.size() <= 5);
    if (inserted) {
      ++inserted_count;
      INFO("reply:\n" << reply);
      REQUIRE(code);
      CHECK(*code == program);
    } else if (code) {
      CHECK(code->find("class ModelNew") != std::string::npos);
    }
  }
  CHECK(inserted_count > 2000);
}

TEST_CASE("fuzz: idea lists in any bullet or number style come back whole and in order") {
  // Random lists: bullets (-, *, •) or numbers (1. 2) (3)), optional bold, optional continuation
  // lines, prose and code blocks around them, CRLF sometimes. Every idea must come back exactly
  // once, in order, joined with its continuation.
  std::mt19937_64 rng{77};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const std::vector<std::string> words = {"fuse",   "the", "bias", "into",   "GELU", "tile",
                                          "matmul", "use", "CUDA", "graphs", "TF32", "warps"};
  auto phrase = [&] {
    std::string s;
    size_t n = 2 + pick(5);
    for (size_t i = 0; i < n; ++i)
      s += (i ? " " : "") + words[pick(words.size())];
    return s;
  };
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<std::string> expected;
    std::string reply = pick(2) ? "Here are some ideas:\n\n" : "";
    if (pick(3) == 0)
      reply += "```cpp\n- not an idea\n```\n";
    size_t n = 1 + pick(8);
    size_t style = pick(6);
    for (size_t i = 0; i < n; ++i) {
      std::string idea = phrase();
      std::string marker;
      switch (style) {
        case 0:
          marker = "- ";
          break;
        case 1:
          marker = "* ";
          break;
        case 2:
          marker = "\xe2\x80\xa2 ";
          break;
        case 3:
          marker = std::to_string(i + 1) + ". ";
          break;
        case 4:
          marker = std::to_string(i + 1) + ") ";
          break;
        default:
          marker = "(" + std::to_string(i + 1) + ") ";
          break;
      }
      std::string line = pick(4) == 0 ? "**" + idea + "**" : idea;
      reply += marker + line + "\n";
      if (pick(3) == 0) {
        std::string more = phrase();
        reply += "   " + more + "\n";
        idea += " " + more;
      }
      expected.push_back(idea);
    }
    if (pick(2))
      reply += "\nThat is all.\n";
    if (pick(3) == 0) {
      std::string crlf;
      for (char c : reply)
        crlf += c == '\n' ? std::string{"\r\n"} : std::string(1, c);
      reply = crlf;
    }
    INFO("reply:\n" << reply);
    CHECK(extract_ideas(reply, 20) == expected);
    CHECK(extract_ideas(reply, 2).size() == std::min<size_t>(2, expected.size()));
  }
}
