#!/usr/bin/env bash
# Builds lathe and runs every test: the Release suite (with the CUDA backend compiled whenever the
# toolkit is found; GPU tests skip visibly without a GPU, and run on the CPU through the CUDA
# emulator as the ctest tests "emu:...", cuda/emulator/README.md), lathe installed and built into
# another project through find_package (tools/check_package.sh), the same suite under
# AddressSanitizer and UndefinedBehaviorSanitizer (CPU only), and the safetensors fuzzer for a
# bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
# GPT-2's vocabulary for the tokenizer tests (they fail, saying so, without it).
bash tools/fetch_gpt2_vocab.sh
# llama.cpp (node-llama-cpp's prebuilt CPU binary) for the GGUF tests; they skip, saying why, without it.
bash tools/fetch_llama_cpp.sh
export PATH="$PATH:/usr/local/cuda/bin"
jobs=$(nproc)
start=$SECONDS
# Each stage says when it starts, counted from the start, so that a slow run shows where it went.
stage() { echo "== $1 (at $((SECONDS - start)) s)"; }

# Both builds here are unity builds (CMake's CMAKE_UNITY_BUILD) with one batch per library
# (CMAKE_UNITY_BUILD_BATCH_SIZE=0): each library's files compile as one, so the standard library,
# Eigen and JSON headers that nearly every file includes are parsed, and their inline code compiled,
# once per library instead of once per file: 171 s instead of 470 s for the libraries and program
# that tools/main.sh builds the same way (docs/benchmarks.md), on every clean CI clone. The fuzzer's build
# does the same (tools/run_fuzzer.sh); a developer's default build compiles each file alone, and the
# test suites always do (tests/CMakeLists.txt). A name that two files of one target both
# keep to themselves (an anonymous namespace's) could collide in a batch, or worse, overload each
# other; tools/check_unity_names.py (a ctest test) keeps such names distinct.
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0)

# A collision would only show as a compile error deep in a batch; say it by name first.
python3 tools/check_unity_names.py

stage "release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${unity[@]}" >/dev/null
cmake --build build -j "$jobs"
stage "release tests"
(cd build && ctest --output-on-failure -j "$jobs")

stage "the installed package, used by another project (tests/consumer/)"
bash tools/check_package.sh build

stage "sanitizer build (address, undefined; CPU only)"
# Built for AVX2 where the machine has it, not for the machine itself: f32 products then run lathe's
# own kernel (core/cpu/matmul.cpp takes it in AVX2 and AVX-512 builds) on its 8-float vectors, so the
# sanitizers check that path, while the Release suite checks the AVX-512 one.
asan_flags="-O1"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then asan_flags="-O1 -mavx2 -mfma"; fi
# Line tables (-g1) are all the sanitizers' reports need (file and line in each frame); full debug
# information made each object 2.5x larger and took 30% more compile time.
# No redzones around globals (asan-globals=0): GCC's ASan pads and registers every global, UBSan's
# own per-check records included, which made 62 MB of the sanitized lathe's data (nn/gpt.cpp's
# object: 1,009 KB of data with them, 234 KB without), paid at each of the ~1,600 process starts
# (registration, page faults) and exits (the leak check scans it). Every UBSan check stays, `bounds`
# among them (an index past a fixed-size array, globals included); heap and stack keep their
# redzones; the fuzzer's clang build keeps redzones around the reader's globals.
asan_flags="$asan_flags --param=asan-globals=0"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLATHE_CUDA=OFF -DLATHE_NATIVE=OFF "${unity[@]}" \
  -DLATHE_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS="$asan_flags" -DCMAKE_CXX_FLAGS_DEBUG=-g1 >/dev/null
cmake --build build-asan -j "$jobs" --target lathe_tests
stage "sanitizer tests"
# Some tests run whole in the Release suite only, where running them again here would check the
# same code for its slowest minutes:
#   - the GGUF checks against llama.cpp: here the exporter runs under the sanitizers for `tiny` with
#     its own byte and BPE tokenizers and for tiny's chat, not again for every model (15 runs of
#     training and llama.cpp at a third of the speed), nor with GPT-2's tokenizer (the BPE export's
#     code with a table of 50,257 entries; training on that vocabulary took 100 s here);
#   - tutorial chapter 10 (700 training steps, past its 120 s under the sanitizers): the fine-tuning
#     and the chat it shows run here in the chat: cases and gguf.llama_cpp.chat_tiny_bytes;
#   - the kill at every write of a checkpoint save and of a fresh run (fault_kill.checkpoint and
#     .fresh_run, 100 s and 66 s here): the kills of tokenize, the conversions and the races run
#     here, through the same writer and the same rereads of what a kill left;
#   - lathe eval's scores against PyTorch's (eval.torch_scores, where PyTorch is installed: its
#     60 steps of training took 228 s here, near its 300 s timeout, and past it on a busy machine):
#     the command runs here in the eval: cases.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$jobs" \
    -E '^(gguf\.llama_cpp\.((chat_)?(small|speedrun|llama|qwen3)_|tiny_gpt2$)|tutorial\.ch10_chat$|fault_kill\.(checkpoint|fresh_run)$|eval\.torch_scores$)')

if [[ -x tools/run_fuzzer.sh ]]; then
  stage "fuzzing the safetensors reader"
  # 30 s on each core (a fuzzing process per core): the minute of one process it was, without
  # leaving the other core idle.
  bash tools/run_fuzzer.sh "${LATHE_FUZZ_SECONDS:-30}"
fi
echo "== all tests passed in $((SECONDS - start)) s"
