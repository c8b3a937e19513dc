// Writers for the CIFAR-10 and CIFAR-100 python versions and for .tar.gz archives, so the tests
// build their inputs without Python or numpy.
//
// cifar_pickle emits the opcode stream that Python 2's cPickle (protocol 2) writes for a
// CIFAR-10 batch dict, as found in cifar-10-python.tar.gz:
//   \x80\x02 } q\x01 ( U\x04data q\x02 cnumpy.core.multiarray\n_reconstruct\n q\x03
//   cnumpy\nndarray\n q\x04 K\x00 \x85 U\x01b \x87 R q\x05
//   ( K\x01 (M<N> M\x00\x0c \x86) cnumpy\ndtype\n q\x06 U\x02u1 K\x00 K\x01 \x87 R q\x07
//     ( K\x03 U\x01| N N N J<-1> J<-1> K\x00 t b  \x89 T<len><pixels> t b
//   U\x06labels q ] q ( K.. e  U\x0bbatch_label q U..  U\x09filenames q ] q ( U.. q .. e  u .
// (lists in runs of at most 1,000 items, as cPickle batches them), and the same dict as
// Python 3 re-pickles it: protocol 3 (bytes as SHORT_BINBYTES/BINBYTES, str keys as BINUNICODE,
// dtype flags as NEWFALSE/NEWTRUE) or protocol 4 (FRAME, SHORT_BINUNICODE, MEMOIZE,
// STACK_GLOBAL). Options bend single fields to make the faults the reader must refuse.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/fixtures.h"

namespace hg::data::test {

enum class PickleStyle { Python2, Python3, Python3Protocol4 };

struct PickleOptions {
  PickleStyle style = PickleStyle::Python2;
  std::string reconstruct = "numpy.core.multiarray._reconstruct";  // module.name
  std::string dtype = "u1";
  int64_t columns = 3072;             // the array's second dimension (pixels must match it)
  int64_t rows = -1;                  // the array's first dimension; -1: the number of labels
  std::string labels_key = "labels";  // CIFAR-100: "fine_labels"
  // Further label lists after the first (CIFAR-100: "coarse_labels").
  std::vector<std::pair<std::string, std::vector<int>>> more_labels;
};

class PickleWriter {
 public:
  // cPickle numbers its memo from 1, Python 3 from 0.
  explicit PickleWriter(PickleStyle style)
      : style_(style), memo_(style == PickleStyle::Python2 ? 1 : 0) {}

  Bytes& out() { return out_; }
  void op(uint8_t code) { out_.push_back(code); }
  void le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(uint8_t(v >> (8 * i)));
  }
  void raw(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
  // Stores the value on top of the stack in the memo, as each pickler does.
  void put() {
    if (style_ == PickleStyle::Python3Protocol4) {
      op(0x94);  // MEMOIZE
    } else if (memo_ < 256) {
      op('q');
      le(memo_, 1);
    } else {
      op('r');
      le(memo_, 4);
    }
    ++memo_;
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      le(uint64_t(v), 1);
    } else if (v >= 0 && v < 65536) {
      op('M');
      le(uint64_t(v), 2);
    } else {
      op('J');
      le(uint64_t(uint32_t(int32_t(v))), 4);
    }
  }
  // A byte string: Python 2 str (SHORT_BINSTRING / BINSTRING), Python 3 bytes (SHORT_BINBYTES
  // / BINBYTES).
  void bytes(std::string_view s) {
    const bool py2 = style_ == PickleStyle::Python2;
    if (s.size() < 256) {
      op(py2 ? 'U' : 'C');
      le(s.size(), 1);
    } else {
      op(py2 ? 'T' : 'B');
      le(s.size(), 4);
    }
    raw(s);
  }
  // A text string: Python 2 str, Python 3 str (BINUNICODE, or SHORT_BINUNICODE in protocol 4).
  void text(std::string_view s) {
    if (style_ == PickleStyle::Python2) return bytes(s);
    if (style_ == PickleStyle::Python3Protocol4 && s.size() < 256) {
      op(0x8c);
      le(s.size(), 1);
    } else {
      op('X');
      le(s.size(), 4);
    }
    raw(s);
  }
  void global(const std::string& dotted) {
    const size_t dot = dotted.rfind('.');
    const std::string module = dotted.substr(0, dot), name = dotted.substr(dot + 1);
    if (style_ == PickleStyle::Python3Protocol4) {
      text(module);
      put();
      text(name);
      put();
      op(0x93);  // STACK_GLOBAL
    } else {
      op('c');
      raw(module + "\n" + name + "\n");
    }
    put();
  }
  void flag(bool v) {
    if (style_ == PickleStyle::Python2) return integer(v ? 1 : 0);
    op(v ? 0x88 : 0x89);
  }

 private:
  PickleStyle style_;
  Bytes out_;
  uint32_t memo_ = 0;
};

// A pickled CIFAR-10 batch dict: labels, and pixels as planar rows of options.columns bytes.
inline Bytes cifar_pickle(const std::vector<int>& labels, const Bytes& pixels,
                          const PickleOptions& options = {}) {
  PickleWriter w(options.style);
  const bool py2 = options.style == PickleStyle::Python2;
  const bool p4 = options.style == PickleStyle::Python3Protocol4;
  w.op(0x80);
  w.op(py2 ? 2 : (p4 ? 4 : 3));
  size_t frame_at = 0;
  if (p4) {
    w.op(0x95);  // FRAME; its length is filled in at the end (one frame for everything)
    frame_at = w.out().size();
    w.le(0, 8);
  }
  w.op('}');
  w.put();
  w.op('(');
  // 'data': _reconstruct(ndarray, (0,), b'b') then BUILD (1, (N, C), dtype, False, pixels).
  w.text("data");
  w.put();
  w.global(options.reconstruct);
  w.global("numpy.ndarray");
  w.integer(0);
  w.op(0x85);  // TUPLE1
  w.bytes("b");
  w.op(0x87);  // TUPLE3
  w.op('R');
  w.put();
  w.op('(');
  w.integer(1);
  w.integer(options.rows >= 0 ? options.rows : int64_t(labels.size()));
  w.integer(options.columns);
  w.op(0x86);  // TUPLE2
  w.global("numpy.dtype");
  w.text(options.dtype);
  w.flag(false);
  w.flag(true);
  w.op(0x87);
  w.op('R');
  w.put();
  w.op('(');
  w.integer(3);
  w.text("|");
  w.op('N');
  w.op('N');
  w.op('N');
  w.integer(-1);
  w.integer(-1);
  w.integer(0);
  w.op('t');
  w.op('b');
  w.flag(false);
  w.bytes(std::string_view(reinterpret_cast<const char*>(pixels.data()), pixels.size()));
  w.op('t');
  w.op('b');
  // 'labels' (and any further lists): each a list appended in runs of 1,000.
  auto label_list = [&](const std::string& key, const std::vector<int>& values) {
    w.text(key);
    w.put();
    w.op(']');
    w.put();
    for (size_t i = 0; i < values.size(); i += 1000) {
      w.op('(');
      for (size_t j = i; j < std::min(values.size(), i + 1000); ++j) w.integer(values[j]);
      w.op('e');
    }
  };
  label_list(options.labels_key, labels);
  for (const auto& [key, values] : options.more_labels) label_list(key, values);
  w.text("batch_label");
  w.put();
  w.text("training batch 1 of 5");
  w.put();
  w.text("filenames");
  w.put();
  w.op(']');
  w.put();
  w.op('(');
  for (size_t i = 0; i < labels.size(); ++i) {
    w.text("image_" + std::to_string(i) + ".png");
    w.put();
  }
  w.op('e');
  w.op('u');  // SETITEMS
  w.op('.');
  if (p4) {
    const uint64_t frame = w.out().size() - frame_at - 8;
    for (int i = 0; i < 8; ++i) w.out()[frame_at + size_t(i)] = uint8_t(frame >> (8 * i));
  }
  return w.out();
}

// The python-version batch holding the same images as cifar_records(count, first_seed).
inline Bytes cifar_python_batch(int count, int first_seed, const PickleOptions& options = {}) {
  std::vector<int> labels;
  Bytes pixels;
  for (int r = 0; r < count; ++r) {
    const int seed = first_seed + r;
    labels.push_back(seed % 10);
    for (int c = 0; c < 3; ++c) {
      for (int pos = 0; pos < 1024; ++pos) pixels.push_back(cifar_value(seed, c, pos));
    }
  }
  return cifar_pickle(labels, pixels, options);
}

// An uncompressed ustar archive of regular files (a name ending in '/' is a folder).
inline Bytes tar_archive(const std::vector<std::pair<std::string, Bytes>>& members) {
  Bytes out;
  auto field = [](uint8_t* at, size_t width, uint64_t value) {  // octal, NUL-terminated
    std::string digits(width - 1, '0');
    for (size_t i = width - 1; i-- > 0; value >>= 3) digits[i] = char('0' + (value & 7));
    std::memcpy(at, digits.data(), width - 1);
  };
  for (const auto& [name, data] : members) {
    uint8_t header[512] = {};
    const bool folder = !name.empty() && name.back() == '/';
    std::memcpy(header, name.data(), std::min<size_t>(name.size(), 99));
    field(header + 100, 8, folder ? 0755 : 0644);       // mode
    field(header + 108, 8, 0);                          // uid
    field(header + 116, 8, 0);                          // gid
    field(header + 124, 12, folder ? 0 : data.size());  // size
    field(header + 136, 12, 0);                         // mtime
    header[156] = folder ? '5' : '0';                   // type: folder or regular file
    std::memcpy(header + 257,
                "ustar\0"
                "00",
                8);
    std::memset(header + 148, ' ', 8);  // the checksum counts its own field as spaces
    unsigned sum = 0;
    for (uint8_t b : header) sum += b;
    field(header + 148, 7, sum);
    out.insert(out.end(), header, header + 512);
    if (folder) continue;
    out.insert(out.end(), data.begin(), data.end());
    out.resize(out.size() + (512 - data.size() % 512) % 512, 0);
  }
  out.resize(out.size() + 1024, 0);  // two zero blocks end the archive
  return out;
}

}  // namespace hg::data::test
