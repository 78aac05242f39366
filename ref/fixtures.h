// `lathe ref --write-fixtures DIR`: a pack of small reference cases with lathe's answers, for
// other implementations to test against without Python or PyTorch (docs/reference-cases.md).
//
// DIR gets <name>.case.safetensors and <name>.expected.safetensors for every case, manifest.json
// (each case's kind, what it covers and the tolerance to compare at) and README.md. The cases: every
// op of the "op" kind in f32, f64, bf16 and f16; a GPT forward and backward; a few training steps
// with each optimizer (one with explicit param_groups); and a run cut in two at a checkpoint,
// whose second half continues from the first half's weights and optimizer state.
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"

namespace lathe::ref {

struct FixturesSummary {
  int64_t cases = 0;
};

// Computes every case on `device` and writes the pack. DIR is created when absent; an existing DIR
// must be empty or hold an earlier pack (its manifest.json), so that no other file is overwritten.
FixturesSummary write_fixtures(const std::string& dir, Device device);

}  // namespace lathe::ref
