// Reference case kind "optim": an optimizer run on given gradients (docs/reference-cases.md).
//
// Inputs: tensors param.<i> (initial values) and grad.<t>.<i> (gradient of parameter i at step t;
// missing = no gradient that step), and the case document {"optimizer", "steps", "groups",
// optional "fused"}. Outputs param.<i>, state.<i>.<key> (PyTorch keys) and {"groups": [...]} with
// each group's scalar state. Malformed input is an Error naming the fault.
#include <cstdint>
#include <map>
#include <memory>

#include "core/error.h"
#include "optim/prodigy.h"
#include "ref/kinds.h"
#include "ref/torch_options.h"
#include "serialize/json_document.h"
#include "optim/registry.h"

namespace lathe::ref {

namespace {

// "12" -> 12; anything else (sign, empty, too long) -> -1.
int64_t parse_index(const std::string& s) {
  if (s.empty() || s.size() > 9) return -1;
  for (char c : s)
    if (c < '0' || c > '9') return -1;
  return std::stoll(s);
}

// Steps without gradients are legitimate (PyTorch skips a parameter without a gradient) and
// cheap, but a document could ask for billions of them; no reference needs more than this.
constexpr int64_t kMaxOptimSteps = 100000;

}  // namespace

RefOutput run_optim_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device) {
  const char* K = "case kind \"optim\": ";
  LATHE_CHECK(spec.contains("optimizer") && spec["optimizer"].is_string(), K,
              "the case document needs \"optimizer\" (a string)");
  LATHE_CHECK(spec.contains("steps") && spec["steps"].is_number_integer() && spec["steps"].get<int64_t>() >= 0, K,
              "the case document needs \"steps\" (an integer >= 0)");
  LATHE_CHECK(spec.contains("groups") && spec["groups"].is_array() && !spec["groups"].empty(), K,
              "the case document needs \"groups\" (a non-empty list)");
  const bool fused = spec.value("fused", false);
  const int64_t steps = spec["steps"].get<int64_t>();
  LATHE_CHECK(steps <= kMaxOptimSteps, K, "\"steps\" is ", steps, ", more than the limit of ", kMaxOptimSteps,
              " steps of an optim case");

  // Parameters and gradients by index; every other tensor name is an error.
  std::map<int64_t, Tensor> params;
  std::map<std::pair<int64_t, int64_t>, const Tensor*> grads;
  for (const auto& [name, t] : c.tensors) {
    if (name.rfind("param.", 0) == 0) {
      const int64_t i = parse_index(name.substr(6));
      LATHE_CHECK(i >= 0, K, "malformed tensor name \"", name, "\" (expected param.<i>)");
      LATHE_CHECK(is_floating(t.dtype()), K, "parameter \"", name, "\" must be floating, got ", t.desc());
      params[i] = t;
    } else if (name.rfind("grad.", 0) == 0) {
      const std::string rest = name.substr(5);
      const auto dot = rest.find('.');
      const int64_t step = dot == std::string::npos ? -1 : parse_index(rest.substr(0, dot));
      const int64_t i = dot == std::string::npos ? -1 : parse_index(rest.substr(dot + 1));
      LATHE_CHECK(step >= 0 && i >= 0, K, "malformed tensor name \"", name, "\" (expected grad.<t>.<i>)");
      LATHE_CHECK(step < steps, K, "gradient \"", name, "\" is for step ", step, " but the case has ", steps, " steps");
      grads[{step, i}] = &t;
    } else {
      LATHE_FAIL(K, "unexpected tensor \"", name, "\" (expected param.<i> and grad.<t>.<i>)");
    }
  }
  LATHE_CHECK(!params.empty(), K, "the case has no param.<i> tensors");
  const int64_t n = int64_t(params.size());
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK(params.count(i), K, "parameters must be numbered 0..", n - 1, " but param.", i, " is missing");
  for (const auto& [key, g] : grads) {
    LATHE_CHECK(params.count(key.second), K, "gradient \"grad.", key.first, ".", key.second,
                "\" names parameter ", key.second, " which does not exist (", n, " parameters)");
    const Tensor& p = params[key.second];
    LATHE_CHECK(g->shape() == p.shape(), K, "gradient \"grad.", key.first, ".", key.second, "\" is ", g->desc(),
                " but parameter ", key.second, " is ", p.desc());
  }

  std::vector<Tensor> work(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) work[size_t(i)] = params[i].to(device).clone().requires_grad_(true);

  // Options beside "groups" are the optimizer's own (its constructor's), which every group
  // overrides: only Prodigy has one a group cannot stand for, d0 (d and d_max start at it).
  nlohmann::json defaults = nlohmann::json::object();
  if (spec.contains("d0")) {
    LATHE_CHECK(spec["optimizer"] == "prodigy", K, "\"d0\" beside \"groups\" is Prodigy's; ",
                serialize::quote_json(spec["optimizer"]), " has none");
    defaults["d0"] = spec["d0"];
  }
  std::unique_ptr<optim::Optimizer> opt;
  try {
    opt = optim::make_optimizer(spec["optimizer"].get<std::string>(), defaults, fused);
  } catch (const Error& e) {
    LATHE_FAIL(K, e.what());
  }
  std::vector<int> group_of(size_t(n), -1);
  std::vector<int64_t> case_index;  // optimizer parameter number -> the case's parameter index
  for (size_t gi = 0; gi < spec["groups"].size(); ++gi) {
    const auto& g = spec["groups"][gi];
    LATHE_CHECK(g.is_object() && g.contains("params") && g["params"].is_array(), K, "group ", gi,
                " needs \"params\" (a list of parameter indices)");
    std::vector<Tensor> ps;
    std::vector<std::string> names;  // the case's, for errors
    for (const auto& v : g["params"]) {
      LATHE_CHECK(v.is_number_integer(), K, "group ", gi, " lists ", serialize::quote_json(v), " which is not a parameter index");
      // An index past int64 (2^64 - 1, say) reads as a negative number: the message shows it as written.
      const int64_t i = v.get<int64_t>();
      LATHE_CHECK(i >= 0 && i < n && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)), K, "group ",
                  gi, " names parameter ", v.dump(), " which does not exist (", n, " parameters)");
      LATHE_CHECK(group_of[size_t(i)] < 0, K, "parameter ", i, " is in group ", group_of[size_t(i)],
                  " and again in group ", gi);
      group_of[size_t(i)] = int(gi);
      ps.push_back(work[size_t(i)]);
      names.push_back("param." + std::to_string(i));
      case_index.push_back(i);
    }
    nlohmann::json options = g;
    options.erase("params");
    const std::string where = K + ("group " + std::to_string(gi));
    options = without_implementation_options(options, fused, where);
    try {
      opt->add_param_group(ps, options, names);
    } catch (const Error& e) {
      LATHE_FAIL(where, ": ", e.what());
    }
  }
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK(group_of[size_t(i)] >= 0, K, "parameter ", i, " is in no group");

  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      auto it = grads.find({t, i});
      work[size_t(i)].set_grad(it == grads.end() ? Tensor() : it->second->to(device).to(work[size_t(i)].dtype()).clone());
    }
    opt->step();
  }

  RefOutput out;
  for (int64_t i = 0; i < n; ++i) out.tensors.emplace_back("param." + std::to_string(i), work[size_t(i)].detach());
  for (const auto& e : opt->state_entries())
    if (e.scope == optim::StateScope::param)
      out.tensors.emplace_back("state." + std::to_string(case_index[size_t(e.index)]) + "." + e.key, e.tensor);
  nlohmann::json groups = nlohmann::json::array();
  auto* prodigy = dynamic_cast<optim::Prodigy*>(opt.get());
  for (size_t g = 0; g < opt->param_groups().size(); ++g)
    groups.push_back(prodigy ? prodigy->group_scalars(g) : nlohmann::json::object());
  out.result = {{"groups", groups}};
  return out;
}

}  // namespace lathe::ref
