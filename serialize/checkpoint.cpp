#include "serialize/checkpoint.h"

#include <map>
#include <set>

#include "core/error.h"
#include "serialize/checksum.h"
#include "serialize/json_document.h"

namespace lathe::serialize {

namespace {

using nlohmann::json;

constexpr const char* kOptimPrefix = "optim.";

std::vector<int64_t> shape_vector(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

// The checksum covers the bytes; dtype and shape are recorded too, so that a header edited to
// another dtype of the same width (I64 <-> F64) is caught as well.
TensorRecord tensor_record(const Tensor& t, const std::string& policy, const std::string& scope) {
  return {tensor_checksum(t), dtype_name(t.dtype()), shape_vector(t.shape()), policy, scope};
}

// The name each optimizer parameter has in the model: an optimizer that holds a tensor the model
// does not own cannot be checkpointed meaningfully (its restore could not find it again).
std::vector<std::string> optimizer_param_names(const nn::Module& model, const optim::Optimizer& opt) {
  std::map<const TensorImpl*, std::string> name_of;
  for (const auto& [name, p] : model.named_parameters()) name_of.emplace(p.id(), name);
  std::vector<std::string> names;
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

}  // namespace

void save_training_state(const std::string& path, const TrainingStateRef& s) {
  LATHE_CHECK(s.model && s.optimizer, path, ": save_training_state needs a model and an optimizer");
  std::vector<std::pair<std::string, Tensor>> tensors;
  CheckpointDocument doc;
  auto record = [&](const std::string& name, const Tensor& t, const std::string& policy, const std::string& scope) {
    doc.tensors[name] = tensor_record(t, policy, scope);
  };
  for (const auto& [name, p] : s.model->named_parameters()) {
    LATHE_CHECK(name.rfind(kOptimPrefix, 0) != 0 && name.rfind("scaler.", 0) != 0, path, ": parameter name '", name,
                "' collides with the names of optimizer state");
    tensors.emplace_back(name, p.detach());
    record(name, p, "parameter", "model");
    doc.parameters.push_back({name, shape_vector(p.shape()), dtype_name(p.dtype())});
  }
  for (const optim::StateEntry& e : s.optimizer->state_entries()) {
    const std::string name = kOptimPrefix + e.name;
    tensors.emplace_back(name, e.tensor);
    record(name, e.tensor, optim::placement_name(e.placement), optim::scope_name(e.scope));
  }
  if (s.scaler) {
    for (const optim::StateEntry& e : s.scaler->state_entries()) {
      tensors.emplace_back(e.name, e.tensor);
      record(e.name, e.tensor, optim::placement_name(e.placement), optim::scope_name(e.scope));
    }
  }
  doc.step = s.step;
  doc.model = s.model_description;
  doc.optimizer = {s.optimizer->kind(), s.optimizer->fused(), optimizer_param_names(*s.model, *s.optimizer),
                   s.optimizer->groups_json()};
  doc.scaler = s.scaler ? scaler_options(*s.scaler) : json();
  doc.program = s.program;
  Metadata meta;
  meta["format"] = "pt";
  try {
    meta[kLatheMetadataKey] = to_json(doc).dump();
  } catch (const json::exception& e) {
    LATHE_FAIL(path, ": the checkpoint document is not valid UTF-8 (", e.what(), ")");
  }
  write_safetensors(path, tensors, meta);
}

bool TrainingCheckpoint::is_checkpoint(const Metadata& metadata) {
  auto it = metadata.find(kLatheMetadataKey);
  if (it == metadata.end()) return false;
  // Not JSON at all: someone else's metadata under the same key.
  if (!json::accept(it->second)) return false;
  json doc;
  try {
    doc = parse_json_document(it->second, kLatheMetadataKey);
  } catch (const Error&) {
    // JSON nested past the bound: from_file reports it, naming the file, rather than the file
    // being taken for plain weights and failing for a reason that misleads.
    return true;
  }
  return doc.is_object() && doc.value("kind", json()) == kCheckpointKind;
}

TrainingCheckpoint TrainingCheckpoint::read(const std::string& path, Device target) {
  return read(path, [target](const CheckpointDocument&) { return target; });
}

TrainingCheckpoint TrainingCheckpoint::read(const std::string& path, const TargetOf& target_of) {
  TrainingCheckpoint c;
  Device target = Device::cpu();
  TensorSink sink;
  sink.on_metadata = [&](const Metadata& metadata) {
    c.parse_document(metadata, path);
    if (target_of) target = target_of(c.doc_);
  };
  // Each tensor is checked from its host staging copy (listed, dtype and shape as recorded, the
  // checksum), then goes where it will be used: host-policy state stays on the host, everything
  // else to the target. Nothing is held on the host on the way to a device.
  sink.place = [&](const std::string& name, const Tensor& host) {
    const TensorRecord& rec = c.check_listed(name, host, path);
    const std::string actual = checksum_hex(checksum_bytes(host.data_ptr(), host.nbytes()));
    LATHE_CHECK(actual == *rec.checksum, path, ": tensor '", name, "' is damaged: checksum ", actual,
                " does not match the recorded ", *rec.checksum);
    const bool on_host = rec.policy && *rec.policy == optim::placement_name(optim::Placement::host);
    return on_host || target.is_cpu() ? host : host.to(target);
  };
  c.file_ = read_safetensors(path, sink);
  c.check_complete();
  return c;
}

TrainingCheckpoint TrainingCheckpoint::from_file(SafetensorsFile file) {
  TrainingCheckpoint c;
  c.file_ = std::move(file);
  c.parse_document(c.file_.metadata, c.file_.path);
  for (const auto& [name, t] : c.file_.tensors) c.check_listed(name, t, c.file_.path);
  verify_checksums(c.file_);
  c.check_complete();
  return c;
}

void TrainingCheckpoint::parse_document(const Metadata& metadata, const std::string& path) {
  auto it = metadata.find(kLatheMetadataKey);
  LATHE_CHECK(it != metadata.end(), path, ": not a lathe training checkpoint (no \"", kLatheMetadataKey,
              "\" document in its metadata)");
  const json doc = parse_json_document(it->second, path + ": metadata \"" + kLatheMetadataKey + "\"");
  LATHE_CHECK(doc.is_object(), path, ": metadata \"", kLatheMetadataKey, "\" is not a JSON object");
  doc_ = checkpoint_document_from_json(doc, path);
  step_ = doc_.step;
}

const TensorRecord& TrainingCheckpoint::check_listed(const std::string& name, const Tensor& t,
                                                     const std::string& path) const {
  auto rec = doc_.tensors.find(name);
  LATHE_CHECK(rec != doc_.tensors.end(), path, ": tensor '", name, "' is not listed in the checkpoint document");
  LATHE_CHECK(rec->second.checksum.has_value(), path, ": tensor '", name, "' has no checksum in the checkpoint document");
  const std::vector<int64_t> shape = shape_vector(t.shape());
  LATHE_CHECK(rec->second.dtype == dtype_name(t.dtype()) && rec->second.shape == shape, path, ": tensor '", name,
              "' is ", dtype_name(t.dtype()), " ", json(shape).dump(), " in the header but ",
              quote_json(rec->second.dtype), " ", quote_json(rec->second.shape), " in the checkpoint document");
  return rec->second;
}

// Every listed parameter and every listed tensor is in the file.
void TrainingCheckpoint::check_complete() const {
  for (const ParameterRecord& p : doc_.parameters)
    LATHE_CHECK(file_.find(p.name), file_.path, ": parameter '", p.name, "' is listed but its tensor is missing");
  for (const auto& [name, rec] : doc_.tensors)
    LATHE_CHECK(file_.find(name), file_.path, ": the checkpoint document lists tensor '", name,
                "', which the file does not hold");
}

nn::NamedTensors TrainingCheckpoint::weights_for(const nn::Module& model) const {
  // The same parameter names, in the same order (shapes are checked by load_state_dict).
  const nn::NamedTensors own = model.named_parameters();
  const std::vector<ParameterRecord>& saved = doc_.parameters;
  LATHE_CHECK(own.size() == saved.size(), "the checkpoint's model has ", saved.size(), " parameters, this model ",
              own.size(), " (a different model config?)");
  nn::NamedTensors weights;
  for (size_t i = 0; i < own.size(); ++i) {
    const std::string& name = saved[i].name;
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
    const OptimizerRecord& opt = doc_.optimizer;
    const std::string& kind = opt.kind;
    LATHE_CHECK(kind == optimizer.kind(), "the checkpoint's optimizer is ", kind, ", this run's is ", optimizer.kind());
    const std::vector<std::string>& names = opt.params;
    LATHE_CHECK(names.size() == optimizer.num_params(), "the checkpoint's optimizer holds ", names.size(),
                " parameters, this one ", optimizer.num_params());
    std::map<std::string, const TensorImpl*> id_of;
    for (const auto& [name, p] : own) id_of.emplace(name, p.id());
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i];
      auto it = id_of.find(name);
      LATHE_CHECK(it != id_of.end() && it->second == optimizer.param(int64_t(i)).id(), "optimizer parameter ", i,
                  " is the model's '", name, "' in the checkpoint, but not in this optimizer");
    }
    LATHE_CHECK(has_scaler() == (scaler != nullptr), has_scaler() ? "the checkpoint has loss-scaler state but this run has no scaler"
                                                                  : "this run has a loss scaler but the checkpoint has none");

    std::map<std::string, optim::StateSource> state, scaler_state;
    for (const auto& [name, t] : file_.tensors) {
      optim::StateSource src{t};
      if (name.rfind(kOptimPrefix, 0) == 0) state.emplace(name.substr(std::char_traits<char>::length(kOptimPrefix)), src);
      else if (name.rfind("scaler.", 0) == 0) scaler_state.emplace(name, src);
    }

    // Everything checked that can be checked up front; now change the objects.
    model.load_state_dict(weights, /*strict=*/true);
    optimizer.load_groups_json(opt.groups);
    optimizer.load_state(state);
    if (scaler) scaler->load_state(scaler_state);
  } catch (const Error& e) {
    LATHE_FAIL(path, ": ", e.what());
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(path, ": checkpoint metadata: ", e.what());
  }
}

}  // namespace lathe::serialize
