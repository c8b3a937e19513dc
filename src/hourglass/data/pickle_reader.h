// A safe reader for the small subset of Python's pickle format that numpy-array dicts such as
// CIFAR-10's python batches use. It interprets the opcode stream without executing anything:
// the only callables it accepts are the three numpy globals that rebuild a plain ndarray
// (numpy.core.multiarray._reconstruct, numpy.ndarray, numpy.dtype), and applying them builds
// an inert PickleValue describing the array (shape, dtype, raw bytes), never calls into Python.
//
// Accepted opcodes: protocol 2 as Python 2's cPickle writes it (PROTO, EMPTY_DICT/LIST/TUPLE,
// MARK, TUPLE/TUPLE1..3, BINPUT/LONG_BINPUT, BINGET/LONG_BINGET, SETITEM(S), APPEND(S),
// SHORT_BINSTRING, BINSTRING, BINUNICODE, BININT/BININT1/BININT2, NONE, NEWTRUE/NEWFALSE,
// GLOBAL, REDUCE, BUILD, STOP) and what a Python 3 re-pickle adds (SHORT_BINBYTES, BINBYTES,
// BINBYTES8, SHORT_BINUNICODE; protocol 4's FRAME, MEMOIZE, STACK_GLOBAL). Anything else is
// refused by name. Every length is checked against the bytes left, and the stack, marks, memo
// and number of objects are bounded, so a hostile file costs at most a bounded amount of memory.
// Every fault is an InvalidInput error naming `where` (the file, or archive and member), the
// byte offset and what is wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hg::data {

enum class PickleKind {
  None,
  Bool,
  Int,
  Bytes,  // Python 2 str, Python 3 bytes (SHORT_BINSTRING, BINSTRING, *BINBYTES*)
  Text,   // unicode / Python 3 str (BINUNICODE, SHORT_BINUNICODE), raw UTF-8
  List,
  Tuple,
  Dict,
  Global,  // an accepted numpy global, not yet applied; `text` is "module.name"
  Array,   // numpy.ndarray rebuilt by _reconstruct (+ BUILD with its state)
  Dtype,   // numpy.dtype(name, align, copy) (+ BUILD with its state)
};

struct PickleValue;
using PickleRef = std::shared_ptr<PickleValue>;

struct PickleValue {
  PickleKind kind = PickleKind::None;
  int64_t integer = 0;           // Bool (0/1) and Int
  std::string_view text;         // Bytes and Text: a view into the input; Global: "module.name";
                                 // Dtype: its type string ("u1"); Array: the raw data (after BUILD)
  std::vector<PickleRef> items;  // List and Tuple; Dict as key, value, key, value, ...
  // Array only, set by BUILD: the shape, dtype and order of the raw data.
  std::vector<int64_t> shape;
  PickleRef dtype;
  bool fortran_order = false;
  bool built = false;  // Array and Dtype: BUILD has given them their state
  // Dtype only, from its BUILD state: the byte-order character ('|', '<', '>', '=').
  char byte_order = 0;
  std::string global_storage;  // owns `text` for Global values (names are built, not viewed)
  // Reader bookkeeping: whether the value is inside a container (which then may not grow), and
  // how deeply containers nest below it.
  bool contained = false;
  int depth = 0;

  // "None", "int", "bytes", ... for messages.
  std::string_view kind_name() const;
  // Dict only: the value under a key given as bytes or text, or nullptr.
  const PickleValue* find(std::string_view key) const;
};

// Interprets `bytes` (which must outlive the result: strings are views into it) up to its STOP
// opcode and returns the value left on the stack. `where` names the source in messages.
PickleRef read_pickle(std::span<const uint8_t> bytes, const std::string& where);

}  // namespace hg::data
