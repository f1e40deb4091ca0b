// llmops.serving cuda_toolkit probe: compiled and linked with nvcc for the target architecture;
// run only where a GPU exists. Exit 0 = a kernel ran and its result is right; 2 = no usable GPU.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  int runtime = 0, driver = 0, devices = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cudaError_t err = cudaGetDeviceCount(&devices);
  printf("cuda runtime %d, driver api %d, devices %d\n", runtime, driver, devices);
  if (err != cudaSuccess || devices == 0) {
    printf("no usable GPU: %s\n", cudaGetErrorString(err));
    return 2;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("device 0: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
  const int n = 1 << 20;
  static float hx[1 << 20], hy[1 << 20];
  for (int i = 0; i < n; i++) { hx[i] = 1.0f; hy[i] = 2.0f; }
  float *x, *y;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&y, n * sizeof(float)) != cudaSuccess) {
    printf("allocation failed\n");
    return 1;
  }
  cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice);
  saxpy<<<(n + 255) / 256, 256>>>(n, 3.0f, x, y);
  err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) {
    printf("kernel failed: %s\n", cudaGetErrorString(err));
    return 1;
  }
  int bad = 0;
  for (int i = 0; i < n; i++) bad += (hy[i] != 5.0f);
  printf("saxpy over %d floats: %d wrong\n", n, bad);
  cudaFree(x);
  cudaFree(y);
  return bad ? 1 : 0;
}
