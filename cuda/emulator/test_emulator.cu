// The emulator's own tests: the CUDA semantics it models, on small kernels whose answers are
// known (shuffles, ballots, barriers, shared memory, cp.async, the launch's arguments), and the
// faults it must stop a program for, with a message (a race in shared memory, launch limits,
// shared memory past the limits or past its end, a lane that exited, a deadlock), each run in a
// child process. Rewritten and compiled
// like cuda/'s sources (README.md); ctest lists each case as "emu: emulator: ...".
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/mma.cuh"  // cp.async, through the shim

namespace {

// Device memory holding `n` values of T, copied back by host().
template <class T>
struct DeviceArray {
  T* p = nullptr;
  size_t n;
  explicit DeviceArray(size_t count) : n(count) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)) == cudaSuccess);
  }
  ~DeviceArray() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

// Runs `f` in a child process; returns what it wrote to stderr, and whether it ended normally.
struct Outcome {
  bool exited_normally;
  std::string stderr_text;
};
Outcome in_child(const std::function<void()>& f) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    f();
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0, text};
}

// Runs `launch` in a child process, which must stop the program with every one of `parts` in what
// it wrote to stderr.
void check_stops_with(const std::function<void()>& launch, std::initializer_list<std::string> parts) {
  const Outcome r = in_child(launch);
  INFO(r.stderr_text);
  CHECK_FALSE(r.exited_normally);
  for (const std::string& part : parts) CHECK_MESSAGE(r.stderr_text.find(part) != std::string::npos, part);
}

// ---- kernels ----

__global__ void shuffles(int* out) {
  const int lane = int(threadIdx.x % 32);
  int* o = out + threadIdx.x * 5;
  o[0] = __shfl_sync(0xffffffffu, lane * 10, 3);       // every lane reads lane 3
  o[1] = __shfl_up_sync(0xffffffffu, lane, 2);         // lanes 0, 1 keep their own
  o[2] = __shfl_down_sync(0xffffffffu, lane, 5, 16);   // within halves of 16
  o[3] = __shfl_xor_sync(0xffffffffu, lane, 1);        // neighbours swap
  o[4] = int(__ballot_sync(0xffffffffu, lane % 3 == 0));
}

// A block's sum through dynamic shared memory and a barrier per level.
__global__ void block_sums(const float* x, float* out) {
  extern __shared__ float partial[];
  const unsigned t = threadIdx.x;
  partial[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

// The same without the barriers: a thread reads partial sums their writers have not reached.
__global__ void block_sums_unsynchronised(const float* x, float* out) {
  __shared__ float partial[64];
  const unsigned t = threadIdx.x;
  partial[t] = x[blockIdx.x * blockDim.x + t];
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2)
    if (t < half) partial[t] += partial[t + half];
  if (t == 0) out[blockIdx.x] = partial[0];
}
constexpr int kUnsynchronisedStoreLine = __LINE__ - 5;  // partial[t] = ...

// Each thread writes its slot, the warps exchange through a shuffle (which meets a warp's lanes
// but orders no memory), and each thread reads a slot of the other warp: without __syncthreads
// the read races.
template <bool kSynchronised>
__global__ void across_warps(float* out) {
  __shared__ float slot[64];
  const unsigned t = threadIdx.x;
  slot[t] = float(t);
  const int neighbour = __shfl_xor_sync(0xffffffffu, int(t), 1);
  if (kSynchronised) __syncthreads();
  out[blockIdx.x * 64 + t] = slot[(t + 32) % 64] + float(neighbour - int(t ^ 1u));
}

// A warp's lanes exchange through shared memory, ordered by __syncwarp, or by nothing but a
// shuffle.
template <bool kSyncwarp>
__global__ void lanes_exchange(float* out) {
  __shared__ float slot[32];
  const unsigned lane = threadIdx.x;
  slot[lane] = float(lane);
  if (kSyncwarp) __syncwarp();
  else (void)__shfl_xor_sync(0xffffffffu, int(lane), 1);
  out[lane] = slot[lane ^ 1u];
}

// Each thread copies one value into its slot with cp.async, waits for its copy and reads a slot of
// the other warp: a copy lands at its thread's wait and is another thread's to read only after the
// barrier that follows.
template <bool kBarrier>
__global__ void async_copies(const float* src, float* out) {
  __shared__ __align__(16) float slot[64];
  const unsigned t = threadIdx.x;
  lathe::cuda::cp_async_4(&slot[t], &src[t], true);
  lathe::cuda::cp_async_commit();
  lathe::cuda::cp_async_wait<0>();
  if (kBarrier) __syncthreads();
  out[t] = slot[(t + 32) % 64];
}

// A stage loaded, read and refilled twice: without the barrier after the reads, one warp's copies
// for the next round overwrite what the other warp has still to read.
template <bool kBarrier>
__global__ void refilled_stage(const float* src, float* out) {
  __shared__ __align__(16) float stage[64];
  const unsigned t = threadIdx.x;
  float sum = 0;
  for (int round = 0; round < 2; ++round) {
    lathe::cuda::cp_async_4(&stage[t], &src[round * 64 + t], true);
    lathe::cuda::cp_async_commit();
    lathe::cuda::cp_async_wait<0>();
    __syncthreads();
    sum += stage[(t + 32) % 64];
    if (kBarrier) __syncthreads();
  }
  out[t] = sum;
}

// Half the slots written: the other half reads the fill of a new block's shared memory, NaN.
__global__ void reads_unwritten(float* out) {
  __shared__ float slot[64];
  if (threadIdx.x < 32) slot[threadIdx.x] = 1.0f;
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = slot[threadIdx.x];
}

// Arguments are evaluated once per launch, as CUDA copies them.
__global__ void store_argument(int value, int* out) { out[threadIdx.x] = value; }

__global__ void uses_dynamic_shared(float* out) {
  extern __shared__ __align__(16) unsigned char bytes[];
  bytes[threadIdx.x] = 1;
  __syncthreads();
  out[threadIdx.x] = bytes[(threadIdx.x + 1) % blockDim.x];
}

__global__ void bf16_round_trip(const float* x, float* out) {
  const __nv_bfloat16 b = __float2bfloat16(x[threadIdx.x]);
  out[threadIdx.x] = __bfloat162float(b + b);
}

// What new kernels use, in one: __launch_bounds__, __ldg, vector loads, float atomicAdd, the half
// and bf16 conversions, CUDA's min/max and the math functions (host functions here, as there).
__global__ void __launch_bounds__(64) vector_intrinsics(const float4* __restrict__ x, float* sum, float* out) {
  const unsigned t = threadIdx.x;
  const float4 v = __ldg(&x[t]);
  atomicAdd(sum, v.x + v.y + v.z + v.w);
  const float h = __half2float(__float2half(v.x)), b = __bfloat162float(__float2bfloat16(v.y));
  out[t] = h + b + fmaxf(v.z, 0.0f) + exp2f(v.w) + __expf(0.0f) + float(min(t, 3u)) + float(max(int(t), 60));
}

__global__ void shuffle_after_exit(int* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void mismatched_barriers() {
  if (threadIdx.x == 0) __syncwarp();
  else __syncthreads();
}

__global__ void past_dynamic_shared(float* out) {
  extern __shared__ float s[];
  s[threadIdx.x * 1024] = 1.0f;  // 4 KB apart: the second thread is past a 64-byte allocation's page
  out[0] = s[0];
}

}  // namespace

TEST_CASE("emulator: shuffles and ballots follow CUDA's lane rules") {
  DeviceArray<int> out(64 * 5);
  shuffles<<<1, 64>>>(out.p);
  const std::vector<int> h = out.host();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    INFO("thread ", t);
    CHECK(h[size_t(t) * 5 + 0] == 30);
    CHECK(h[size_t(t) * 5 + 1] == (lane >= 2 ? lane - 2 : lane));
    CHECK(h[size_t(t) * 5 + 2] == (lane % 16 + 5 < 16 ? lane + 5 : lane));
    CHECK(h[size_t(t) * 5 + 3] == (lane ^ 1));
    CHECK(unsigned(h[size_t(t) * 5 + 4]) == 0x49249249u);  // lanes 0, 3, 6, ..., 30
  }
}

TEST_CASE("emulator: dynamic shared memory and barriers sum each block") {
  const int blocks = 3, threads = 64;
  std::vector<float> x(blocks * threads);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7);
  DeviceArray<float> dx(x.size()), dout(blocks);
  cudaMemcpy(dx.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  block_sums<<<blocks, threads, threads * sizeof(float)>>>(dx.p, dout.p);
  const std::vector<float> h = dout.host();
  for (int b = 0; b < blocks; ++b) {
    float want = 0;
    for (int t = 0; t < threads; ++t) want += x[size_t(b * threads + t)];
    CHECK(h[size_t(b)] == want);
  }
}

TEST_CASE("emulator: a missing barrier is a race, reported with the kernel, both threads, the byte and the line") {
  const int blocks = 2, threads = 64;
  std::vector<float> x(blocks * threads, 1.0f);
  DeviceArray<float> dx(x.size()), dout(blocks);
  cudaMemcpy(dx.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  // Thread 0 runs first and reads partial[1] in its loop; thread 1 then stores its value there.
  check_stops_with([&] { block_sums_unsynchronised<<<blocks, threads>>>(dx.p, dout.p); },
                   {"emu: block_sums_unsynchronised: a race in shared memory: thread (1, 0, 0) writes a "
                    "__shared__ array's byte at 0x",
                    "which thread (0, 0, 0) read with no barrier between them",
                    "test_emulator.cu:" + std::to_string(kUnsynchronisedStoreLine) + " (block (0, 0, 0)"});
}

TEST_CASE("emulator: __syncthreads orders a block's threads and __syncwarp a warp's lanes, a shuffle neither") {
  DeviceArray<float> dout(2 * 64);
  across_warps<true><<<2, 64>>>(dout.p);
  const std::vector<float> synchronised = dout.host();
  for (int i = 0; i < 2 * 64; ++i) CHECK(synchronised[size_t(i)] == float((i % 64 + 32) % 64));
  // Warp 0 runs first in block 0 and reads slots of warp 1 before their writers ran; warp 1 then
  // writes what it read.
  check_stops_with([&] { across_warps<false><<<2, 64>>>(dout.p); },
                   {"across_warps<false>: a race in shared memory: thread (32, 0, 0) writes",
                    "which thread (0, 0, 0) read"});

  lanes_exchange<true><<<1, 32>>>(dout.p);
  const std::vector<float> lanes = dout.host();
  for (int l = 0; l < 32; ++l) CHECK(lanes[size_t(l)] == float(l ^ 1));
  // Lane 0 reads lane 1's slot, written before the shuffle that lane 0 waited at.
  check_stops_with([&] { lanes_exchange<false><<<1, 32>>>(dout.p); },
                   {"lanes_exchange<false>: a race in shared memory: thread (0, 0, 0) reads",
                    "which thread (1, 0, 0) wrote"});
}

TEST_CASE("emulator: cp.async writes from its issue to its wait, and another thread reads it after a barrier") {
  std::vector<float> src(128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(i);
  DeviceArray<float> dsrc(src.size()), dout(64);
  cudaMemcpy(dsrc.p, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice);
  async_copies<true><<<1, 64>>>(dsrc.p, dout.p);
  std::vector<float> h = dout.host();
  for (int t = 0; t < 64; ++t) CHECK(h[size_t(t)] == float((t + 32) % 64));
  check_stops_with([&] { async_copies<false><<<1, 64>>>(dsrc.p, dout.p); },
                   {"async_copies<false>: a race in shared memory:"});

  refilled_stage<true><<<1, 64>>>(dsrc.p, dout.p);
  h = dout.host();
  for (int t = 0; t < 64; ++t) CHECK(h[size_t(t)] == float((t + 32) % 64 + 64 + (t + 32) % 64));
  // Warp 0 runs on to its next round's copy; warp 1 then reads the slot being refilled.
  check_stops_with([&] { refilled_stage<false><<<1, 64>>>(dsrc.p, dout.p); },
                   {"refilled_stage<false>: a race in shared memory: thread (32, 0, 0) reads",
                    "which thread (0, 0, 0) wrote"});
}

TEST_CASE("emulator: shared memory that no thread of the block wrote reads as NaN") {
  DeviceArray<float> dout(2 * 64);
  reads_unwritten<<<2, 64>>>(dout.p);
  const std::vector<float> h = dout.host();
  for (int i = 0; i < 2 * 64; ++i) {
    INFO("element ", i);
    if (i % 64 < 32) CHECK(h[size_t(i)] == 1.0f);
    else CHECK(std::isnan(h[size_t(i)]));
  }
}

TEST_CASE("emulator: the race detector's records: reads never race, a write races with any unordered access") {
  std::vector<unsigned char> memory(8);
  emu::race::Detector d;
  d.watch(memory.data(), memory.size());
  CHECK(d.watches(d.offset_of(&memory[7])));
  CHECK_FALSE(d.watches(d.offset_of(memory.data() + 8)));
  d.block_started(3);
  emu::race::Conflict c{};
  auto read = [&](size_t byte, unsigned tid) { return d.access(byte, 1, tid, false, &c); };
  auto write = [&](size_t byte, unsigned tid) { return d.access(byte, 1, tid, true, &c); };
  // Readers of three warps, the last two of warp 0: a write by warp 0 races with warp 1's read.
  CHECK(read(0, 40));
  CHECK(read(0, 70));
  CHECK(read(0, 1));
  CHECK(read(0, 2));
  CHECK_FALSE(write(0, 2));
  CHECK(c.other / 32 != 0);
  CHECK_FALSE(c.other_wrote);
  // A thread's own accesses are in order; another lane's read after a write races until __syncwarp.
  CHECK(write(1, 5));
  CHECK(read(1, 5));
  CHECK(write(1, 5));
  CHECK_FALSE(read(1, 6));
  CHECK(c.other == 5);
  CHECK(c.other_wrote);
  d.warp_barrier(0);
  CHECK(read(1, 6));
  CHECK_FALSE(read(1, 33));  // __syncwarp orders warp 0's lanes only
  CHECK(c.other == 5);
  // Two lanes read, then one of them writes: it races with the other.
  CHECK(read(2, 7));
  CHECK(read(2, 8));
  CHECK_FALSE(write(2, 8));
  CHECK(c.other == 7);
  // A barrier orders everything before it against everything after.
  d.block_barrier();
  CHECK(write(0, 2));
  CHECK(write(1, 64));
  CHECK(write(2, 8));
  // A failed access leaves the records as they were: thread 9's read is still the only one.
  CHECK(read(3, 9));
  CHECK_FALSE(write(3, 40));
  CHECK_FALSE(write(3, 41));
  CHECK(c.other == 9);
}

TEST_CASE("emulator: a launch's arguments are evaluated once") {
  int calls = 0;
  auto next = [&] { return ++calls; };
  DeviceArray<int> out(96);
  store_argument<<<1, 96>>>(next(), out.p);
  CHECK(calls == 1);
  for (int v : out.host()) CHECK(v == 1);
}

TEST_CASE("emulator: bf16 arithmetic rounds through f32 to nearest even") {
  const std::vector<float> x = {1.0f, 1.00390625f, 3.14159f, -2.5f};
  DeviceArray<float> dx(4), dout(4);
  cudaMemcpy(dx.p, x.data(), 4 * sizeof(float), cudaMemcpyHostToDevice);
  bf16_round_trip<<<1, 4>>>(dx.p, dout.p);
  const std::vector<float> h = dout.host();
  CHECK(h[0] == 2.0f);
  CHECK(h[1] == 2.0f);        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even (1)
  CHECK(h[2] == 6.28125f);    // 3.14159 rounds to 3.140625
  CHECK(h[3] == -5.0f);
}

TEST_CASE("emulator: __ldg, vector types, float atomicAdd, 16-bit conversions and math in a kernel") {
  constexpr int n = 64;
  std::vector<float> x(4 * n);
  for (int i = 0; i < 4 * n; ++i) x[i] = float(i % 7) - 2.0f;  // small integers: every step exact
  DeviceArray<float4> dx(n);
  DeviceArray<float> sum(1), out(n);
  cudaMemcpy(dx.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(sum.p, 0, sizeof(float));
  CHECK(sizeof(float4) == 16);
  CHECK(alignof(float4) == 16);
  vector_intrinsics<<<1, n>>>(dx.p, sum.p, out.p);
  float want_sum = 0;
  for (float v : x) want_sum += v;
  CHECK(sum.host()[0] == want_sum);
  const std::vector<float> got = out.host();
  for (int t = 0; t < n; ++t) {
    const float* v = &x[4 * t];
    const float want = v[0] + v[1] + std::max(v[2], 0.0f) + std::exp2(v[3]) + 1.0f + float(std::min(t, 3)) +
                       float(std::max(t, 60));
    CHECK_MESSAGE(got[t] == want, "thread ", t);
  }
}

TEST_CASE("emulator: over 48 KB of dynamic shared memory needs cudaFuncSetAttribute, over 227 KB fails") {
  DeviceArray<float> out(128);
  check_stops_with([&] { uses_dynamic_shared<<<1, 128, 64 * 1024>>>(out.p); },
                   {"uses_dynamic_shared: 65536 bytes of dynamic shared memory, but the kernel allows 49152",
                    "cudaFuncSetAttribute(uses_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize"});
  const Outcome with = in_child([&] {
    if (cudaFuncSetAttribute(uses_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) != cudaSuccess)
      _exit(3);
    uses_dynamic_shared<<<1, 128, 64 * 1024>>>(out.p);
  });
  CHECK_MESSAGE(with.exited_normally, with.stderr_text);
  check_stops_with(
      [&] {
        cudaFuncSetAttribute(uses_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
        uses_dynamic_shared<<<1, 128, 227 * 1024 + 1>>>(out.p);
      },
      {"232449 bytes of dynamic shared memory: an H100 has at most 232448 (227 KB) per block"});
  CHECK(cudaFuncSetAttribute(uses_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) ==
        cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

TEST_CASE("emulator: launch shapes past an H100's limits stop the program") {
  DeviceArray<float> out(2048);
  check_stops_with([&] { uses_dynamic_shared<<<1, 1025, 2048>>>(out.p); },
                   {"block (1025, 1, 1): at most 1024 threads"});
  check_stops_with([&] { uses_dynamic_shared<<<dim3(1, 65536), 32, 64>>>(out.p); }, {"grid (1, 65536, 1)"});
}

TEST_CASE("emulator: a shuffle whose mask names a lane that exited stops the program") {
  DeviceArray<int> out(32);
  check_stops_with([&] { shuffle_after_exit<<<1, 32>>>(out.p); },
                   {"shuffle_after_exit: in block (0, 0, 0), warp 0: a warp-synchronous call",
                    "names lane 5 in its mask 0xffffffff, but that lane has exited"});
}

TEST_CASE("emulator: threads waiting at barriers that cannot all complete are a deadlock") {
  check_stops_with([] { mismatched_barriers<<<1, 64>>>(); }, {"mismatched_barriers: deadlock: in block (0, 0, 0)"});
}

TEST_CASE("emulator: an access past the launch's dynamic shared memory faults with the kernel named") {
  DeviceArray<float> out(1);
  check_stops_with([&] { past_dynamic_shared<<<1, 2, 64>>>(out.p); },
                   {"emu: past_dynamic_shared: segmentation fault in block (0, 0, 0), thread (1, 0, 0)"});
}
