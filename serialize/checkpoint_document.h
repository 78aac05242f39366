// The JSON document a training checkpoint stores under the metadata key "lathe" (the fields are
// described in serialize/checkpoint.h), as one typed struct: save_training_state writes it,
// TrainingCheckpoint reads and validates it, `lathe inspect` prints it. Parsing it in one place
// keeps the three from disagreeing about what a checkpoint holds.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace lathe::serialize {

inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr const char* kCheckpointKind = "training_state";

// One model parameter, in the model's order.
struct ParameterRecord {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
};

struct OptimizerRecord {
  std::string kind;                 // Optimizer::kind()
  bool fused = false;
  std::vector<std::string> params;  // the model's name of the optimizer's parameter i
  nlohmann::json groups;            // Optimizer::groups_json()
};

// What the document records of one tensor of the file.
struct TensorRecord {
  std::optional<std::string> checksum;  // XXH3-64 of the bytes
  std::string dtype;
  std::vector<int64_t> shape;
  std::optional<std::string> policy;    // "parameter" or a placement policy name
  std::string scope;                    // "model" or optim::scope_name
};

struct CheckpointDocument {
  int64_t format_version = kCheckpointFormatVersion;
  std::string kind = kCheckpointKind;
  int64_t step = 0;
  nlohmann::json model;    // the program's description of the model
  std::vector<ParameterRecord> parameters;
  OptimizerRecord optimizer;
  nlohmann::json scaler;   // GradScaler options, null when the run has no loss scaler
  nlohmann::json program;  // the program's own state, verbatim
  std::map<std::string, TensorRecord> tensors;
};

nlohmann::json to_json(const CheckpointDocument& doc);

// Checks every field (presence, type, a supported format version, the kind, placement policy
// names); errors name `path` and the field.
CheckpointDocument checkpoint_document_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace lathe::serialize
