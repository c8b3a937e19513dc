// The pickle subset of pickle_reader.h, interpreted one opcode at a time over a byte span.
//
// Safety, beyond checking every length against the bytes left:
// - Memory is bounded by counting: at most kMaxObjects values, kMaxStack stack entries,
//   kMaxMarks open marks and kMaxMemo memo entries (a CIFAR batch needs about 20,000 values,
//   1,000 stack entries, 2 marks and 20,000 memo entries). Strings are views into the input.
// - No cycles, no deep nesting: a container may only be filled (APPEND(S), SETITEM(S)) while it
//   is not yet inside another value, so nothing can come to contain itself (values are shared
//   pointers, a cycle would leak); nesting is limited to kMaxDepth, which bounds the recursion
//   of destroying the result.
// - Callables: only the numpy globals, and REDUCE/BUILD only in the shapes numpy writes.
#include "hourglass/data/pickle_reader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

#include "hourglass/base/error.h"

namespace hg::data {

namespace {

constexpr size_t kMaxObjects = size_t(1) << 18;
constexpr size_t kMaxStack = size_t(1) << 16;
constexpr size_t kMaxMarks = 64;
constexpr size_t kMaxMemo = size_t(1) << 17;
constexpr int kMaxDepth = 32;
constexpr size_t kMaxGlobalName = 128;  // "module\nname\n" of GLOBAL, each part

constexpr std::string_view kReconstruct = "numpy.core.multiarray._reconstruct";
// numpy 2 moved numpy.core to numpy._core; its pickles name the same function there.
constexpr std::string_view kReconstruct2 = "numpy._core.multiarray._reconstruct";
constexpr std::string_view kNdarray = "numpy.ndarray";
constexpr std::string_view kDtype = "numpy.dtype";

// Names of opcodes that exist in pickle but are not accepted here, for messages.
std::string_view refused_opcode_name(uint8_t op) {
  switch (op) {
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'G': return "BINFLOAT";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 'l': return "LIST";
    case 'd': return "DICT";
    case 'g': return "GET";
    case 'p': return "PUT";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return {};
  }
}

// Printable ASCII of an untrusted name, at most 80 characters, for messages.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 80) out += "...";
  return out;
}

class Machine {
 public:
  Machine(std::span<const uint8_t> bytes, const std::string& where)
      : bytes_(bytes), where_(where) {}

  PickleRef run() {
    while (true) {
      op_at_ = pos_;
      const uint8_t op = take_u8();
      if (op == '.') break;  // STOP
      step(op);
    }
    if (!marks_.empty()) fail("STOP with an unclosed MARK");
    if (stack_.size() != 1) {
      fail(fmt::format("STOP with {} values on the stack, expected 1", stack_.size()));
    }
    if (pos_ != bytes_.size()) {
      throw_invalid(fmt::format("{}: pickle: {} bytes after the STOP opcode at byte {}", where_,
                                bytes_.size() - pos_, op_at_),
                    "the file is not a single pickle; re-download it");
    }
    return stack_.back();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw_invalid(fmt::format("{}: pickle: {} (opcode at byte {})", where_, what, op_at_),
                  "the file is corrupt or not a CIFAR-10 python batch; re-download it");
  }

  // ---- reading operands ----
  void need(size_t n) const {
    if (bytes_.size() - pos_ < n) {
      fail(fmt::format("truncated: needs {} more bytes, {} left", n, bytes_.size() - pos_));
    }
  }
  uint8_t take_u8() {
    if (pos_ >= bytes_.size()) fail("truncated: the data ends before the STOP opcode");
    return bytes_[pos_++];
  }
  uint64_t take_le(size_t n) {
    need(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t(bytes_[pos_ + i]) << (8 * i);
    pos_ += n;
    return v;
  }
  std::string_view take_bytes(uint64_t n) {
    if (n > bytes_.size() - pos_) {
      fail(fmt::format("truncated: a string of {} bytes, {} left", n, bytes_.size() - pos_));
    }
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), size_t(n));
    pos_ += size_t(n);
    return s;
  }
  // One line of GLOBAL's text operand, without its newline.
  std::string_view take_line() {
    const size_t start = pos_;
    while (pos_ < bytes_.size() && bytes_[pos_] != '\n') {
      if (pos_ - start >= kMaxGlobalName) fail("GLOBAL name longer than 128 characters");
      ++pos_;
    }
    if (pos_ >= bytes_.size()) fail("truncated: GLOBAL name without its newline");
    ++pos_;
    return {reinterpret_cast<const char*>(bytes_.data() + start), pos_ - 1 - start};
  }

  // ---- values ----
  PickleRef make(PickleKind kind) {
    if (++objects_ > kMaxObjects) fail(fmt::format("more than {} objects", kMaxObjects));
    auto v = std::make_shared<PickleValue>();
    v->kind = kind;
    return v;
  }
  void push(PickleRef v) {
    if (stack_.size() >= kMaxStack) fail(fmt::format("stack deeper than {}", kMaxStack));
    stack_.push_back(std::move(v));
  }
  PickleRef pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("pop from an empty stack");
    PickleRef v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  PickleRef& top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("the stack is empty");
    return stack_.back();
  }
  // The values pushed since the last MARK, removing them and the mark.
  std::vector<PickleRef> pop_mark() {
    if (marks_.empty()) fail("no MARK to close");
    const size_t at = marks_.back();
    marks_.pop_back();
    std::vector<PickleRef> items(std::make_move_iterator(stack_.begin() + ptrdiff_t(at)),
                                 std::make_move_iterator(stack_.end()));
    stack_.resize(at);
    return items;
  }
  void push_int(int64_t v) {
    PickleRef r = make(PickleKind::Int);
    r->integer = v;
    push(std::move(r));
  }
  void push_string(PickleKind kind, std::string_view s) {
    PickleRef r = make(kind);
    r->text = s;
    push(std::move(r));
  }
  void push_tuple(std::vector<PickleRef> items) {
    PickleRef t = make(PickleKind::Tuple);
    for (PickleRef& item : items) adopt(*t, item);
    push(std::move(t));
  }
  // Puts `child` inside `parent` (a list, tuple or dict being built): see the file comment.
  void adopt(PickleValue& parent, PickleRef& child) {
    if (parent.contained)
      fail(fmt::format("adding to a {} that is already inside another value", parent.kind_name()));
    if (child.get() == &parent) fail(fmt::format("a {} containing itself", parent.kind_name()));
    child->contained = true;
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxDepth) fail(fmt::format("values nested deeper than {}", kMaxDepth));
    parent.items.push_back(child);
  }
  void memo_put(uint64_t index) {
    if (memo_.size() >= kMaxMemo && memo_.find(index) == memo_.end()) {
      fail(fmt::format("more than {} memo entries", kMaxMemo));
    }
    memo_[index] = top();
  }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail(fmt::format("memo entry {} was never stored", index));
    push(it->second);
  }
  void push_global(std::string_view module, std::string_view name) {
    std::string full = std::string(module) + "." + std::string(name);
    if (full != kReconstruct && full != kReconstruct2 && full != kNdarray && full != kDtype) {
      fail(
          fmt::format("global '{}' is not accepted: only {}, {} and {} are (this reader never "
                      "calls anything else)",
                      printable(full), kReconstruct, kNdarray, kDtype));
    }
    PickleRef g = make(PickleKind::Global);
    g->global_storage = std::move(full);
    g->text = g->global_storage;
    push(std::move(g));
  }

  // ---- REDUCE and BUILD, only as numpy uses them ----
  static bool is_flag(const PickleValue& v) {
    return v.kind == PickleKind::Bool || v.kind == PickleKind::Int;
  }
  static bool is_string(const PickleValue& v) {
    return v.kind == PickleKind::Bytes || v.kind == PickleKind::Text;
  }
  void reduce() {
    PickleRef args = pop();
    PickleRef callable = pop();
    if (callable->kind != PickleKind::Global) {
      fail(fmt::format("REDUCE applied to a {}, not to a numpy global", callable->kind_name()));
    }
    if (args->kind != PickleKind::Tuple) {
      fail(fmt::format("REDUCE arguments are a {}, not a tuple", args->kind_name()));
    }
    const std::vector<PickleRef>& a = args->items;
    if (callable->text == kReconstruct || callable->text == kReconstruct2) {
      // _reconstruct(numpy.ndarray, (0,), b'b'): an empty array that BUILD then fills.
      if (a.size() != 3 || a[0]->kind != PickleKind::Global || a[0]->text != kNdarray) {
        fail("_reconstruct is accepted only as _reconstruct(numpy.ndarray, shape, typecode)");
      }
      push(make(PickleKind::Array));
      return;
    }
    if (callable->text == kDtype) {
      // dtype('u1', 0, 1) from Python 2, dtype('u1', False, True) from Python 3.
      if (a.size() != 3 || !is_string(*a[0]) || !is_flag(*a[1]) || !is_flag(*a[2])) {
        fail("numpy.dtype is accepted only as dtype(type string, align, copy)");
      }
      PickleRef d = make(PickleKind::Dtype);
      d->text = a[0]->text;
      push(std::move(d));
      return;
    }
    fail(fmt::format("REDUCE of {} is not accepted", callable->text));
  }
  void build() {
    PickleRef state = pop();
    PickleValue& target = *top();
    if (state->kind != PickleKind::Tuple) {
      fail(fmt::format("BUILD state is a {}, not a tuple", state->kind_name()));
    }
    const std::vector<PickleRef>& s = state->items;
    if (target.built) fail(fmt::format("BUILD applied twice to one {}", target.kind_name()));
    if (target.kind == PickleKind::Dtype) {
      // (3, '|', None, None, None, -1, -1, 0): version, byte order, then fields numpy keeps
      // for structured types (None and -1 for a plain type).
      if (s.size() < 2 || !is_string(*s[1]) || s[1]->text.size() != 1) {
        fail("dtype state lacks its byte-order character");
      }
      target.byte_order = s[1]->text[0];
      target.built = true;
      return;
    }
    if (target.kind == PickleKind::Array) {
      // (version, shape, dtype, is_fortran, raw data); older numpy omits the version.
      const size_t first = s.size() == 5 ? 1 : 0;
      if ((s.size() != 5 && s.size() != 4) || (first == 1 && s[0]->kind != PickleKind::Int) ||
          s[first]->kind != PickleKind::Tuple || s[first + 1]->kind != PickleKind::Dtype ||
          !is_flag(*s[first + 2]) || s[first + 3]->kind != PickleKind::Bytes) {
        fail("ndarray state is not (version, shape, dtype, fortran order, raw bytes)");
      }
      for (const PickleRef& dim : s[first]->items) {
        if (dim->kind != PickleKind::Int || dim->integer < 0) {
          fail("ndarray shape holds something other than sizes >= 0");
        }
        target.shape.push_back(dim->integer);
      }
      target.dtype = s[first + 1];
      target.fortran_order = s[first + 2]->integer != 0;
      target.text = s[first + 3]->text;
      target.built = true;
      return;
    }
    fail(fmt::format("BUILD applied to a {}, only to a numpy array or dtype", target.kind_name()));
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t proto = take_u8();
        if (proto < 2 || proto > 4) fail(fmt::format("pickle protocol {}, expected 2 to 4", proto));
        return;
      }
      case 0x95:  // FRAME (protocol 4): a length hint for buffered readers; the data follows
        if (take_le(8) > bytes_.size() - pos_) fail("FRAME longer than the data left");
        return;
      case '}': push(make(PickleKind::Dict)); return;   // EMPTY_DICT
      case ']': push(make(PickleKind::List)); return;   // EMPTY_LIST
      case ')': push(make(PickleKind::Tuple)); return;  // EMPTY_TUPLE
      case 'N': push(make(PickleKind::None)); return;   // NONE
      case 0x88:                                        // NEWTRUE
      case 0x89: {                                      // NEWFALSE
        PickleRef b = make(PickleKind::Bool);
        b->integer = op == 0x88 ? 1 : 0;
        push(std::move(b));
        return;
      }
      case '(':  // MARK
        if (marks_.size() >= kMaxMarks) fail(fmt::format("more than {} open MARKs", kMaxMarks));
        marks_.push_back(stack_.size());
        return;
      case 't': push_tuple(pop_mark()); return;  // TUPLE
      case 0x85:                                 // TUPLE1
      case 0x86:                                 // TUPLE2
      case 0x87: {                               // TUPLE3
        std::vector<PickleRef> items(size_t(op - 0x84));
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        push_tuple(std::move(items));
        return;
      }
      case 'q': memo_put(take_le(1)); return;                              // BINPUT
      case 'r': memo_put(take_le(4)); return;                              // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); return;                           // MEMOIZE (protocol 4)
      case 'h': memo_get(take_le(1)); return;                              // BINGET
      case 'j': memo_get(take_le(4)); return;                              // LONG_BINGET
      case 'K': push_int(int64_t(take_le(1))); return;                     // BININT1
      case 'M': push_int(int64_t(take_le(2))); return;                     // BININT2
      case 'J': push_int(int64_t(int32_t(uint32_t(take_le(4))))); return;  // BININT
      case 'U':                                                            // SHORT_BINSTRING
      case 'C': push_string(PickleKind::Bytes, take_bytes(take_le(1))); return;  // SHORT_BINBYTES
      case 'T': {  // BINSTRING: a signed 4-byte length
        const int32_t n = int32_t(uint32_t(take_le(4)));
        if (n < 0) fail(fmt::format("BINSTRING of negative length {}", n));
        push_string(PickleKind::Bytes, take_bytes(uint64_t(n)));
        return;
      }
      case 'B': push_string(PickleKind::Bytes, take_bytes(take_le(4))); return;   // BINBYTES
      case 0x8e: push_string(PickleKind::Bytes, take_bytes(take_le(8))); return;  // BINBYTES8
      case 'X': push_string(PickleKind::Text, take_bytes(take_le(4))); return;    // BINUNICODE
      case 0x8c: push_string(PickleKind::Text, take_bytes(take_le(1))); return;  // SHORT_BINUNICODE
      case 'c': {  // GLOBAL "module\nname\n"
        const std::string_view module = take_line();
        push_global(module, take_line());
        return;
      }
      case 0x93: {  // STACK_GLOBAL (protocol 4): module and name from the stack
        PickleRef name = pop();
        PickleRef module = pop();
        if (module->kind != PickleKind::Text || name->kind != PickleKind::Text) {
          fail("STACK_GLOBAL needs two strings");
        }
        push_global(module->text, name->text);
        return;
      }
      case 'a': {  // APPEND
        PickleRef value = pop();
        PickleRef& list = top();
        if (list->kind != PickleKind::List) fail(fmt::format("APPEND to a {}", list->kind_name()));
        adopt(*list, value);
        return;
      }
      case 'e': {  // APPENDS
        std::vector<PickleRef> items = pop_mark();
        PickleRef& list = top();
        if (list->kind != PickleKind::List) fail(fmt::format("APPENDS to a {}", list->kind_name()));
        for (PickleRef& item : items) adopt(*list, item);
        return;
      }
      case 's': {  // SETITEM
        PickleRef value = pop();
        PickleRef key = pop();
        PickleRef& dict = top();
        if (dict->kind != PickleKind::Dict) fail(fmt::format("SETITEM on a {}", dict->kind_name()));
        adopt(*dict, key);
        adopt(*dict, value);
        return;
      }
      case 'u': {  // SETITEMS
        std::vector<PickleRef> items = pop_mark();
        PickleRef& dict = top();
        if (dict->kind != PickleKind::Dict) {
          fail(fmt::format("SETITEMS on a {}", dict->kind_name()));
        }
        if (items.size() % 2 != 0) fail("SETITEMS with a key that has no value");
        for (PickleRef& item : items) adopt(*dict, item);
        return;
      }
      case 'R': reduce(); return;  // REDUCE
      case 'b': build(); return;   // BUILD
      default: break;
    }
    const std::string_view name = refused_opcode_name(op);
    if (!name.empty()) {
      fail(
          fmt::format("opcode {} (0x{:02x}) is not accepted: only the opcodes of numpy-array "
                      "pickles are",
                      name, op));
    }
    fail(fmt::format("unknown opcode 0x{:02x}", op));
  }

  std::span<const uint8_t> bytes_;
  const std::string& where_;
  size_t pos_ = 0;
  size_t op_at_ = 0;  // where the opcode being run starts, for messages
  size_t objects_ = 0;
  std::vector<PickleRef> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint64_t, PickleRef> memo_;
};

}  // namespace

std::string_view PickleValue::kind_name() const {
  static constexpr std::array<std::string_view, 11> names = {
      "None", "bool", "int", "bytes", "str", "list", "tuple", "dict", "global", "ndarray", "dtype"};
  return names[size_t(kind)];
}

const PickleValue* PickleValue::find(std::string_view key) const {
  if (kind != PickleKind::Dict) return nullptr;
  // From the end: a key set twice keeps its last value, as in Python.
  for (size_t i = items.size() / 2; i-- > 0;) {
    const PickleValue& k = *items[2 * i];
    if ((k.kind == PickleKind::Bytes || k.kind == PickleKind::Text) && k.text == key) {
      return items[2 * i + 1].get();
    }
  }
  return nullptr;
}

PickleRef read_pickle(std::span<const uint8_t> bytes, const std::string& where) {
  return Machine(bytes, where).run();
}

}  // namespace hg::data
