// The static scan (gpu/scan.hpp): a Python tokenizer just good enough to skip comments, read
// strings as strings and see dotted names, then rules over those tokens.
//
// Names are resolved through the candidate's own imports (`import torch.cuda as tc`,
// `from time import perf_counter as pc`, `E = torch.cuda.Event`), and only an imported name
// counts as a module: a local variable that happens to be called `time` is not one. That keeps
// honest code (`torch.nn.functional`, `torch.backends.cudnn.benchmark = True`, docstrings that
// mention a clock) out of the findings.
//
// What a statement assigns is read where Python's grammar puts targets: before `=`, before the
// colon of an annotation, after `for` and `as`, in the body after a compound header's colon. An
// annotation, a default value or a keyword argument mentions a name without assigning it
// (`BLOCK: tl.constexpr = 64`, `def f(x: torch.Tensor = None)`), and rejecting those turned
// away published solutions.

#include "gpu/scan.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <utility>

namespace kiln {

std::string scan_finding::text() const {
  return "static scan: " + rule + " (line " + std::to_string(line) + ")";
}

namespace {

// -- tokens --------------------------------------------------------------------------------------

enum class tok { name, number, string, op, newline };

struct token {
  tok kind;
  std::string text; ///< a string's content, without prefix and quotes
  int line;
};

bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_'
         || static_cast<unsigned char>(c) >= 0x80;
}

bool name_char(char c) {
  return name_start(c) || std::isdigit(static_cast<unsigned char>(c));
}

bool string_prefix(std::string_view id) {
  std::string low;
  for (char c : id)
    low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return low == "r" || low == "b" || low == "u" || low == "f" || low == "br" || low == "rb"
         || low == "fr" || low == "rf";
}

/// Python's tokens minus indentation, with `;` and the end of a logical line as `newline`.
std::vector<token> tokenize(std::string_view s) {
  std::vector<token> out;
  int line = 1;
  int depth = 0;
  auto newline = [&] {
    if (!out.empty() && out.back().kind != tok::newline)
      out.push_back({tok::newline, "", line});
  };
  size_t i = 0;
  const size_t n = s.size();
  auto read_string = [&](size_t at) { // `at` is at the opening quote
    const char q = s[at];
    const bool triple = at + 2 < n && s[at + 1] == q && s[at + 2] == q;
    const int start_line = line;
    size_t j = at + (triple ? 3 : 1);
    std::string text;
    while (j < n) {
      char c = s[j];
      if (c == '\\' && j + 1 < n) {
        if (s[j + 1] == '\n')
          ++line;
        text += s[j + 1];
        j += 2;
        continue;
      }
      if (c == '\n') {
        if (!triple)
          break; // unterminated: the runner will report the syntax error
        ++line;
      }
      if (c == q && (!triple || (j + 2 < n && s[j + 1] == q && s[j + 2] == q))) {
        j += triple ? 3 : 1;
        break;
      }
      text += c;
      ++j;
    }
    out.push_back({tok::string, std::move(text), start_line});
    i = j;
  };
  while (i < n) {
    char c = s[i];
    if (c == '#') {
      while (i < n && s[i] != '\n')
        ++i;
    } else if (c == '\\' && i + 1 < n && s[i + 1] == '\n') {
      ++line;
      i += 2;
    } else if (c == '\n') {
      if (depth == 0)
        newline();
      ++line;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
      ++i;
    } else if (c == '"' || c == '\'') {
      read_string(i);
    } else if (name_start(c)) {
      size_t j = i;
      while (j < n && name_char(s[j]))
        ++j;
      std::string_view id = s.substr(i, j - i);
      if (j < n && (s[j] == '"' || s[j] == '\'') && string_prefix(id)) {
        read_string(j);
      } else {
        out.push_back({tok::name, std::string{id}, line});
        i = j;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c))
               || (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t j = i + 1;
      while (j < n
             && (name_char(s[j]) || s[j] == '.'
                 || ((s[j] == '+' || s[j] == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
        ++j;
      out.push_back({tok::number, std::string{s.substr(i, j - i)}, line});
      i = j;
    } else if (c == ';') {
      newline();
      ++i;
    } else {
      static const char* const multi[] = {
          "**=", "//=", ">>=", "<<=", "...", "==", "!=", "<=", ">=", "+=", "-=", "*=",
          "/=",  "%=",  "&=",  "|=",  "^=",  "@=", "->", ":=", "**", "//", "<<", ">>"};
      size_t len = 1;
      for (const char* m : multi)
        if (s.substr(i, std::strlen(m)) == m) {
          len = std::strlen(m);
          break;
        }
      if (len == 1 && (c == '(' || c == '[' || c == '{'))
        ++depth;
      if (len == 1 && (c == ')' || c == ']' || c == '}'))
        depth = std::max(0, depth - 1);
      out.push_back({tok::op, std::string{s.substr(i, len)}, line});
      i += len;
    }
  }
  newline();
  return out;
}

bool is_op(const token& t, std::string_view op) {
  return t.kind == tok::op && t.text == op;
}

bool is_name(const token& t, std::string_view name) {
  return t.kind == tok::name && t.text == name;
}

/// `=` and the augmented assignments. Not `:=`: a walrus binds a plain name only.
bool is_assign_op(const token& t) {
  if (t.kind != tok::op)
    return false;
  const std::string& x = t.text;
  return x == "="
         || (x.size() >= 2 && x.back() == '=' && x != "==" && x != "!=" && x != "<=" && x != ">="
             && x != ":=");
}

bool opens(const token& t) {
  return t.kind == tok::op && (t.text == "(" || t.text == "[" || t.text == "{");
}

bool closes(const token& t) {
  return t.kind == tok::op && (t.text == ")" || t.text == "]" || t.text == "}");
}

const std::set<std::string> keywords = {
    "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
    "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
    "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
    "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};

/// Statements whose header ends at a colon, with a body that may follow on the same line.
const std::set<std::string> compound_keywords = {"if",   "elif", "else",   "while",
                                                 "for",  "try",  "except", "finally",
                                                 "with", "def",  "class",  "async"};

/// A token after which `(` or `[` is a call or a subscript, not a parenthesized target list.
bool ends_operand(const token& t) {
  if (t.kind == tok::name)
    return !keywords.count(t.text) || t.text == "None" || t.text == "True" || t.text == "False";
  return t.kind == tok::number || t.kind == tok::string
         || (t.kind == tok::op && (t.text == ")" || t.text == "]" || t.text == "}"));
}

// -- rules ---------------------------------------------------------------------------------------

/// A dotted name the candidate mentions, resolved through its imports ("" when its root is not
/// an imported name).
struct chain {
  size_t begin = 0; ///< first token
  size_t end = 0;   ///< one past the last token
  std::vector<std::string> parts;
  std::string resolved;
};

struct name_rule {
  const char* prefix; ///< a dotted name; with a trailing `*`, a plain string prefix
  const char* what;
};

// What a resolved name may not be (or start with). Grouped by the failure mode they stop.
const name_rule name_rules[] = {
    {"gc.get_objects", "scans the garbage collector with"},
    {"gc.get_referrers", "scans the garbage collector with"},
    {"gc.get_referents", "scans the garbage collector with"},
    {"sys._getframe", "reads the harness's frames with"},
    {"sys._current_frames", "reads the harness's frames with"},
    {"inspect.stack", "reads the harness's frames with"},
    {"inspect.currentframe", "reads the harness's frames with"},
    {"inspect.getouterframes", "reads the harness's frames with"},
    {"inspect.getinnerframes", "reads the harness's frames with"},
    {"inspect.trace", "reads the harness's frames with"},
    {"traceback.extract_stack", "reads the harness's frames with"},
    {"traceback.walk_stack", "reads the harness's frames with"},
    {"sys.settrace", "hooks the interpreter with"},
    {"sys.setprofile", "hooks the interpreter with"},
    {"sys.addaudithook", "hooks the interpreter with"},
    {"sys.argv", "reads the harness's arguments with"},
    {"sys.orig_argv", "reads the harness's arguments with"},
    {"sys.modules", "reads the harness's modules with"},
    {"__main__", "reads the harness's module with"},
    {"kiln_harness", "reads the harness with"},
    {"kiln_timing", "reads the harness with"},
    {"kiln_build", "reads the harness with"},
    {"threading", "starts background work with"},
    {"_thread", "starts background work with"},
    {"multiprocessing", "starts background work with"},
    {"torch.multiprocessing", "starts background work with"},
    {"concurrent", "starts background work with"},
    {"asyncio", "starts background work with"},
    {"subprocess", "starts background work with"},
    {"pty", "starts background work with"},
    {"os.fork", "starts background work with"},
    {"os.forkpty", "starts background work with"},
    {"os.system", "starts background work with"},
    {"os.popen", "starts background work with"},
    {"os.spawn*", "starts background work with"},
    {"os.exec*", "starts background work with"},
    {"os.posix_spawn*", "starts background work with"},
    {"signal.setitimer", "starts background work with"},
    {"signal.alarm", "starts background work with"},
    {"socket", "uses the network with"},
    {"ssl", "uses the network with"},
    {"urllib", "uses the network with"},
    {"http", "uses the network with"},
    {"requests", "uses the network with"},
    {"ftplib", "uses the network with"},
    {"smtplib", "uses the network with"},
    {"xmlrpc", "uses the network with"},
    {"importlib", "loads code the scan cannot read with"},
    {"runpy", "loads code the scan cannot read with"},
    {"builtins.__import__", "loads code the scan cannot read with"},
    {"builtins.exec", "loads code the scan cannot read with"},
    {"builtins.eval", "loads code the scan cannot read with"},
    {"unittest.mock", "patches functions with"},
    {"mock.patch", "patches functions with"},
};

/// Modules whose attributes the name rules guard one by one (frames, the module table, the
/// collector, loaders): reading them by a computed name or through vars() is refused.
const std::set<std::string> introspected_roots = {"sys",      "gc",        "inspect",
                                                  "builtins", "importlib", "traceback"};

/// Attribute names that lead from an object to interpreter frames (the harness's locals).
const std::set<std::string> frame_attributes = {"f_back",   "f_globals", "f_locals", "f_builtins",
                                                "tb_frame", "gi_frame",  "cr_frame", "ag_frame"};

/// Modules a dotted name may not pass through, wherever it starts (`queue.threading.Thread`).
const std::set<std::string> banned_components = {"threading",  "_thread", "multiprocessing",
                                                 "subprocess", "socket",  "__builtins__"};

/// Modules whose attributes the candidate may not rebind: the harness and the timing loops call
/// into them after the candidate was imported.
const std::set<std::string> protected_roots = {
    "torch", "time",      "triton", "builtins", "json", "os",     "sys",       "gc",
    "math",  "importlib", "uuid",   "numpy",    "io",   "pickle", "traceback", "threading"};

/// Settings of torch that exist to be set by user code.
const char* const settable_prefixes[] = {"torch.backends.", "torch._dynamo.config.",
                                         "torch._inductor.config.", "torch._functorch.config."};

/// Strings that name the harness's files, or the process's own internals.
const std::pair<const char*, const char*> string_rules[] = {
    {"kiln_harness", "reads the harness's files"}, {"kiln_timing", "reads the harness's files"},
    {"kiln_build", "reads the harness's files"},   {"result.json", "reads the harness's files"},
    {"job.json", "reads the harness's files"},     {"/proc/", "reads process internals"},
};

/// Reduced-precision markers: noted, never rejected (DESIGN allows lower precision; the
/// tolerance decides, and a reader should know).
const std::pair<const char*, const char*> precision_markers[] = {
    {"half", "float16"},
    {"float16", "float16"},
    {"bfloat16", "bfloat16"},
    {"autocast", "autocast"},
    {"allow_tf32", "TF32"},
    {"set_float32_matmul_precision", "TF32"},
    {"allow_fp16_reduced_precision_reduction", "float16 reductions"},
    {"allow_bf16_reduced_precision_reduction", "bfloat16 reductions"},
};

bool matches(const std::string& resolved, std::string_view prefix) {
  if (!prefix.empty() && prefix.back() == '*')
    return resolved.compare(0, prefix.size() - 1, prefix.substr(0, prefix.size() - 1)) == 0;
  return resolved.compare(0, prefix.size(), prefix) == 0
         && (resolved.size() == prefix.size() || resolved[prefix.size()] == '.');
}

std::string root_of(const std::string& dotted) {
  return dotted.substr(0, dotted.find('.'));
}

class scanner {
public:
  explicit scanner(std::string_view source) : tokens_(tokenize(source)) {}

  scan_result run() {
    size_t begin = 0;
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (tokens_[i].kind != tok::newline)
        continue;
      statement(begin, i);
      begin = i + 1;
    }
    scan_result out;
    out.rejections = std::move(findings_);
    if (!precision_.empty()) {
      std::string note = "reduced precision:";
      for (size_t k = 0; k < precision_.size(); ++k)
        note += (k ? ", " : " ") + precision_[k].first + " (line "
                + std::to_string(precision_[k].second) + ")";
      out.notes.push_back(note + "; the outputs passed the tolerance, the reference is float32");
    }
    for (auto& n : other_notes_)
      out.notes.push_back(std::move(n));
    return out;
  }

private:
  void reject(std::string rule, int line) {
    for (const auto& f : findings_)
      if (f.rule == rule && f.line == line)
        return;
    findings_.push_back({std::move(rule), line});
  }

  void note_once(const std::string& key, std::string text) {
    if (noted_.insert(key).second)
      other_notes_.push_back(std::move(text));
  }

  /// `a.b.c` starting at token `i` (not preceded by a dot).
  chain read_chain(size_t i, size_t end) const {
    chain c;
    c.begin = i;
    c.parts.push_back(tokens_[i].text);
    size_t j = i + 1;
    while (j + 1 < end && is_op(tokens_[j], ".") && tokens_[j + 1].kind == tok::name) {
      c.parts.push_back(tokens_[j + 1].text);
      j += 2;
    }
    c.end = j;
    std::string root = c.parts.front();
    std::string base;
    if (auto it = aliases_.find(root); it != aliases_.end())
      base = it->second;
    else if (root == "__builtins__")
      base = "builtins";
    if (!base.empty()) {
      c.resolved = base;
      for (size_t k = 1; k < c.parts.size(); ++k)
        c.resolved += "." + c.parts[k];
    }
    return c;
  }

  /// A name used or imported: the rules on names, the notes.
  void use(const std::string& resolved, const std::vector<std::string>& parts, int line) {
    if (!resolved.empty()) {
      for (const auto& r : name_rules)
        if (matches(resolved, r.prefix)) {
          reject(std::string{r.what} + " " + resolved, line);
          break;
        }
      if (parts.size() > 1 && parts.back() == "__dict__"
          && protected_roots.count(root_of(resolved)))
        reject("patches " + resolved, line);
      if (matches(resolved, "ctypes"))
        note_once("ctypes", "uses ctypes (line " + std::to_string(line)
                                + "): native calls the static scan cannot read");
      if (matches(resolved, "torch.cuda.Stream") || matches(resolved, "torch.cuda.stream"))
        note_once("stream", "uses CUDA streams (line " + std::to_string(line)
                                + "): timing waits for the whole device");
    }
    for (size_t k = 0; k < parts.size(); ++k) {
      const auto& p = parts[k];
      if (frame_attributes.count(p))
        reject("reads the harness's frames with ." + p, line);
      if (k > 0 && banned_components.count(p))
        reject("reaches a forbidden module through ." + p, line);
      for (const auto& [marker, kind] : precision_markers)
        if (k > 0 && p == marker
            && std::none_of(precision_.begin(), precision_.end(),
                            [&](const auto& x) { return x.first == kind; }))
          precision_.emplace_back(kind, line);
    }
  }

  void import_statement(size_t begin, size_t end) {
    // import a.b [as c], d
    size_t i = begin + 1;
    while (i < end) {
      if (tokens_[i].kind != tok::name) {
        ++i;
        continue;
      }
      std::string dotted = tokens_[i].text;
      size_t j = i + 1;
      while (j + 1 < end && is_op(tokens_[j], ".") && tokens_[j + 1].kind == tok::name) {
        dotted += "." + tokens_[j + 1].text;
        j += 2;
      }
      std::string bound = root_of(dotted);
      std::string target = bound;
      if (j + 1 < end && is_name(tokens_[j], "as") && tokens_[j + 1].kind == tok::name) {
        bound = tokens_[j + 1].text;
        target = dotted;
        j += 2;
      }
      aliases_[bound] = target;
      use(dotted, split(dotted), tokens_[i].line);
      i = j;
    }
  }

  void from_statement(size_t begin, size_t end) {
    // from a.b import c [as d], (e, f)
    size_t i = begin + 1;
    std::string module;
    while (i < end && !is_name(tokens_[i], "import")) {
      module += tokens_[i].text;
      ++i;
    }
    if (module.empty() || module[0] == '.')
      return; // relative imports: the candidate is a single file
    use(module, split(module), tokens_[begin].line);
    for (++i; i < end; ++i) {
      if (tokens_[i].kind != tok::name || is_name(tokens_[i], "as"))
        continue;
      std::string name = tokens_[i].text;
      std::string bound = name;
      if (i + 2 < end && is_name(tokens_[i + 1], "as") && tokens_[i + 2].kind == tok::name) {
        bound = tokens_[i + 2].text;
        i += 2;
      }
      std::string full = module + "." + name;
      aliases_[bound] = full;
      use(full, split(full), tokens_[i].line);
    }
  }

  static std::vector<std::string> split(const std::string& dotted) {
    std::vector<std::string> parts;
    size_t at = 0;
    for (;;) {
      size_t dot = dotted.find('.', at);
      parts.push_back(dotted.substr(at, dot - at));
      if (dot == std::string::npos)
        return parts;
      at = dot + 1;
    }
  }

  bool settable(const std::string& resolved) const {
    return std::any_of(std::begin(settable_prefixes), std::end(settable_prefixes),
                       [&](const char* p) { return resolved.rfind(p, 0) == 0; });
  }

  void patch(const chain& c, const std::string& attr, int line) {
    if (c.resolved.empty() || !protected_roots.count(root_of(c.resolved)))
      return;
    std::string name = attr.empty() ? c.resolved : c.resolved + "." + attr;
    if (settable(name))
      return;
    reject("patches " + name, line);
  }

  /// What one line binds, worked out before its names are checked.
  struct binding {
    std::set<size_t> targets;  ///< the first tokens of the chains it assigns or deletes
    std::vector<size_t> names; ///< single names that `=` binds to the value
    size_t value = 0;          ///< where that value starts; 0: no `=` value
    std::vector<std::pair<std::string, std::string>> walrus; ///< name, what it now names
  };

  /// The colon that ends a compound statement's header (`def f(a: int = 1) -> T:`), not one of
  /// a lambda in it; `end` when there is none.
  size_t header_colon(size_t begin, size_t end) const {
    int depth = 0;
    int lambdas = 0;
    for (size_t i = begin; i < end; ++i) {
      const token& t = tokens_[i];
      if (opens(t))
        ++depth;
      else if (closes(t))
        --depth;
      else if (depth == 0 && is_name(t, "lambda"))
        ++lambdas;
      else if (depth == 0 && is_op(t, ":") && lambdas-- == 0)
        return i;
    }
    return end;
  }

  bool compound(size_t begin, size_t end) const {
    const token& first = tokens_[begin];
    if (first.kind != tok::name)
      return false;
    if (compound_keywords.count(first.text))
      return true;
    // `match` and `case` are keywords only in front of a subject or a pattern and a colon;
    // `match = re.match(...)` is a variable.
    if ((first.text == "match" || first.text == "case") && begin + 1 < end) {
      const token& next = tokens_[begin + 1];
      const bool operand =
          next.kind != tok::op || opens(next) || next.text == "-" || next.text == "*";
      return operand && header_colon(begin, end) < end;
    }
    return false;
  }

  /// Marks the chains that the target list [from, to) binds: those at its top level or inside
  /// parentheses and brackets that group targets (`a, (torch.x, b) = ...`), never inside a call
  /// or a subscript (`d[torch.float16] = ...` binds an item of d, not torch.float16).
  void targets(size_t from, size_t to, binding& b) const {
    std::vector<bool> grouping;
    for (size_t i = from; i < to; ++i) {
      const token& t = tokens_[i];
      if (opens(t)) {
        grouping.push_back(t.text != "{" && !(i > 0 && ends_operand(tokens_[i - 1])));
        continue;
      }
      if (closes(t)) {
        if (!grouping.empty())
          grouping.pop_back();
        continue;
      }
      if (t.kind != tok::name || keywords.count(t.text) || (i > 0 && is_op(tokens_[i - 1], ".")))
        continue;
      const size_t j = read_chain(i, to).end;
      const bool open = std::find(grouping.begin(), grouping.end(), false) == grouping.end();
      if (open
          && (j == to || is_op(tokens_[j], ",") || closes(tokens_[j]) || is_assign_op(tokens_[j])))
        b.targets.insert(i);
      i = j - 1;
    }
  }

  /// A line's targets. An annotation is not a target: `x: torch.Tensor = None`,
  /// `def f(a: torch.Tensor = None)` and `BLOCK: tl.constexpr = 64` bind x, a and BLOCK. Only a
  /// simple statement (`simple`) assigns; a compound statement's header binds through
  /// `for ... in` and `as` only, and both can appear in any line (comprehensions).
  binding bindings(size_t begin, size_t end, bool simple) const {
    binding b;
    if (simple && is_name(tokens_[begin], "del")) {
      targets(begin + 1, end, b);
    } else if (simple) {
      // Outside brackets, a simple statement's targets end at its last `=` (or augmented
      // assignment), or at the colon of an annotation when that comes first. A lambda ends the
      // search: its defaults and its colon belong to the value.
      std::vector<size_t> assigns;
      size_t colon = end;
      int depth = 0;
      for (size_t i = begin; i < end; ++i) {
        const token& t = tokens_[i];
        if (opens(t))
          ++depth;
        else if (closes(t))
          --depth;
        else if (depth != 0)
          continue;
        else if (is_name(t, "lambda"))
          break;
        else if (is_op(t, ":") && assigns.empty() && colon == end)
          colon = i;
        else if (is_assign_op(t))
          assigns.push_back(i);
      }
      const bool plain = !assigns.empty()
                         && std::all_of(assigns.begin(), assigns.end(),
                                        [&](size_t i) { return tokens_[i].text == "="; });
      if (colon < end) {
        targets(begin, colon, b);
        if (plain) {
          b.value = assigns.front() + 1;
          if (colon == begin + 1 && tokens_[begin].kind == tok::name)
            b.names.push_back(begin);
        }
      } else if (!assigns.empty()) {
        targets(begin, assigns.back(), b);
        if (plain) {
          b.value = assigns.back() + 1;
          size_t group = begin;
          for (size_t at : assigns) {
            if (at == group + 1 && tokens_[group].kind == tok::name)
              b.names.push_back(group);
            group = at + 1;
          }
        }
      }
    }
    for (size_t i = begin; i < end; ++i) {
      const token& t = tokens_[i];
      if (is_name(t, "for")) {
        int depth = 0;
        for (size_t j = i + 1; j < end; ++j) {
          if (opens(tokens_[j])) {
            ++depth;
          } else if (closes(tokens_[j])) {
            if (--depth < 0)
              break;
          } else if (depth == 0 && is_name(tokens_[j], "in")) {
            targets(i + 1, j, b);
            break;
          }
        }
      } else if (is_name(t, "as") && i + 1 < end && tokens_[i + 1].kind == tok::name) {
        const size_t j = read_chain(i + 1, end).end;
        if (j == end || !(is_op(tokens_[j], "(") || is_op(tokens_[j], "[")))
          b.targets.insert(i + 1);
      } else if (is_op(t, ":=") && i > begin && tokens_[i - 1].kind == tok::name) {
        std::string now;
        if (i + 1 < end && tokens_[i + 1].kind == tok::name) {
          chain value = read_chain(i + 1, end);
          if (value.end == end || is_op(tokens_[value.end], ",") || closes(tokens_[value.end]))
            now = value.resolved;
        }
        b.walrus.emplace_back(tokens_[i - 1].text, now);
      }
    }
    return b;
  }

  void statement(size_t begin, size_t end) {
    if (begin >= end)
      return;
    const token& first = tokens_[begin];
    if (is_name(first, "import"))
      return import_statement(begin, end);
    if (is_name(first, "from"))
      return from_statement(begin, end);
    if (compound(begin, end)) {
      // `for dt in torch.float16, torch.bfloat16: y = 1` is a header and a statement: the
      // body after the colon is scanned as a statement of its own (an assignment, an import).
      const size_t colon = header_colon(begin, end);
      line(begin, colon, false);
      statement(colon + 1, end);
      return;
    }
    line(begin, end, true);
  }

  void line(size_t begin, size_t end, bool simple) {
    const binding bound = bindings(begin, end, simple);
    const bool docstring = std::all_of(tokens_.begin() + static_cast<long>(begin),
                                       tokens_.begin() + static_cast<long>(end),
                                       [](const token& t) { return t.kind == tok::string; });

    for (size_t i = begin; i < end; ++i) {
      const token& t = tokens_[i];
      if (t.kind == tok::op)
        continue;
      if (t.kind == tok::string) {
        if (!docstring)
          check_string(t);
        continue;
      }
      if (t.kind != tok::name)
        continue;
      if (i > begin && is_op(tokens_[i - 1], "."))
        continue; // inside a chain that started earlier (`x.y` after a call or subscript)
      const bool after_def =
          i > begin && (is_name(tokens_[i - 1], "def") || is_name(tokens_[i - 1], "class"));
      chain c = read_chain(i, end);
      const int line = t.line;
      use(c.resolved, c.parts, line);

      const bool called = c.end < end && is_op(tokens_[c.end], "(");
      if (c.parts.size() == 1 && called && !after_def && c.resolved.empty()) {
        const std::string& fn = c.parts[0];
        if (fn == "eval" || fn == "exec" || fn == "__import__")
          reject("loads code the scan cannot read with " + fn + "()", line);
        // `getattr(sys, "modules")` is `sys.modules` spelled otherwise; with a name built at
        // run time, or `vars(sys)`, the scan cannot tell which attribute of a module it guards
        // is read, so those modules may not be read that way at all.
        if ((fn == "getattr" || fn == "vars") && c.end + 1 < end
            && tokens_[c.end + 1].kind == tok::name) {
          chain target = read_chain(c.end + 1, end);
          const bool literal =
              fn == "getattr" && target.end + 2 < end && is_op(tokens_[target.end], ",")
              && tokens_[target.end + 1].kind == tok::string
              && (is_op(tokens_[target.end + 2], ")") || is_op(tokens_[target.end + 2], ","));
          if (!target.resolved.empty() && literal) {
            auto name = target.resolved + "." + tokens_[target.end + 1].text;
            use(name, split(name), line);
          } else if (!target.resolved.empty() && target.end < end
                     && (is_op(tokens_[target.end], ",") || is_op(tokens_[target.end], ")"))
                     && introspected_roots.count(root_of(target.resolved))) {
            reject("reads " + target.resolved + " by a name the scan cannot see with " + fn + "()",
                   line);
          }
        }
        if ((fn == "setattr" || fn == "delattr") && c.end + 1 < end
            && tokens_[c.end + 1].kind == tok::name) {
          chain target = read_chain(c.end + 1, end);
          std::string attr;
          if (target.end + 1 < end && is_op(tokens_[target.end], ",")
              && tokens_[target.end + 1].kind == tok::string)
            attr = tokens_[target.end + 1].text;
          patch(target, attr, line);
        }
      }

      // An assignment target (`torch.allclose = f`, `torch.a, x = ...`, `time.x += 1`,
      // `torch.allclose: object = f`, `for torch.x in ...`) or a `del`.
      if (c.parts.size() >= 2 && bound.targets.count(i))
        patch(c, "", line);
      i = c.end - 1;
    }

    // `E = torch.cuda.Event` (also `E: type = ...`, `(E := torch.cuda.Event)`): E now names what
    // it was bound to; bound to anything else, it is a plain variable.
    if (bound.value > begin && bound.value < end) {
      std::string now;
      if (tokens_[bound.value].kind == tok::name) {
        chain value = read_chain(bound.value, end);
        if (value.end == end)
          now = value.resolved;
      }
      for (size_t at : bound.names)
        rebind(tokens_[at].text, now);
    }
    for (const auto& [name, now] : bound.walrus)
      rebind(name, now);
  }

  void rebind(const std::string& name, const std::string& now) {
    if (!now.empty()) {
      aliases_[name] = now;
      return;
    }
    // The scan reads the lines in order and knows no branches: `if False: time = None` rebinds
    // nothing at run time. A name for a guarded module keeps meaning it.
    auto it = aliases_.find(name);
    if (it != aliases_.end() && !protected_roots.count(root_of(it->second)))
      aliases_.erase(it);
  }

  void check_string(const token& t) {
    std::string low;
    for (char ch : t.text)
      low += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const auto& [needle, what] : string_rules)
      if (low.find(needle) != std::string::npos) {
        reject(std::string{what} + " ('" + needle + "')", t.line);
        return;
      }
    // The outputs the harness writes: out_<k>.pt, in whatever formatting.
    auto out = low.find("out_");
    if (out != std::string::npos && low.find(".pt", out) != std::string::npos)
      reject("reads the harness's files ('out_*.pt')", t.line);
  }

  std::vector<token> tokens_;
  std::map<std::string, std::string> aliases_;
  std::vector<scan_finding> findings_;
  std::vector<std::pair<std::string, int>> precision_;
  std::vector<std::string> other_notes_;
  std::set<std::string> noted_;
};

} // namespace

scan_result scan_candidate(std::string_view source) {
  return scanner{source}.run();
}

} // namespace kiln
