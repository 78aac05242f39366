// libFuzzer entry point for the safetensors reader: any byte string must either parse into a
// valid file or be refused with lathe::Error. A crash, a sanitizer report, a hang, a leak or any
// other exception type is a bug. Successful parses also go through checksum verification, which
// parses the "lathe" metadata document, and files that call themselves training checkpoints go
// through the checkpoint's own validation (serialize/checkpoint.h). The seed corpus holds real
// checkpoints written by `lathe train`.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "serialize/checkpoint.h"
#include "serialize/checksum.h"
#include "serialize/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    lathe::serialize::SafetensorsFile f = lathe::serialize::parse_safetensors(data, size, "fuzz-input");
    // A file that parses must describe exactly the bytes it holds.
    size_t total = 0;
    for (const auto& [name, t] : f.tensors) total += t.nbytes();
    if (total > size) __builtin_trap();
    lathe::serialize::verify_checksums(f);
    if (lathe::serialize::TrainingCheckpoint::is_checkpoint(f.metadata))
      lathe::serialize::TrainingCheckpoint::from_file(std::move(f));
  } catch (const lathe::Error&) {
    // refused with a message: the expected outcome for damaged input
  }
  return 0;
}
