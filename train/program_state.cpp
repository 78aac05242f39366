#include "train/program_state.h"

#include "core/error.h"

namespace lathe::train {

namespace {

nlohmann::json generator_json(const GeneratorState& g) { return {{"seed", g.seed}, {"offset", g.offset}}; }

GeneratorState generator_from_json(const nlohmann::json& j) {
  return {j.at("seed").get<uint64_t>(), j.at("offset").get<uint64_t>()};
}

}  // namespace

nlohmann::json to_json(const ProgramState& s) {
  return {
      {"options", to_json(s.options)},
      {"model_name", s.model_name},
      {"batch", s.batch},
      {"corpus_bytes", s.corpus_bytes},
      {"data_generator", generator_json(s.data_generator)},
      {"dropout_generator", generator_json(s.dropout_generator)},
      {"last_val_loss", s.last_val_loss},
      {"tokenizer", s.tokenizer},
  };
}

ProgramState program_state_from_json(const nlohmann::json& j) {
  ProgramState s;
  s.options = train_options_from_json(j.at("options"));
  s.model_name = j.at("model_name").get<std::string>();
  s.batch = j.at("batch").get<int64_t>();
  s.corpus_bytes = j.at("corpus_bytes").get<size_t>();
  s.data_generator = generator_from_json(j.at("data_generator"));
  s.dropout_generator = generator_from_json(j.at("dropout_generator"));
  s.last_val_loss = j.at("last_val_loss").get<double>();
  if (j.contains("tokenizer")) s.tokenizer = j.at("tokenizer");
  return s;
}

ProgramState read_program_state(const serialize::TrainingCheckpoint& ckpt) {
  try {
    return program_state_from_json(ckpt.program());
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(ckpt.path(), ": checkpoint program state: ", e.what());
  } catch (const Error& e) {
    LATHE_FAIL(ckpt.path(), ": ", e.what());
  }
}

}  // namespace lathe::train
