// `lathe inspect FILE`: what a safetensors file (weights, checkpoint, reference case) holds.
//
// Prints the header summary and metadata (lathe's own document under the key "lathe" with its
// known parts first: format version, kind, step, model config, optimizer and its groups; any other
// JSON generically), then one row per tensor with dtype, shape, bytes and, when the lathe document
// records them, its placement policy and checksum. Recorded checksums are verified: a mismatch is
// an error naming the tensor (exit 1) after the table is printed.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "examples/cli/commands.h"
#include "serialize/checkpoint.h"
#include "serialize/checksum.h"
#include "serialize/json_document.h"

namespace lathe::cli {

namespace {

using nlohmann::json;

// JSON text of a metadata value, or null when it is not JSON (then it is printed as a string).
// JSON nested past serialize::kMaxJsonNesting is an error naming the file and key: printing it
// would recurse once per level.
json parse_or_null(const std::string& s, const std::string& path, const std::string& key) {
  if (!json::accept(s)) return json();  // accept() does not build the value, so depth costs nothing
  return serialize::parse_json_document(s, path + ": metadata \"" + key + "\"");
}

std::string compact(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// Prints `key: value`, inline when short, else as an indented tree.
void print_json(std::ostream& os, const std::string& key, const json& j, int indent) {
  std::string pad(size_t(indent), ' ');
  std::string inline_text = compact(j);
  if (!j.is_structured() || inline_text.size() + key.size() + size_t(indent) <= 96) {
    os << pad << key << ": " << inline_text << "\n";
    return;
  }
  os << pad << key << ":\n";
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) print_json(os, k, v, indent + 2);
  } else {
    for (size_t i = 0; i < j.size(); ++i) print_json(os, "[" + std::to_string(i) + "]", j[i], indent + 2);
  }
}

// "k=v k=v" for a flat object (a model config, an optimizer group).
std::string key_values(const json& obj) {
  std::string out;
  for (const auto& [k, v] : obj.items()) out += (out.empty() ? "" : " ") + k + "=" + compact(v);
  return out;
}

const json* first_of(const json& doc, std::initializer_list<const char*> keys, std::string& found) {
  for (const char* k : keys) {
    auto it = doc.find(k);
    if (it != doc.end()) {
      found = k;
      return &*it;
    }
  }
  return nullptr;
}

// "    model: k=v ..." for a model config (or {"config": {...}}), else the value as a tree.
void print_model(std::ostream& os, const std::string& key, const json& cfg) {
  const json* inner = cfg.is_object() && cfg.contains("config") ? &cfg["config"] : &cfg;
  if (inner->is_object()) os << "    model: " << key_values(*inner) << "\n";
  else print_json(os, key, cfg, 4);
}

// "    optimizer: KIND, N groups" and one line per group.
void print_optimizer_head(std::ostream& os, const std::string& kind, const json* groups) {
  os << "    optimizer:" << (kind.empty() ? "" : " " + kind);
  if (groups && groups->is_array()) os << ", " << groups->size() << " group" << (groups->size() == 1 ? "" : "s");
  os << "\n";
  if (groups && groups->is_array()) {
    for (size_t i = 0; i < groups->size(); ++i) {
      const json& g = (*groups)[i];
      os << "      group " << i << ": " << (g.is_object() ? key_values(g) : compact(g)) << "\n";
    }
  }
}

void print_parameter_count(std::ostream& os, size_t n) {
  // Each is a row of the tensor table below; here only how many.
  os << "    parameters: " << n << " (in the tensor table)\n";
}

// A training checkpoint's document, read as the checkpoint reader reads it
// (serialize/checkpoint_document.h). The per-tensor entries are shown in the tensor table.
void print_checkpoint_document(std::ostream& os, const serialize::CheckpointDocument& d) {
  os << "  lathe document, format version " << d.format_version << ", kind " << d.kind << "\n";
  os << "    step: " << d.step << "\n";
  print_model(os, "model", d.model);
  print_optimizer_head(os, d.optimizer.kind, &d.optimizer.groups);
  print_json(os, "fused", d.optimizer.fused, 6);
  print_json(os, "params", d.optimizer.params, 6);
  print_parameter_count(os, d.parameters.size());
  print_json(os, "program", d.program, 4);
  print_json(os, "scaler", d.scaler, 4);
}

// Any other lathe document (weights, or a checkpoint whose document does not read): the parts a
// reader looks for first, then everything else generically. The per-tensor entries are shown in
// the tensor table instead.
void print_lathe_document(std::ostream& os, const json& doc) {
  std::vector<std::string> shown = {"tensors"};
  os << "  lathe document";
  if (doc.contains("format_version")) os << ", format version " << compact(doc["format_version"]);
  if (doc.contains("kind")) os << ", kind " << compact(doc["kind"]);
  os << "\n";
  shown.insert(shown.end(), {"format_version", "kind"});
  if (doc.contains("step")) {
    os << "    step: " << compact(doc["step"]) << "\n";
    shown.push_back("step");
  }
  std::string key;
  if (const json* cfg = first_of(doc, {"model_config", "config", "model"}, key)) {
    shown.push_back(key);
    print_model(os, key, *cfg);
  }
  if (const json* opt = first_of(doc, {"optimizer", "optim"}, key)) {
    shown.push_back(key);
    if (opt->is_object()) {
      std::string name;
      const json* kind = first_of(*opt, {"kind", "name", "type"}, name);
      const json* groups = opt->contains("groups") ? &(*opt)["groups"]
                           : opt->contains("param_groups") ? &(*opt)["param_groups"] : nullptr;
      print_optimizer_head(os, kind ? compact(*kind) : std::string(), groups);
      for (const auto& [k, v] : opt->items())
        if (k != name && k != "groups" && k != "param_groups") print_json(os, k, v, 6);
    } else {
      print_json(os, key, *opt, 4);
    }
  }
  if (doc.contains("parameters") && doc["parameters"].is_array()) {
    print_parameter_count(os, doc["parameters"].size());
    shown.push_back("parameters");
  }
  for (const auto& [k, v] : doc.items())
    if (std::find(shown.begin(), shown.end(), k) == shown.end()) print_json(os, k, v, 4);
}

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string pad_right(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

uint64_t header_bytes(const std::string& path) {
  uint64_t n = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    if (std::fread(&n, 8, 1, f) != 1) n = 0;
    std::fclose(f);
  }
  return n;
}

void inspect(const std::string& path, std::ostream& os) {
  serialize::SafetensorsFile file = serialize::read_safetensors(path);
  // Every metadata value is parsed before anything is printed, so that a value that cannot be
  // shown (JSON nested too deep) is the only line of output, an error.
  std::map<std::string, json> parsed;
  for (const auto& [k, v] : file.metadata) parsed[k] = parse_or_null(v, path, k);
  const std::map<std::string, std::string> recorded = serialize::recorded_checksums(file.metadata, path);
  uint64_t data_bytes = 0;
  for (const auto& [name, t] : file.tensors) data_bytes += t.nbytes();
  os << path << ": safetensors, header " << header_bytes(path) << " bytes, " << file.tensors.size() << " tensor"
     << (file.tensors.size() == 1 ? "" : "s") << ", " << data_bytes << " data bytes (" << human_bytes(data_bytes)
     << ")\n";

  // Metadata: the lathe document first, then the other keys.
  json lathe_doc;
  if (parsed.count(serialize::kLatheMetadataKey)) lathe_doc = parsed[serialize::kLatheMetadataKey];
  // A checkpoint's document is read as the checkpoint reader reads it; one that does not read
  // (damaged, or another version) is still shown, generically.
  std::optional<serialize::CheckpointDocument> ckpt_doc;
  if (lathe_doc.is_object() && serialize::TrainingCheckpoint::is_checkpoint(file.metadata)) {
    try {
      ckpt_doc = serialize::checkpoint_document_from_json(lathe_doc, path);
    } catch (const Error&) {
    }
  }
  if (!file.metadata.empty()) os << "metadata:\n";
  if (ckpt_doc) print_checkpoint_document(os, *ckpt_doc);
  else if (lathe_doc.is_object()) print_lathe_document(os, lathe_doc);
  for (const auto& [k, v] : file.metadata) {
    if (k == serialize::kLatheMetadataKey && lathe_doc.is_object()) continue;
    const json& j = parsed[k];
    if (j.is_structured()) print_json(os, k, j, 2);
    else os << "  " << k << ": " << v << "\n";
  }

  // Tensors, with policy and checksum where the lathe document records them.
  const json* per_tensor = lathe_doc.is_object() && lathe_doc.contains("tensors") && lathe_doc["tensors"].is_object()
                               ? &lathe_doc["tensors"] : nullptr;
  size_t name_w = 4, shape_w = 5;
  for (const auto& [name, t] : file.tensors) {
    name_w = std::max(name_w, name.size());
    shape_w = std::max(shape_w, shape_text(t.shape()).size());
  }
  os << "tensors:\n  " << pad_right("name", name_w) << "  dtype  " << pad_right("shape", shape_w)
     << "  " << pad_right("bytes", 10) << "  details\n";
  std::vector<std::string> damaged;
  size_t verified = 0;
  for (const auto& [name, t] : file.tensors) {
    std::string row = "  " + pad_right(name, name_w) + "  " + pad_right(serialize::safetensors_dtype_name(t.dtype()), 5) +
                      "  " + pad_right(shape_text(t.shape()), shape_w) + "  " + pad_right(std::to_string(t.nbytes()), 10);
    std::string details;
    if (t.numel() == 1) {
      std::ostringstream v;
      v.precision(10);
      v << "value " << t.item();
      details += v.str();
    }
    if (ckpt_doc) {
      auto rec = ckpt_doc->tensors.find(name);
      if (rec != ckpt_doc->tensors.end() && rec->second.policy)
        details += (details.empty() ? "" : "  ") + std::string("policy ") + *rec->second.policy;
    } else if (per_tensor && per_tensor->contains(name)) {
      const json& entry = (*per_tensor)[name];
      if (entry.is_object() && entry.contains("policy"))
        details += (details.empty() ? "" : "  ") + std::string("policy ") + compact(entry["policy"]);
    }
    auto sum = recorded.find(name);
    if (sum != recorded.end()) {
      std::string actual = serialize::tensor_checksum(t);
      bool ok = actual == sum->second;
      details += (details.empty() ? "" : "  ") + std::string("checksum ") + sum->second + (ok ? " ok" : " MISMATCH (computed " + actual + ")");
      if (ok) ++verified;
      else damaged.push_back(name);
    }
    row += "  " + details;
    row.erase(row.find_last_not_of(' ') + 1);
    os << row << "\n";
  }
  for (const auto& [name, sum] : recorded)
    if (!file.find(name)) damaged.push_back(name + " (recorded, but not in the file)");
  if (!recorded.empty()) os << "checksums: " << verified << " of " << recorded.size() << " verified\n";
  os.flush();
  if (!damaged.empty()) {
    std::string names;
    for (const auto& n : damaged) names += (names.empty() ? "'" : ", '") + n + "'";
    LATHE_FAIL(path, ": checksum mismatch in ", damaged.size(), " tensor", damaged.size() == 1 ? "" : "s", ": ", names);
  }
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "show a safetensors file's metadata and tensors; verify recorded checksums");
  auto path = std::make_shared<std::string>();
  cmd->add_option("FILE", *path, "a safetensors file (weights, checkpoint, reference case)")
      ->required()
      ->check(reachable_path());
  cmd->callback([path] { inspect(*path, std::cout); });
}

}  // namespace lathe::cli
