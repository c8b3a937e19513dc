// The pickle subset reader on hostile streams: each is refused with an InvalidInput error that
// names the source and the fault, within the reader's bounds on memory and nesting.
#include "hourglass/data/pickle_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "data/fixtures.h"

namespace hg::data {
namespace {

using test::fails_with;

PickleRef read(const std::string& stream) {
  return read_pickle(std::span(reinterpret_cast<const uint8_t*>(stream.data()), stream.size()),
                     "test.pkl");
}

// Protocol 2 header, then the body.
std::string p2(const std::string& body) { return std::string("\x80\x02", 2) + body; }

// A string literal's bytes, NULs included.
template <size_t N>
std::string bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

TEST(PickleReader, ReadsTheAcceptedValues) {
  // {b'k': [1, 300, -2, None, True, u'x'], b'm': (b'ab',)} with memo use.
  const std::string stream =
      p2(bytes("}q\x01(U\x01kq\x02]q\x03(K\x01M\x2c\x01J\xfe\xff\xff\xff"
               "N\x88X\x01\x00\x00\x00xeU\x01mC\x02"
               "ab\x85u."));
  const PickleRef root = read(stream);
  ASSERT_EQ(root->kind, PickleKind::Dict);
  const PickleValue* k = root->find("k");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->kind, PickleKind::List);
  ASSERT_EQ(k->items.size(), 6u);
  EXPECT_EQ(k->items[0]->integer, 1);
  EXPECT_EQ(k->items[1]->integer, 300);
  EXPECT_EQ(k->items[2]->integer, -2);
  EXPECT_EQ(k->items[3]->kind, PickleKind::None);
  EXPECT_EQ(k->items[4]->kind, PickleKind::Bool);
  EXPECT_EQ(k->items[5]->text, "x");
  const PickleValue* m = root->find("m");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->kind, PickleKind::Tuple);
  EXPECT_EQ(m->items[0]->text, "ab");
  EXPECT_EQ(root->find("absent"), nullptr);
}

TEST(PickleReader, RefusesWhatIsNotAccepted) {
  auto refused = [](const std::string& stream, const std::vector<std::string>& fragments) {
    std::vector<std::string> all = {"test.pkl: pickle: "};
    all.insert(all.end(), fragments.begin(), fragments.end());
    return fails_with([&] { read(stream); }, all);
  };
  EXPECT_TRUE(refused("", {"truncated"}));
  EXPECT_TRUE(refused(std::string("\x80\x05}.", 4), {"protocol 5"}));
  EXPECT_TRUE(refused(p2("cos\nsystem\n."), {"global 'os.system' is not accepted"}));
  EXPECT_TRUE(refused(p2("cbuiltins\neval\n(S'1'\ntR."), {"global 'builtins.eval'"}));
  EXPECT_TRUE(refused(p2("S'x'\n."), {"opcode STRING (0x53) is not accepted"}));
  EXPECT_TRUE(refused(p2("\xff."), {"unknown opcode 0xff"}));
  EXPECT_TRUE(refused(p2("K\x01K\x02."), {"2 values on the stack"}));
  EXPECT_TRUE(refused(p2("(K\x01."), {"unclosed MARK"}));
  EXPECT_TRUE(refused(p2("K\x01.x"), {"1 bytes after the STOP"}));
  EXPECT_TRUE(refused(p2("h\x07."), {"memo entry 7 was never stored"}));
  EXPECT_TRUE(refused(p2("t."), {"no MARK to close"}));
  EXPECT_TRUE(refused(p2("a."), {"pop from an empty stack"}));
  EXPECT_TRUE(refused(p2("(a."), {"pop from an empty stack"}));  // not below the MARK
  EXPECT_TRUE(refused(p2(std::string("T\xff\xff\xff\xff", 5) + "."), {"negative length"}));
  EXPECT_TRUE(refused(p2(std::string("T\x00\x00\x00\x10", 5) + "abc."),
                      {"a string of 268435456 bytes, 4 left"}));
  EXPECT_TRUE(refused(p2(std::string("\x8e\xff\xff\xff\xff\xff\xff\xff\xff", 9)), {"truncated"}));
  EXPECT_TRUE(refused(p2("K\x01K\x02K\x03s."), {"SETITEM on a int"}));
  EXPECT_TRUE(refused(p2("cnumpy\nndarray\n)R."), {"REDUCE of numpy.ndarray"}));
  EXPECT_TRUE(refused(p2("])b."), {"BUILD applied to a list"}));
  EXPECT_TRUE(
      refused(p2(std::string("cnumpy\n") + std::string(200, 'a') + "\n."), {"longer than 128"}));
}

TEST(PickleReader, NoCyclesNoDeepNesting) {
  // A list appended to itself (through the memo).
  EXPECT_TRUE(fails_with(
      [] {
        read(
            p2("]q\x01h\x01"
               "a."));
      },
      {"a list containing itself"}));
  // A list filled after it was put inside a tuple: the way to a cycle through two values.
  EXPECT_TRUE(fails_with(
      [] {
        read(
            p2("]q\x01\x85h\x01K\x01"
               "a0."));
      },
      {"adding to a list that is already inside another value"}));
  // Nesting beyond 32 levels.
  std::string deep = "K\x01";
  for (int i = 0; i < 40; ++i) deep += "\x85";
  EXPECT_TRUE(fails_with([&] { read(p2(deep + ".")); }, {"nested deeper than 32"}));
}

TEST(PickleReader, BoundsOnMarksStackAndObjects) {
  EXPECT_TRUE(
      fails_with([] { read(p2(std::string(100, '(') + ".")); }, {"more than 64 open MARKs"}));
  std::string many;
  for (int i = 0; i < 70000; ++i) many += "N";
  EXPECT_TRUE(fails_with([&] { read(p2(many + ".")); }, {"stack deeper than 65536"}));
  // Objects: lists of 1,000 Nones appended to one list, 300 times.
  std::string objects = "]";
  for (int i = 0; i < 300; ++i) objects += "(" + std::string(1000, 'N') + "e";
  EXPECT_TRUE(fails_with([&] { read(p2(objects + ".")); }, {"more than 262144 objects"}));
}

}  // namespace
}  // namespace hg::data
