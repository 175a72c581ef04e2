// How many thread-block clusters of each size can be resident at once on this GPU (the long-row
// row kernels use clusters of 4-16 CTAs). Run on the device:
//   nvcc -arch=sm_90a -o /tmp/cluster_occupancy scripts/cluster_occupancy.cu && /tmp/cluster_occupancy
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(int* p) { extern __shared__ int s[]; if (p) p[0] = s[threadIdx.x]; }
int main() {
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
  cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  int threads[] = {256, 512}, smem_kb[] = {64, 96, 160, 192};
  for (int t : threads) for (int kb : smem_kb) for (int c = 1; c <= 16; c *= 2) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(c * 64); cfg.blockDim = dim3(t); cfg.dynamicSmemBytes = kb * 1024;
    cudaLaunchAttribute a; a.id = cudaLaunchAttributeClusterDimension; a.val.clusterDim.x = c; a.val.clusterDim.y = 1; a.val.clusterDim.z = 1;
    cfg.attrs = &a; cfg.numAttrs = 1;
    int n = -1; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
    printf("threads %d smem %3d KB cluster %2d: %3d clusters = %3d CTAs %s\n", t, kb, c, n, n * c, e ? cudaGetErrorString(e) : "");
  }
}
