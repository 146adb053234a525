#include "prompts/rules.hpp"

// The offline proposer. It reads a prompt the way a model would, through the fixed markers of
// the templates (docs/prompts.md): `### Task`, `### Reference program`, `### Current program`,
// `### Idea` and `### Device`. From the reference source and the device facts it decides which
// rewrites of its library apply, and answers with ideas or with a complete candidate program.
//
// Every candidate is the reference source, unchanged, followed by a `ModelNew` that builds the
// reference `Model` first (same parameters, same order, same weights) and, on its first call in
// eval mode, runs a list of rewrites over a small "plan" (the module, the callable, input and
// output adapters, call contexts, outer wrappers). Because each rewrite only edits the plan, any
// combination composes; the plan fixes the order in which they take effect (`phase` below). A
// marker line `# kiln-rules: a+b` records the rewrites in the order they were added, which is
// how `improve` adds one more and `fix` drops the newest.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string_view>

namespace kiln {

namespace {

// -- What the prompt says -------------------------------------------------------------------

struct device_view {
  std::string device = "cpu";
  std::string torch;
  bool cuda = false;
  bool triton = false;
  bool compile = false;
};

struct prompt_view {
  std::string task;
  std::optional<std::string> reference;
  std::optional<std::string> current;
  std::string idea;
  device_view device;
  size_t max_ideas = 10;
};

std::string_view trim(std::string_view s) {
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  size_t e = s.size();
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return s.substr(b, e - b);
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    auto line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    lines.push_back(line);
    pos = end + 1;
  }
  return lines;
}

bool is_fence(std::string_view line) {
  auto t = trim(line);
  return t.size() >= 3 && (t.substr(0, 3) == "```" || t.substr(0, 3) == "~~~");
}

bool is_heading(std::string_view line) {
  return line.substr(0, 3) == "###";
}

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// The fenced block that follows the heading line `heading` (before any other heading).
std::optional<std::string> fenced_after(const std::vector<std::string_view>& lines,
                                        std::string_view heading) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]) != heading)
      continue;
    size_t j = i + 1;
    while (j < lines.size() && !is_fence(lines[j]) && !is_heading(lines[j]))
      ++j;
    if (j >= lines.size() || !is_fence(lines[j]))
      return std::nullopt;
    auto mark = trim(lines[j]).substr(0, 3);
    std::string body;
    for (++j; j < lines.size() && trim(lines[j]) != mark; ++j) {
      body.append(lines[j]);
      body.push_back('\n');
    }
    return body;
  }
  return std::nullopt;
}

/// The lines between the heading line `heading` and the next heading, trimmed.
std::vector<std::string_view> section(const std::vector<std::string_view>& lines,
                                      std::string_view heading) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]) != heading)
      continue;
    for (size_t j = i + 1; j < lines.size() && !is_heading(lines[j]); ++j)
      out.push_back(trim(lines[j]));
    break;
  }
  return out;
}

/// How many ideas the brainstorm prompt asks for: the first "at most N" / "up to N" /
/// "maximum of N" outside code blocks (a task's own comments must not count).
size_t parse_max_ideas(const std::vector<std::string_view>& lines) {
  static const std::regex pattern{R"((at most|up to|maximum of|no more than)\s+(\d+))",
                                  std::regex::icase};
  bool in_code = false;
  for (auto line : lines) {
    if (is_fence(line)) {
      in_code = !in_code;
      continue;
    }
    if (in_code)
      continue;
    std::match_results<std::string_view::const_iterator> m;
    if (std::regex_search(line.begin(), line.end(), m, pattern)) {
      auto n = std::stoul(m[2].str());
      return std::clamp<size_t>(n, 1, 100);
    }
  }
  return 10;
}

prompt_view parse_prompt(std::string_view prompt) {
  auto lines = split_lines(prompt);
  prompt_view v;
  for (auto line : section(lines, "### Task"))
    if (!line.empty()) {
      v.task = std::string{line};
      break;
    }
  v.reference = fenced_after(lines, "### Reference program");
  v.current = fenced_after(lines, "### Current program");
  std::string idea;
  for (auto line : section(lines, "### Idea")) {
    if (!idea.empty())
      idea += ' ';
    idea += line;
  }
  v.idea = std::string{trim(idea)};
  for (auto line : section(lines, "### Device")) {
    if (line.substr(0, 2) != "- ")
      continue;
    auto colon = line.find(':');
    if (colon == std::string_view::npos)
      continue;
    auto key = lower(trim(line.substr(2, colon - 2)));
    auto value = std::string{trim(line.substr(colon + 1))};
    bool yes = lower(value) == "yes";
    if (key == "device")
      v.device.device = value.substr(0, value.find(' '));
    else if (key == "torch")
      v.device.torch = value;
    else if (key == "cuda")
      v.device.cuda = yes;
    else if (key == "triton")
      v.device.triton = yes;
    else if (key == "torch.compile")
      v.device.compile = yes;
  }
  v.max_ideas = parse_max_ideas(lines);
  return v;
}

// -- What the reference program does --------------------------------------------------------

struct source_traits {
  bool conv = false;        ///< any convolution
  bool conv_nd = false;     ///< 2-D or 3-D convolution, where channels-last layouts exist
  bool batch_norm = false;  ///< an nn.BatchNorm module (what conv_bn_fold can fold)
  bool matmul = false;      ///< linear layers or explicit matrix products
  bool elementwise = false; ///< activations and arithmetic that a fuser could merge
  bool stateful = false;    ///< forward updates module state in place
};

bool contains(const std::string& text, const std::regex& pattern) {
  return std::regex_search(text, pattern);
}

/// The bodies of the `forward` methods: state updates only matter where they run every call
/// (an initialiser that fills a buffer in place is not state).
std::string forward_bodies(const std::string& source) {
  auto lines = split_lines(source);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto t = trim(lines[i]);
    if (t.substr(0, 12) != "def forward(")
      continue;
    size_t indent = lines[i].find('d');
    for (size_t j = i + 1; j < lines.size(); ++j) {
      auto body = trim(lines[j]);
      size_t ind = lines[j].find_first_not_of(" \t");
      if (!body.empty() && ind != std::string_view::npos && ind <= indent)
        break;
      out.append(lines[j]);
      out.push_back('\n');
    }
  }
  return out;
}

source_traits analyse(const std::string& source) {
  // Word lists rather than a parser: the traits only decide what is worth offering, and the
  // evaluator judges the result anyway.
  static const std::regex conv{R"(\b(Conv|ConvTranspose)[123]d\b|\bconv(_transpose)?[123]d\s*\()"};
  static const std::regex conv_nd{R"(\b(Conv|ConvTranspose)[23]d\b|\bconv(_transpose)?[23]d\s*\()"};
  static const std::regex bn{R"(\bBatchNorm[123]d\b)"};
  static const std::regex matmul{std::string{R"(\bLinear\b|\blinear\s*\(|\bmatmul\s*\(|\bbmm\s*\()"}
                                 + R"(|\bmm\s*\(|\baddmm\s*\(|\beinsum\s*\(|[\w)\]]\s*@\s*[\w(])"};
  static const std::regex elementwise{
      std::string{R"(\b(gelu|tanh|sigmoid|relu|relu6|silu|mish|elu|selu|leaky_relu|hardtanh)"}
      + R"(|hardswish|softplus|clamp|clip|exp|erf)\b)"
      + R"(|\b(GELU|Tanh|Sigmoid|ReLU|SiLU|Mish|ELU|LeakyReLU|Hardtanh|Hardswish|Softplus)\b)"};
  // In `forward`: an in-place method on an attribute (`self.avg.mul_(`), an augmented assignment
  // to one (`self.n += 1`), or a plain assignment (`self.last = x`).
  static const std::regex inplace_state{
      std::string{R"(self\.[A-Za-z_][\w.]*\.[a-z][a-z0-9_]*_\s*\()"}
      + R"(|self\.[A-Za-z_][\w.]*(\[[^\]]*\])?\s*(\+|-|\*|/)=)" + R"(|self\.[A-Za-z_]\w*\s*=[^=])"};
  source_traits t;
  t.conv = contains(source, conv);
  t.conv_nd = contains(source, conv_nd);
  t.batch_norm = contains(source, bn);
  t.matmul = contains(source, matmul);
  t.elementwise = contains(source, elementwise);
  t.stateful = contains(forward_bodies(source), inplace_state);
  return t;
}

// -- The library ----------------------------------------------------------------------------

/// One rewrite: the Python step it adds to a candidate, when it applies, and how promising it
/// is. `phase` orders the steps inside a candidate so that any combination composes: module
/// rewrites, then compilers, then flags and call contexts, then the outer CUDA graph.
struct rewrite {
  std::string_view name;
  std::string_view summary;
  int phase;
  std::vector<std::string_view> conflicts;
  /// 0 = not applicable; otherwise higher means more likely to pay off.
  int (*score)(const source_traits&, const device_view&);
  std::string_view python;
};

// Scores. They follow the speedups measured on the bundled tasks (docs/rules.md): on CPUs with
// torch 1.13 and 2.x (2 threads), and on an H200 with torch 2.11. Only the order matters: the
// brainstorm lists the best first and improve picks among the top three.

bool torch_1(const device_view& d) {
  return d.torch.rfind("1.", 0) == 0;
}

int score_inference_mode(const source_traits&, const device_view&) {
  return 10;
}

int score_conv_bn_fold(const source_traits& s, const device_view& d) {
  // fx traces the forward to find the pairs; tracing replays in-place state updates wrongly,
  // so stateful modules are left alone.
  if (!s.conv || !s.batch_norm || s.stateful)
    return 0;
  return d.cuda ? 70 : 85;
}

int score_channels_last(const source_traits& s, const device_view& d) {
  if (!s.conv_nd)
    return 0;
  return d.cuda ? 40 : 20;
}

int score_inplace_elementwise(const source_traits& s, const device_view& d) {
  // fx traces the forward (not for stateful modules, as for conv_bn_fold).
  if (!s.elementwise || s.stateful)
    return 0;
  return d.cuda ? 30 : 75;
}

int score_jit_freeze(const source_traits& s, const device_view& d) {
  if (d.cuda)
    return 70; // the GPU fuser merges elementwise chains: 1.2-2.2x on the bundled tasks
  if (s.conv)
    return 90; // optimize_for_inference folds and pre-packs convolutions
  return s.elementwise || s.matmul ? 30 : 15;
}

int score_cpu_fuser(const source_traits& s, const device_view& d) {
  // Neither Debian's torch 1.13 nor the pip torch 2.x tried was built with LLVM, and without
  // it this is jit_freeze minus optimize_for_inference; offered last among the real rewrites.
  if (d.cuda || !s.elementwise)
    return 0;
  return 12;
}

int score_mkldnn(const source_traits& s, const device_view& d) {
  if (d.cuda || s.stateful || !(s.conv || s.matmul))
    return 0;
  if (s.conv)
    return 60;
  // Packed oneDNN linear layers beat the OpenBLAS of Debian's torch 1.13 by 1.3-1.6x on every
  // bundled linear task; with pip's torch 2.x (MKL) fx's variant lost (0.87x on 1_MLP).
  return torch_1(d) ? 80 : 15;
}

int score_torch_compile(const source_traits&, const device_view& d) {
  return d.compile ? (d.cuda ? 55 : 45) : 0;
}

int score_torch_compile_reduce_overhead(const source_traits&, const device_view& d) {
  return d.compile && d.cuda ? 60 : 0;
}

int score_torch_compile_max_autotune(const source_traits& s, const device_view& d) {
  if (!d.compile || !d.cuda)
    return 0;
  return s.matmul || s.conv ? 50 : 35;
}

int score_cuda_graph(const source_traits&, const device_view& d) {
  return d.cuda ? 90 : 0;
}

int score_tf32(const source_traits& s, const device_view& d) {
  return d.cuda && (s.matmul || s.conv) ? 65 : 0;
}

int score_half_autocast(const source_traits& s, const device_view& d) {
  return d.cuda && (s.matmul || s.conv) ? 45 : 0;
}

constexpr std::string_view py_inference_mode = R"py(
def _kiln_inference_mode(plan):
    # inference_mode is a stricter no_grad: tensors made during the call carry no autograd
    # bookkeeping (version counters, view tracking), which trims per-operator overhead.
    plan.contexts.append(torch.inference_mode)
)py";

constexpr std::string_view py_conv_bn_fold = R"py(
def _kiln_fold_sequential_pairs(module):
    # Without an fx trace the data flow is unknown, except inside nn.Sequential, where a conv
    # followed by a BatchNorm is certain to feed it.
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    convs = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
    for seq in [m for m in module.modules() if isinstance(m, nn.Sequential)]:
        names = list(seq._modules.keys())
        for a, b in zip(names, names[1:]):
            conv, bn = seq._modules[a], seq._modules[b]
            if (isinstance(conv, convs) and isinstance(bn, nn.modules.batchnorm._BatchNorm)
                    and bn.track_running_stats):
                seq._modules[a] = fuse_conv_bn_eval(conv, bn)
                seq._modules[b] = nn.Identity()
    return module


def _kiln_conv_bn_fold(plan):
    # An eval-mode BatchNorm after a convolution is an affine map per channel, so it folds into
    # the convolution's weights and bias: w' = w * gamma / sqrt(var + eps),
    # b' = (b - mean) * gamma / sqrt(var + eps) + beta. One pass over the activations instead of
    # two. fx traces a copy of the module to find each conv -> BN pair; the reference module
    # itself is not touched.
    try:
        from torch.fx.experimental.optimization import fuse
        plan.module = fuse(plan.module)
    except Exception as e:
        _kiln_note("conv_bn_fold: fx cannot trace the model (%s); folding nn.Sequential pairs "
                   "only" % type(e).__name__)
        plan.module = _kiln_fold_sequential_pairs(copy.deepcopy(plan.module))
)py";

constexpr std::string_view py_mkldnn = R"py(
class _KilnMkldnnLinear(nn.Module):
    """A linear layer on oneDNN with its weight packed once, for dense float32 inputs."""

    def __init__(self, linear):
        super().__init__()
        from torch.utils import mkldnn as torch_mkldnn
        self.packed = torch_mkldnn.MkldnnLinear(linear, torch.float)
        # Code that reads the layer's attributes directly (`self.fc.bias`) still finds them.
        self.weight, self.bias = linear.weight, linear.bias
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x):
        # oneDNN reads dense memory only; a no-op for the usual contiguous input.
        return self.packed(x.contiguous())


def _kiln_mkldnn_linears(module):
    count = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if (type(child) is nn.Linear and child.weight.dtype == torch.float32
                    and child.weight.device.type == "cpu"):
                setattr(parent, name, _KilnMkldnnLinear(child))
                count += 1
    return count


def _kiln_mkldnn(plan):
    # oneDNN (mkldnn) kernels with weights packed once, instead of the BLAS PyTorch was built
    # with. Models with convolutions go through fx's optimize_for_inference, which also folds
    # conv/BN and keeps whole conv chains in oneDNN's blocked layout; other models, or models fx
    # cannot trace, get each float32 nn.Linear replaced by a packed oneDNN linear layer on a copy.
    convs = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
    if any(isinstance(m, convs) for m in plan.module.modules()):
        try:
            from torch.fx.experimental.optimization import optimize_for_inference
            plan.module = optimize_for_inference(plan.module)
            return
        except Exception as e:
            _kiln_note("mkldnn: fx optimize_for_inference failed (%s: %s); converting linear "
                       "layers only" % (type(e).__name__, _kiln_first_line(e)))
    module = copy.deepcopy(plan.module)
    if _kiln_mkldnn_linears(module):
        plan.module = module
    else:
        _kiln_note("mkldnn: nothing to convert (no float32 nn.Linear on the CPU)")
)py";

constexpr std::string_view py_channels_last = R"py(
def _kiln_memory_format(t):
    if t.dim() == 4:
        return torch.channels_last
    if t.dim() == 5:
        return torch.channels_last_3d
    return None


def _kiln_to_channels_last(value):
    if isinstance(value, torch.Tensor):
        fmt = _kiln_memory_format(value)
        if fmt is not None:
            return value.contiguous(memory_format=fmt)
    return value


def _kiln_channels_last(plan):
    # Convolution libraries (cuDNN, oneDNN) are fastest on channels-last data (NHWC) and
    # otherwise transpose internally. Weights are converted once, inputs on every call, and
    # outputs are made contiguous again, so callers see the reference's layout.
    with torch.no_grad():
        for t in list(plan.module.parameters()) + list(plan.module.buffers()):
            fmt = _kiln_memory_format(t)
            if fmt is not None:
                t.data = t.data.contiguous(memory_format=fmt)
    plan.adapt_inputs.append(lambda args: tuple(_kiln_to_channels_last(a) for a in args))
    plan.adapt_output.append(lambda out: _kiln_map(out, lambda t: t.contiguous()))
)py";

constexpr std::string_view py_script_helper = R"py(
def _kiln_script(plan, rewrite):
    # TorchScript, then freeze: weights and attributes become constants, which lets the graph
    # optimiser fold and pre-pack across them. Attributes that forward mutates stay attributes,
    # so modules with state keep updating it.
    try:
        scripted = torch.jit.script(plan.module.eval())
    except Exception as e:
        _kiln_note("%s: TorchScript cannot compile the model (%s: %s); running it eagerly"
                   % (rewrite, type(e).__name__, _kiln_first_line(e)))
        return None
    return torch.jit.freeze(scripted)
)py";

constexpr std::string_view py_jit_freeze = R"py(
def _kiln_jit_freeze(plan):
    # The frozen graph runs in the TorchScript executor, which drops Python dispatch and fuses
    # what it can. optimize_for_inference then folds conv/BN and pre-packs convolution weights
    # (oneDNN on CPUs, cuDNN fusions on GPUs). On a CPU model without convolutions it is skipped:
    # there it rewrites linear layers into a oneDNN form that was slower than BLAS in kiln's
    # measurements.
    convs = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
    has_conv = any(isinstance(m, convs) for m in plan.module.modules())
    on_gpu = any(p.is_cuda for p in plan.module.parameters())
    frozen = _kiln_script(plan, "jit_freeze")
    if frozen is None:
        return
    if has_conv or on_gpu:
        try:
            frozen = torch.jit.optimize_for_inference(frozen)
        except Exception as e:
            _kiln_note("jit_freeze: optimize_for_inference failed (%s); using the frozen graph"
                       % type(e).__name__)
    plan.fn = frozen
)py";

constexpr std::string_view py_inplace_elementwise = R"py(
import operator as _kiln_operator

# Operators whose result is always a new tensor (never a view of, or the same object as, an
# input), so the result may be overwritten once nothing else reads it.
_KILN_FRESH_FUNCTIONS = {
    torch.add, torch.sub, torch.mul, torch.div, torch.matmul, torch.mm, torch.bmm, torch.addmm,
    torch.relu, torch.tanh, torch.sigmoid, torch.exp, torch.clamp, torch.softmax, torch.sqrt,
    torch.abs, torch.neg, _kiln_operator.add, _kiln_operator.sub, _kiln_operator.mul,
    _kiln_operator.truediv, _kiln_operator.matmul, nn.functional.linear, nn.functional.gelu,
    nn.functional.silu, nn.functional.softmax, nn.functional.layer_norm,
    nn.functional.conv1d, nn.functional.conv2d, nn.functional.conv3d,
}
_KILN_FRESH_METHODS = {"add", "sub", "mul", "div", "matmul", "clamp", "relu", "tanh", "sigmoid",
                       "exp", "softmax", "sqrt", "abs", "neg", "add_", "sub_", "mul_", "div_",
                       "clamp_", "relu_", "tanh_", "sigmoid_", "exp_"}
_KILN_FRESH_MODULES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d,
                       nn.ConvTranspose2d, nn.ConvTranspose3d, nn.modules.batchnorm._BatchNorm,
                       nn.LayerNorm, nn.GroupNorm, nn.GELU, nn.Tanh, nn.Sigmoid, nn.Softmax)
# Out-of-place operator -> its in-place method, and whether its operands may be swapped.
_KILN_INPLACE = {
    torch.add: ("add_", True), _kiln_operator.add: ("add_", True), "add": ("add_", True),
    torch.mul: ("mul_", True), _kiln_operator.mul: ("mul_", True), "mul": ("mul_", True),
    torch.sub: ("sub_", False), _kiln_operator.sub: ("sub_", False), "sub": ("sub_", False),
    torch.div: ("div_", False), _kiln_operator.truediv: ("div_", False), "div": ("div_", False),
    torch.clamp: ("clamp_", False), "clamp": ("clamp_", False),
    torch.relu: ("relu_", False), nn.functional.relu: ("relu_", False), "relu": ("relu_", False),
    torch.tanh: ("tanh_", False), "tanh": ("tanh_", False),
    torch.sigmoid: ("sigmoid_", False), "sigmoid": ("sigmoid_", False),
    torch.exp: ("exp_", False), "exp": ("exp_", False),
}
_KILN_INPLACE_MODULES = ((nn.ReLU, "relu_"), (nn.Tanh, "tanh_"), (nn.Sigmoid, "sigmoid_"))
_KILN_UNARY = {"relu_", "tanh_", "sigmoid_", "exp_"}


def _kiln_tensor_meta(node):
    meta = node.meta.get("tensor_meta")
    return meta if hasattr(meta, "shape") and hasattr(meta, "dtype") else None


def _kiln_inplace_pass(gm):
    modules = dict(gm.named_modules())
    fresh = set()
    changed = 0
    for node in list(gm.graph.nodes):
        target, method, swap = node.target, None, False
        if node.op == "call_function" and target in _KILN_INPLACE:
            method, swap = _KILN_INPLACE[target]
        elif node.op == "call_method" and target in _KILN_INPLACE:
            method, swap = _KILN_INPLACE[target]
        elif node.op == "call_module":
            module = modules.get(target)
            for kind, name in _KILN_INPLACE_MODULES:
                if type(module) is kind and not getattr(module, "inplace", False):
                    method = name
        if node.kwargs.get("inplace"):
            method = None
        candidates = [0, 1] if swap and len(node.args) > 1 and not node.kwargs else [0]
        done = False
        for i in candidates if method else []:
            if i >= len(node.args):
                continue
            src = node.args[i]
            out_meta, src_meta = _kiln_tensor_meta(node), None
            if isinstance(src, torch.fx.Node):
                src_meta = _kiln_tensor_meta(src)
            if (src_meta is None or out_meta is None or src not in fresh
                    or len(src.users) != 1 or tuple(src_meta.shape) != tuple(out_meta.shape)
                    or src_meta.dtype != out_meta.dtype):
                continue
            args = (src,) + tuple(a for j, a in enumerate(node.args) if j != i)
            kwargs = dict(node.kwargs)
            if method in _KILN_UNARY:
                # F.relu(x, inplace=False) and friends: the flag is not an operand.
                args, kwargs = (src,), {}
            with gm.graph.inserting_before(node):
                new = gm.graph.call_method(method, args, kwargs)
            new.meta = dict(node.meta)
            node.replace_all_uses_with(new)
            gm.graph.erase_node(node)
            fresh.add(new)
            changed += 1
            done = True
            break
        if done:
            continue
        if node.op == "call_function" and target in _KILN_FRESH_FUNCTIONS:
            fresh.add(node)
        elif (node.op == "call_function" and target is nn.functional.relu
              and not node.kwargs.get("inplace")):
            fresh.add(node)
        elif node.op == "call_method" and target in _KILN_FRESH_METHODS:
            fresh.add(node)
        elif node.op == "call_module":
            module = modules.get(target)
            if isinstance(module, _KILN_FRESH_MODULES) and not getattr(module, "inplace", False):
                fresh.add(node)
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed


def _kiln_inplace_elementwise(plan):
    # Eager PyTorch runs each elementwise operator out of place: a fresh output allocated and
    # streamed through memory once more. Where an operator's input is an intermediate result
    # that nothing else reads, with the output's shape and dtype, the in-place form writes the
    # same values into that buffer instead. fx traces the model to find those places, and one
    # run on the first call's inputs gives the shapes and dtypes; inputs, parameters and views
    # are never written.
    from torch.fx.passes.shape_prop import ShapeProp
    try:
        gm = torch.fx.symbolic_trace(plan.module)
        with torch.no_grad():
            ShapeProp(gm).propagate(*plan.example_inputs)
    except Exception as e:
        _kiln_note("inplace_elementwise: fx cannot trace the model (%s: %s); running it as is"
                   % (type(e).__name__, _kiln_first_line(e)))
        return
    if _kiln_inplace_pass(gm):
        plan.module = gm
    else:
        _kiln_note("inplace_elementwise: no operator could safely run in place")
)py";

constexpr std::string_view py_cpu_fuser = R"py(
def _kiln_cpu_fuser(plan):
    # TorchScript's tensor-expression fuser compiles chains of elementwise operators into one
    # loop on the CPU too, once it is allowed to (it is off for CPUs by default). It needs a
    # PyTorch built with LLVM; without it the frozen graph still runs, only unfused.
    if getattr(torch._C, "_llvm_enabled", lambda: False)():
        torch._C._jit_override_can_fuse_on_cpu(True)
    else:
        _kiln_note("cpu_fuser: this PyTorch has no LLVM, so CPU fusion stays off")
    frozen = _kiln_script(plan, "cpu_fuser")
    if frozen is not None:
        plan.fn = frozen
)py";

constexpr std::string_view py_torch_compile = R"py(
def _kiln_compile(plan, mode):
    # torch.compile traces the forward with TorchDynamo and generates fused kernels with
    # Inductor (Triton on GPUs, C++/OpenMP on CPUs).
    if mode is None:
        plan.fn = torch.compile(plan.module)
        return
    plan.fn = torch.compile(plan.module, mode=mode)
    # These modes replay CUDA graphs whose output buffers the next call overwrites: mark each
    # call as a new step and hand out copies, so earlier results stay valid.
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    if mark is not None:
        def begin_step(args):
            mark()
            return args
        plan.adapt_inputs.append(begin_step)
    plan.adapt_output.append(lambda out: _kiln_map(out, lambda t: t.clone()))
)py";

constexpr std::string_view py_torch_compile_default = R"py(
def _kiln_torch_compile(plan):
    _kiln_compile(plan, None)
)py";

constexpr std::string_view py_torch_compile_reduce_overhead = R"py(
def _kiln_torch_compile_reduce_overhead(plan):
    # reduce-overhead adds CUDA graphs to the generated kernels: one launch per call.
    _kiln_compile(plan, "reduce-overhead")
)py";

constexpr std::string_view py_torch_compile_max_autotune = R"py(
def _kiln_torch_compile_max_autotune(plan):
    # max-autotune benchmarks Triton matmul/conv templates against the libraries and keeps the
    # fastest, and uses CUDA graphs; compiling takes much longer.
    _kiln_compile(plan, "max-autotune")
)py";

constexpr std::string_view py_tf32 = R"py(
def _kiln_tf32(plan):
    # TensorFloat-32 runs float32 matmuls and convolutions on tensor cores with a 10-bit
    # mantissa: about 1e-3 relative error, well inside the 1e-2 tolerance.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
)py";

constexpr std::string_view py_half_autocast = R"py(
def _kiln_half_autocast(plan):
    # Matmuls and convolutions in float16 on tensor cores, at half the memory traffic; autocast
    # keeps softmax, norms and reductions in float32. float16 rather than bfloat16 because its
    # 10-bit mantissa stays inside the tolerance where bfloat16's 7 bits may not. The weight
    # cast cache is off because it is not allowed while a CUDA graph is recorded. Outputs are cast
    # back to the inputs' dtype, so callers see the reference's dtype.
    dtype = next((a.dtype for a in plan.example_inputs
                  if isinstance(a, torch.Tensor) and a.is_floating_point()), torch.float32)
    plan.contexts.append(
        lambda: torch.autocast("cuda", dtype=torch.float16, cache_enabled=False))
    plan.adapt_output.append(lambda out: _kiln_map(
        out, lambda t: t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t))
)py";

constexpr std::string_view py_cuda_graph = R"py(
def _kiln_state_tensors(plan):
    # The buffers the prepared call may update in place (running statistics, counters).
    seen, out = set(), []
    for owner in (plan.module, plan.fn):
        if isinstance(owner, nn.Module):
            for b in owner.buffers():
                if id(b) not in seen:
                    seen.add(id(b))
                    out.append(b)
    return out


def _kiln_graph_key(args):
    return tuple((tuple(a.shape), a.dtype, str(a.device), a.stride())
                 if isinstance(a, torch.Tensor) else repr(a) for a in args)


def _kiln_cuda_graph_wrap(run, plan):
    graphs = {}

    def capture(args):
        static = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        # Warm-up runs (cuDNN and cuBLAS pick algorithms, allocators settle) execute the model
        # for real; a module that keeps state must not see them, so its buffers are restored
        # before the first real call.
        saved = [(b, b.detach().clone()) for b in _kiln_state_tensors(plan)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                run(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = run(*static)
        with torch.no_grad():
            for b, value in saved:
                b.copy_(value)
        return graph, static, out

    def replay(*args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or not all(t.is_cuda for t in tensors):
            return run(*args)
        key = _kiln_graph_key(args)
        if key not in graphs:
            graphs[key] = capture(args)
        graph, static, out = graphs[key]
        for s, a in zip(static, args):
            if isinstance(s, torch.Tensor):
                s.copy_(a)
        graph.replay()
        # The graph writes into the same output buffers every replay: return copies.
        return _kiln_map(out, lambda t: t.clone())

    return replay


def _kiln_cuda_graph(plan):
    # Records the whole prepared call once as a CUDA graph and replays it: one launch instead of
    # one per kernel, which is most of the time of a small model. Each call copies its inputs
    # into the graph's input buffers, so every result is computed from that call's inputs.
    plan.wrappers.append(_kiln_cuda_graph_wrap)
)py";

const std::vector<rewrite>& library() {
  // Conflicts are symmetric in effect (either side's list suffices): the compilers exclude each
  // other, CUDA graphs exclude the torch.compile modes that record their own, TorchScript does
  // not mix with autocast, and fx's oneDNN rewrite owns its whole graph.
  static const std::vector<rewrite> lib = {
      {"conv_bn_fold",
       "fold each eval-mode BatchNorm into the convolution before it, so every conv+BN pair "
       "becomes a single convolution with adjusted weights and bias",
       10,
       {"mkldnn"},
       score_conv_bn_fold,
       py_conv_bn_fold},
      {"mkldnn",
       "run convolutions and linear layers on oneDNN (mkldnn) with weights packed once: fx "
       "optimize_for_inference for conv models, packed oneDNN linear layers otherwise",
       20,
       {"conv_bn_fold", "channels_last", "inplace_elementwise", "jit_freeze", "cpu_fuser"},
       score_mkldnn,
       py_mkldnn},
      {"channels_last",
       "convert weights and 4-D/5-D inputs to the channels-last memory format that cuDNN and "
       "oneDNN convolutions prefer, returning outputs in the original layout",
       30,
       {"mkldnn"},
       score_channels_last,
       py_channels_last},
      {"inplace_elementwise",
       "run elementwise operators in place on intermediate results that nothing else reads, "
       "saving an allocation and a pass over memory for each",
       35,
       {"mkldnn", "half_autocast"},
       score_inplace_elementwise,
       py_inplace_elementwise},
      {"jit_freeze",
       "TorchScript and freeze the model (plus optimize_for_inference when it has "
       "convolutions), so weights become constants the graph optimiser can fold and pre-pack",
       40,
       {"cpu_fuser", "mkldnn", "torch_compile", "torch_compile_reduce_overhead",
        "torch_compile_max_autotune", "half_autocast"},
       score_jit_freeze,
       py_jit_freeze},
      {"cpu_fuser",
       "TorchScript and freeze the model with the CPU tensor-expression fuser enabled, so the "
       "elementwise tail runs as one fused loop (needs a PyTorch built with LLVM)",
       40,
       {"jit_freeze", "mkldnn", "torch_compile", "torch_compile_reduce_overhead",
        "torch_compile_max_autotune", "half_autocast"},
       score_cpu_fuser,
       py_cpu_fuser},
      {"torch_compile",
       "compile the forward with torch.compile (TorchDynamo + Inductor) to fuse operators into "
       "generated kernels",
       40,
       {"jit_freeze", "cpu_fuser", "torch_compile_reduce_overhead", "torch_compile_max_autotune"},
       score_torch_compile,
       py_torch_compile_default},
      {"torch_compile_reduce_overhead",
       "compile with torch.compile(mode=\"reduce-overhead\"): fused Inductor kernels replayed "
       "as CUDA graphs to remove launch overhead",
       40,
       {"jit_freeze", "cpu_fuser", "torch_compile", "torch_compile_max_autotune", "cuda_graph"},
       score_torch_compile_reduce_overhead,
       py_torch_compile_reduce_overhead},
      {"torch_compile_max_autotune",
       "compile with torch.compile(mode=\"max-autotune\"): autotuned Triton matmul/conv "
       "templates plus CUDA graphs",
       40,
       {"jit_freeze", "cpu_fuser", "torch_compile", "torch_compile_reduce_overhead", "cuda_graph"},
       score_torch_compile_max_autotune,
       py_torch_compile_max_autotune},
      {"tf32",
       "allow TensorFloat-32 tensor-core math for float32 matmuls and convolutions "
       "(about 1e-3 relative error, inside the tolerance)",
       50,
       {},
       score_tf32,
       py_tf32},
      {"half_autocast",
       "run matmuls and convolutions in float16 under torch.autocast and cast the outputs back "
       "to the input dtype",
       60,
       {"jit_freeze", "cpu_fuser"},
       score_half_autocast,
       py_half_autocast},
      {"inference_mode",
       "run the forward under torch.inference_mode() to drop autograd bookkeeping on every "
       "operator",
       70,
       {},
       score_inference_mode,
       py_inference_mode},
      {"cuda_graph",
       "capture the whole forward once as a CUDA graph on static input buffers and replay it, "
       "one launch per call instead of one per kernel",
       80,
       {"torch_compile_reduce_overhead", "torch_compile_max_autotune"},
       score_cuda_graph,
       py_cuda_graph},
  };
  return lib;
}

const rewrite* find_rewrite(std::string_view name) {
  for (auto& r : library())
    if (r.name == name)
      return &r;
  return nullptr;
}

// -- Choosing -------------------------------------------------------------------------------

uint64_t mix(uint64_t x) {
  // splitmix64: a cheap, well-spread hash for seed-dependent tie breaking.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t name_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ULL;
  return h;
}

struct scored {
  const rewrite* r;
  int score;
};

/// The applicable rewrites, most promising first; equal scores are ordered by the seed.
std::vector<scored> ranked(const source_traits& s, const device_view& d, uint64_t seed) {
  std::vector<scored> out;
  for (auto& r : library())
    if (int sc = r.score(s, d); sc > 0)
      out.push_back({&r, sc});
  std::sort(out.begin(), out.end(), [seed](const scored& a, const scored& b) {
    if (a.score != b.score)
      return a.score > b.score;
    return mix(seed ^ name_hash(a.r->name)) < mix(seed ^ name_hash(b.r->name));
  });
  return out;
}

bool conflicts_with(const rewrite& r, const std::vector<std::string>& steps) {
  for (auto& s : steps) {
    if (s == r.name)
      return true;
    if (std::find(r.conflicts.begin(), r.conflicts.end(), s) != r.conflicts.end())
      return true;
    if (auto other = find_rewrite(s);
        other
        && std::find(other->conflicts.begin(), other->conflicts.end(), r.name)
               != other->conflicts.end())
      return true;
  }
  return false;
}

/// The rewrites named by a candidate's `# kiln-rules:` marker, in the order they were added.
std::vector<std::string> marker_steps(const std::string& code) {
  std::vector<std::string> steps;
  for (auto line : split_lines(code)) {
    auto t = trim(line);
    if (t.substr(0, 13) != "# kiln-rules:")
      continue;
    std::string names{trim(t.substr(13))};
    std::stringstream ss{names};
    std::string name;
    while (std::getline(ss, name, '+')) {
      auto n = std::string{trim(name)};
      if (find_rewrite(n) && std::find(steps.begin(), steps.end(), n) == steps.end())
        steps.push_back(n);
    }
    break;
  }
  return steps;
}

/// The rewrite an idea names: its text starts with a rewrite name, possibly decorated
/// (`**cuda_graph**:`, `` `tf32` ``). Longer names first, so `torch_compile_max_autotune` is not
/// read as `torch_compile`.
const rewrite* rewrite_for_idea(const std::string& idea) {
  std::string t;
  for (char c : idea) {
    if (c == '*' || c == '`' || c == '"' || c == '\'')
      continue;
    t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  auto start = trim(t);
  while (!start.empty() && (start[0] == '-' || start[0] == ' '))
    start.remove_prefix(1);
  const rewrite* best = nullptr;
  for (auto& r : library()) {
    if (start.substr(0, r.name.size()) != r.name)
      continue;
    auto next = start.size() > r.name.size() ? start[r.name.size()] : ' ';
    if (std::isalnum(static_cast<unsigned char>(next)) || next == '_')
      continue;
    if (!best || r.name.size() > best->name.size())
      best = &r;
  }
  return best;
}

// -- Writing the candidate ------------------------------------------------------------------

constexpr std::string_view py_preamble = R"py(
import contextlib
import copy
import sys

import torch
import torch.fx
import torch.nn as nn


def _kiln_note(message):
    # A rewrite that cannot apply says so on stderr (the evaluator shows it to the error
    # fixer) and leaves the model as it was, so the candidate stays correct.
    print("kiln-rules: " + message, file=sys.stderr)


def _kiln_first_line(error):
    text = str(error).strip()
    return (text.splitlines()[0] if text else "")[:160]


def _kiln_map(out, fn):
    # Outputs may be one tensor or nested tuples/lists/dicts of tensors; adapters apply per
    # tensor and keep the structure.
    if isinstance(out, torch.Tensor):
        return fn(out)
    if isinstance(out, tuple):
        return tuple(_kiln_map(o, fn) for o in out)
    if isinstance(out, list):
        return [_kiln_map(o, fn) for o in out]
    if isinstance(out, dict):
        return {k: _kiln_map(v, fn) for k, v in out.items()}
    return out


class _KilnPlan:
    """What the rewrites build together, each editing one part of it."""

    def __init__(self, module, example_inputs):
        self.module = module              # an nn.Module while the module rewrites run
        self.fn = None                    # set by a compiling rewrite; else the module is called
        self.example_inputs = example_inputs
        self.adapt_inputs = []            # each: tuple of inputs -> tuple of inputs
        self.adapt_output = []            # each: output structure -> output structure
        self.contexts = []                # each: () -> a context manager around the call
        self.wrappers = []                # each: (callable, plan) -> callable, applied last


def _kiln_finish(plan):
    fn = plan.fn if plan.fn is not None else plan.module
    adapt_inputs, adapt_output = list(plan.adapt_inputs), list(plan.adapt_output)
    contexts = list(plan.contexts)

    def run(*args):
        for adapt in adapt_inputs:
            args = adapt(args)
        if contexts:
            with contextlib.ExitStack() as stack:
                for make in contexts:
                    stack.enter_context(make())
                out = fn(*args)
        else:
            out = fn(*args)
        for adapt in adapt_output:
            out = adapt(out)
        return out

    for wrap in plan.wrappers:
        run = wrap(run, plan)
    return run
)py";

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (auto& i : items) {
    if (!out.empty())
      out += sep;
    out += i;
  }
  return out;
}

/// A complete candidate: the reference source, then the wrapper applying `steps` (given in the
/// order they were added; applied in phase order).
std::string write_candidate(const std::string& reference, const std::vector<std::string>& steps) {
  std::vector<const rewrite*> ordered;
  for (auto& s : steps)
    if (auto r = find_rewrite(s))
      ordered.push_back(r);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const rewrite* a, const rewrite* b) { return a->phase < b->phase; });
  std::vector<std::string> applied;
  for (auto r : ordered)
    applied.emplace_back(r->name);

  std::string out = reference;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  out += "\n\n\n# " + std::string(96, '=') + "\n";
  out += "# kiln-rules: " + join(steps, "+") + "\n";
  out += "# A candidate from kiln's offline `rules` proposer. The reference program above is "
         "unchanged.\n"
         "# ModelNew builds the reference Model first, so it creates the same parameters in "
         "the same\n"
         "# order and gets the same weights; on its first call in eval mode it prepares a "
         "faster\n"
         "# callable from it by applying, in this order: "
         + join(applied, ", ") + ".\n";
  out += py_preamble;
  bool compile_helper = false;
  bool script_helper = false;
  for (auto r : ordered) {
    bool is_compile = r->name.substr(0, 13) == "torch_compile";
    bool is_script = r->name == "jit_freeze" || r->name == "cpu_fuser";
    if (is_compile && !compile_helper) {
      out += "\n";
      out += py_torch_compile;
      compile_helper = true;
    }
    if (is_script && !script_helper) {
      out += "\n";
      out += py_script_helper;
      script_helper = true;
    }
    out += "\n";
    out += r->python;
  }
  out += R"py(

class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        # Built first, exactly like the reference, so the parameters match it one for one.
        self.inner = Model(*args, **kwargs)
        # The prepared callable; a plain attribute, so it stays out of the module tree.
        self._kiln_run = None

    def forward(self, *args):
        if self.training:
            # The rewrites assume inference (BatchNorm running statistics, frozen graphs).
            return self.inner(*args)
        if self._kiln_run is None:
            plan = _KilnPlan(self.inner, args)
)py";
  for (auto r : ordered)
    out += "            _kiln_" + std::string{r->name} + "(plan)\n";
  out += R"py(            self._kiln_run = _kiln_finish(plan)
        return self._kiln_run(*args)
)py";
  return out;
}

std::string fenced(const std::string& code) {
  return "```python\n" + code + "```\n";
}

std::string no_reference_answer() {
  return "I cannot propose anything: the prompt has no `### Reference program` section with the "
         "task's source in a ```python block, and every rewrite I know starts from that source.\n";
}

std::string answer_brainstorm(const prompt_view& p, const source_traits& s, uint64_t seed) {
  auto list = ranked(s, p.device, seed);
  std::string where = p.device.device;
  if (!p.device.torch.empty())
    where += " (torch " + p.device.torch + ")";
  std::string out = "Ideas for " + (p.task.empty() ? std::string{"this task"} : p.task) + " on "
                    + where + ", most promising first:\n\n";
  size_t n = 0;
  for (auto& e : list) {
    if (n++ >= p.max_ideas)
      break;
    out += "- " + std::string{e.r->name} + ": " + std::string{e.r->summary} + ".\n";
  }
  return out;
}

std::string answer_optimize(const prompt_view& p, const source_traits& s, uint64_t seed) {
  const rewrite* r = rewrite_for_idea(p.idea);
  std::string prose;
  if (r && r->score(s, p.device) > 0) {
    prose = "This applies `" + std::string{r->name} + "`: " + std::string{r->summary} + ".";
  } else {
    auto list = ranked(s, p.device, seed);
    auto fallback = list.empty() ? find_rewrite("inference_mode") : list.front().r;
    prose = std::string{r ? "`" + std::string{r->name} + "` does not apply here"
                          : "I have no rewrite for that idea"}
            + ", so this applies the most promising one I have, `" + std::string{fallback->name}
            + "`: " + std::string{fallback->summary} + ".";
    r = fallback;
  }
  return prose + "\n\n" + fenced(write_candidate(*p.reference, {std::string{r->name}}));
}

std::string answer_improve(const prompt_view& p, const source_traits& s, uint64_t seed) {
  auto steps = p.current ? marker_steps(*p.current) : std::vector<std::string>{};
  std::vector<scored> options;
  for (auto& e : ranked(s, p.device, seed))
    if (!conflicts_with(*e.r, steps))
      options.push_back(e);
  if (options.empty()) {
    std::string prose = "Every rewrite I know that applies here is already in the current "
                        "program or conflicts with it, so I return it unchanged.";
    if (p.current)
      return prose + "\n\n" + fenced(*p.current);
    return prose + "\n\n" + fenced(write_candidate(*p.reference, steps));
  }
  // Vary among the three most promising additions so that parallel improve queries with
  // different seeds explore different compositions.
  auto pick = options[mix(seed) % std::min<size_t>(options.size(), 3)].r;
  std::string prose =
      steps.empty() ? "The current program uses none of my rewrites; starting again from "
                      "the reference with `"
                          + std::string{pick->name} + "`: " + std::string{pick->summary} + "."
                    : "Keeping `" + join(steps, "`, `") + "` and adding `" + std::string{pick->name}
                          + "`: " + std::string{pick->summary} + ".";
  steps.emplace_back(pick->name);
  return prose + "\n\n" + fenced(write_candidate(*p.reference, steps));
}

std::string answer_fix(const prompt_view& p) {
  auto steps = p.current ? marker_steps(*p.current) : std::vector<std::string>{};
  std::string prose;
  if (steps.empty()) {
    prose = "The current program is not one of my rewrites, so I fall back to the simplest safe "
            "candidate: the reference under `inference_mode`.";
  } else {
    auto dropped = steps.back();
    steps.pop_back();
    prose = "The newest rewrite, `" + dropped
            + "`, is the most likely cause; this is the same "
              "candidate without it.";
  }
  if (steps.empty()) {
    steps.emplace_back("inference_mode");
    if (prose.find("inference_mode") == std::string::npos)
      prose += " Nothing else is left, so this is the reference under `inference_mode`.";
  }
  return prose + "\n\n" + fenced(write_candidate(*p.reference, steps));
}

} // namespace

std::string rules_answer(const llm_request& req) {
  auto p = parse_prompt(req.prompt);
  if (!p.reference || trim(*p.reference).empty())
    return no_reference_answer();
  auto traits = analyse(*p.reference);
  switch (req.kind) {
    case prompt_kind::brainstorm:
      return answer_brainstorm(p, traits, req.seed);
    case prompt_kind::optimize:
      return answer_optimize(p, traits, req.seed);
    case prompt_kind::improve:
    case prompt_kind::crossover: // the rules know no other programs: they improve the current one
      return answer_improve(p, traits, req.seed);
    case prompt_kind::fix:
    case prompt_kind::fix_correctness:
      return answer_fix(p);
    case prompt_kind::review:
      // The rules wrote every program they see: they have nothing to object to.
      if (p.current)
        return "I checked the program against the contract; it stands as written.\n\n"
               + fenced(*p.current);
      return no_reference_answer();
  }
  return no_reference_answer();
}

std::vector<std::string> rules_rewrite_names() {
  std::vector<std::string> names;
  for (auto& r : library())
    names.emplace_back(r.name);
  return names;
}

} // namespace kiln
