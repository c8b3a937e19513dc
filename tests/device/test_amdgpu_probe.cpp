// The ROCm driver checks of `hourglass doctor` (device/amdgpu_probe.h) against fake sysfs and
// /dev trees in a scratch folder: the amdgpu module present or absent, KFD nodes parsed to gfx
// targets, /dev/kfd and render nodes missing or refused, with the remedy for each. Access is
// judged for a given identity (uid, groups), so the tests hold when run as root too. Also the
// GPU device files of any vendor (gpu_device_files).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hourglass/device/amdgpu_probe.h"
#include "support/temp_dir.h"

namespace hg::gpu {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& text, mode_t mode = 0644) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  ASSERT_EQ(::chmod(p.c_str(), mode), 0) << p;
}

// A KFD node's properties file as the kernel writes it (the lines around the one read).
std::string properties(unsigned gfx_target_version) {
  return "cpu_cores_count 0\nsimd_count 304\ngfx_target_version " +
         std::to_string(gfx_target_version) + "\nvendor_id 4098\n";
}

// A user who is not root, not the files' owner and in none of their groups.
ProcessIdentity stranger() { return {54321, {54321}}; }
// The same user in the group of the tree's /dev/kfd (the group the test created it with).
ProcessIdentity member(const std::string& root) {
  struct stat st {};
  EXPECT_EQ(::stat((fs::path(root) / "dev/kfd").c_str(), &st), 0) << root;
  return {54321, {54321, st.st_gid}};
}

// A machine as ROCm expects it: amdgpu loaded, a CPU node and two GPUs (MI250X, MI300X),
// /dev/kfd and two render nodes, mode 0660 as udev sets them.
std::string healthy_tree(const std::string& name) {
  const fs::path root = test::fresh_temp_dir(name);
  write_file(root / "sys/module/amdgpu/version", "6.8.5\n");
  const fs::path nodes = root / "sys/class/kfd/kfd/topology/nodes";
  write_file(nodes / "0/properties", properties(0));
  write_file(nodes / "1/properties", properties(90010));
  write_file(nodes / "2/properties", properties(90402));
  write_file(root / "dev/kfd", "", 0660);
  write_file(root / "dev/dri/renderD128", "", 0660);
  write_file(root / "dev/dri/renderD129", "", 0660);
  write_file(root / "dev/dri/card0", "", 0660);
  return root.string();
}

// The check called `name` (a copy: callers pass the temporary result of amdgpu_checks).
AmdgpuCheck check_named(const std::vector<AmdgpuCheck>& checks, const std::string& name) {
  for (const AmdgpuCheck& c : checks)
    if (c.name == name) return c;
  ADD_FAILURE() << "no check named " << name;
  return {};
}

TEST(AmdgpuProbe, GfxTargetNamesFromKfdVersions) {
  EXPECT_EQ(gfx_target_name(90010), "gfx90a");  // MI200
  EXPECT_EQ(gfx_target_name(90402), "gfx942");  // MI300X, MI300A, MI325X
  EXPECT_EQ(gfx_target_name(90008), "gfx908");  // MI100
  EXPECT_EQ(gfx_target_name(100300), "gfx1030");
  EXPECT_EQ(gfx_target_name(110000), "gfx1100");
}

TEST(AmdgpuProbe, HealthyMachinePassesEveryCheck) {
  const std::string root = healthy_tree("amdgpu_healthy");
  const AmdgpuProbe p = probe_amdgpu(root, member(root));
  EXPECT_TRUE(p.module_loaded);
  EXPECT_EQ(p.module_version, "6.8.5");
  ASSERT_EQ(p.gpus.size(), 2u);
  EXPECT_EQ(p.gpus[0].node, 1);
  EXPECT_EQ(p.gpus[0].gfx_target_version, 90010u);
  EXPECT_EQ(p.gpus[0].gfx_target, "gfx90a");
  EXPECT_EQ(p.gpus[1].node, 2);
  EXPECT_EQ(p.gpus[1].gfx_target, "gfx942");
  EXPECT_TRUE(p.unreadable.empty());
  EXPECT_EQ(p.kfd.path, "/dev/kfd");
  EXPECT_TRUE(p.kfd.exists);
  EXPECT_TRUE(p.kfd.read_write);
  ASSERT_EQ(p.render_nodes.size(), 2u);  // card0 is not a render node
  EXPECT_EQ(p.render_nodes[0].path, "/dev/dri/renderD128");
  const std::vector<AmdgpuCheck> checks = amdgpu_checks(p);
  ASSERT_EQ(checks.size(), 4u);
  for (const AmdgpuCheck& c : checks) {
    EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
    EXPECT_EQ(c.remedy, "") << c.name;
  }
  EXPECT_EQ(check_named(checks, "amdgpu kernel driver is loaded").detail, "amdgpu module 6.8.5");
  EXPECT_EQ(check_named(checks, "KFD lists AMD GPUs").detail,
            "2 GPUs: node 1 gfx90a, node 2 gfx942");
}

TEST(AmdgpuProbe, NoDriverFailsWithTheRemedy) {
  // An empty machine: no module, no topology, no device files (a container started without
  // the devices on a host without the driver).
  const std::string root = test::fresh_temp_dir("amdgpu_none");
  const AmdgpuProbe p = probe_amdgpu(root, stranger());
  EXPECT_FALSE(p.module_loaded);
  EXPECT_FALSE(p.kfd_topology);
  EXPECT_TRUE(p.gpus.empty());
  EXPECT_FALSE(p.kfd.exists);
  EXPECT_TRUE(p.render_nodes.empty());
  const std::vector<AmdgpuCheck> checks = amdgpu_checks(p);
  for (const AmdgpuCheck& c : checks) EXPECT_FALSE(c.passed) << c.name;
  const AmdgpuCheck module = check_named(checks, "amdgpu kernel driver is loaded");
  EXPECT_NE(module.detail.find("/sys/module/amdgpu is absent"), std::string::npos) << module.detail;
  EXPECT_NE(module.remedy.find("modprobe amdgpu"), std::string::npos) << module.remedy;
  const AmdgpuCheck topology = check_named(checks, "KFD lists AMD GPUs");
  EXPECT_NE(topology.detail.find("no KFD topology"), std::string::npos) << topology.detail;
  const AmdgpuCheck kfd = check_named(checks, "/dev/kfd is usable");
  EXPECT_EQ(kfd.detail, "/dev/kfd does not exist");
  EXPECT_NE(kfd.remedy.find("--device=/dev/kfd --device=/dev/dri --group-add video"),
            std::string::npos)
      << kfd.remedy;
  const AmdgpuCheck render = check_named(checks, "a /dev/dri render node is usable");
  EXPECT_NE(render.remedy.find("--device=/dev/dri"), std::string::npos) << render.remedy;
}

TEST(AmdgpuProbe, ModuleWithoutVersionFileStillCounts) {
  const std::string root = healthy_tree("amdgpu_in_tree");
  fs::remove(fs::path(root) / "sys/module/amdgpu/version");
  const AmdgpuProbe p = probe_amdgpu(root, member(root));
  EXPECT_TRUE(p.module_loaded);
  EXPECT_EQ(p.module_version, "");
  const AmdgpuCheck c = amdgpu_checks(p)[0];
  EXPECT_TRUE(c.passed);
  EXPECT_NE(c.detail.find("version absent"), std::string::npos) << c.detail;
}

TEST(AmdgpuProbe, TopologyWithOnlyCpuNodesFails) {
  const std::string root = healthy_tree("amdgpu_cpu_only");
  const fs::path nodes = fs::path(root) / "sys/class/kfd/kfd/topology/nodes";
  fs::remove_all(nodes / "1");
  fs::remove_all(nodes / "2");
  fs::create_directories(nodes / "3");  // a node whose properties cannot be read
  const AmdgpuProbe p = probe_amdgpu(root, member(root));
  EXPECT_TRUE(p.kfd_topology);
  EXPECT_TRUE(p.gpus.empty());
  ASSERT_EQ(p.unreadable.size(), 1u);
  EXPECT_EQ(p.unreadable[0], "3/properties");
  const AmdgpuCheck c = check_named(amdgpu_checks(p), "KFD lists AMD GPUs");
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("no GPU node"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("3/properties"), std::string::npos) << c.detail;
  EXPECT_NE(c.remedy.find("dmesg"), std::string::npos) << c.remedy;
}

TEST(AmdgpuProbe, DeviceFilesOutsideTheUsersGroupsFailWithTheGroupRemedy) {
  const std::string root = healthy_tree("amdgpu_refused");
  const AmdgpuProbe p = probe_amdgpu(root, stranger());
  EXPECT_TRUE(p.kfd.exists);
  EXPECT_FALSE(p.kfd.read_write);
  ASSERT_EQ(p.render_nodes.size(), 2u);
  EXPECT_FALSE(p.render_nodes[0].read_write);
  const std::vector<AmdgpuCheck> checks = amdgpu_checks(p);
  EXPECT_TRUE(check_named(checks, "amdgpu kernel driver is loaded").passed);
  EXPECT_TRUE(check_named(checks, "KFD lists AMD GPUs").passed);
  for (const char* name : {"/dev/kfd is usable", "a /dev/dri render node is usable"}) {
    const AmdgpuCheck c = check_named(checks, name);
    EXPECT_FALSE(c.passed) << name;
    EXPECT_NE(c.detail.find("not readable and writable by this user (group " + p.kfd.group + ")"),
              std::string::npos)
        << c.detail;
    EXPECT_NE(c.remedy.find("sudo usermod -aG render,video $USER"), std::string::npos) << c.remedy;
    EXPECT_NE(c.remedy.find("--group-add video"), std::string::npos) << c.remedy;
  }
}

TEST(AmdgpuProbe, AccessFollowsTheModeBits) {
  const std::string root = healthy_tree("amdgpu_modes");
  // Readable but not writable by the group: refused to a member.
  ASSERT_EQ(::chmod((fs::path(root) / "dev/kfd").c_str(), 0640), 0);
  EXPECT_FALSE(probe_amdgpu(root, member(root)).kfd.read_write);
  // World read-write: granted to anyone.
  ASSERT_EQ(::chmod((fs::path(root) / "dev/kfd").c_str(), 0666), 0);
  EXPECT_TRUE(probe_amdgpu(root, stranger()).kfd.read_write);
  // Root is granted whatever the mode.
  ASSERT_EQ(::chmod((fs::path(root) / "dev/kfd").c_str(), 0000), 0);
  EXPECT_TRUE(probe_amdgpu(root, ProcessIdentity{0, {0}}).kfd.read_write);
  EXPECT_FALSE(probe_amdgpu(root, member(root)).kfd.read_write);
}

TEST(AmdgpuProbe, OneUsableRenderNodeIsEnough) {
  const std::string root = healthy_tree("amdgpu_one_render");
  ASSERT_EQ(::chmod((fs::path(root) / "dev/dri/renderD129").c_str(), 0600), 0);
  const AmdgpuCheck c = check_named(amdgpu_checks(probe_amdgpu(root, member(root))),
                                    "a /dev/dri render node is usable");
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.detail, "/dev/dri/renderD128 (not /dev/dri/renderD129)");
}

// The device files `hourglass doctor` takes as a GPU being there: a GPU of any vendor, not the
// control files a driver creates without one.
TEST(GpuDeviceFiles, NamesTheGpuDeviceFilesOfEachVendor) {
  const fs::path none = test::fresh_temp_dir("gpu_files_none");
  write_file(none / "dev/null", "");
  write_file(none / "dev/nvidiactl", "");
  write_file(none / "dev/nvidia-uvm", "");
  write_file(none / "dev/nvidia-caps/nvidia-cap1", "");
  EXPECT_TRUE(gpu_device_files(none.string()).empty());
  EXPECT_TRUE(gpu_device_files((none / "missing").string()).empty());

  const fs::path nvidia = test::fresh_temp_dir("gpu_files_nvidia");
  write_file(nvidia / "dev/nvidiactl", "");
  write_file(nvidia / "dev/nvidia1", "");
  write_file(nvidia / "dev/nvidia0", "");
  EXPECT_EQ(gpu_device_files(nvidia.string()),
            (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia1"}));

  EXPECT_EQ(gpu_device_files(healthy_tree("gpu_files_amd")), std::vector<std::string>{"/dev/kfd"});

  const fs::path wsl = test::fresh_temp_dir("gpu_files_wsl");
  write_file(wsl / "dev/dxg", "");
  EXPECT_EQ(gpu_device_files(wsl.string()), std::vector<std::string>{"/dev/dxg"});
}

}  // namespace
}  // namespace hg::gpu
