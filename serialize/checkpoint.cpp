#include "serialize/checkpoint.h"

#include <map>
#include <set>

#include "core/error.h"
#include "serialize/checksum.h"

namespace lathe::serialize {

namespace {

using nlohmann::json;

constexpr const char* kOptimPrefix = "optim.";

json shape_json(const Shape& s) { return json(std::vector<int64_t>(s.begin(), s.end())); }

// The checksum covers the bytes; dtype and shape are recorded too, so that a header edited to
// another dtype of the same width (I64 <-> F64) is caught as well.
json tensor_record(const Tensor& t, const std::string& policy, const std::string& scope) {
  return {{"checksum", tensor_checksum(t)}, {"dtype", dtype_name(t.dtype())}, {"shape", shape_json(t.shape())},
          {"policy", policy}, {"scope", scope}};
}

// The name each optimizer parameter has in the model: an optimizer that holds a tensor the model
// does not own cannot be checkpointed meaningfully (its restore could not find it again).
json optimizer_param_names(const nn::Module& model, const optim::Optimizer& opt) {
  std::map<const TensorImpl*, std::string> name_of;
  for (const auto& [name, p] : model.named_parameters()) name_of.emplace(p.id(), name);
  json names = json::array();
  for (size_t i = 0; i < opt.num_params(); ++i) {
    auto it = name_of.find(opt.param(int64_t(i)).id());
    LATHE_CHECK(it != name_of.end(), "optimizer parameter ", i, " (", opt.param(int64_t(i)).desc(),
                ") is not a parameter of the model");
    names.push_back(it->second);
  }
  return names;
}

json scaler_options(const optim::GradScaler& s) {
  const optim::GradScalerOptions& o = s.options();
  return {{"init_scale", o.init_scale}, {"growth_factor", o.growth_factor}, {"backoff_factor", o.backoff_factor},
          {"growth_interval", o.growth_interval}, {"enabled", o.enabled}};
}

// Field access with errors that name the file and the field.
const json& field(const json& doc, const char* key, json::value_t type, const std::string& path) {
  auto it = doc.find(key);
  LATHE_CHECK(it != doc.end(), path, ": checkpoint metadata lacks \"", key, "\"");
  const bool ok = it->type() == type ||
                  (type == json::value_t::number_integer && it->type() == json::value_t::number_unsigned);
  LATHE_CHECK(ok, path, ": checkpoint metadata \"", key, "\" has the wrong type (", it->type_name(), ")");
  return *it;
}

}  // namespace

void save_training_state(const std::string& path, const TrainingStateRef& s) {
  LATHE_CHECK(s.model && s.optimizer, path, ": save_training_state needs a model and an optimizer");
  std::vector<std::pair<std::string, Tensor>> tensors;
  json records = json::object();
  json params = json::array();
  for (const auto& [name, p] : s.model->named_parameters()) {
    LATHE_CHECK(name.rfind(kOptimPrefix, 0) != 0 && name.rfind("scaler.", 0) != 0, path, ": parameter name '", name,
                "' collides with the names of optimizer state");
    tensors.emplace_back(name, p.detach());
    records[name] = tensor_record(p, "parameter", "model");
    params.push_back({{"name", name}, {"shape", shape_json(p.shape())}, {"dtype", dtype_name(p.dtype())}});
  }
  for (const optim::StateEntry& e : s.optimizer->state_entries()) {
    const std::string name = kOptimPrefix + e.name;
    tensors.emplace_back(name, e.tensor);
    records[name] = tensor_record(e.tensor, optim::placement_name(e.placement), optim::scope_name(e.scope));
  }
  if (s.scaler) {
    for (const optim::StateEntry& e : s.scaler->state_entries()) {
      tensors.emplace_back(e.name, e.tensor);
      records[e.name] = tensor_record(e.tensor, optim::placement_name(e.placement), optim::scope_name(e.scope));
    }
  }
  json doc = {{"format_version", kCheckpointFormatVersion},
              {"kind", kCheckpointKind},
              {"step", s.step},
              {"model", s.model_description},
              {"parameters", params},
              {"optimizer",
               {{"kind", s.optimizer->kind()},
                {"fused", s.optimizer->fused()},
                {"params", optimizer_param_names(*s.model, *s.optimizer)},
                {"groups", s.optimizer->groups_json()}}},
              {"scaler", s.scaler ? scaler_options(*s.scaler) : json()},
              {"program", s.program},
              {"tensors", records}};
  Metadata meta;
  meta["format"] = "pt";
  try {
    meta[kLatheMetadataKey] = doc.dump();
  } catch (const json::exception& e) {
    LATHE_FAIL(path, ": the checkpoint document is not valid UTF-8 (", e.what(), ")");
  }
  write_safetensors(path, tensors, meta);
}

bool TrainingCheckpoint::is_checkpoint(const Metadata& metadata) {
  auto it = metadata.find(kLatheMetadataKey);
  if (it == metadata.end()) return false;
  const json doc = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() && doc.value("kind", json()) == kCheckpointKind;
}

TrainingCheckpoint TrainingCheckpoint::read(const std::string& path) {
  return from_file(read_safetensors(path, Device::cpu()));
}

TrainingCheckpoint TrainingCheckpoint::from_file(SafetensorsFile file) {
  TrainingCheckpoint c;
  c.file_ = std::move(file);
  const std::string& path = c.file_.path;
  auto it = c.file_.metadata.find(kLatheMetadataKey);
  LATHE_CHECK(it != c.file_.metadata.end(), path, ": not a lathe training checkpoint (no \"", kLatheMetadataKey,
              "\" document in its metadata)");
  c.doc_ = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  LATHE_CHECK(!c.doc_.is_discarded() && c.doc_.is_object(), path, ": metadata \"", kLatheMetadataKey,
              "\" is not a JSON object");
  const json& doc = c.doc_;
  const int64_t version = field(doc, "format_version", json::value_t::number_integer, path).get<int64_t>();
  LATHE_CHECK(version >= 1 && version <= kCheckpointFormatVersion, path, ": checkpoint format version ", version,
              " is not supported (this lathe reads 1 to ", kCheckpointFormatVersion, ")");
  const std::string kind = field(doc, "kind", json::value_t::string, path).get<std::string>();
  LATHE_CHECK(kind == kCheckpointKind, path, ": a lathe file of kind \"", kind, "\", not a training checkpoint (\"",
              kCheckpointKind, "\")");
  c.step_ = field(doc, "step", json::value_t::number_integer, path).get<int64_t>();
  LATHE_CHECK(c.step_ >= 0, path, ": checkpoint step ", c.step_, " is negative");
  LATHE_CHECK(doc.contains("model"), path, ": checkpoint metadata lacks \"model\"");
  LATHE_CHECK(doc.contains("program"), path, ": checkpoint metadata lacks \"program\"");
  LATHE_CHECK(doc.contains("scaler"), path, ": checkpoint metadata lacks \"scaler\"");
  for (const json& p : field(doc, "parameters", json::value_t::array, path)) {
    LATHE_CHECK(p.is_object() && p.contains("name") && p["name"].is_string(), path,
                ": checkpoint metadata \"parameters\" has an entry without a name");
    const std::string name = p["name"].get<std::string>();
    LATHE_CHECK(c.file_.find(name), path, ": parameter '", name, "' is listed but its tensor is missing");
  }
  const json& opt = field(doc, "optimizer", json::value_t::object, path);
  field(opt, "kind", json::value_t::string, path);
  field(opt, "fused", json::value_t::boolean, path);
  field(opt, "params", json::value_t::array, path);
  field(opt, "groups", json::value_t::array, path);

  // Every tensor is accounted for, and every checksum holds.
  const json& records = field(doc, "tensors", json::value_t::object, path);
  for (const auto& [name, t] : c.file_.tensors) {
    LATHE_CHECK(records.contains(name), path, ": tensor '", name, "' is not listed in the checkpoint document");
    const json& rec = records[name];
    LATHE_CHECK(rec.is_object() && rec.contains("checksum"), path, ": tensor '", name,
                "' has no checksum in the checkpoint document");
    LATHE_CHECK(rec.value("dtype", json()) == dtype_name(t.dtype()) && rec.value("shape", json()) == shape_json(t.shape()),
                path, ": tensor '", name, "' is ", dtype_name(t.dtype()), " ", shape_json(t.shape()).dump(),
                " in the header but ", rec.value("dtype", json()).dump(), " ", rec.value("shape", json()).dump(),
                " in the checkpoint document");
    if (rec.contains("policy") && rec["policy"] != "parameter") {
      LATHE_CHECK(rec["policy"].is_string(), path, ": tensor '", name, "': policy is not a string");
      try {
        optim::placement_from_name(rec["policy"].get<std::string>());
      } catch (const Error& e) {
        LATHE_FAIL(path, ": tensor '", name, "': ", e.what());
      }
    }
  }
  verify_checksums(c.file_);  // also: every listed tensor is present
  return c;
}

nn::NamedTensors TrainingCheckpoint::weights_for(const nn::Module& model) const {
  // The same parameter names, in the same order (shapes are checked by load_state_dict).
  const nn::NamedTensors own = model.named_parameters();
  const json& saved = doc_.at("parameters");
  LATHE_CHECK(own.size() == saved.size(), "the checkpoint's model has ", saved.size(), " parameters, this model ",
              own.size(), " (a different model config?)");
  nn::NamedTensors weights;
  for (size_t i = 0; i < own.size(); ++i) {
    const std::string name = saved[i].at("name").get<std::string>();
    LATHE_CHECK(name == own[i].first, "parameter ", i, " is '", name, "' in the checkpoint, '", own[i].first,
                "' in this model");
    weights.emplace_back(name, file_.at(name));
  }
  return weights;
}

void TrainingCheckpoint::load_weights(nn::Module& model) const {
  try {
    model.load_state_dict(weights_for(model), /*strict=*/true);
  } catch (const Error& e) {
    LATHE_FAIL(file_.path, ": ", e.what());
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(file_.path, ": checkpoint metadata: ", e.what());
  }
}

void TrainingCheckpoint::restore(nn::Module& model, optim::Optimizer& optimizer, optim::GradScaler* scaler) const {
  const std::string& path = file_.path;
  try {
    const nn::NamedTensors own = model.named_parameters();
    const nn::NamedTensors weights = weights_for(model);

    // The optimizer: same kind, and it holds the same model parameters in the same groups.
    const json& opt = doc_.at("optimizer");
    const std::string kind = opt.at("kind").get<std::string>();
    LATHE_CHECK(kind == optimizer.kind(), "the checkpoint's optimizer is ", kind, ", this run's is ", optimizer.kind());
    const json& names = opt.at("params");
    LATHE_CHECK(names.size() == optimizer.num_params(), "the checkpoint's optimizer holds ", names.size(),
                " parameters, this one ", optimizer.num_params());
    std::map<std::string, const TensorImpl*> id_of;
    for (const auto& [name, p] : own) id_of.emplace(name, p.id());
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string name = names[i].get<std::string>();
      auto it = id_of.find(name);
      LATHE_CHECK(it != id_of.end() && it->second == optimizer.param(int64_t(i)).id(), "optimizer parameter ", i,
                  " is the model's '", name, "' in the checkpoint, but not in this optimizer");
    }
    LATHE_CHECK(has_scaler() == (scaler != nullptr), has_scaler() ? "the checkpoint has loss-scaler state but this run has no scaler"
                                                                  : "this run has a loss scaler but the checkpoint has none");

    std::map<std::string, optim::StateSource> state, scaler_state;
    const json& records = doc_.at("tensors");
    for (const auto& [name, t] : file_.tensors) {
      optim::StateSource src{t, std::nullopt};
      const json& rec = records.at(name);
      if (rec.contains("policy") && rec["policy"] != "parameter")
        src.saved_placement = optim::placement_from_name(rec["policy"].get<std::string>());
      if (name.rfind(kOptimPrefix, 0) == 0) state.emplace(name.substr(std::char_traits<char>::length(kOptimPrefix)), src);
      else if (name.rfind("scaler.", 0) == 0) scaler_state.emplace(name, src);
    }

    // Everything checked that can be checked up front; now change the objects.
    model.load_state_dict(weights, /*strict=*/true);
    optimizer.load_groups_json(opt.at("groups"));
    optimizer.load_state(state);
    if (scaler) scaler->load_state(scaler_state);
  } catch (const Error& e) {
    LATHE_FAIL(path, ": ", e.what());
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(path, ": checkpoint metadata: ", e.what());
  }
}

}  // namespace lathe::serialize
