// Reference case kind "train": a few steps of nanoGPT's training loop (docs/reference-cases.md).
//
//   for t in range(steps):
//     logits, loss = model(idx.<t>, targets.<t>); losses[t] = loss   (before the update)
//     loss.backward(); clip_grad_norm_(params, grad_clip) if grad_clip != 0
//     optimizer.step(); optimizer.zero_grad(set_to_none=True)
//
// That is train_step (train/train_step.h), the step `lathe train` takes. Dropout is off. The
// optimizer spec {"name": "sgd" | "adam" | "adamw" | "prodigy", "fused"?, <PyTorch option names>}
// goes over the case's "param_groups" when it lists them; without them it is built as nanoGPT's
// configure_optimizers builds AdamW (train/nanogpt_groups.h): parameters with 2 or more dims take
// the given weight_decay, the others (biases, LayerNorm weights) weight_decay 0. "muon" is Muon
// beside AdamW ({"name": "muon", <Muon's options>, "adamw": {<AdamW's>}}), split as lathe train
// splits them (train/muon_groups.h) or by the "optimizer" of each param group. The optimizer can
// start from given state (optimizer_state.* tensors, a resumed run) and return its state
// ("return_state": true), so that a run can be cut in two cases. "precision": "bf16" | "fp16" runs
// the model under the mixed-precision policy (nn/precision.h); fp16 with the dynamic loss scaler
// ("scaler": its options), whose state is returned and read back as scaler.scale and
// scaler.growth_tracker, and whose skipped steps are the result "skipped".
#include <cstdint>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/ops.h"
#include "nn/gpt.h"
#include "nn/precision.h"
#include "optim/grad_scaler.h"
#include "ref/case_model.h"
#include "ref/kinds.h"
#include "ref/torch_options.h"
#include "serialize/json_document.h"
#include "optim/adam.h"
#include "optim/composite.h"
#include "optim/muon.h"
#include "train/muon_groups.h"
#include "train/nanogpt_groups.h"
#include "optim/registry.h"
#include "train/train_step.h"

namespace lathe::ref {

namespace {

constexpr const char* kTrainCase = "case kind \"train\": ";

// One group of the case's explicit "param_groups": its parameters (with their names) and its
// option overrides.
struct NamedGroup {
  std::vector<Tensor> params;
  std::vector<std::string> names;
  nlohmann::json overrides;
};

// The case's explicit "param_groups": [{"params": [parameter names], <option overrides>}, ...],
// each parameter of the model in exactly one group, in PyTorch's way of listing groups.
std::vector<NamedGroup> named_param_groups(const nn::Module& model, const nlohmann::json& groups) {
  LATHE_CHECK(groups.is_array() && !groups.empty(), kTrainCase,
              "\"param_groups\" must be a non-empty list of {\"params\": [parameter names], ...}");
  const auto named = model.named_parameters();
  std::map<std::string, int64_t> group_of;  // parameter name -> its group, -1 while in none
  std::string all_names;
  for (const auto& [name, p] : named) {
    group_of[name] = -1;
    all_names += (all_names.empty() ? "" : ", ") + name;
  }
  std::vector<NamedGroup> out;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const nlohmann::json& g = groups[gi];
    LATHE_CHECK(g.is_object() && g.contains("params") && g["params"].is_array() && !g["params"].empty(), kTrainCase,
                "param_groups[", gi, "] needs \"params\", a non-empty list of parameter names");
    NamedGroup ng;
    for (const auto& v : g["params"]) {
      LATHE_CHECK(v.is_string(), kTrainCase, "param_groups[", gi, "] lists ", serialize::quote_json(v),
                  ", which is not a parameter name");
      const std::string name = v;
      auto it = group_of.find(name);
      LATHE_CHECK(it != group_of.end(), kTrainCase, "param_groups[", gi, "] names \"", name,
                  "\", which is not a parameter of the model (its parameters: ", all_names, ")");
      LATHE_CHECK(it->second < 0, kTrainCase, "parameter \"", name, "\" is in param_groups[", it->second,
                  "] and again in param_groups[", gi, "]");
      it->second = int64_t(gi);
      for (const auto& [n, p] : named)
        if (n == name) ng.params.push_back(p);
      ng.names.push_back(name);
    }
    ng.overrides = g;
    ng.overrides.erase("params");
    out.push_back(std::move(ng));
  }
  for (const auto& [name, p] : named)
    LATHE_CHECK(group_of.at(name) >= 0, kTrainCase, "parameter \"", name, "\" is in no group of \"param_groups\"");
  return out;
}

// Adds param_groups[gi] to `opt`, its implementation options checked and set aside.
void add_case_group(optim::Optimizer& opt, const NamedGroup& g, size_t gi) {
  const std::string where = kTrainCase + ("param_groups[" + std::to_string(gi) + "]");
  const nlohmann::json overrides = without_implementation_options(g.overrides, opt.fused(), where);
  try {
    opt.add_param_group(g.params, overrides, g.names);
  } catch (const Error& e) {
    LATHE_FAIL(where, ": ", e.what());
  }
}

// "muon": torch.optim.Muon on the hidden matrices beside torch.optim.AdamW on the rest, the pair a
// PyTorch training loop steps (train/muon_groups.h): {"name": "muon", <Muon's options>, "adamw":
// {<AdamW's options>}}. Explicit "param_groups" say which optimizer updates each one
// ("optimizer": "muon" or "adamw"); without them the split is lathe train's.
std::unique_ptr<optim::Optimizer> case_muon_optimizer(const nlohmann::json& doc, const nn::GPT& model,
                                                      nlohmann::json muon, bool fused) {
  const std::string where = std::string(kTrainCase) + "\"optimizer\".\"adamw\"";
  nlohmann::json adamw = muon.contains("adamw") ? muon["adamw"] : nlohmann::json::object();
  muon.erase("adamw");
  LATHE_CHECK(adamw.is_object(), where, " must be an object of AdamW's options, got ", serialize::quote_json(adamw));
  adamw = without_implementation_options(adamw, fused, where);
  if (!doc.contains("param_groups")) {
    try {
      return train::make_muon_adamw(model, muon, adamw, fused);
    } catch (const Error& e) {
      LATHE_FAIL(kTrainCase, e.what());
    }
  }
  std::unique_ptr<optim::Optimizer> muon_part, adamw_part;
  try {
    muon_part = std::make_unique<optim::Muon>(muon);
    adamw_part = std::make_unique<optim::AdamW>(adamw, fused);
  } catch (const Error& e) {
    LATHE_FAIL(kTrainCase, e.what());
  }
  const std::vector<NamedGroup> groups = named_param_groups(model, doc["param_groups"]);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    NamedGroup g = groups[gi];
    const nlohmann::json which = g.overrides.value("optimizer", nlohmann::json());
    LATHE_CHECK(which == "muon" || which == "adamw", kTrainCase, "param_groups[", gi,
                "] needs \"optimizer\": \"muon\" or \"adamw\" (which of the pair updates it), got ",
                g.overrides.contains("optimizer") ? serialize::quote_json(which) : "none");
    g.overrides.erase("optimizer");
    add_case_group(which == "muon" ? *muon_part : *adamw_part, g, gi);
  }
  std::vector<std::unique_ptr<optim::Optimizer>> parts;
  for (auto* part : {&muon_part, &adamw_part})
    if ((*part)->num_params() > 0) parts.push_back(std::move(*part));
  return std::make_unique<optim::Composite>(std::move(parts));
}

// The case's optimizer: {"name", "fused"?, <PyTorch option names>}. The options are the
// optimizer's own (its constructor's, as torch.optim.AdamW(groups, lr=...) takes them); the
// groups are the case's "param_groups" when it has them, else nanoGPT's (train/nanogpt_groups.h).
std::unique_ptr<optim::Optimizer> case_optimizer(const nlohmann::json& doc, const nn::GPT& model) {
  const nlohmann::json& spec = doc["optimizer"];
  LATHE_CHECK(spec.is_object() && spec.contains("name") && spec["name"].is_string(), kTrainCase,
              "\"optimizer\" must be an object with a \"name\" (", optim::optimizer_names(), ")");
  const nlohmann::json fused = spec.value("fused", nlohmann::json(false));
  LATHE_CHECK(fused.is_boolean() || fused.is_null(), kTrainCase, "\"fused\" of the optimizer must be true, false or null, got ",
              serialize::quote_json(fused));
  nlohmann::json options = spec;
  options.erase("name");
  options = without_implementation_options(options, fused == true, std::string(kTrainCase) + "\"optimizer\"");
  if (spec["name"] == "muon") return case_muon_optimizer(doc, model, options, fused == true);
  const bool explicit_groups = doc.contains("param_groups");
  std::unique_ptr<optim::Optimizer> opt;
  try {
    opt = optim::make_optimizer(spec["name"].get<std::string>(), explicit_groups ? options : nlohmann::json::object(),
                         fused == true);
  } catch (const Error& e) {
    LATHE_FAIL(kTrainCase, e.what());
  }
  if (explicit_groups) {
    const std::vector<NamedGroup> groups = named_param_groups(model, doc["param_groups"]);
    for (size_t gi = 0; gi < groups.size(); ++gi) add_case_group(*opt, groups[gi], gi);
  } else {
    train::add_nanogpt_param_groups(*opt, model, options);
  }
  return opt;
}

// Optimizer state in a case, under names another implementation can produce:
// "optimizer_state.<parameter name>.<key>", "optimizer_state.group.<g>.<key>" and
// "optimizer_state.global.<key>"; the optimizer's own names number the parameters instead.
constexpr const char* kStatePrefix = "optimizer_state.";

std::map<TensorImpl*, std::string> parameter_names(const nn::Module& model) {
  std::map<TensorImpl*, std::string> out;
  for (const auto& [name, p] : model.named_parameters()) out[p.id()] = name;
  return out;
}

std::string case_state_name(const optim::StateEntry& e, const optim::Optimizer& opt,
                            const std::map<TensorImpl*, std::string>& names) {
  if (e.scope == optim::StateScope::param) return kStatePrefix + names.at(opt.param(e.index).id()) + "." + e.key;
  return kStatePrefix + e.name;  // "group.<g>.<key>", "global.<key>"
}

// The case's optimizer_state.* tensors, loaded into `opt` under its own names.
void load_case_state(const serialize::SafetensorsFile& c, optim::Optimizer& opt, const nn::Module& model) {
  std::map<std::string, int64_t> index_of;  // parameter name -> the optimizer's number
  const auto names = parameter_names(model);
  for (size_t i = 0; i < opt.num_params(); ++i) index_of[names.at(opt.param(int64_t(i)).id())] = int64_t(i);
  std::map<std::string, optim::StateSource> sources;
  std::map<std::string, std::string> case_name;  // the optimizer's name -> the case's
  for (const auto& [name, t] : c.tensors) {
    if (name.rfind(kStatePrefix, 0) != 0) continue;
    const std::string rest = name.substr(std::string(kStatePrefix).size());
    if (rest.rfind("group.", 0) == 0 || rest.rfind("global.", 0) == 0) {
      sources[rest] = optim::StateSource{t};
      continue;
    }
    const auto dot = rest.rfind('.');
    const std::string param = dot == std::string::npos ? "" : rest.substr(0, dot);
    auto it = index_of.find(param);
    LATHE_CHECK(it != index_of.end(), kTrainCase, "state tensor \"", name,
                "\" names no parameter the optimizer holds (expected optimizer_state.<parameter name>.<key>, "
                "optimizer_state.group.<g>.<key> or optimizer_state.global.<key>)");
    sources["param." + std::to_string(it->second) + rest.substr(dot)] = optim::StateSource{t};
    case_name["param." + std::to_string(it->second) + rest.substr(dot)] = name;
  }
  if (sources.empty()) return;
  // Each tensor alone first, so that an error names the case's tensor, not the optimizer's number
  // for it ("param.0.exp_avg, part 0").
  for (const auto& [own, src] : sources) {
    try {
      opt.check_state({{own, src}});
    } catch (const Error& e) {
      LATHE_FAIL(kTrainCase, "\"", case_name.count(own) ? case_name[own] : kStatePrefix + own, "\": ", e.what());
    }
  }
  try {
    opt.load_state(sources);
  } catch (const Error& e) {
    LATHE_FAIL(kTrainCase, "optimizer_state: ", e.what());
  }
}

// t for "<prefix><t>" written the way the case format writes it (decimal, no sign, no leading
// zero); -1 for any other name.
int64_t step_of(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.rfind(prefix, 0) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int64_t t = std::stoll(digits);
  return std::to_string(t) == digits ? t : -1;
}

constexpr const char* kScalerPrefix = "scaler.";

bool is_step_input(const std::string& name, int64_t steps) {
  if (name.rfind(kStatePrefix, 0) == 0) return true;  // read by load_case_state
  if (name.rfind(kScalerPrefix, 0) == 0) return true;  // read by case_scaler
  for (const char* prefix : {"idx.", "targets."}) {
    const int64_t t = step_of(name, prefix);
    if (t >= 0 && t < steps) return true;
  }
  return false;
}

bool has_step_inputs(const serialize::SafetensorsFile& c, int64_t t) {
  return c.find("idx." + std::to_string(t)) && c.find("targets." + std::to_string(t));
}

// How many steps, from 0 on, have both idx.<t> and targets.<t>; never more than the tensors.
int64_t steps_provided(const serialize::SafetensorsFile& c) {
  int64_t t = 0;
  while (has_step_inputs(c, t)) ++t;
  return t;
}

std::string first_missing_input(const serialize::SafetensorsFile& c, int64_t t) {
  const std::string idx = "idx." + std::to_string(t);
  return c.find(idx) ? "targets." + std::to_string(t) : idx;
}

// GradScaler's growth_interval, an integer from 1 to int64's largest. JSON's parser reads a larger
// integer as an unsigned one (up to 2^64 - 1) or as a float (2^70), and a float is no interval.
int64_t growth_interval(const nlohmann::json& v) {
  const bool fits = v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX));
  LATHE_CHECK(fits && v.get<int64_t>() >= 1, kTrainCase, "\"scaler\": growth_interval must be an integer from 1 to ", INT64_MAX,
              ", got ", serialize::quote_json(v));
  return v.get<int64_t>();
}

// fp16's loss scaler: "scaler": {"init_scale", "growth_factor", "backoff_factor",
// "growth_interval"} (PyTorch's GradScaler defaults), its state from scaler.* tensors when the case
// has them (a resumed run).
std::unique_ptr<optim::GradScaler> case_scaler(const serialize::SafetensorsFile& c, const nlohmann::json& spec,
                                               nn::Precision precision) {
  if (!nn::needs_loss_scaling(precision)) {
    LATHE_CHECK(!spec.contains("scaler"), kTrainCase, "\"scaler\" is for \"precision\": \"fp16\" only");
    for (const auto& [name, t] : c.tensors)
      LATHE_CHECK(name.rfind(kScalerPrefix, 0) != 0, kTrainCase, "tensor \"", name,
                  "\" is loss-scaler state, which only an fp16 case has");
    return nullptr;
  }
  const nlohmann::json s = spec.value("scaler", nlohmann::json::object());
  LATHE_CHECK(s.is_object(), kTrainCase, "\"scaler\" must be an object of GradScaler options, got ", serialize::quote_json(s));
  optim::GradScalerOptions o;
  for (const auto& [key, v] : s.items()) {
    const bool number = v.is_number() && !v.is_boolean();
    if (key == "init_scale" && number) o.init_scale = v.get<double>();
    else if (key == "growth_factor" && number) o.growth_factor = v.get<double>();
    else if (key == "backoff_factor" && number) o.backoff_factor = v.get<double>();
    else if (key == "growth_interval" && v.is_number()) o.growth_interval = growth_interval(v);
    else
      LATHE_FAIL(kTrainCase, "\"scaler\": unknown option or wrong type \"", key, "\" = ", serialize::quote_json(v),
                 " (options: init_scale, growth_factor, backoff_factor, growth_interval)");
  }
  std::unique_ptr<optim::GradScaler> scaler;
  try {
    scaler = std::make_unique<optim::GradScaler>(o);
    std::map<std::string, optim::StateSource> sources;
    for (const auto& [name, t] : c.tensors)
      if (name.rfind(kScalerPrefix, 0) == 0) sources[name] = optim::StateSource{t};
    if (!sources.empty()) scaler->load_state(sources);
  } catch (const Error& e) {
    LATHE_FAIL(kTrainCase, e.what());
  }
  return scaler;
}

}  // namespace

RefOutput run_train_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device) {
  LATHE_CHECK(spec.contains("steps") && spec["steps"].is_number_integer() && spec["steps"].get<int64_t>() >= 1, kTrainCase,
              "the case document needs \"steps\" (an integer >= 1)");
  LATHE_CHECK(spec.contains("optimizer"), kTrainCase, "the case document has no \"optimizer\"");
  const int64_t steps = spec["steps"].get<int64_t>();
  // Every step reads its own inputs, so the case's tensors bound the steps: refused at once, not
  // after a loop over a count the document made up.
  const int64_t provided = steps_provided(c);
  LATHE_CHECK(steps <= provided, kTrainCase, "\"steps\" is ", steps, " but the case holds inputs for ", provided,
              " step", provided == 1 ? "" : "s", " (\"", first_missing_input(c, provided), "\" is missing)");
  const double grad_clip = spec.value("grad_clip", 0.0);
  LATHE_CHECK(grad_clip >= 0, kTrainCase, "invalid grad_clip = ", grad_clip, " (must be >= 0; 0 = no clipping)");
  auto model_ptr = case_gpt(c, spec, device, "train", [steps](const std::string& n) { return is_step_input(n, steps); },
                            "idx.<t> / targets.<t> for t < " + std::to_string(steps) + " / optimizer_state.*");
  nn::GPT& model = *model_ptr;
  model.train();
  const nn::Precision precision = case_precision(spec, "train");
  model.set_precision(precision);
  auto scaler = case_scaler(c, spec, precision);

  std::vector<Tensor> idx, targets;
  for (int64_t s = 0; s < steps; ++s) {
    idx.push_back(case_tokens(c, "idx." + std::to_string(s), model, device, "train"));
    targets.push_back(case_tokens(c, "targets." + std::to_string(s), model, device, "train", /*targets=*/true));
    LATHE_CHECK(targets.back().shape() == idx.back().shape(), kTrainCase, "targets.", s, " ",
                shape_str(targets.back().shape()), " must have the shape of idx.", s, " ", shape_str(idx.back().shape()));
  }

  auto opt = case_optimizer(spec, model);
  load_case_state(c, *opt, model);
  const nlohmann::json return_state = spec.value("return_state", nlohmann::json(false));
  LATHE_CHECK(return_state.is_boolean(), kTrainCase, "\"return_state\" must be true or false, got ",
              serialize::quote_json(return_state));
  std::vector<float> losses;
  std::vector<int32_t> skipped;
  for (int64_t s = 0; s < steps; ++s) {
    const train::StepOutcome o =
        train::train_step(model, *opt, idx[size_t(s)], targets[size_t(s)], grad_clip, std::nullopt, scaler.get());
    losses.push_back(float(o.loss()));
    skipped.push_back(o.skipped ? 1 : 0);
  }

  RefOutput result;
  result.tensors.emplace_back("losses", Tensor::from_vector(losses, {steps}));
  if (scaler) {
    result.tensors.emplace_back("skipped", Tensor::from_vector(skipped, {steps}));
    for (const optim::StateEntry& e : scaler->state_entries()) result.tensors.emplace_back(e.name, e.tensor);
  }
  for (const auto& [name, p] : model.state_dict()) {
    if (name == "lm_head.weight" && !c.find(name)) continue;
    result.tensors.emplace_back(name, p.detach());
  }
  if (return_state.get<bool>()) {
    const auto names = parameter_names(model);
    for (const optim::StateEntry& e : opt->state_entries())
      result.tensors.emplace_back(case_state_name(e, *opt, names), e.tensor);
  }
  return result;
}

}  // namespace lathe::ref
