// What `lathe train` stores of its own in a checkpoint (the document's "program" part, see
// serialize/checkpoint.h), as one struct written by Trainer::save_checkpoint and read back once,
// here, when a run resumes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serialize/checkpoint.h"
#include "train/train_options.h"

namespace lathe::train {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

struct ProgramState {
  TrainOptions options;         // the run's settings
  std::string model_name;       // the preset or config file's name
  int64_t batch = 0;            // sequences per step
  // The data stream's length (bytes of a text corpus, tokens of token shards; the name is the
  // checkpoint format's): resuming on other data would draw other windows.
  size_t corpus_bytes = 0;
  GeneratorState data_generator;     // training batches drawn so far
  GeneratorState dropout_generator;  // the model's dropout masks drawn so far
  double last_val_loss = -1;    // the last evaluation (-1: none yet)
  // The tokenizer of token-shard data (TokenizerIdentity as JSON); null for a byte corpus, and in
  // checkpoints written before tokenizers existed. A resume refuses data of another tokenizer.
  nlohmann::json tokenizer;
};

nlohmann::json to_json(const ProgramState& s);
// Throws nlohmann::json exceptions for a missing or mistyped field, lathe::Error for bad options.
ProgramState program_state_from_json(const nlohmann::json& j);

// The program state of a checkpoint; errors name the file ("<path>: checkpoint program state: ...").
ProgramState read_program_state(const serialize::TrainingCheckpoint& ckpt);

}  // namespace lathe::train
