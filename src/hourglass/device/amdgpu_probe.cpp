// Reads the amdgpu module, the KFD topology and the ROCm device files under a root folder.
// The access check is computed from the mode bits, owner and group (as the kernel does for a
// process without capabilities, ACLs not read), so that it can be checked for any identity.
#include "hourglass/device/amdgpu_probe.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace hg::gpu {

namespace fs = std::filesystem;

namespace {

// The Docker flags that give a container the GPUs and the groups that may open them.
constexpr const char* kDockerFlags =
    "--device=/dev/kfd --device=/dev/dri --group-add video --group-add render";

// `path` under `root`: "/" + "/dev/kfd" -> "/dev/kfd"; "/tmp/x" + "/dev/kfd" -> "/tmp/x/dev/kfd".
fs::path under(const std::string& root, const std::string& path) {
  return fs::path(root) / fs::path(path).relative_path();
}

bool directory_exists(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string group_name(gid_t gid) {
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  if (getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr)
    return found->gr_name;
  return std::to_string(gid);
}

DeviceFileAccess device_file(const std::string& root, const std::string& path,
                             const ProcessIdentity& who) {
  DeviceFileAccess access;
  access.path = path;
  struct stat st {};
  if (::stat(under(root, path).c_str(), &st) != 0) return access;
  access.exists = true;
  access.group = group_name(st.st_gid);
  mode_t read = S_IROTH, write = S_IWOTH;
  if (who.uid == st.st_uid) {
    read = S_IRUSR;
    write = S_IWUSR;
  } else if (std::find(who.groups.begin(), who.groups.end(), st.st_gid) != who.groups.end()) {
    read = S_IRGRP;
    write = S_IWGRP;
  }
  access.read_write = who.uid == 0 || ((st.st_mode & read) && (st.st_mode & write));
  return access;
}

// The gfx_target_version line of a KFD node's properties; false when the file cannot be read
// or has none ("gfx_target_version 0" is a CPU node).
bool read_gfx_target_version(const fs::path& properties, unsigned& version) {
  std::ifstream in(properties);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    unsigned long long value = 0;
    if (!(fields >> key) || key != "gfx_target_version") continue;
    if (!(fields >> value) || value > 0xffffffffull) return false;
    version = unsigned(value);
    return true;
  }
  return false;
}

void probe_kfd_topology(const std::string& root, AmdgpuProbe& probe) {
  const fs::path nodes = under(root, "/sys/class/kfd/kfd/topology/nodes");
  probe.kfd_topology = directory_exists(nodes);
  if (!probe.kfd_topology) return;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(nodes, ec)) {
    const std::string name = entry.path().filename().string();
    char* end = nullptr;
    const long node = std::strtol(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0' || node < 0) continue;
    unsigned version = 0;
    if (!read_gfx_target_version(entry.path() / "properties", version)) {
      probe.unreadable.push_back((fs::path(name) / "properties").string());
      continue;
    }
    if (version == 0) continue;  // a CPU node
    probe.gpus.push_back({int(node), version, gfx_target_name(version)});
  }
  std::sort(probe.gpus.begin(), probe.gpus.end(),
            [](const KfdGpuNode& a, const KfdGpuNode& b) { return a.node < b.node; });
  std::sort(probe.unreadable.begin(), probe.unreadable.end());
}

void probe_render_nodes(const std::string& root, const ProcessIdentity& who, AmdgpuProbe& probe) {
  std::error_code ec;
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(under(root, "/dev/dri"), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("renderD", 0) == 0) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names)
    probe.render_nodes.push_back(device_file(root, "/dev/dri/" + name, who));
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

std::string gpu_list(const std::vector<KfdGpuNode>& gpus) {
  std::string text;
  for (const KfdGpuNode& g : gpus)
    text += fmt::format("{}node {} {}", text.empty() ? "" : ", ", g.node, g.gfx_target);
  return text;
}

std::string group_remedy(const std::string& group) {
  return fmt::format(
      "add the user to the group that owns it ({}) and to render and video "
      "(`sudo usermod -aG render,video $USER`, then log in again); in Docker: {}",
      group, kDockerFlags);
}

AmdgpuCheck module_check(const AmdgpuProbe& p) {
  AmdgpuCheck c{"amdgpu kernel driver is loaded", p.module_loaded, "", ""};
  if (p.module_loaded) {
    c.detail = p.module_version.empty()
                   ? "amdgpu module loaded (the kernel's own; /sys/module/amdgpu/version absent)"
                   : "amdgpu module " + p.module_version;
    return c;
  }
  c.detail = "no amdgpu kernel module (/sys/module/amdgpu is absent)";
  c.remedy =
      "install the amdgpu driver (ROCm's amdgpu-dkms, or a kernel with amdgpu) and load it "
      "(`sudo modprobe amdgpu`; `dmesg | grep amdgpu` says why it failed); a container uses "
      "the host's driver";
  return c;
}

AmdgpuCheck topology_check(const AmdgpuProbe& p) {
  AmdgpuCheck c{"KFD lists AMD GPUs", !p.gpus.empty(), "", ""};
  const std::string unreadable =
      p.unreadable.empty()
          ? ""
          : fmt::format(" ({} node propert{} unreadable: {})", p.unreadable.size(),
                        p.unreadable.size() == 1 ? "y" : "ies", joined(p.unreadable));
  if (c.passed) {
    c.detail = fmt::format("{} GPU{}: {}{}", p.gpus.size(), p.gpus.size() == 1 ? "" : "s",
                           gpu_list(p.gpus), unreadable);
    return c;
  }
  if (!p.kfd_topology) {
    c.detail = "no KFD topology (/sys/class/kfd/kfd/topology/nodes is absent)";
    c.remedy =
        "the amdgpu driver must be loaded with compute (KFD) support: use ROCm's amdgpu driver "
        "or a kernel built with CONFIG_HSA_AMD (`dmesg | grep -i kfd`)";
    return c;
  }
  c.detail = "the KFD topology has no GPU node, only CPUs" + unreadable;
  c.remedy =
      "the driver does not support this GPU or it is disabled (`dmesg | grep -i amdgpu`); see "
      "ROCm's list of supported GPUs";
  return c;
}

AmdgpuCheck kfd_check(const AmdgpuProbe& p) {
  AmdgpuCheck c{"/dev/kfd is usable", p.kfd.exists && p.kfd.read_write, "", ""};
  if (c.passed) {
    c.detail = fmt::format("read and write (group {})", p.kfd.group);
  } else if (!p.kfd.exists) {
    c.detail = "/dev/kfd does not exist";
    c.remedy = fmt::format("load the amdgpu driver (above); in Docker, pass the device files: {}",
                           kDockerFlags);
  } else {
    c.detail =
        fmt::format("/dev/kfd is not readable and writable by this user (group {})", p.kfd.group);
    c.remedy = group_remedy(p.kfd.group);
  }
  return c;
}

AmdgpuCheck render_check(const AmdgpuProbe& p) {
  AmdgpuCheck c{"a /dev/dri render node is usable", false, "", ""};
  std::vector<std::string> usable, refused;
  std::string refused_group;
  for (const DeviceFileAccess& r : p.render_nodes) {
    if (r.read_write) {
      usable.push_back(r.path);
    } else {
      refused.push_back(r.path);
      refused_group = r.group;
    }
  }
  c.passed = !usable.empty();
  if (c.passed) {
    c.detail = joined(usable);
    if (!refused.empty()) c.detail += " (not " + joined(refused) + ")";
  } else if (refused.empty()) {
    c.detail = "no /dev/dri/renderD* device file";
    c.remedy = fmt::format("load the amdgpu driver (above); in Docker, pass the device files: {}",
                           kDockerFlags);
  } else {
    c.detail = fmt::format("{} not readable and writable by this user (group {})", joined(refused),
                           refused_group);
    c.remedy = group_remedy(refused_group);
  }
  return c;
}

}  // namespace

ProcessIdentity ProcessIdentity::current() {
  ProcessIdentity who;
  who.uid = ::geteuid();
  who.groups.push_back(::getegid());
  const int n = ::getgroups(0, nullptr);
  if (n > 0) {
    std::vector<gid_t> extra(static_cast<size_t>(n));
    const int got = ::getgroups(n, extra.data());
    if (got > 0) who.groups.insert(who.groups.end(), extra.begin(), extra.begin() + got);
  }
  return who;
}

std::string gfx_target_name(unsigned v) {
  return fmt::format("gfx{}{:x}{:x}", v / 10000, (v / 100) % 100, v % 100);
}

AmdgpuProbe probe_amdgpu(const std::string& root, const ProcessIdentity& who) {
  AmdgpuProbe probe;
  try {
    const fs::path module = under(root, "/sys/module/amdgpu");
    probe.module_loaded = directory_exists(module);
    if (probe.module_loaded) probe.module_version = first_line(module / "version");
    probe_kfd_topology(root, probe);
    probe.kfd = device_file(root, "/dev/kfd", who);
    probe_render_nodes(root, who, probe);
  } catch (const std::exception&) {
    // What was read so far stands; the rest reads as absent.
  }
  return probe;
}

std::vector<std::string> gpu_device_files(const std::string& root) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(under(root, "/dev"), ec)) {
    const std::string name = entry.path().filename().string();
    // nvidia0, nvidia1, ...; not nvidiactl, nvidia-uvm or nvidia-modeset, which a loaded
    // driver creates without a GPU.
    const bool nvidia =
        name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        std::all_of(name.begin() + 6, name.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (nvidia || name == "kfd" || name == "dxg") files.push_back("/dev/" + name);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<AmdgpuCheck> amdgpu_checks(const AmdgpuProbe& probe) {
  return {module_check(probe), topology_check(probe), kfd_check(probe), render_check(probe)};
}

}  // namespace hg::gpu
