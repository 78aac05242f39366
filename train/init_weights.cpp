#include "train/init_weights.h"

#include <filesystem>

#include "data/bpe_tokenizer.h"
#include "serialize/json_document.h"

namespace lathe::train {

InitialWeights load_initial_weights(const TrainOptions& o) {
  InitialWeights out;
  out.loaded = serialize::load_model(o.init_from, Device::cpu());
  const nn::GPTConfig& file = out.loaded.model->config();
  if (o.config.empty()) {
    // A directory's own name ("gpt2/"), a file's stem.
    std::filesystem::path p(o.init_from);
    if (p.filename().empty()) p = p.parent_path();
    out.model_choice = {p.stem().string(), file, 8};
    return out;
  }
  out.model_choice = resolve_model_config(o.config);
  // Every field, the switches at their defaults included: a switch that --config sets and the file's
  // model lacks differs as much as one the file has and --config lacks.
  const nlohmann::json given = out.model_choice.config.to_json(true), held = file.to_json(true);
  for (const auto& [key, value] : held.items()) {
    if (key == "dropout" || given[key] == value) continue;
    throw InitSettingsError(detail::cat("--config ", o.config, " has ", key, " = ", serialize::quote_json(given[key]),
                                        ", but --init-from ", o.init_from, " holds a model with ", key, " = ",
                                        serialize::quote_json(value),
                                        "; the model is the file's (leave --config out, or make it agree)"));
  }
  const double dropout = out.model_choice.config.dropout;
  out.model_choice.config = file;
  out.model_choice.config.dropout = dropout;
  return out;
}

void check_init_tokenizer(const std::string& recorded, const data::Tokenizer& data, const std::string& init_from,
                          const std::string& data_path) {
  if (recorded.empty() || recorded == serialize::kUnknownTokenizer) return;
  std::string had = "bytes", had_sum;
  if (recorded != "bytes") {
    const auto id = data::TokenizerIdentity::from_json(
        serialize::parse_json_document(recorded, init_from + ": metadata \"tokenizer\""), init_from);
    had = id.describe();
    had_sum = id.checksum;
  }
  const std::string have = data.describe();
  const std::string have_sum = data.checksum();
  LATHE_CHECK(had_sum == have_sum, "--init-from ", init_from, ": its weights were trained on tokens of ", had,
              ", but --data ", data_path, " holds tokens of ", have, "; fine-tuning needs the same tokenizer");
}

}  // namespace lathe::train
