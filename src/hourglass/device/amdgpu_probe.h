// What the kernel says about AMD GPUs, read from sysfs and /dev without the HIP runtime: the
// amdgpu module, the GPUs of the KFD topology with their gfx targets, and whether this process
// may open /dev/kfd and /dev/dri/renderD*. On ROCm, hipDriverGetVersion reports the runtime's
// own version even when no driver is loaded, so `hourglass doctor` and `hourglass info` take
// the driver from here. Also the GPU device files of any vendor (gpu_device_files), by which
// `hourglass doctor` tells a machine without a GPU from one whose GPU does not work. Plain C++,
// compiled in every build; every path is read under a root folder so that the tests can use
// fake trees.
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

namespace hg::gpu {

// A GPU node of the KFD topology (<root>/sys/class/kfd/kfd/topology/nodes/<node>/properties).
struct KfdGpuNode {
  int node = 0;                     // the folder's number
  unsigned gfx_target_version = 0;  // "gfx_target_version 90402"
  std::string gfx_target;           // "gfx942"
};

// Whether the process may read and write a device file, from its mode bits and owner.
struct DeviceFileAccess {
  std::string path;  // "/dev/kfd", as seen from the root
  bool exists = false;
  bool read_write = false;  // the mode bits grant the process read and write
  std::string group;        // the owning group's name ("render"), or its number
};

// Who the access checks are for: the process by default; tests pass another.
struct ProcessIdentity {
  uid_t uid = 0;
  std::vector<gid_t> groups;  // effective group and supplementary groups
  static ProcessIdentity current();
};

struct AmdgpuProbe {
  bool module_loaded = false;    // <root>/sys/module/amdgpu exists
  std::string module_version;    // <root>/sys/module/amdgpu/version ("6.8.5"); "" when absent
                                 // (the in-tree module of a distribution kernel has none)
  bool kfd_topology = false;     // <root>/sys/class/kfd/kfd/topology/nodes exists
  std::vector<KfdGpuNode> gpus;  // nodes with a non-zero gfx_target_version, by node number
  std::vector<std::string> unreadable;         // KFD node properties that could not be parsed
  DeviceFileAccess kfd;                        // /dev/kfd
  std::vector<DeviceFileAccess> render_nodes;  // /dev/dri/renderD*, by name
};

// Reads the tree under `root` ("/" on a real machine). Never throws: what is missing or
// unreadable is reported as absent.
AmdgpuProbe probe_amdgpu(const std::string& root = "/",
                         const ProcessIdentity& who = ProcessIdentity::current());

// The LLVM target name of a KFD gfx_target_version (major*10000 + minor*100 + stepping, minor
// and stepping written in hex): 90010 -> "gfx90a", 90402 -> "gfx942", 110000 -> "gfx1100".
std::string gfx_target_name(unsigned gfx_target_version);

// The device files through which a loaded kernel driver offers GPUs, under `root`, by name:
// NVIDIA's /dev/nvidia<N>, ROCm's /dev/kfd, WSL 2's /dev/dxg. Empty on a machine (or in a
// container) with no GPU to offer. Never throws.
std::vector<std::string> gpu_device_files(const std::string& root = "/");

// One result of amdgpu_checks: a PASS detail, or a failure with its remedy.
struct AmdgpuCheck {
  std::string name;
  bool passed = false;
  std::string detail;
  std::string remedy;  // "" when passed
};

// The driver checks of `hourglass doctor` on ROCm, in order: the amdgpu module is loaded, the
// KFD topology lists GPUs, /dev/kfd and a render node are there and usable by this process.
std::vector<AmdgpuCheck> amdgpu_checks(const AmdgpuProbe& probe);

}  // namespace hg::gpu
