// lathe train --init-from: a fresh run whose weights come from a file or directory (fine-tuning).
// The model is the file's: its config, with --config's dropout when --config is given (a dropout
// rate is the run's choice, not the weights'); every other field --config names must agree with
// the file's. The optimizer, the schedule, the data and the step start fresh; the run's options
// (and so its checkpoints) record where its weights came from.
#pragma once

#include <string>

#include "core/error.h"
#include "data/tokenizer.h"
#include "serialize/model_file.h"
#include "train/model_config.h"
#include "train/train_options.h"

namespace lathe::train {

// A --config that contradicts the --init-from file: the user's mistake (`lathe train` exits with 2).
struct InitSettingsError : Error {
  using Error::Error;
};

struct InitialWeights {
  ModelChoice model_choice;  // the run's model
  serialize::LoadedModel loaded;        // the file's model, on the host
};

// Reads `options.init_from` (any format load_model reads) and settles the run's model with
// `options.config` ("" when the command line named none). A field of --config that differs from
// the file's is an InitSettingsError naming the field and both values.
InitialWeights load_initial_weights(const TrainOptions& options);

// Refuses data whose tokens are not the ones the weights were trained on: `recorded` is the
// weights' "tokenizer" metadata ("bytes", a TokenizerIdentity's JSON, or "none" / absent when
// unknown, which passes), `data` the data's tokenizer. The error names both.
void check_init_tokenizer(const std::string& recorded, const data::Tokenizer& data, const std::string& init_from,
                          const std::string& data_path);

}  // namespace lathe::train
