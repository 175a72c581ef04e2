#include "common/launch.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <tuple>
#include <map>
#include <utility>
#include <vector>

#include "common/pdl.h"

namespace quack::detail {

namespace {

// No CUDA driver or no device: cudaErrorInsufficientDriver (what cudart reports when there is
// no driver at all), cudaErrorNoDevice, cudaErrorStubLibrary.
bool is_no_gpu_error(cudaError_t err) {
  return err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice ||
         err == cudaErrorStubLibrary;
}

}  // namespace

void check_cuda(cudaError_t err, const char* where, const char* call) {
  if (err == cudaSuccess) return;
  // Without a driver cudart reports "CUDA driver version is insufficient for CUDA runtime
  // version", which sends users after a driver upgrade on machines that have no GPU at all.
  if (is_no_gpu_error(err))
    throw CudaError(std::string(where) + ": no CUDA driver/GPU (" + call + " returned " +
                    cudaGetErrorName(err) + ")");
  throw CudaError(std::string(where) + ": " + call + " failed: " + cudaGetErrorName(err) +
                  " (" + cudaGetErrorString(err) + ")");
}

// cudaSetDevice even when `device` is already current: it makes the device's primary context
// current on this thread. A thread that has made no runtime call yet (PyTorch's autograd worker,
// any new std::thread) reports device 0 from cudaGetDevice without a current context, and the
// driver calls of the GEMM host code (cuTensorMapEncodeTiled, through CuTe's make_tma_copy) then
// fail — on the H200 CuTe prints "TMA Desc Addr" and the process dies with SIGSEGV (e.g. in
// the Linear backward). cudaSetDevice costs well under a microsecond.
DeviceGuard::DeviceGuard(int device, const char* fn) {
  int cur = -1;
  check_cuda(cudaGetDevice(&cur), fn, "cudaGetDevice");
  if (const cudaError_t err = cudaSetDevice(device); err == cudaErrorInvalidDevice) {
    // A tensor's device index that no device of this process has (the arguments' checks pass
    // any index ≥ 0: host-side tests stand in devices a machine may not have).
    cudaGetLastError();  // not left for the next launch check to report
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), fn, "cudaGetDeviceCount");
    throw InvalidArgument(std::string(fn) + ": the tensors are on cuda:" + std::to_string(device) +
                          ", expected a device below the " + std::to_string(count) +
                          " this process sees");
  } else {
    check_cuda(err, fn, "cudaSetDevice");
  }
  if (cur != device) previous_ = cur;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

int sm_count(int device) {
  static std::mutex mu;
  static std::map<int, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  int n = 0;
  check_cuda(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "sm_count",
             "cudaDeviceGetAttribute");
  cache[device] = n;
  return n;
}

// Function attributes are per device and per kernel. The dynamic shared memory limit only
// grows (a smaller later value must not shrink it under an earlier, larger launch), and
// kernels that stage rows in shared memory ask for the largest carveout: persistent grids are
// sized by the occupancy calculator, and a smaller carveout at launch would leave part of the
// grid waiting for a second wave.
static void prepare_kernel(const void* kernel, size_t smem, int cluster_n, const char* where) {
  struct State {
    size_t smem = 48 * 1024;
    bool carveout = false;
    bool non_portable = false;
  };
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, State> states;
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), where, "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mu);
  State& st = states[{dev, kernel}];
  if (smem > st.smem) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               where, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    st.smem = smem;
  }
  if (smem > 0 && !st.carveout) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared),
               where, "cudaFuncSetAttribute(PreferredSharedMemoryCarveout)");
    st.carveout = true;
  }
  if (cluster_n > 8 && !st.non_portable) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
               where, "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)");
    st.non_portable = true;
  }
}

// (cluster_n, 1, 1) clusters on cfg; attr must outlive cfg's use.
static void set_cluster(cudaLaunchConfig_t& cfg, cudaLaunchAttribute& attr, int cluster_n) {
  if (cluster_n <= 1) return;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster_n;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
}

// launch_kernel's body; programmatic: launch_kernel_dependent's attribute (common/pdl.h).
static void launch_with(const void* kernel, void** args, int64_t grid, int block, size_t smem,
                        int cluster_n, cudaStream_t stream, const char* where, bool programmatic) {
  prepare_kernel(kernel, smem, cluster_n, where);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid), 1, 1);
  cfg.blockDim = dim3(block, 1, 1);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2];
  set_cluster(cfg, attrs[0], cluster_n);
  if (programmatic) {
    cudaLaunchAttribute& a = attrs[cfg.numAttrs];
    a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attrs;
    cfg.numAttrs += 1;
  }
  check_cuda(cudaLaunchKernelExC(&cfg, kernel, args), where, "cudaLaunchKernelExC");
  check_cuda(cudaGetLastError(), where, "kernel launch");
}

void launch_kernel(const void* kernel, void** args, int64_t grid, int block, size_t smem,
                   int cluster_n, cudaStream_t stream, const char* where) {
  launch_with(kernel, args, grid, block, smem, cluster_n, stream, where, false);
}

bool pdl_enabled() {
  const char* e = std::getenv("QUACK_PDL");  // ~0.1 µs against the launch's microseconds
  return e == nullptr || std::strcmp(e, "0") != 0;
}

void launch_kernel_dependent(const void* kernel, void** args, int64_t grid, int block,
                             size_t smem, cudaStream_t stream, const char* where) {
  launch_with(kernel, args, grid, block, smem, 1, stream, where, pdl_enabled());
}

int64_t max_resident(const void* kernel, int block, size_t smem, int cluster_n, int device,
                     const char* where) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, size_t, int, int>, int64_t> cache;
  auto key = std::make_tuple(kernel, block, smem, cluster_n, device);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  DeviceGuard guard(device, where);
  prepare_kernel(kernel, smem, cluster_n, where);
  int64_t n = 0;
  if (cluster_n == 1) {
    int per_sm = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, smem),
               where, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    n = static_cast<int64_t>(per_sm) * sm_count(device);
  } else {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(cluster_n, 1, 1);
    cfg.blockDim = dim3(block, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr;
    set_cluster(cfg, attr, cluster_n);
    int clusters = 0;
    check_cuda(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg), where,
               "cudaOccupancyMaxActiveClusters");
    n = clusters;
  }
  if (n < 1) n = 1;
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = n;
  return n;
}

}  // namespace quack::detail
