// Compile-time check of the AMD SMI and ROCm SMI calls that the machine readings open with
// dlopen (src/hourglass/device/amd_gpu_library_calls.h) against the libraries' own headers:
// each declared call has the header's parameter count, and each parameter and result the size
// and kind (integer or enum, pointer, floating) of the header's; the struct fields read through
// bytes are at offset 0 and fit the buffer; the enum values are the header's. Built (a
// compile, nothing to run) where CMake finds the header: <amd_smi/amdsmi.h> (ROCm 6 and later)
// with HG_CHECK_AMD_SMI, <rocm_smi/rocm_smi.h> (Debian's librocm-smi-dev, ROCm) with
// HG_CHECK_ROCM_SMI. A call a header lacks (an older ROCm SMI has no
// rsmi_dev_current_socket_power_get; one declared with other parameters is taken as absent too)
// is left out of the comparison, not failed: the reader treats a missing symbol as a missing
// reading.
#include <cstddef>
#include <type_traits>

#include "hourglass/device/amd_gpu_library_calls.h"

#ifdef HG_CHECK_AMD_SMI
#include <amd_smi/amdsmi.h>
#endif
#ifdef HG_CHECK_ROCM_SMI
#include <rocm_smi/rocm_smi.h>
#endif

namespace {

// Whether a value of type A travels as one of type B: the same type, or both integers or enums
// of one size, both floating of one size, or both pointers to such (void* matches any object
// pointer: the readers pass a buffer where the library takes a struct).
template <typename A, typename B>
constexpr bool same_abi() {
  if constexpr (std::is_same_v<A, B>) {
    return true;
  } else if constexpr ((std::is_integral_v<A> || std::is_enum_v<A>)&&(std::is_integral_v<B> ||
                                                                      std::is_enum_v<B>)) {
    return sizeof(A) == sizeof(B);
  } else if constexpr (std::is_floating_point_v<A> && std::is_floating_point_v<B>) {
    return sizeof(A) == sizeof(B);
  } else if constexpr (std::is_pointer_v<A> && std::is_pointer_v<B>) {
    using PA = std::remove_cv_t<std::remove_pointer_t<A>>;
    using PB = std::remove_cv_t<std::remove_pointer_t<B>>;
    if constexpr (std::is_void_v<PA> || std::is_void_v<PB>)
      return (std::is_void_v<PA> || std::is_object_v<PA>)&&(std::is_void_v<PB> ||
                                                            std::is_object_v<PB>);
    else
      return same_abi<PA, PB>();
  } else {
    return false;
  }
}

template <typename Header, typename Ours>
struct SameCall : std::false_type {};
template <typename RH, typename... PH, typename RO, typename... PO>
struct SameCall<RH (*)(PH...), RO (*)(PO...)> {
  static constexpr bool value =
      sizeof...(PH) == sizeof...(PO) && same_abi<RH, RO>() && (same_abi<PH, PO>() && ...);
};
template <typename RH, typename... PH, typename RO, typename... PO>
struct SameCall<RH (*)(PH...) noexcept, RO (*)(PO...)> : SameCall<RH (*)(PH...), RO (*)(PO...)> {};

// The header's declaration of a call when it has one; Absent (left out) when it does not: the
// fallback below takes any arguments and loses overload resolution to a real declaration.
struct Absent {};
namespace fallback {
template <typename... Args>
Absent rsmi_dev_current_socket_power_get(Args...) {
  return {};
}
}  // namespace fallback

}  // namespace

#define HG_EXPECT_CALL(name, ours)                        \
  static_assert(SameCall<decltype(&::name), ours>::value, \
                #name " differs from " #ours " (amd_gpu_library_calls.h)")

#ifdef HG_CHECK_AMD_SMI
namespace amd = hg::amd_smi;
HG_EXPECT_CALL(amdsmi_init, amd::Init);
HG_EXPECT_CALL(amdsmi_shut_down, amd::ShutDown);
HG_EXPECT_CALL(amdsmi_get_socket_handles, amd::SocketHandles);
HG_EXPECT_CALL(amdsmi_get_processor_handles, amd::ProcessorHandles);
HG_EXPECT_CALL(amdsmi_get_processor_type, amd::ProcessorType);
HG_EXPECT_CALL(amdsmi_get_gpu_asic_info, amd::AsicInfo);
HG_EXPECT_CALL(amdsmi_get_gpu_activity, amd::Activity);
HG_EXPECT_CALL(amdsmi_get_gpu_memory_total, amd::Memory);
HG_EXPECT_CALL(amdsmi_get_gpu_memory_usage, amd::Memory);
HG_EXPECT_CALL(amdsmi_get_energy_count, amd::EnergyCount);
HG_EXPECT_CALL(amdsmi_get_temp_metric, amd::Temperature);
HG_EXPECT_CALL(amdsmi_get_clock_info, amd::ClockInfo);
static_assert(amd::kSuccess == AMDSMI_STATUS_SUCCESS);
static_assert(amd::kInitAmdGpus == AMDSMI_INIT_AMD_GPUS);
static_assert(amd::kProcessorAmdGpu == AMDSMI_PROCESSOR_TYPE_AMD_GPU);
static_assert(amd::kMemoryVram == AMDSMI_MEM_TYPE_VRAM);
static_assert(amd::kTemperatureEdge == AMDSMI_TEMPERATURE_TYPE_EDGE);
static_assert(amd::kTemperatureCurrent == AMDSMI_TEMP_CURRENT);
static_assert(amd::kClockGfx == AMDSMI_CLK_TYPE_GFX);
static_assert(amd::kClockMemory == AMDSMI_CLK_TYPE_MEM);
static_assert(offsetof(amdsmi_asic_info_t, market_name) == 0);
static_assert(sizeof(amdsmi_asic_info_t::market_name) <= amd::kNameBytes);
static_assert(sizeof(amdsmi_asic_info_t) <= amd::kStructBytes);
static_assert(offsetof(amdsmi_engine_usage_t, gfx_activity) == 0);
static_assert(std::is_same_v<decltype(amdsmi_engine_usage_t::gfx_activity), uint32_t>);
static_assert(sizeof(amdsmi_engine_usage_t) <= amd::kStructBytes);
static_assert(offsetof(amdsmi_clk_info_t, clk) == 0);
static_assert(std::is_same_v<decltype(amdsmi_clk_info_t::clk), uint32_t>);
static_assert(sizeof(amdsmi_clk_info_t) <= amd::kStructBytes);
#endif

#ifdef HG_CHECK_ROCM_SMI
namespace rocm = hg::rocm_smi;
HG_EXPECT_CALL(rsmi_init, rocm::Init);
HG_EXPECT_CALL(rsmi_shut_down, rocm::ShutDown);
HG_EXPECT_CALL(rsmi_num_monitor_devices, rocm::DeviceCount);
HG_EXPECT_CALL(rsmi_dev_name_get, rocm::Name);
HG_EXPECT_CALL(rsmi_dev_busy_percent_get, rocm::Busy);
HG_EXPECT_CALL(rsmi_dev_memory_total_get, rocm::Memory);
HG_EXPECT_CALL(rsmi_dev_memory_usage_get, rocm::Memory);
HG_EXPECT_CALL(rsmi_dev_power_ave_get, rocm::PowerAverage);
HG_EXPECT_CALL(rsmi_dev_temp_metric_get, rocm::Temperature);
static_assert(rocm::kSuccess == RSMI_STATUS_SUCCESS);
static_assert(rocm::kMemoryVram == RSMI_MEM_TYPE_VRAM);
static_assert(rocm::kTemperatureEdge == RSMI_TEMP_TYPE_EDGE);
static_assert(rocm::kTemperatureCurrent == RSMI_TEMP_CURRENT);
namespace rocm_smi_optional {
using namespace fallback;
// The header's declaration when it takes (uint32_t, uint64_t*); else the fallback (Absent).
using SocketPowerResult =
    decltype(rsmi_dev_current_socket_power_get(uint32_t{}, static_cast<uint64_t*>(nullptr)));
constexpr auto socket_power =
    static_cast<SocketPowerResult (*)(uint32_t, uint64_t*)>(&rsmi_dev_current_socket_power_get);
static_assert(std::is_same_v<SocketPowerResult, Absent> ||
                  SameCall<std::remove_cv_t<decltype(socket_power)>, rocm::SocketPower>::value,
              "rsmi_dev_current_socket_power_get differs from rocm_smi::SocketPower");
}  // namespace rocm_smi_optional
#endif
