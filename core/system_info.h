// Facts about this build and this machine, for `lathe info` and the benchmark's report.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lathe {

// Vector instruction sets the compiler was allowed to use (from its predefined macros), e.g.
// {"SSE4.2", "AVX", "AVX2", "FMA"}. With -march=native these are the host's.
std::vector<std::string> compiled_cpu_features();
std::string compiler_description();  // "g++ 12.2.0"
std::string eigen_version();         // "3.4.0"
int openmp_max_threads();
// The f32 multiply-add rate of this machine's vector units at the thread count in force, in
// GFLOP/s: every thread runs independent chains of vector multiply-adds, nothing else. No kernel
// can beat it; `lathe bench --profile` sets each kernel's rate against it.
double cpu_fma_peak_gflops();
int cpu_count();  // processors online
// Number of CUDA devices: 0 when CUDA is not compiled in or no GPU is present (never throws).
int cuda_device_count();
bool cuda_compiled_in();

// The process's peak resident set size (getrusage), in bytes.
size_t peak_rss_bytes();
// Sets the threads used by lathe's CPU kernels (OpenMP, and Eigen's GEMM through it) for a
// program that picks its own count; n <= 0 leaves the default. (train and bench follow the free
// cores instead: core/thread_governor.h.) Results do not depend on the count.
void set_cpu_threads(int n);

}  // namespace lathe
