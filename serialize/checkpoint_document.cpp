#include "serialize/checkpoint_document.h"

#include "core/error.h"
#include "optim/placement.h"

namespace lathe::serialize {

namespace {

using nlohmann::json;

// Field access with errors that name the file and the field.
const json& field(const json& doc, const char* key, json::value_t type, const std::string& path) {
  auto it = doc.find(key);
  LATHE_CHECK(it != doc.end(), path, ": checkpoint metadata lacks \"", key, "\"");
  const bool ok = it->type() == type ||
                  (type == json::value_t::number_integer && it->type() == json::value_t::number_unsigned);
  LATHE_CHECK(ok, path, ": checkpoint metadata \"", key, "\" has the wrong type (", it->type_name(), ")");
  return *it;
}

// A shape as the document writes it; anything else reads as no shape (and then mismatches the
// header's, an error that shows both).
std::vector<int64_t> shape_of(const json& j) {
  std::vector<int64_t> out;
  if (!j.is_array()) return out;
  for (const json& d : j)
    if (d.is_number_integer()) out.push_back(d.get<int64_t>());
  return out;
}

std::string string_or_empty(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

json record_json(const TensorRecord& r) {
  json j = {{"dtype", r.dtype}, {"shape", r.shape}, {"scope", r.scope}};
  if (r.checksum) j["checksum"] = *r.checksum;
  if (r.policy) j["policy"] = *r.policy;
  return j;
}

TensorRecord record_from_json(const std::string& name, const json& rec, const std::string& path) {
  TensorRecord r;
  if (!rec.is_object()) return r;  // no checksum: TrainingCheckpoint names the tensor
  if (rec.contains("checksum")) {
    LATHE_CHECK(rec["checksum"].is_string(), path, ": metadata \"lathe\": checksum of tensor '", name,
                "' is not a string");
    r.checksum = rec["checksum"].get<std::string>();
  }
  r.dtype = string_or_empty(rec, "dtype");
  r.shape = shape_of(rec.value("shape", json()));
  r.scope = string_or_empty(rec, "scope");
  if (rec.contains("policy")) {
    LATHE_CHECK(rec["policy"].is_string(), path, ": tensor '", name, "': policy is not a string");
    r.policy = rec["policy"].get<std::string>();
    if (*r.policy != "parameter") {
      try {
        optim::placement_from_name(*r.policy);
      } catch (const Error& e) {
        LATHE_FAIL(path, ": tensor '", name, "': ", e.what());
      }
    }
  }
  return r;
}

}  // namespace

json to_json(const CheckpointDocument& d) {
  json params = json::array();
  for (const ParameterRecord& p : d.parameters) params.push_back({{"name", p.name}, {"shape", p.shape}, {"dtype", p.dtype}});
  json records = json::object();
  for (const auto& [name, r] : d.tensors) records[name] = record_json(r);
  return {{"format_version", d.format_version},
          {"kind", d.kind},
          {"step", d.step},
          {"model", d.model},
          {"parameters", params},
          {"optimizer",
           {{"kind", d.optimizer.kind},
            {"fused", d.optimizer.fused},
            {"params", d.optimizer.params},
            {"groups", d.optimizer.groups}}},
          {"scaler", d.scaler},
          {"program", d.program},
          {"tensors", records}};
}

CheckpointDocument checkpoint_document_from_json(const json& doc, const std::string& path) {
  CheckpointDocument d;
  try {
    d.format_version = field(doc, "format_version", json::value_t::number_integer, path).get<int64_t>();
    LATHE_CHECK(d.format_version >= 1 && d.format_version <= kCheckpointFormatVersion, path,
                ": checkpoint format version ", d.format_version, " is not supported (this lathe reads 1 to ",
                kCheckpointFormatVersion, ")");
    d.kind = field(doc, "kind", json::value_t::string, path).get<std::string>();
    LATHE_CHECK(d.kind == kCheckpointKind, path, ": a lathe file of kind \"", d.kind,
                "\", not a training checkpoint (\"", kCheckpointKind, "\")");
    d.step = field(doc, "step", json::value_t::number_integer, path).get<int64_t>();
    LATHE_CHECK(d.step >= 0, path, ": checkpoint step ", d.step, " is negative");
    LATHE_CHECK(doc.contains("model"), path, ": checkpoint metadata lacks \"model\"");
    LATHE_CHECK(doc.contains("program"), path, ": checkpoint metadata lacks \"program\"");
    LATHE_CHECK(doc.contains("scaler"), path, ": checkpoint metadata lacks \"scaler\"");
    d.model = doc["model"];
    d.program = doc["program"];
    d.scaler = doc["scaler"];
    for (const json& p : field(doc, "parameters", json::value_t::array, path)) {
      LATHE_CHECK(p.is_object() && p.contains("name") && p["name"].is_string(), path,
                  ": checkpoint metadata \"parameters\" has an entry without a name");
      d.parameters.push_back({p["name"].get<std::string>(), shape_of(p.value("shape", json())), string_or_empty(p, "dtype")});
    }
    const json& opt = field(doc, "optimizer", json::value_t::object, path);
    d.optimizer.kind = field(opt, "kind", json::value_t::string, path).get<std::string>();
    d.optimizer.fused = field(opt, "fused", json::value_t::boolean, path).get<bool>();
    d.optimizer.params = field(opt, "params", json::value_t::array, path).get<std::vector<std::string>>();
    d.optimizer.groups = field(opt, "groups", json::value_t::array, path);
    for (const auto& [name, rec] : field(doc, "tensors", json::value_t::object, path).items())
      d.tensors.emplace(name, record_from_json(name, rec, path));
  } catch (const json::exception& e) {
    LATHE_FAIL(path, ": checkpoint metadata: ", e.what());
  }
  return d;
}

}  // namespace lathe::serialize
