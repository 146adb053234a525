// The only translation unit of kiln that sees libtorch. It includes the unpickler and the
// per-operator ATen headers it needs instead of <torch/torch.h> (25-55 s of compile each).

#include "gpu/compare.hpp"
#include "config/rules.hpp"
#include "gpu/file_bytes.hpp"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/isclose.h>
#include <ATen/ops/view_as_real.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

// What "correct" means here (docs/evaluation.md):
//   1. structure: same number of outputs, and per output the same shape and dtype -> else
//      `rejected`; a candidate output that is not a dense tensor is `rejected` too;
//   2. numerics, in float64 on the CPU, chunk by chunk so that big outputs do not need several
//      float64 copies at once: NaN/Inf where the reference has none -> `incorrect`; then
//      allclose(candidate, reference, rtol, atol) with NaN equal to NaN -> else `incorrect`;
//      integer and bool outputs must be equal;
//   3. signal, for floating outputs of more than one element whose reference varies: a
//      constant candidate is `rejected`; where the reference is so close to zero that zeros
//      would pass allclose, the candidate must reproduce its variation (relative L2 error at most
//      0.1 of the reference's spread around its mean) -> else `rejected`.
// "The reference varies" ignores rounding jitter: a reference that is mathematically constant
// (say, row sums of a softmax) differs by a few ulps between elements, and a candidate that
// computes it exactly must not be rejected for that. The spread must exceed 32 machine epsilons
// of the reference's dtype relative to its largest magnitude.

namespace kiln {

namespace {

constexpr int64_t chunk_elems = int64_t{1} << 22; // 32 MiB per float64 temporary
constexpr int64_t max_compare_threads = 8;
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double low_signal_max_rel_l2 = rules::low_signal_max_rel_l2;
constexpr double jitter_eps = 32;

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

std::string dims(c10::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    out += (i == 0 ? "" : ", ") + std::to_string(sizes[i]);
  return out + "]";
}

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    case c10::ScalarType::Long:
      return "int64";
    case c10::ScalarType::Int:
      return "int32";
    case c10::ScalarType::Short:
      return "int16";
    case c10::ScalarType::Char:
      return "int8";
    case c10::ScalarType::Byte:
      return "uint8";
    case c10::ScalarType::Bool:
      return "bool";
    case c10::ScalarType::ComplexFloat:
      return "complex64";
    case c10::ScalarType::ComplexDouble:
      return "complex128";
    default:
      return c10::toString(t); // c10's enum is not ours: no exhaustive switch here
  }
}

/// The index of a flat (row-major) position, for messages.
std::string unravel(int64_t flat, c10::IntArrayRef sizes) {
  std::vector<int64_t> idx(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    int64_t n = std::max<int64_t>(sizes[i], 1);
    idx[i] = flat % n;
    flat /= n;
  }
  return dims(idx);
}

/// A zip archive in memory, for PyTorchStreamReader.
class bytes_adapter : public caffe2::serialize::ReadAdapterInterface {
public:
  explicit bytes_adapter(std::string_view bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* what) const override {
    if (pos >= bytes_.size())
      return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

private:
  std::string_view bytes_;
};

/// libtorch 1.13's unpickler has no APPEND ('a') and no SETITEM ('s'), which Python's pickler
/// emits for a list (dict) of exactly one element: a list of one tensor is the commonest outputs
/// file. Each becomes MARK (in front of the added item) + APPENDS ('e') or SETITEMS ('u'), which
/// every libtorch reads. The opcodes are walked with their stack effects only, to know where each
/// item starts. Returns nothing when there is nothing to rewrite or an opcode is not known here;
/// the unpickler then gets the original bytes.
std::optional<std::vector<char>> rewrite_single_adds(const char* data, size_t size) {
  struct slot {
    size_t start; ///< offset of the first opcode that built this stack value
    bool mark;
  };
  std::vector<slot> stack;
  std::vector<size_t> marks_at;              // where to insert a MARK
  std::vector<std::pair<size_t, char>> adds; // APPEND/SETITEM opcodes and their replacements
  size_t pos = 0;
  bool bad = false;
  auto skip = [&](uint64_t n) {
    if (n > size - pos)
      bad = true;
    else
      pos += n;
  };
  auto length = [&](int bytes) -> uint64_t { // a little-endian length prefix
    if (static_cast<size_t>(bytes) > size - pos) {
      bad = true;
      return 0;
    }
    uint64_t n = 0;
    for (int i = bytes - 1; i >= 0; --i)
      n = (n << 8) | static_cast<unsigned char>(data[pos + i]);
    pos += bytes;
    return n;
  };
  auto skip_line = [&] {
    const void* nl = std::memchr(data + pos, '\n', size - pos);
    if (nl == nullptr)
      bad = true;
    else
      pos = static_cast<size_t>(static_cast<const char*>(nl) - data) + 1;
  };
  auto pop = [&](size_t k) -> size_t { // pops k values, returns where the first began
    if (stack.size() < k) {
      bad = true;
      return 0;
    }
    for (size_t i = stack.size() - k; i < stack.size(); ++i)
      bad = bad || stack[i].mark;
    size_t start = k > 0 ? stack[stack.size() - k].start : pos;
    stack.resize(stack.size() - k);
    return start;
  };
  auto pop_mark = [&]() -> size_t { // pops to the last MARK, returns where it was
    size_t i = stack.size();
    while (i > 0 && !stack[i - 1].mark)
      --i;
    if (i == 0) {
      bad = true;
      return 0;
    }
    size_t start = stack[i - 1].start;
    stack.resize(i - 1);
    return start;
  };
  auto push = [&](size_t start) { stack.push_back({start, false}); };

  bool stopped = false;
  while (pos < size && !bad && !stopped) {
    size_t op_at = pos;
    auto op = static_cast<unsigned char>(data[pos++]);
    // One line per opcode: it reads as the table it is.
    // clang-format off
    switch (op) {
      case 0x80: skip(1); break;                                  // PROTO
      case 0x95: skip(8); break;                                  // FRAME
      case 'q': skip(1); break;                                   // BINPUT
      case 'r': skip(4); break;                                   // LONG_BINPUT
      case 'p': skip_line(); break;                               // PUT
      case 0x94: break;                                           // MEMOIZE
      case '(': stack.push_back({op_at, true}); break;            // MARK
      case ']': case ')': case '}': case 'N': case 0x88: case 0x89: case 0x8f:
        push(op_at);
        break;
      case 'K': case 'h': skip(1); push(op_at); break;            // BININT1, BINGET
      case 'M': skip(2); push(op_at); break;                      // BININT2
      case 'J': case 'j': skip(4); push(op_at); break;            // BININT, LONG_BINGET
      case 'G': skip(8); push(op_at); break;                      // BINFLOAT
      case 0x8a: case 0x8c: case 'U': case 'C': skip(length(1)); push(op_at); break;
      case 0x8b: case 'X': case 'T': case 'B': skip(length(4)); push(op_at); break;
      case 0x8d: case 0x8e: skip(length(8)); push(op_at); break;
      case 'c': skip_line(); skip_line(); push(op_at); break;    // GLOBAL
      case 'I': case 'L': case 'F': case 'S': case 'V': case 'g': case 'P':
        skip_line();
        push(op_at);
        break;
      case '2':                                                   // DUP
        if (stack.empty())
          bad = true;
        push(op_at);
        break;
      case '0': pop(1); break;                                    // POP
      case '1': pop_mark(); break;                                // POP_MARK
      case 'Q': case 0x85: push(pop(1)); break;                   // BINPERSID, TUPLE1
      case 0x86: case 'R': case 'b': case 0x81: case 0x93: push(pop(2)); break;
      case 0x87: push(pop(3)); break;                             // TUPLE3
      case 't': case 'l': case 'd': case 0x91: push(pop_mark()); break;
      case 'e': case 'u': case 0x90:                              // APPENDS, SETITEMS, ADDITEMS
        pop_mark();
        bad = bad || stack.empty();
        break;
      case 'a':                                                   // APPEND
      case 's': {                                                 // SETITEM
        size_t items = op == 'a' ? 1 : 2;
        if (stack.size() < items + 1 || stack[stack.size() - items - 1].mark) {
          bad = true;
          break;
        }
        marks_at.push_back(pop(items));
        adds.emplace_back(op_at, op == 'a' ? 'e' : 'u');
        break;
      }
      case '.': stopped = true; break;                            // STOP
      default: bad = true; break;
    }
    // clang-format on
  }
  if (bad || adds.empty())
    return std::nullopt;

  std::sort(marks_at.begin(), marks_at.end());
  std::vector<char> out;
  out.reserve(size + marks_at.size());
  size_t m = 0;
  size_t a = 0;
  for (size_t i = 0; i < size; ++i) {
    while (m < marks_at.size() && marks_at[m] == i) {
      out.push_back('(');
      ++m;
    }
    if (a < adds.size() && adds[a].first == i) {
      out.push_back(adds[a].second);
      ++a;
    } else {
      out.push_back(data[i]);
    }
  }
  return out;
}

/// What `torch::pickle_load` does, with the rewrite above in between and every tensor mapped
/// to the CPU (a harness that saved CUDA tensors still produces a readable file).
c10::IValue unpickle_archive(std::string_view bytes) {
  caffe2::serialize::PyTorchStreamReader archive(std::make_shared<bytes_adapter>(bytes));
  at::DataPtr record;
  size_t record_size = 0;
  std::tie(record, record_size) = archive.getRecord("data.pkl");
  const char* pickle = static_cast<const char*>(record.get());
  std::optional<std::vector<char>> rewritten = rewrite_single_adds(pickle, record_size);
  if (rewritten) {
    pickle = rewritten->data();
    record_size = rewritten->size();
  }
  size_t offset = 0;
  auto read = [&](char* buf, size_t n) -> size_t {
    n = std::min(n, record_size - offset);
    std::memcpy(buf, pickle + offset, n);
    offset += n;
    return n;
  };
  auto read_record = [&](const std::string& name) {
    return std::get<0>(archive.getRecord("data/" + name));
  };
  torch::jit::Unpickler unpickler(read, nullptr, nullptr, read_record, c10::Device(c10::kCPU));
  unpickler.set_version(archive.version());
  return unpickler.parse_ivalue();
}

/// An outputs file's contents, already in memory; `name` says where they came from.
c10::IValue load_bytes(std::string_view bytes, const std::string& path) {
  try {
    return unpickle_archive(bytes);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot read outputs file '" + path
                             + "': " + first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot read outputs file '" + path + "': " + first_line(e.what()));
  }
}

/// The tensors of an outputs file, or why it does not hold tensors.
struct outputs {
  std::vector<at::Tensor> tensors;
  std::string problem;
};

outputs as_outputs(const c10::IValue& v) {
  outputs out;
  auto add = [&](const c10::IValue& e) {
    if (!out.problem.empty())
      return;
    if (e.isTensor())
      out.tensors.push_back(e.toTensor());
    else
      out.problem =
          "output " + std::to_string(out.tensors.size()) + " is not a tensor (" + e.tagKind() + ")";
  };
  if (v.isTensor()) {
    out.tensors.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    out.tensors = v.toTensorVector();
  } else if (v.isList()) {
    for (const auto& e : v.toListRef())
      add(e);
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements())
      add(e);
  } else {
    out.problem = "outputs are " + v.tagKind() + ", not tensors";
  }
  return out;
}

/// The harness's raw outputs format (docs/evaluation.md, "Outputs files"): a text header, then
/// each tensor's bytes where the header says. Read in place: the tensors are views of the
/// file's bytes, which they keep alive.
constexpr std::string_view raw_magic = "KILNOUT1\n";
constexpr size_t raw_max_tensors = size_t{1} << 20;
constexpr size_t raw_max_dims = 64;

class header_reader {
public:
  /// `text` starts `base` bytes into the file.
  header_reader(std::string_view text, size_t base, const std::string& name)
      : text_(text), name_(name), base_(base) {}

  std::runtime_error bad(const std::string& why) const {
    return std::runtime_error("cannot read outputs file '" + name_ + "': " + why + " (byte "
                              + std::to_string(base_ + pos_) + ")");
  }
  std::string_view word() {
    while (pos_ < text_.size() && text_[pos_] == ' ')
      ++pos_;
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ' ' && text_[pos_] != '\n')
      ++pos_;
    if (start == pos_)
      throw bad("expected a field");
    return text_.substr(start, pos_ - start);
  }
  uint64_t number() {
    auto w = word();
    if (w.size() > 20)
      throw bad("number too long");
    uint64_t v = 0;
    for (char ch : w) {
      if (ch < '0' || ch > '9')
        throw bad("not a number: '" + std::string{w} + "'");
      uint64_t next = v * 10 + static_cast<uint64_t>(ch - '0');
      if (next / 10 != v)
        throw bad("number out of range");
      v = next;
    }
    return v;
  }
  void end_line() {
    while (pos_ < text_.size() && text_[pos_] == ' ')
      ++pos_;
    if (pos_ >= text_.size() || text_[pos_] != '\n')
      throw bad("expected the end of a line");
    ++pos_;
  }

private:
  std::string_view text_;
  const std::string& name_;
  size_t base_ = 0;
  size_t pos_ = 0;
};

std::optional<c10::ScalarType> raw_dtype(std::string_view name) {
  using st = c10::ScalarType;
  for (st t : {st::Float, st::Double, st::Half, st::BFloat16, st::Long, st::Int, st::Short,
               st::Char, st::Byte, st::Bool, st::ComplexFloat, st::ComplexDouble})
    if (dtype_name(t) == name)
      return t;
  return std::nullopt;
}

outputs read_raw(const file_bytes& file) {
  const std::string_view bytes = file.bytes();
  const std::string& name = file.name();
  header_reader in{bytes.substr(raw_magic.size()), raw_magic.size(), name};
  const uint64_t count = in.number();
  in.end_line();
  if (count > raw_max_tensors)
    throw in.bad("too many tensors (" + std::to_string(count) + ")");
  std::shared_ptr<const void> keep = keep_alive(file);
  outputs out;
  for (uint64_t i = 0; i < count; ++i) {
    auto type_name = in.word();
    auto type = raw_dtype(type_name);
    if (!type)
      throw in.bad("unknown dtype '" + std::string{type_name} + "'");
    const uint64_t ndim = in.number();
    if (ndim > raw_max_dims)
      throw in.bad("too many dimensions");
    std::vector<int64_t> sizes;
    uint64_t numel = 1;
    for (uint64_t d = 0; d < ndim; ++d) {
      uint64_t n = in.number();
      if (n > (uint64_t{1} << 62) || (n != 0 && numel > (uint64_t{1} << 62) / n))
        throw in.bad("shape too large");
      numel *= n;
      sizes.push_back(static_cast<int64_t>(n));
    }
    const uint64_t offset = in.number();
    const uint64_t nbytes = in.number();
    in.end_line();
    const uint64_t item = c10::elementSize(*type);
    if (numel > (uint64_t{1} << 62) / item || nbytes != numel * item)
      throw in.bad("tensor " + std::to_string(i) + " has " + std::to_string(nbytes)
                   + " bytes for its shape");
    if (offset > bytes.size() || nbytes > bytes.size() - offset)
      throw in.bad("tensor " + std::to_string(i) + " lies outside the file");
    if (offset % item != 0)
      throw in.bad("tensor " + std::to_string(i) + " is not aligned");
    auto options = at::TensorOptions().dtype(*type);
    // A bool byte other than 0 or 1 is undefined behaviour for every operation that reads it.
    if (*type == c10::ScalarType::Bool) {
      const auto* b = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
      for (uint64_t k = 0; k < nbytes; ++k)
        if (b[k] > 1)
          throw in.bad("tensor " + std::to_string(i) + " is bool but holds the byte "
                       + std::to_string(b[k]));
    }
    if (nbytes == 0) {
      out.tensors.push_back(at::empty(sizes, options));
      continue;
    }
    // Read-only memory behind a mutable pointer: nothing here writes to these tensors.
    void* data = const_cast<char*>(bytes.data() + offset);
    out.tensors.push_back(at::from_blob(
        data, sizes, [keep](void*) {}, options));
  }
  return out;
}

/// An outputs file in either format: the harness's raw one, or a `torch.save` archive.
outputs load_outputs(const file_bytes& file) {
  if (file.bytes().substr(0, raw_magic.size()) == raw_magic)
    return read_raw(file);
  return as_outputs(load_bytes(file.bytes(), file.name()));
}

bool is_exact(c10::ScalarType t) {
  return !c10::isFloatingType(t) && !c10::isComplexType(t);
}

double epsilon_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half:
      return 9.765625e-4;
    case c10::ScalarType::BFloat16:
      return 7.8125e-3;
    case c10::ScalarType::Float:
    case c10::ScalarType::ComplexFloat:
      return 1.1920929e-7;
    default:
      return 2.220446049250313e-16;
  }
}

/// Part of a flattened tensor as float64 on the CPU (complex values as (re, im) pairs).
at::Tensor chunk_as_double(const at::Tensor& flat, int64_t begin, int64_t end) {
  at::Tensor part = flat.slice(0, begin, end);
  if (c10::isComplexType(part.scalar_type()))
    return at::view_as_real(part.to(at::kCPU, at::kComplexDouble)).reshape({-1});
  return part.to(at::kCPU, at::kDouble);
}

double item(const at::Tensor& t) {
  return t.item<double>();
}

/// The comparison of one output pair whose structure already matched.
struct one_output {
  double max_abs = 0;
  double max_rel = 0;
  bool ok = true;
  verdict_status status = verdict_status::correct;
  std::string reason;
  std::string code;
  int64_t outside = 0;
  int64_t values = 0;
  double worst_ratio = 0;

  void fail(verdict_status s, std::string c, std::string why) {
    ok = false;
    status = s;
    code = std::move(c);
    reason = std::move(why);
  }
};

/// Accumulates |c - r| and |c - r| / |r| with NaN == NaN and equal infinities counting as 0.
void add_diffs(const at::Tensor& c, const at::Tensor& r, one_output& res) {
  at::Tensor same = c.eq(r).logical_or(c.isnan().logical_and(r.isnan()));
  at::Tensor d = (c - r).abs().masked_fill(same, 0.0);
  d = d.masked_fill(d.isnan(), inf); // one side NaN: as far apart as it gets
  at::Tensor rel = d / (r.abs() + 1e-12);
  rel = rel.masked_fill(d.eq(0), 0.0);
  rel = rel.masked_fill(rel.isnan(), inf);
  res.max_abs = std::max(res.max_abs, item(d.max()));
  res.max_rel = std::max(res.max_rel, item(rel.max()));
}

one_output compare_exact(const at::Tensor& cand, const at::Tensor& ref, size_t index) {
  one_output res;
  at::Tensor c = cand.reshape({-1});
  at::Tensor r = ref.reshape({-1});
  int64_t n = r.numel();
  int64_t unequal = 0;
  for (int64_t b = 0; b < n; b += chunk_elems) {
    int64_t e = std::min(n, b + chunk_elems);
    at::Tensor cs = c.slice(0, b, e).to(at::kCPU);
    at::Tensor rs = r.slice(0, b, e).to(at::kCPU);
    unequal += cs.ne(rs).sum().item<int64_t>();
    add_diffs(chunk_as_double(c, b, e), chunk_as_double(r, b, e), res);
  }
  if (unequal > 0)
    res.fail(verdict_status::incorrect, "exact_mismatch",
             "output " + std::to_string(index) + " differs: " + std::to_string(unequal) + " of "
                 + std::to_string(n) + " elements not equal (" + dtype_name(ref.scalar_type())
                 + " outputs must match exactly; no tolerance applies)");
  return res;
}

/// What one pass over an output pair gathers (every value as float64; complex outputs as their
/// (re, im) pairs).
struct float_scan {
  double atol = 0, rtol = 0;
  bool cand_nan = false; ///< NaN where the reference has none
  bool cand_inf = false; ///< an infinity the reference does not have there
  int64_t nan_count = 0, inf_count = 0;
  int64_t first_nan_at = -1, first_inf_at = -1; ///< flat indices into the values scanned
  double max_abs = 0, max_rel = 0;
  int64_t not_close = 0;
  double worst_ratio = 0; ///< max |c - r| / (atol + rtol |r|) over the values not close
  double worst_excess = -inf;
  int64_t worst_at = -1; ///< flat index into the values scanned
  double worst_c = 0, worst_r = 0;
  // Over the positions where the reference is finite:
  int64_t finite = 0;
  double ref_min = inf, ref_max = -inf, ref_sum = 0, ref_absmax = 0;
  double cand_min = inf, cand_max = -inf, err_sq = 0;
  bool ref_near_zero = true; ///< allclose(zeros_like(r), r) would hold

  /// One plain loop instead of a dozen ATen passes over float64 copies: the comparison of
  /// 3 trials of a 128 MB output took 18 s on 2 cores that way, longer than the evaluation.
  template <typename T> void add(const T* cs, const T* rs, int64_t count, int64_t base) {
    for (int64_t i = 0; i < count; ++i) {
      const double c = static_cast<double>(cs[i]);
      const double r = static_cast<double>(rs[i]);
      const bool c_nan = std::isnan(c);
      const bool r_nan = std::isnan(r);
      if (c_nan && !r_nan) {
        cand_nan = true;
        if (nan_count++ == 0)
          first_nan_at = base + i;
      }
      if (std::isinf(c) && c != r) {
        cand_inf = true;
        if (inf_count++ == 0)
          first_inf_at = base + i;
      }
      // |c - r| with NaN == NaN and equal infinities as 0, one-sided NaN as infinitely far.
      const bool same = c == r || (c_nan && r_nan);
      double d = same ? 0.0 : std::fabs(c - r);
      if (std::isnan(d))
        d = inf;
      double rel = d == 0 ? 0.0 : d / (std::fabs(r) + 1e-12);
      if (std::isnan(rel))
        rel = inf;
      max_abs = std::max(max_abs, d);
      max_rel = std::max(max_rel, rel);
      // torch.isclose(c, r, rtol, atol, equal_nan=True).
      const double allowed = atol + rtol * std::fabs(r);
      const double actual = std::fabs(c - r);
      const bool close = same || (std::isfinite(actual) && actual <= allowed);
      if (!close) {
        ++not_close;
        double excess = actual - allowed;
        if (std::isnan(excess))
          excess = inf;
        const double ratio = allowed > 0 ? actual / allowed : inf;
        worst_ratio = std::max(worst_ratio, std::isnan(ratio) ? inf : ratio);
        if (excess > worst_excess) {
          worst_excess = excess;
          worst_at = base + i;
          worst_c = c;
          worst_r = r;
        }
      }
      if (std::isfinite(r)) {
        ++finite;
        ref_min = std::min(ref_min, r);
        ref_max = std::max(ref_max, r);
        ref_sum += r;
        ref_absmax = std::max(ref_absmax, std::fabs(r));
        cand_min = std::min(cand_min, c);
        cand_max = std::max(cand_max, c);
        err_sq += (c - r) * (c - r);
        ref_near_zero = ref_near_zero && std::fabs(r) <= allowed;
      }
    }
  }

  /// Folds in the scan of the values that come right after this one's.
  void merge(const float_scan& o) {
    cand_nan = cand_nan || o.cand_nan;
    cand_inf = cand_inf || o.cand_inf;
    if (first_nan_at < 0)
      first_nan_at = o.first_nan_at;
    if (first_inf_at < 0)
      first_inf_at = o.first_inf_at;
    nan_count += o.nan_count;
    inf_count += o.inf_count;
    max_abs = std::max(max_abs, o.max_abs);
    max_rel = std::max(max_rel, o.max_rel);
    not_close += o.not_close;
    worst_ratio = std::max(worst_ratio, o.worst_ratio);
    if (o.worst_excess > worst_excess) { // strictly: the first of equals wins, as in one pass
      worst_excess = o.worst_excess;
      worst_at = o.worst_at;
      worst_c = o.worst_c;
      worst_r = o.worst_r;
    }
    finite += o.finite;
    ref_min = std::min(ref_min, o.ref_min);
    ref_max = std::max(ref_max, o.ref_max);
    ref_sum += o.ref_sum;
    ref_absmax = std::max(ref_absmax, o.ref_absmax);
    cand_min = std::min(cand_min, o.cand_min);
    cand_max = std::max(cand_max, o.cand_max);
    err_sq += o.err_sq;
    ref_near_zero = ref_near_zero && o.ref_near_zero;
  }
};

/// The CPUs this process may run on (its affinity mask), at least 1.
int64_t usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max<int64_t>(1, CPU_COUNT(&set));
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

/// An output pair flattened to plain values (complex as (re, im) pairs), same length.
struct flat_pair {
  at::Tensor c, r;
  int64_t n = 0;
};

flat_pair flatten_pair(const at::Tensor& cand, const at::Tensor& ref) {
  flat_pair p{cand.contiguous(), ref.contiguous()};
  if (c10::isComplexType(p.r.scalar_type())) {
    p.c = at::view_as_real(p.c);
    p.r = at::view_as_real(p.r);
  }
  p.c = p.c.reshape({-1});
  p.r = p.r.reshape({-1});
  p.n = p.r.numel();
  return p;
}

/// Calls `fn(cs, rs, count, base)` on values [b, e) of the pair: float32 and float64 straight
/// from the tensors' memory, float16 and bfloat16 converted to float64 first.
template <typename Fn> void visit_chunk(const flat_pair& p, int64_t b, int64_t e, Fn&& fn) {
  switch (p.r.scalar_type()) {
    case c10::ScalarType::Float:
      fn(p.c.data_ptr<float>() + b, p.r.data_ptr<float>() + b, e - b, b);
      return;
    case c10::ScalarType::Double:
      fn(p.c.data_ptr<double>() + b, p.r.data_ptr<double>() + b, e - b, b);
      return;
    default: {
      at::Tensor cs = p.c.slice(0, b, e).to(at::kCPU, at::kDouble).contiguous();
      at::Tensor rs = p.r.slice(0, b, e).to(at::kCPU, at::kDouble).contiguous();
      fn(cs.data_ptr<double>(), rs.data_ptr<double>(), e - b, b);
    }
  }
}

/// Calls `fn(cs, rs, count, base)` over a floating output pair, chunk after chunk.
template <typename Fn> void for_each_chunk(const at::Tensor& cand, const at::Tensor& ref, Fn&& fn) {
  const flat_pair p = flatten_pair(cand, ref);
  for (int64_t b = 0; b < p.n; b += chunk_elems)
    visit_chunk(p, b, std::min(p.n, b + chunk_elems), fn);
}

/// The scan of a floating output pair, its chunks spread over threads: outputs of hundreds of
/// megabytes are common, and the device waits while kiln compares. Chunks are fixed, and merged
/// in order, so the result does not depend on the number of threads.
float_scan scan_pair(const at::Tensor& cand, const at::Tensor& ref, tolerance tol) {
  const flat_pair p = flatten_pair(cand, ref);
  const int64_t chunks = (p.n + chunk_elems - 1) / chunk_elems;
  std::vector<float_scan> parts(static_cast<size_t>(std::max<int64_t>(chunks, 1)));
  for (auto& part : parts) {
    part.atol = tol.atol;
    part.rtol = tol.rtol;
  }
  auto work = [&](int64_t k) {
    const int64_t b = k * chunk_elems;
    visit_chunk(
        p, b, std::min(p.n, b + chunk_elems),
        [&part = parts[static_cast<size_t>(k)]](const auto* cs, const auto* rs, int64_t count,
                                                int64_t base) { part.add(cs, rs, count, base); });
  };
  const int64_t threads = std::min<int64_t>({chunks, max_compare_threads, usable_cpus()});
  if (threads <= 1) {
    for (int64_t k = 0; k < chunks; ++k)
      work(k);
  } else {
    std::atomic<int64_t> next{0};
    std::mutex failed_lock;
    std::exception_ptr failed;
    auto drain = [&] {
      try {
        for (int64_t k = next++; k < chunks; k = next++)
          work(k);
      } catch (...) {
        std::lock_guard<std::mutex> hold{failed_lock};
        failed = std::current_exception();
      }
    };
    struct joiner { // joins whatever started, also when starting another thread throws
      std::vector<std::thread> threads;
      ~joiner() {
        for (auto& th : threads)
          th.join();
      }
    } pool;
    try {
      for (int64_t t = 1; t < threads; ++t)
        pool.threads.emplace_back(drain);
    } catch (const std::system_error&) {
      // No thread to be had (a process or pid limit is reached): this one does the rest.
    }
    drain();
    for (auto& th : pool.threads)
      th.join();
    pool.threads.clear();
    if (failed)
      std::rethrow_exception(failed);
  }
  for (size_t k = 1; k < parts.size(); ++k)
    parts[0].merge(parts[k]);
  return parts[0];
}

one_output compare_floating(const at::Tensor& cand, const at::Tensor& ref, size_t index,
                            tolerance tol) {
  one_output res;
  const std::string out_name = "output " + std::to_string(index);
  const int64_t per_elem = c10::isComplexType(ref.scalar_type()) ? 2 : 1;
  const float_scan scan = scan_pair(cand, ref, tol);
  res.max_abs = scan.max_abs;
  res.max_rel = scan.max_rel;

  const int64_t values = ref.numel() * per_elem;
  auto at = [&](int64_t flat) { return unravel(flat / per_elem, ref.sizes()); };
  // Only what was seen here; the evaluator adds the likely cause once it knows more (a NaN
  // that goes away without kiln's NaN fill of freed memory is memory the candidate never wrote).
  if (scan.cand_nan) {
    res.fail(verdict_status::incorrect, "nan_output",
             out_name + " has NaN where the reference has none: " + std::to_string(scan.nan_count)
                 + " of " + std::to_string(values) + " values, the first at "
                 + at(scan.first_nan_at));
    return res;
  }
  if (scan.cand_inf) {
    res.fail(verdict_status::incorrect, "inf_output",
             out_name + " has Inf where the reference is finite: " + std::to_string(scan.inf_count)
                 + " of " + std::to_string(values) + " values, the first at "
                 + at(scan.first_inf_at)
                 + "; usually an overflow, often of a float16 intermediate (largest value 65504)");
    return res;
  }
  if (scan.not_close > 0) {
    res.outside = scan.not_close;
    res.values = values;
    res.worst_ratio = scan.worst_ratio;
    std::string why = out_name + " differs: max abs diff " + num(res.max_abs)
                      + " > tolerance (atol " + num(tol.atol) + ", rtol " + num(tol.rtol) + "); "
                      + std::to_string(scan.not_close) + " of " + std::to_string(values)
                      + " values outside";
    if (scan.worst_at >= 0)
      why += ", worst at " + at(scan.worst_at) + ": " + num(scan.worst_c) + " vs "
             + num(scan.worst_r) + ", " + num(scan.worst_ratio)
             + "x the allowed difference (atol + rtol |ref|)";
    res.fail(verdict_status::incorrect, "tolerance", why);
    return res;
  }

  // Signal check.
  double spread = scan.ref_max - scan.ref_min;
  bool varies =
      scan.finite > 1 && spread > jitter_eps * epsilon_of(ref.scalar_type()) * scan.ref_absmax;
  if (!varies)
    return res;
  if (scan.cand_max == scan.cand_min) {
    res.fail(verdict_status::rejected, "constant_output",
             out_name + " is constant where the reference varies (every value " + num(scan.cand_min)
                 + ", the reference's from " + num(scan.ref_min) + " to " + num(scan.ref_max)
                 + "): an output that does not follow the inputs skips the work, whatever the "
                   "tolerance allows");
    return res;
  }
  if (scan.ref_near_zero) {
    // Second pass, only here: the reference's spread around its mean.
    const double mean = scan.ref_sum / static_cast<double>(scan.finite);
    double var_sum = 0;
    for_each_chunk(ref, ref, [&](const auto* rs, const auto*, int64_t count, int64_t) {
      for (int64_t i = 0; i < count; ++i) {
        const double r = static_cast<double>(rs[i]);
        if (std::isfinite(r))
          var_sum += (r - mean) * (r - mean);
      }
    });
    const double rel_l2 = var_sum > 0 ? std::sqrt(scan.err_sq) / std::sqrt(var_sum) : 0;
    if (rel_l2 > low_signal_max_rel_l2)
      res.fail(verdict_status::rejected, "low_signal",
               out_name
                   + " has low signal (|ref| within tolerance of zero) and the candidate does not "
                     "reproduce it: an all-zero output would pass the tolerance here, so kiln "
                     "asks the candidate to follow the reference's variation, and its L2 error is "
                   + num(rel_l2) + " of the reference's spread around its mean (at most "
                   + num(low_signal_max_rel_l2) + ")");
  }
  return res;
}

} // namespace

namespace {

output_comparison compare_loaded(const file_bytes& reference, const file_bytes& candidate,
                                 tolerance tol) {
  outputs ref = load_outputs(reference);
  if (!ref.problem.empty())
    throw std::runtime_error("reference outputs in '" + reference.name() + "': " + ref.problem);
  outputs cand = load_outputs(candidate);

  output_comparison res;
  auto reject = [&](std::string code, std::string why) {
    res.ok = false;
    res.status = verdict_status::rejected;
    res.code = std::move(code);
    res.reason = std::move(why);
    return res;
  };
  if (!cand.problem.empty())
    return reject("bad_outputs", cand.problem);
  if (cand.tensors.size() != ref.tensors.size())
    return reject("output_count",
                  "output count " + std::to_string(cand.tensors.size()) + ", expected "
                      + std::to_string(ref.tensors.size())
                      + " (tensors returned, nested tuples and lists counted flat)");

  // Structure of every output first: a wrong shape anywhere is a broken contract, whatever the
  // numbers of the other outputs.
  for (size_t i = 0; i < ref.tensors.size(); ++i) {
    const at::Tensor& c = cand.tensors[i];
    const at::Tensor& r = ref.tensors[i];
    std::string name = "output " + std::to_string(i);
    if (c.layout() != c10::kStrided || r.layout() != c10::kStrided)
      return reject("not_dense", name + " is not a dense tensor (sparse or another layout)");
    if (c.sizes() != r.sizes())
      return reject("shape", name + " has shape " + dims(c.sizes()) + ", expected "
                                 + dims(r.sizes())
                                 + " (a broadcast, a missing squeeze or a wrong view)");
    if (c.scalar_type() != r.scalar_type())
      return reject("dtype", name + " has dtype " + dtype_name(c.scalar_type()) + ", expected "
                                 + dtype_name(r.scalar_type())
                                 + " (a reduced-precision result needs a cast back)");
  }

  res.ok = true;
  res.status = verdict_status::correct;
  for (size_t i = 0; i < ref.tensors.size(); ++i) {
    const at::Tensor& c = cand.tensors[i];
    const at::Tensor& r = ref.tensors[i];
    one_output one;
    if (r.numel() > 0) {
      try {
        one = is_exact(r.scalar_type()) ? compare_exact(c, r, i) : compare_floating(c, r, i, tol);
      } catch (const c10::Error& e) {
        one.fail(verdict_status::rejected, "uncomparable",
                 "output " + std::to_string(i)
                     + " cannot be compared: " + first_line(e.what_without_backtrace()));
      }
    }
    res.max_abs_diff.push_back(one.max_abs);
    res.max_rel_diff.push_back(one.max_rel);
    if (!one.ok && res.ok) {
      res.ok = false;
      res.status = one.status;
      res.reason = std::move(one.reason);
      res.code = std::move(one.code);
      res.outside = one.outside;
      res.values = one.values;
      res.worst_ratio = one.worst_ratio;
    }
  }
  return res;
}

} // namespace

output_comparison compare_outputs(const std::string& reference_file,
                                  const std::string& candidate_file, tolerance tol) {
  return compare_loaded(file_bytes::open(reference_file), file_bytes::open(candidate_file), tol);
}

bool is_raw_outputs(const file_bytes& f) {
  return f.bytes().substr(0, raw_magic.size()) == raw_magic;
}

output_comparison compare_output_files(const file_bytes& reference, const file_bytes& candidate,
                                       tolerance tol) {
  return compare_loaded(reference, candidate, tol);
}

void merge_comparison(output_comparison& acc, const output_comparison& next) {
  // A default-constructed accumulator (not ok, no reason, no outputs) has seen no trial yet:
  // it takes the first comparison as it is.
  if (!acc.ok && acc.reason.empty() && acc.max_abs_diff.empty() && acc.max_rel_diff.empty()) {
    acc = next;
    return;
  }
  auto worst = [](std::vector<double>& into, const std::vector<double>& from) {
    if (into.size() < from.size())
      into.resize(from.size(), 0.0);
    for (size_t i = 0; i < from.size(); ++i)
      if (std::isnan(from[i]) || from[i] > into[i])
        into[i] = from[i];
  };
  worst(acc.max_abs_diff, next.max_abs_diff);
  worst(acc.max_rel_diff, next.max_rel_diff);
  if (acc.ok && !next.ok) {
    acc.status = next.status;
    acc.reason = next.reason;
    acc.code = next.code;
    acc.outside = next.outside;
    acc.values = next.values;
    acc.worst_ratio = next.worst_ratio;
  }
  acc.ok = acc.ok && next.ok;
}

bool output_comparison::borderline() const {
  if (ok || code != "tolerance" || values <= 0)
    return false;
  const double allowed = std::max(static_cast<double>(borderline_count),
                                  borderline_fraction * static_cast<double>(values));
  return static_cast<double>(outside) <= allowed && worst_ratio <= borderline_ratio;
}

} // namespace kiln
