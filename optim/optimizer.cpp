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

// ---------------------------------------------------------------- Optimizer

size_t Optimizer::add_param_group(const std::vector<Tensor>& params, const nlohmann::json& options,
                                  const std::vector<std::string>& names) {
  const std::string k = kind();
  LATHE_CHECK(!params.empty(), k, ": add_param_group got an empty parameter list");
  LATHE_CHECK(names.empty() || names.size() == params.size(), k, ": add_param_group got ", names.size(),
              " names for ", params.size(), " parameters");
  nlohmann::json opts = checked_options(options);
  for (size_t j = 0; j < params.size(); ++j) {
    const Tensor& p = params[j];
    const std::string what = names.empty() ? "parameter " + std::to_string(j) + " of the new group"
                                           : "parameter \"" + names[j] + "\"";
    LATHE_CHECK(p.defined(), k, ": ", what, " is an undefined tensor");
    LATHE_CHECK(is_floating(p.dtype()), k, ": ", what, " is ", p.desc(), "; only floating tensors can be optimized");
    LATHE_CHECK(p.is_leaf(), k, ": ", what, " (", p.desc(),
                ") is not a leaf tensor; optimize the tensor you created, not a result of an op");
    check_param(p, what + " (" + p.desc() + ")");
  }
  const size_t g = append_group(params, std::move(opts));
  store_options(g, groups_[g].options);
  init_group_state(g);
  return g;
}

size_t Optimizer::append_group(const std::vector<Tensor>& params, nlohmann::json options) {
  const std::string k = kind();
  std::map<TensorImpl*, int64_t> seen;
  for (size_t j = 0; j < params.size(); ++j) {
    const Tensor& p = params[j];
    auto it = index_of_.find(p.id());
    LATHE_CHECK(it == index_of_.end(), k, ": parameter ", j, " of the new group (", p.desc(),
                ") is already parameter ", it == index_of_.end() ? 0 : it->second,
                " of another group; a parameter may be in one group only");
    LATHE_CHECK(!seen.count(p.id()), k, ": parameter ", j, " of the new group (", p.desc(),
                ") appears twice in it (first as parameter ", seen[p.id()], ")");
    seen[p.id()] = int64_t(j);
  }
  ParamGroup g;
  for (const Tensor& p : params) {
    int64_t i = int64_t(params_.size());
    index_of_[p.id()] = i;
    params_.push_back(p);
    g.params.push_back(p);
    g.indices.push_back(i);
  }
  g.options = std::move(options);
  groups_.push_back(std::move(g));
  return groups_.size() - 1;
}

const Tensor& Optimizer::param(int64_t i) const {
  LATHE_CHECK(i >= 0 && i < int64_t(params_.size()), kind(), ": parameter ", i, " does not exist (",
              params_.size(), " parameters)");
  return params_[size_t(i)];
}

bool Optimizer::participates(const Tensor& p) const {
  if (!p.requires_grad() || !p.grad().defined()) return false;
  return !sharded() || owns(index_of_.at(p.id()));
}

void Optimizer::shard_state(int64_t begin, int64_t end) {
  LATHE_CHECK(!reads_all_state(), kind(), ": its update reads the state of every parameter at once, so its state "
              "cannot be sharded (ZeRO-1 needs an update that is per parameter: sgd, adam, adamw)");
  LATHE_CHECK(begin >= 0 && begin <= end && end <= int64_t(params_.size()), kind(), ": shard [", begin, ", ", end,
              ") is not a range of its ", params_.size(), " parameters");
  shard_begin_ = begin;
  shard_end_ = end;
  release_unowned_state();
}

void Optimizer::release_unowned_state() {
  if (!sharded()) return;
  for (StateSlot* s : declared_slots()) {
    if (s->scope() != StateScope::param) continue;
    for (int64_t i = 0; i < s->extent(); ++i)
      if (!owns(i)) s->at(i) = Tensor();
  }
}

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
  completed_steps_.value() += 1;
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

double Optimizer::lr(size_t group) const {
  LATHE_CHECK(group < groups_.size(), kind(), ": group ", group, " does not exist (", groups_.size(), " groups)");
  return groups_[group].number("lr");
}

void Optimizer::set_lr(size_t group, double value) {
  LATHE_CHECK(group < groups_.size(), kind(), ": group ", group, " does not exist (", groups_.size(), " groups)");
  nlohmann::json opts = groups_[group].options;
  opts["lr"] = value;
  opts = checked_options(opts);
  groups_[group].options = std::move(opts);
  store_options(group, groups_[group].options);
}

void Optimizer::set_lr_all(double value) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, value);
}

// ---------------------------------------------------------------- placement

const StateSlot& Optimizer::slot(StateScope scope, const std::string& key) const {
  const StateSlot* s = declared(scope, key);
  LATHE_CHECK(s != nullptr, kind(), ": no ", scope_name(scope), " state \"", key, "\" in this optimizer");
  return *s;
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

Device Optimizer::target_device(const StateSlot& s, int64_t index) const {
  if (s.placement(fused_) == Placement::host) return Device::cpu();
  return owner_device(s.scope(), index);
}

DType Optimizer::target_dtype(const StateSlot& s, int64_t index) const {
  return s.scope() == StateScope::param ? s.dtype_for(param(index).dtype()) : s.dtype_for(DType::f32);
}

Device Optimizer::state_device(StateScope scope, int64_t index, const std::string& key) const {
  return target_device(slot(scope, key), index);
}

Tensor Optimizer::placed(const StateSlot& s, int64_t index, const Tensor& value) const {
  Tensor t = value.detach().to(target_device(s, index)).to(target_dtype(s, index));
  // Own the storage: state must never alias a caller's tensor.
  if (t.storage() == value.storage() || !t.is_contiguous()) t = t.clone();
  return t;
}

void Optimizer::place_state() {
  for (StateSlot* s : declared_slots()) {
    const int64_t n = s->scope() == StateScope::global ? 0 : s->extent();
    for (int64_t i = s->scope() == StateScope::global ? -1 : 0; i < n; ++i) {
      Tensor& t = s->at(i);
      if (!t.defined()) continue;
      Device d = target_device(*s, i);
      if (t.device() != d) t = t.to(d);
    }
  }
}

// ---------------------------------------------------------------- per-parameter slots

ParamSlot::ParamSlot(Optimizer& owner, std::string key, Placement plain, Placement fused, std::optional<DType> dtype,
                     bool shaped_like_param)
    : StateSlot(owner, StateScope::param, std::move(key), plain, fused, dtype, shaped_like_param), owner_(owner) {}

Tensor* ParamSlot::find_at(int64_t i) {
  owner_.param(i);
  Tensor& t = at(i);
  return t.defined() ? &t : nullptr;
}

Tensor& ParamSlot::zeros_at(int64_t i) {
  if (Tensor* t = find_at(i)) return *t;
  const Tensor& p = owner_.param(i);
  return at(i) = Tensor::zeros(shaped_like_param() ? p.shape() : Shape{}, owner_.target_dtype(*this, i),
                               owner_.target_device(*this, i));
}

Tensor& ParamSlot::store(int64_t i, const Tensor& value) { return at(i) = owner_.placed(*this, i, value); }

bool ParamSlot::owner_fused() const { return owner_.fused(); }

// The point of typed slots, checked where it is cheapest: host access compiles only against a
// slot whose policy is host (a device-placed slot has no T&).
namespace {
template <class S>
concept host_readable = requires(S& s) { s.host(int64_t(0)); };
static_assert(host_readable<ParamScalar<float, Placement::host, Placement::with_param>>);
static_assert(!host_readable<ParamScalar<float, Placement::with_param>>);
static_assert(!host_readable<ParamState<>>);
}  // namespace

// ---------------------------------------------------------------- state access by name

Tensor Optimizer::state(int64_t i, const std::string& key) const {
  param(i);
  const StateSlot* s = declared(StateScope::param, key);
  return s ? s->get(i) : Tensor();
}

Tensor Optimizer::group_state_tensor(size_t g, const std::string& key) const {
  LATHE_CHECK(g < groups_.size(), kind(), ": group ", g, " does not exist (", groups_.size(), " groups)");
  const StateSlot* s = declared(StateScope::group, key);
  return s ? s->get(int64_t(g)) : Tensor();
}

Tensor Optimizer::global_state_tensor(const std::string& key) const {
  const StateSlot* s = declared(StateScope::global, key);
  return s ? s->get(-1) : Tensor();
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
    all.push_back(checked_options(j));
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].options = std::move(all[g]);
    store_options(g, groups_[g].options);
  }
}

std::vector<StateEntry> Optimizer::state_entries() const {
  // Within each parameter / group, entries come in key order (the order of the files written
  // before state had types).
  std::map<std::string, const StateSlot*> by_scope[3];
  for (const StateSlot* s : declared_slots()) by_scope[size_t(s->scope())][s->key()] = s;
  std::vector<StateEntry> out;
  auto add = [&](StateScope scope, int64_t index, const StateSlot& s, const Tensor& t) {
    std::string name = state_name(scope, index, s.key());
    // Per-parameter state of a sharded optimizer lives with its parameter on the owning process only.
    Placement policy = s.placement(fused_);
    if (sharded() && scope == StateScope::param && policy == Placement::with_param) policy = Placement::sharded;
    out.push_back(StateEntry{std::move(name), scope, index, s.key(), policy, t.dtype(), t});
  };
  for (int64_t i = 0; i < int64_t(params_.size()); ++i)
    for (const auto& [key, s] : by_scope[size_t(StateScope::param)])
      if (const Tensor& t = s->get(i); t.defined()) add(StateScope::param, i, *s, t);
  for (int64_t g = 0; g < int64_t(groups_.size()); ++g)
    for (const auto& [key, s] : by_scope[size_t(StateScope::group)])
      if (const Tensor& t = s->get(g); t.defined()) add(StateScope::group, g, *s, t);
  for (const auto& [key, s] : by_scope[size_t(StateScope::global)])
    if (const Tensor& t = s->get(-1); t.defined()) add(StateScope::global, -1, *s, t);
  return out;
}

StateName parse_state_name(const std::string& owner, const std::string& name) {
  auto fail = [&]() -> StateName {
    LATHE_FAIL(owner, ": malformed state name \"", name,
               "\" (expected param.<i>.<key>, group.<g>.<key> or global.<key>)");
  };
  auto dot = name.find('.');
  if (dot == std::string::npos) return fail();
  std::string head = name.substr(0, dot), rest = name.substr(dot + 1);
  if (head == "global") return rest.empty() ? fail() : StateName{StateScope::global, -1, rest};
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
  return StateName{scope, std::stoll(num), rest.substr(dot2 + 1)};
}

std::string state_name(StateScope scope, int64_t index, const std::string& key) {
  return std::string(scope_name(scope)) + "." + (index >= 0 ? std::to_string(index) + "." : "") + key;
}

namespace {

// A step counter (every optimizer's state "step") holds whole numbers from 0 to 2^53: a NaN, a
// negative or a fractional count would be taken on as a step number (-9223372036854775804 after a
// NaN went through int64) and the bias corrections computed from it.
void check_step_counts(const std::string& kind, const std::string& name, const StateSource& src) {
  Tensor t;
  if (const auto* tensor = std::get_if<Tensor>(&src.value)) {
    t = *tensor;
  } else {
    const auto& hb = std::get<HostBytes>(src.value);
    t = Tensor::from_bytes(hb.data, hb.shape, hb.dtype, Device::cpu());
  }
  for (double v : t.to(Device::cpu()).to_vector<double>())
    LATHE_CHECK(std::isfinite(v) && v >= 0 && v <= 9007199254740992.0 && std::floor(v) == v, kind, ": state \"", name,
                "\" counts steps and must hold whole numbers from 0 to 2^53, got ", v);
}

}  // namespace

std::vector<Optimizer::CheckedState> Optimizer::checked_state(const std::map<std::string, StateSource>& sources) const {
  const std::string k = kind();
  std::vector<CheckedState> items;
  for (const auto& [name, src] : sources) {
    StateName pn = parse_state_name(k, name);
    StateSlot* sp = declared(pn.scope, pn.key);
    LATHE_CHECK(sp != nullptr, k, ": state \"", name, "\" is not declared by this optimizer (", scope_name(pn.scope),
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
    if (pn.scope == StateScope::param && sp->shaped_like_param()) {
      const Tensor& p = params_[size_t(pn.index)];
      LATHE_CHECK(shape == p.shape(), k, ": state \"", name, "\" has shape ", shape_str(shape), " but parameter ",
                  pn.index, " has shape ", shape_str(p.shape()));
    }
    if (sp->scope() != StateScope::param)
      LATHE_CHECK(numel_of(shape) == 1, k, ": state \"", name, "\" must hold one value, got shape ", shape_str(shape));
    if (sp->key() == "step") check_step_counts(k, name, src);
    items.push_back(CheckedState{pn, sp, &src});
  }
  return items;
}

void Optimizer::check_state(const std::map<std::string, StateSource>& sources) const { checked_state(sources); }

void Optimizer::load_state(const std::map<std::string, StateSource>& sources) {
  // Everything is checked first, so that a bad entry changes nothing.
  for (const CheckedState& it : checked_state(sources)) {
    const int64_t index = it.where.index;
    Device target = target_device(*it.slot, index);
    DType dt = target_dtype(*it.slot, index);
    Tensor t;
    if (const auto* src = std::get_if<Tensor>(&it.src->value)) {
      t = placed(*it.slot, index, *src);
    } else {
      // Straight from the host bytes to the target device: one copy, no stop on the way.
      const auto& hb = std::get<HostBytes>(it.src->value);
      t = Tensor::from_bytes(hb.data, hb.shape, hb.dtype, hb.dtype == dt ? target : Device::cpu());
      if (t.dtype() != dt) t = t.to(dt).to(target);
    }
    if (it.slot->scope() != StateScope::param) t = t.reshape({});
    it.slot->at(index) = t;
  }
}

}  // namespace lathe::optim
