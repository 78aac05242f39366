#include "optim/optimizer.h"

#include <cmath>
#include <cstdlib>

#include "core/autograd.h"
#include "core/error.h"

namespace lathe::optim {

// ---------------------------------------------------------------- ParamGroup

namespace {
const nlohmann::json& option_at(const nlohmann::json& o, const std::string& key) {
  auto it = o.find(key);
  LATHE_CHECK(it != o.end(), "param group has no option \"", key, "\"");
  return *it;
}
}  // namespace

double ParamGroup::number(const std::string& key) const {
  const auto& v = option_at(options, key);
  LATHE_CHECK(v.is_number(), "param group option \"", key, "\" must be a number, got ", v.dump());
  return v.get<double>();
}

bool ParamGroup::flag(const std::string& key) const {
  const auto& v = option_at(options, key);
  LATHE_CHECK(v.is_boolean(), "param group option \"", key, "\" must be true or false, got ", v.dump());
  return v.get<bool>();
}

int64_t ParamGroup::integer(const std::string& key) const {
  const auto& v = option_at(options, key);
  LATHE_CHECK(v.is_number_integer(), "param group option \"", key, "\" must be an integer, got ", v.dump());
  return v.get<int64_t>();
}

std::pair<double, double> ParamGroup::pair(const std::string& key) const {
  const auto& v = option_at(options, key);
  LATHE_CHECK(v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number(), "param group option \"",
              key, "\" must be a pair of numbers, got ", v.dump());
  return {v[0].get<double>(), v[1].get<double>()};
}

bool ParamGroup::is_null(const std::string& key) const { return option_at(options, key).is_null(); }

// ---------------------------------------------------------------- option checks

void check_lr(const char* opt, double lr) {
  LATHE_CHECK(std::isfinite(lr) && lr >= 0, opt, ": invalid learning rate lr = ", lr, " (must be >= 0)");
}

void check_nonnegative(const char* opt, const char* option, double value) {
  LATHE_CHECK(!std::isnan(value) && value >= 0, opt, ": invalid ", option, " = ", value, " (must be >= 0)");
}

void check_beta(const char* opt, const char* option, double value) {
  LATHE_CHECK(value >= 0 && value < 1, opt, ": invalid ", option, " = ", value, " (must be in [0, 1))");
}

void check_positive(const char* opt, const char* option, double value) {
  LATHE_CHECK(value > 0, opt, ": invalid ", option, " = ", value, " (must be > 0)");
}

void merge_defaults(const char* opt, nlohmann::json& options, const nlohmann::json& defaults) {
  if (options.is_null()) options = nlohmann::json::object();
  LATHE_CHECK(options.is_object(), opt, ": group options must be a JSON object, got ", options.dump());
  for (auto it = options.begin(); it != options.end(); ++it) {
    if (it.key() == "params") continue;
    LATHE_CHECK(defaults.contains(it.key()), opt, ": unknown option \"", it.key(), "\"");
  }
  options.erase("params");
  for (auto it = defaults.begin(); it != defaults.end(); ++it)
    if (!options.contains(it.key())) options[it.key()] = it.value();
}

// ---------------------------------------------------------------- Optimizer

Optimizer::Optimizer(nlohmann::json defaults, StateSchema schema, bool fused)
    : defaults_(std::move(defaults)), schema_(std::move(schema)), fused_(fused) {
  // Completed steps: counted on the host in every mode, so counting costs no device traffic.
  schema_.push_back(global_state("step", Placement::host, DType::i64));
  global_state_["step"] = Tensor::zeros({}, DType::i64);
}

size_t Optimizer::add_param_group(const std::vector<Tensor>& params, const nlohmann::json& options) {
  const std::string k = kind();
  LATHE_CHECK(!params.empty(), k, ": add_param_group got an empty parameter list");
  nlohmann::json opts = options;
  merge_defaults(k.c_str(), opts, defaults_);
  validate_options(opts);

  ParamGroup g;
  std::map<TensorImpl*, int64_t> seen;
  for (size_t j = 0; j < params.size(); ++j) {
    const Tensor& p = params[j];
    LATHE_CHECK(p.defined(), k, ": parameter ", j, " of the new group is an undefined tensor");
    LATHE_CHECK(is_floating(p.dtype()), k, ": parameter ", j, " of the new group is ", p.desc(),
                "; only floating tensors can be optimized");
    LATHE_CHECK(p.is_leaf(), k, ": parameter ", j, " of the new group (", p.desc(),
                ") is not a leaf tensor; optimize the tensor you created, not a result of an op");
    auto it = index_of_.find(p.id());
    LATHE_CHECK(it == index_of_.end(), k, ": parameter ", j, " of the new group (", p.desc(),
                ") is already parameter ", it == index_of_.end() ? 0 : it->second,
                " of another group; a parameter may be in one group only");
    LATHE_CHECK(!seen.count(p.id()), k, ": parameter ", j, " of the new group (", p.desc(),
                ") appears twice in it (first as parameter ", seen[p.id()], ")");
    seen[p.id()] = int64_t(j);
  }
  for (const Tensor& p : params) {
    int64_t i = int64_t(params_.size());
    index_of_[p.id()] = i;
    params_.push_back(p);
    param_state_.emplace_back();
    g.params.push_back(p);
    g.indices.push_back(i);
  }
  g.options = std::move(opts);
  groups_.push_back(std::move(g));
  group_state_.emplace_back();
  init_group_state(groups_.size() - 1);
  return groups_.size() - 1;
}

const Tensor& Optimizer::param(int64_t i) const {
  LATHE_CHECK(i >= 0 && i < int64_t(params_.size()), kind(), ": parameter ", i, " does not exist (",
              params_.size(), " parameters)");
  return params_[size_t(i)];
}

bool Optimizer::participates(const Tensor& p) { return p.requires_grad() && p.grad().defined(); }

void Optimizer::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!participates(p)) continue;
    const Tensor g = p.grad();
    LATHE_CHECK(g.shape() == p.shape(), kind(), ": the gradient of parameter ", i, " is ", g.desc(),
                " but the parameter is ", p.desc());
    LATHE_CHECK(g.device() == p.device(), kind(), ": the gradient of parameter ", i, " is on ",
                g.device().str(), " but the parameter is on ", p.device().str());
  }
  place_state();
  update();
  global_state_["step"].data<int64_t>()[0] += 1;
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

int64_t Optimizer::step_count() const { return global_state_.at("step").data<int64_t>()[0]; }

double Optimizer::lr(size_t group) const {
  LATHE_CHECK(group < groups_.size(), kind(), ": group ", group, " does not exist (", groups_.size(), " groups)");
  return groups_[group].number("lr");
}

void Optimizer::set_lr(size_t group, double value) {
  LATHE_CHECK(group < groups_.size(), kind(), ": group ", group, " does not exist (", groups_.size(), " groups)");
  nlohmann::json opts = groups_[group].options;
  opts["lr"] = value;
  validate_options(opts);
  groups_[group].options = std::move(opts);
}

void Optimizer::set_lr_all(double value) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, value);
}

// ---------------------------------------------------------------- placement

const StateSpec& Optimizer::spec(StateScope scope, const std::string& key) const {
  for (const auto& s : schema_)
    if (s.scope == scope && s.key == key) return s;
  LATHE_FAIL(kind(), ": no ", scope_name(scope), " state \"", key, "\" in this optimizer's schema");
}

Device Optimizer::owner_device(StateScope scope, int64_t index) const {
  if (scope == StateScope::param) return param(index).device();
  // Group and global state live with "the parameters": they must all be on one device.
  std::vector<Tensor> ps;
  if (scope == StateScope::group) ps = groups_.at(size_t(index)).params;
  else ps = params_;
  LATHE_CHECK(!ps.empty(), kind(), ": ", scope_name(scope), " state needs parameters to be placed with");
  Device d = ps[0].device();
  for (const Tensor& p : ps)
    LATHE_CHECK(p.device() == d, kind(), ": ", scope == StateScope::group ? "group " + std::to_string(index) : "optimizer",
                " state is placed with its parameters, but they are on ", d.str(), " and ", p.device().str());
  return d;
}

Device Optimizer::target_device(const StateSpec& s, int64_t index) const {
  Placement pl = s.placement_for(fused_);
  if (pl == Placement::host) return Device::cpu();
  return owner_device(s.scope, index);
}

Device Optimizer::state_device(StateScope scope, int64_t index, const std::string& key) const {
  return target_device(spec(scope, key), index);
}

Tensor Optimizer::placed(const StateSpec& s, int64_t index, const Tensor& value) const {
  DType dt = s.scope == StateScope::param ? state_dtype(s, param(index).dtype()) : state_dtype(s, DType::f32);
  Tensor t = value.detach().to(target_device(s, index)).to(dt);
  // Own the storage: state must never alias a caller's tensor.
  if (t.storage() == value.storage() || !t.is_contiguous()) t = t.clone();
  return t;
}

void Optimizer::place_state() {
  for (size_t i = 0; i < param_state_.size(); ++i)
    for (auto& [key, t] : param_state_[i]) {
      Device d = target_device(spec(StateScope::param, key), int64_t(i));
      if (t.device() != d) t = t.to(d);
    }
  for (size_t g = 0; g < group_state_.size(); ++g)
    for (auto& [key, t] : group_state_[g]) {
      Device d = target_device(spec(StateScope::group, key), int64_t(g));
      if (t.device() != d) t = t.to(d);
    }
  for (auto& [key, t] : global_state_) {
    const StateSpec& s = spec(StateScope::global, key);
    if (s.placement_for(fused_) == Placement::host && t.device().is_cpu()) continue;
    Device d = target_device(s, -1);
    if (t.device() != d) t = t.to(d);
  }
}

// ---------------------------------------------------------------- state access

Tensor* Optimizer::find_state(int64_t i, const std::string& key) {
  auto& m = param_state_.at(size_t(i));
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

Tensor& Optimizer::set_state(int64_t i, const std::string& key, const Tensor& value) {
  const StateSpec& s = spec(StateScope::param, key);
  return param_state_.at(size_t(i))[key] = placed(s, i, value);
}

Tensor& Optimizer::state_or_zeros(int64_t i, const std::string& key) {
  if (Tensor* t = find_state(i, key)) return *t;
  const StateSpec& s = spec(StateScope::param, key);
  const Tensor& p = param(i);
  Tensor z = Tensor::zeros(s.shaped_like_param ? p.shape() : Shape{}, state_dtype(s, p.dtype()), target_device(s, i));
  return param_state_[size_t(i)][key] = z;
}

Tensor& Optimizer::group_state_ref(size_t g, const std::string& key) {
  auto& m = group_state_.at(g);
  auto it = m.find(key);
  LATHE_CHECK(it != m.end(), kind(), ": group ", g, " has no state \"", key, "\"");
  return it->second;
}

void Optimizer::set_group_state(size_t g, const std::string& key, const Tensor& value) {
  group_state_.at(g)[key] = placed(spec(StateScope::group, key), int64_t(g), value);
}

Tensor& Optimizer::global_state_ref(const std::string& key) {
  auto it = global_state_.find(key);
  LATHE_CHECK(it != global_state_.end(), kind(), ": no global state \"", key, "\"");
  return it->second;
}

void Optimizer::set_global_state(const std::string& key, const Tensor& value) {
  global_state_[key] = placed(spec(StateScope::global, key), -1, value);
}

Tensor Optimizer::state(int64_t i, const std::string& key) const {
  param(i);
  const auto& m = param_state_[size_t(i)];
  auto it = m.find(key);
  return it == m.end() ? Tensor() : it->second;
}

Tensor Optimizer::group_state_tensor(size_t g, const std::string& key) const {
  LATHE_CHECK(g < groups_.size(), kind(), ": group ", g, " does not exist (", groups_.size(), " groups)");
  auto it = group_state_[g].find(key);
  return it == group_state_[g].end() ? Tensor() : it->second;
}

Tensor Optimizer::global_state_tensor(const std::string& key) const {
  auto it = global_state_.find(key);
  return it == global_state_.end() ? Tensor() : it->second;
}

// ---------------------------------------------------------------- checkpoint API

nlohmann::json Optimizer::groups_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : groups_) {
    nlohmann::json j = g.options;
    j["params"] = g.indices;
    out.push_back(std::move(j));
  }
  return out;
}

void Optimizer::load_groups_json(const nlohmann::json& groups) {
  const std::string k = kind();
  LATHE_CHECK(groups.is_array() && groups.size() == groups_.size(), k, ": load_groups_json expects ",
              groups_.size(), " groups, got ", groups.is_array() ? std::to_string(groups.size()) : groups.dump());
  std::vector<nlohmann::json> all;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& j = groups[g];
    LATHE_CHECK(j.is_object() && j.contains("params"), k, ": saved group ", g, " has no \"params\"");
    std::vector<int64_t> idx;
    try {
      idx = j["params"].get<std::vector<int64_t>>();
    } catch (const std::exception&) {
      LATHE_FAIL(k, ": saved group ", g, " has a malformed \"params\" list: ", j["params"].dump());
    }
    LATHE_CHECK(idx == groups_[g].indices, k, ": saved group ", g, " holds parameters ", j["params"].dump(),
                " but this optimizer's group ", g, " holds ", nlohmann::json(groups_[g].indices).dump());
    nlohmann::json opts = j;
    merge_defaults(k.c_str(), opts, defaults_);
    validate_options(opts);
    all.push_back(std::move(opts));
  }
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options = std::move(all[g]);
}

std::vector<StateEntry> Optimizer::state_entries() const {
  std::vector<StateEntry> out;
  auto add = [&](StateScope scope, int64_t index, const std::string& key, const Tensor& t) {
    const StateSpec& s = spec(scope, key);
    std::string name = std::string(scope_name(scope)) + "." + (index >= 0 ? std::to_string(index) + "." : "") + key;
    out.push_back(StateEntry{std::move(name), scope, index, key, s.placement_for(fused_), t.dtype(), t});
  };
  for (size_t i = 0; i < param_state_.size(); ++i)
    for (const auto& [key, t] : param_state_[i]) add(StateScope::param, int64_t(i), key, t);
  for (size_t g = 0; g < group_state_.size(); ++g)
    for (const auto& [key, t] : group_state_[g]) add(StateScope::group, int64_t(g), key, t);
  for (const auto& [key, t] : global_state_) add(StateScope::global, -1, key, t);
  return out;
}

namespace {
struct ParsedName {
  StateScope scope;
  int64_t index = -1;
  std::string key;
};

ParsedName parse_state_name(const std::string& k, const std::string& name) {
  auto fail = [&]() -> ParsedName {
    LATHE_FAIL(k, ": malformed state name \"", name,
               "\" (expected param.<i>.<key>, group.<g>.<key> or global.<key>)");
  };
  auto dot = name.find('.');
  if (dot == std::string::npos) return fail();
  std::string head = name.substr(0, dot), rest = name.substr(dot + 1);
  if (head == "global") return rest.empty() ? fail() : ParsedName{StateScope::global, -1, rest};
  StateScope scope;
  if (head == "param") scope = StateScope::param;
  else if (head == "group") scope = StateScope::group;
  else return fail();
  auto dot2 = rest.find('.');
  if (dot2 == std::string::npos || dot2 == 0 || dot2 + 1 == rest.size()) return fail();
  std::string num = rest.substr(0, dot2);
  for (char c : num)
    if (c < '0' || c > '9') return fail();
  if (num.size() > 15) return fail();
  return ParsedName{scope, std::stoll(num), rest.substr(dot2 + 1)};
}
}  // namespace

void Optimizer::load_state(const std::map<std::string, StateSource>& sources) {
  const std::string k = kind();
  // Validate everything first, so that a bad entry changes nothing.
  struct Item {
    ParsedName where;
    const StateSpec* spec;
    const StateSource* src;
  };
  std::vector<Item> items;
  for (const auto& [name, src] : sources) {
    ParsedName pn = parse_state_name(k, name);
    const StateSpec* sp = nullptr;
    for (const auto& s : schema_)
      if (s.scope == pn.scope && s.key == pn.key) sp = &s;
    LATHE_CHECK(sp != nullptr, k, ": state \"", name, "\" is not in this optimizer's schema (", scope_name(pn.scope),
                " state \"", pn.key, "\" unknown)");
    if (pn.scope == StateScope::param) {
      LATHE_CHECK(pn.index < int64_t(params_.size()), k, ": state \"", name, "\" names parameter ", pn.index,
                  " but the optimizer has ", params_.size(), " parameters");
      LATHE_CHECK(params_[size_t(pn.index)].requires_grad(), k, ": state \"", name, "\" belongs to parameter ",
                  pn.index, " which is frozen (requires_grad false); frozen parameters hold no state");
    }
    if (pn.scope == StateScope::group)
      LATHE_CHECK(pn.index < int64_t(groups_.size()), k, ": state \"", name, "\" names group ", pn.index,
                  " but the optimizer has ", groups_.size(), " groups");
    Shape shape;
    DType dt;
    if (const auto* t = std::get_if<Tensor>(&src.value)) {
      LATHE_CHECK(t->defined(), k, ": state \"", name, "\" is an undefined tensor");
      shape = t->shape();
      dt = t->dtype();
    } else {
      const auto& hb = std::get<HostBytes>(src.value);
      LATHE_CHECK(hb.data != nullptr || numel_of(hb.shape) == 0, k, ": state \"", name, "\" has no data");
      shape = hb.shape;
      dt = hb.dtype;
    }
    LATHE_CHECK(is_floating(dt) || is_integral(dt), k, ": state \"", name, "\" has dtype ", dtype_name(dt));
    if (pn.scope == StateScope::param && sp->shaped_like_param) {
      const Tensor& p = params_[size_t(pn.index)];
      LATHE_CHECK(shape == p.shape(), k, ": state \"", name, "\" has shape ", shape_str(shape), " but parameter ",
                  pn.index, " has shape ", shape_str(p.shape()));
    }
    if (pn.scope != StateScope::param || !sp->shaped_like_param)
      if (sp->scope != StateScope::param)
        LATHE_CHECK(numel_of(shape) == 1, k, ": state \"", name, "\" must hold one value, got shape ", shape_str(shape));
    items.push_back(Item{pn, sp, &src});
  }
  for (const auto& it : items) {
    const int64_t index = it.where.index;
    Device target = target_device(*it.spec, index);
    DType dt = it.spec->scope == StateScope::param ? state_dtype(*it.spec, params_[size_t(index)].dtype())
                                                   : state_dtype(*it.spec, DType::f32);
    Tensor t;
    if (const auto* src = std::get_if<Tensor>(&it.src->value)) {
      t = placed(*it.spec, index, *src);
    } else {
      // Straight from the host bytes to the target device: one copy, no stop on the way.
      const auto& hb = std::get<HostBytes>(it.src->value);
      t = Tensor::from_bytes(hb.data, hb.shape, hb.dtype, hb.dtype == dt ? target : Device::cpu());
      if (t.dtype() != dt) t = t.to(dt).to(target);
    }
    if (it.spec->scope != StateScope::param) t = t.reshape({});
    if (it.spec->scope == StateScope::param) param_state_[size_t(index)][it.where.key] = t;
    else if (it.spec->scope == StateScope::group) group_state_[size_t(index)][it.where.key] = t;
    else global_state_[it.where.key] = t;
  }
}

}  // namespace lathe::optim
