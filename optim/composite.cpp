#include "optim/composite.h"

#include <algorithm>

#include "core/error.h"

namespace lathe::optim {

namespace {

bool any_fused(const std::vector<std::unique_ptr<Optimizer>>& parts) {
  return std::any_of(parts.begin(), parts.end(), [](const auto& p) { return p && p->fused(); });
}

}  // namespace

Composite::Composite(std::vector<std::unique_ptr<Optimizer>> parts) : Optimizer(any_fused(parts)), parts_(std::move(parts)) {
  LATHE_CHECK(!parts_.empty(), "composite optimizer: no parts");
  for (size_t k = 0; k < parts_.size(); ++k) {
    const Optimizer* part = parts_[k].get();
    LATHE_CHECK(part != nullptr, "composite optimizer: part ", k, " is null");
    LATHE_CHECK(part->num_params() > 0, "composite optimizer: part ", k, " (", part->kind(),
                ") holds no parameter; add its groups before composing");
    for (const StateSlot* s : part->declared_slots())
      LATHE_CHECK(s->scope() != StateScope::global || s->key() == "step", "composite optimizer: part ", k, " (",
                  part->kind(), ") keeps global state \"", s->key(), "\", which a composite cannot name");
  }
  for (size_t k = 0; k < parts_.size(); ++k) {
    param_offset_.push_back(int64_t(num_params()));
    group_offset_.push_back(int64_t(groups_.size()));
    for (const ParamGroup& g : parts_[k]->param_groups()) {
      try {
        append_group(g.params, g.options);
      } catch (const Error& e) {
        LATHE_FAIL("composite optimizer: part ", k, " (", parts_[k]->kind(), ") holds a parameter of an earlier part: ",
                   e.what());
      }
    }
  }
  // One step count for all: the parts must agree on it (they may have stepped before composing).
  for (size_t k = 1; k < parts_.size(); ++k)
    LATHE_CHECK(parts_[k]->step_count() == parts_[0]->step_count(), "composite optimizer: part ", k, " (",
                parts_[k]->kind(), ") has taken ", parts_[k]->step_count(), " steps but part 0 (", parts_[0]->kind(),
                ") ", parts_[0]->step_count(), "; parts step together");
  Optimizer::load_state({{"global.step", StateSource{parts_[0]->global_state_tensor("step")}}});
}

std::string Composite::kind() const {
  std::string out;
  for (const auto& p : parts_) {
    if (!out.empty()) out += '+';
    out += p->kind();
  }
  return out;
}

Composite::Span Composite::param_span(int64_t index) const {
  LATHE_CHECK(index >= 0 && index < int64_t(num_params()), kind(), ": parameter ", index, " does not exist (",
              num_params(), " parameters)");
  size_t k = parts_.size() - 1;
  while (param_offset_[k] > index) --k;
  return {k, index - param_offset_[k]};
}

Composite::Span Composite::group_span(int64_t index) const {
  LATHE_CHECK(index >= 0 && index < int64_t(groups_.size()), kind(), ": group ", index, " does not exist (",
              groups_.size(), " groups)");
  size_t k = parts_.size() - 1;
  while (group_offset_[k] > index) --k;
  return {k, index - group_offset_[k]};
}

std::pair<Optimizer*, size_t> Composite::part_of_group(size_t group) const {
  const Span s = group_span(int64_t(group));
  return {parts_[s.part].get(), size_t(s.local)};
}

size_t Composite::add_param_group(const std::vector<Tensor>&, const nlohmann::json&, const std::vector<std::string>&) {
  LATHE_FAIL(kind(), ": a composite optimizer takes no new groups; add them to its parts before composing");
}

nlohmann::json Composite::checked_options(const nlohmann::json&) const {
  LATHE_FAIL(kind(), ": a composite optimizer's options are its parts'");
}

void Composite::store_options(size_t, const nlohmann::json&) {
  LATHE_FAIL(kind(), ": a composite optimizer's options are its parts'");
}

void Composite::set_lr(size_t group, double value) {
  const Span s = group_span(int64_t(group));
  Optimizer& part = *parts_[s.part];
  part.set_lr(size_t(s.local), value);
  groups_[group].options = part.param_groups()[size_t(s.local)].options;
}

void Composite::set_param_copies(ParamCopies* copies) {
  for (auto& part : parts_) part->set_param_copies(copies);
}

void Composite::update() {
  for (auto& part : parts_) part->step();
}

// ---------------------------------------------------------------- state by name

Tensor Composite::state(int64_t param_index, const std::string& key) const {
  const Span s = param_span(param_index);
  return parts_[s.part]->state(s.local, key);
}

Tensor Composite::group_state_tensor(size_t group, const std::string& key) const {
  const Span s = group_span(int64_t(group));
  return parts_[s.part]->group_state_tensor(size_t(s.local), key);
}

Tensor Composite::global_state_tensor(const std::string& key) const { return Optimizer::global_state_tensor(key); }

Device Composite::state_device(StateScope scope, int64_t index, const std::string& key) const {
  if (scope == StateScope::global) return Optimizer::state_device(scope, index, key);
  const Span s = scope == StateScope::param ? param_span(index) : group_span(index);
  return parts_[s.part]->state_device(scope, s.local, key);
}

// ---------------------------------------------------------------- checkpoint API

nlohmann::json Composite::groups_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t k = 0; k < parts_.size(); ++k) {
    for (nlohmann::json g : parts_[k]->groups_json()) {
      for (auto& i : g["params"]) i = i.get<int64_t>() + param_offset_[k];
      g["optimizer"] = parts_[k]->kind();
      out.push_back(std::move(g));
    }
  }
  return out;
}

void Composite::load_groups_json(const nlohmann::json& groups) {
  const std::string k = kind();
  LATHE_CHECK(groups.is_array() && groups.size() == groups_.size(), k, ": load_groups_json expects ",
              groups_.size(), " groups, got ", groups.is_array() ? std::to_string(groups.size()) : groups.dump());
  // Each part's groups in its own numbering, checked against the part before any part changes.
  std::vector<nlohmann::json> per_part(parts_.size(), nlohmann::json::array());
  for (size_t g = 0; g < groups.size(); ++g) {
    const Span s = group_span(int64_t(g));
    const Optimizer& part = *parts_[s.part];
    nlohmann::json j = groups[g];
    LATHE_CHECK(j.is_object() && j.contains("params") && j["params"].is_array(), k, ": saved group ", g,
                " has no \"params\" list");
    LATHE_CHECK(j.value("optimizer", nlohmann::json()) == part.kind(), k, ": saved group ", g, " is updated by ",
                j.contains("optimizer") ? j["optimizer"].dump() : "no optimizer named", " but this optimizer's group ",
                g, " by \"", part.kind(), "\"");
    j.erase("optimizer");
    for (auto& i : j["params"]) {
      LATHE_CHECK(i.is_number_integer(), k, ": saved group ", g, " has a malformed \"params\" list: ",
                  groups[g]["params"].dump());
      i = i.get<int64_t>() - param_offset_[s.part];
    }
    per_part[s.part].push_back(std::move(j));
  }
  std::vector<nlohmann::json> before;
  for (const auto& part : parts_) before.push_back(part->groups_json());
  try {
    for (size_t p = 0; p < parts_.size(); ++p) parts_[p]->load_groups_json(per_part[p]);
  } catch (const Error&) {
    // A later part refused its groups: the earlier ones take theirs back (which they accept).
    for (size_t p = 0; p < parts_.size(); ++p) parts_[p]->load_groups_json(before[p]);
    throw;
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    const Span s = group_span(int64_t(g));
    groups_[g].options = parts_[s.part]->param_groups()[size_t(s.local)].options;
  }
}

std::vector<StateEntry> Composite::state_entries() const {
  // As Optimizer::state_entries orders them: per-parameter entries by parameter, then per-group,
  // then the global step.
  std::vector<StateEntry> params, groups;
  for (size_t k = 0; k < parts_.size(); ++k) {
    for (StateEntry e : parts_[k]->state_entries()) {
      if (e.scope == StateScope::global) continue;  // the step count, which the composite's stands for
      e.index += e.scope == StateScope::param ? param_offset_[k] : group_offset_[k];
      e.name = state_name(e.scope, e.index, e.key);
      (e.scope == StateScope::param ? params : groups).push_back(std::move(e));
    }
  }
  std::vector<StateEntry> out = std::move(params);
  out.insert(out.end(), std::make_move_iterator(groups.begin()), std::make_move_iterator(groups.end()));
  for (StateEntry& e : Optimizer::state_entries()) out.push_back(std::move(e));
  return out;
}

std::vector<std::map<std::string, StateSource>> Composite::split_state(const std::map<std::string, StateSource>& sources,
                                                                        std::map<std::string, StateSource>& own) const {
  const std::string k = kind();
  std::vector<std::map<std::string, StateSource>> per_part(parts_.size());
  for (const auto& [name, src] : sources) {
    const StateName n = parse_state_name(k, name);
    if (n.scope == StateScope::global) {
      // The step count is every part's as well as the composite's; other global state is
      // refused by the composite's own check, naming it.
      own.emplace(name, src);
      if (n.key == "step")
        for (auto& part : per_part) part.emplace(name, src);
      continue;
    }
    const bool param = n.scope == StateScope::param;
    LATHE_CHECK(n.index < (param ? int64_t(num_params()) : int64_t(groups_.size())), k, ": state \"", name,
                "\" names ", param ? "parameter " : "group ", n.index, " but the optimizer has ",
                param ? num_params() : groups_.size(), param ? " parameters" : " groups");
    const Span s = param ? param_span(n.index) : group_span(n.index);
    per_part[s.part].emplace(state_name(n.scope, s.local, n.key), src);
  }
  return per_part;
}

void Composite::check_state(const std::map<std::string, StateSource>& sources) const {
  std::map<std::string, StateSource> own;
  const auto per_part = split_state(sources, own);
  Optimizer::check_state(own);
  for (size_t p = 0; p < parts_.size(); ++p) {
    try {
      parts_[p]->check_state(per_part[p]);
    } catch (const Error& e) {
      // The part names its own numbers; say which part, so they can be read back.
      LATHE_FAIL(kind(), ": part ", p, " (parameters from ", param_offset_[p], ", groups from ", group_offset_[p],
                 "): ", e.what());
    }
  }
}

void Composite::load_state(const std::map<std::string, StateSource>& sources) {
  check_state(sources);  // every part's share, before any part changes
  std::map<std::string, StateSource> own;
  const auto per_part = split_state(sources, own);
  Optimizer::load_state(own);
  for (size_t p = 0; p < parts_.size(); ++p) parts_[p]->load_state(per_part[p]);
}

// ---------------------------------------------------------------- sharding

bool Composite::reads_all_state() const {
  return std::any_of(parts_.begin(), parts_.end(), [](const auto& p) { return p->reads_all_state(); });
}

void Composite::shard_state(int64_t begin, int64_t end) {
  Optimizer::shard_state(begin, end);  // checks the range and that no part refuses
  for (size_t p = 0; p < parts_.size(); ++p) {
    const int64_t n = int64_t(parts_[p]->num_params());
    auto local = [&](int64_t i) { return std::clamp(i - param_offset_[p], int64_t(0), n); };
    parts_[p]->shard_state(local(begin), local(end));
  }
}

void Composite::release_unowned_state() {
  for (auto& part : parts_) part->release_unowned_state();
}

}  // namespace lathe::optim
