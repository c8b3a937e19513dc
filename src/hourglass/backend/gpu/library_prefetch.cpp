#include "hourglass/backend/gpu/library_prefetch.h"
#include "hourglass/base/environment.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

namespace hg::gpu {

namespace {

namespace fs = std::filesystem;

// The stem `name` starts with, or null.
const std::string* stem_of(const std::string& name, const std::vector<std::string>& stems) {
  for (const std::string& s : stems)
    if (name.starts_with(s)) return &s;
  return nullptr;
}

// Plain constants: the detached reader may still run while the process exits and its static
// objects are destroyed.
#ifdef HOURGLASS_GPU_HIP
constexpr const char* kStems[] = {"libMIOpen", "libhipblaslt"};
#else
constexpr const char* kStems[] = {"libcudnn", "libcublasLt"};
#endif

void read_ahead(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) (void)::readahead(fd, 0, size_t(st.st_size));
  ::close(fd);
}

}  // namespace

std::vector<std::string> vendor_library_files(const std::string& maps_text,
                                              const std::vector<std::string>& stems) {
  std::set<std::string> seen;
  std::vector<std::pair<uintmax_t, std::string>> files;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    const fs::path real = fs::canonical(p, ec);
    if (ec || !fs::is_regular_file(real, ec) || !seen.insert(real.string()).second) return;
    const uintmax_t bytes = fs::file_size(real, ec);
    if (!ec) files.emplace_back(bytes, real.string());
  };
  std::set<std::pair<std::string, std::string>> folders;  // (folder, stem)
  std::istringstream lines(maps_text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const fs::path path = line.substr(slash);
    const std::string* stem = stem_of(path.filename().string(), stems);
    if (stem == nullptr) continue;
    add(path);
    // Every stem's files in the folder: cuBLASLt is opened only at the first product
    // (blas_cublaslt.cpp), so it is found beside cuDNN, as the CUDA toolkit installs them.
    for (const std::string& s : stems) folders.emplace(path.parent_path().string(), s);
  }
  for (const auto& [folder, stem] : folders) {
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.starts_with(stem) && name.find(".so") != std::string::npos) add(it->path());
    }
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> out;
  for (auto& f : files) out.push_back(std::move(f.second));
  return out;
}

void prefetch_vendor_libraries() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!env::on_unless_zero("HOURGLASS_PREFETCH_LIBRARIES")) return;
    std::thread([] {
      const std::vector<std::string> stems(std::begin(kStems), std::end(kStems));
      std::ifstream maps("/proc/self/maps");
      std::stringstream text;
      text << maps.rdbuf();
      for (const std::string& f : vendor_library_files(text.str(), stems)) read_ahead(f);
    }).detach();
  });
}

}  // namespace hg::gpu
