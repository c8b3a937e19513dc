// Every op declared in ops.h must be exercised by an op test: this reads ops.h and the op test
// sources and fails naming any op no test calls as ops::<name>(.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(OpRegistry, EveryOpHasATest) {
  const std::filesystem::path root = HG_SOURCE_DIR;
  const std::string header = read(root / "src/hourglass/ops/ops.h");
  // Declarations look like "Tensor conv2d(" or "void add_(" at the start of a line.
  std::regex decl(R"(^(?:Tensor|void|[A-Za-z0-9]+(?:Forward|Grads))\s+([a-z_0-9]+)\()",
                  std::regex::multiline);
  std::set<std::string> ops;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), decl);
       it != std::sregex_iterator(); ++it)
    ops.insert((*it)[1]);
  ASSERT_GE(ops.size(), 30u) << "ops.h parsing found too few ops";
  std::string tests;
  for (const auto& entry : std::filesystem::directory_iterator(root / "tests/ops"))
    if (entry.path().filename().string().rfind("test_", 0) == 0 &&
        entry.path().filename() != "test_registry.cpp")
      tests += read(entry.path());
  for (const auto& op : ops)
    EXPECT_NE(tests.find("ops::" + op + "("), std::string::npos)
        << "op '" << op << "' (ops.h) is called by no test in tests/ops/";
}

}  // namespace
