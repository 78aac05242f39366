// Several optimizers over disjoint sets of parameters, stepped together and seen by everything
// else as one optimizer: the checkpoint, data parallelism (ZeRO-1 included), the loss scaler and
// train_step take it as they take any other. It is how `lathe train --optimizer muon` runs Muon on
// the hidden matrices beside AdamW on the rest (train/muon_groups.h), as modded-nanogpt and
// nanochat keep a list of optimizers and step each.
//
// The parts are built first, each with its own groups, options and mode (a fused AdamW beside a
// plain Muon); the composite takes them over and tracks exactly their parameters, in their groups,
// and nothing else (a parameter in two parts is refused; it takes no groups of its own).
//
// Numbering: the parts' parameters follow each other in part order, and so do their groups:
// parameter i of part k is parameter offset_k + i of the composite. Its checkpoint names
// (param.<i>.<key>, group.<g>.<key>) and groups_json use that numbering, each group with its part's
// kind under "optimizer" so that a reader sees which rule updates it. Every state tensor stays in
// its part, under the part's policy; the composite's only state of its own is the count of
// completed steps ("global.step"), which every part shares because the parts step only together.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace lathe::optim {

class Composite : public Optimizer {
 public:
  // Throws when there is no part, a part holds no parameter, two parts hold the same parameter,
  // or a part keeps global state other than its step count (the composite could not name it).
  explicit Composite(std::vector<std::unique_ptr<Optimizer>> parts);

  // The parts' kinds joined by "+": "muon+adamw".
  std::string kind() const override;
  const std::vector<std::unique_ptr<Optimizer>>& parts() const { return parts_; }
  // The part that updates group g, and g's number in it.
  std::pair<Optimizer*, size_t> part_of_group(size_t group) const;

  // A composite takes no groups: add them to a part before composing.
  size_t add_param_group(const std::vector<Tensor>& params, const nlohmann::json& options = {},
                         const std::vector<std::string>& names = {}) override;
  void set_lr(size_t group, double value) override;

  Tensor state(int64_t param_index, const std::string& key) const override;
  Tensor group_state_tensor(size_t group, const std::string& key) const override;
  Tensor global_state_tensor(const std::string& key) const override;
  Device state_device(StateScope scope, int64_t index, const std::string& key) const override;

  nlohmann::json groups_json() const override;
  void load_groups_json(const nlohmann::json& groups) override;
  std::vector<StateEntry> state_entries() const override;
  void load_state(const std::map<std::string, StateSource>& sources) override;
  void check_state(const std::map<std::string, StateSource>& sources) const override;

  void shard_state(int64_t begin, int64_t end) override;
  void release_unowned_state() override;
  bool reads_all_state() const override;
  void set_param_copies(ParamCopies* copies) override;

 protected:
  // Options live in the parts, and every path that reads or writes them (add_param_group, set_lr,
  // load_groups_json) is routed there, so these two are never reached.
  nlohmann::json checked_options(const nlohmann::json& overrides) const override;
  void store_options(size_t group, const nlohmann::json& canonical) override;
  // Steps every part (each places its own state first).
  void update() override;

 private:
  struct Span {
    size_t part;
    int64_t local;  // the number within the part
  };
  Span param_span(int64_t index) const;  // throws naming the index when out of range
  Span group_span(int64_t index) const;
  // `sources` under the composite's names, split into each part's names (index: part), plus the
  // composite's own (global) entries. Throws naming a bad entry; nothing changes.
  std::vector<std::map<std::string, StateSource>> split_state(const std::map<std::string, StateSource>& sources,
                                                              std::map<std::string, StateSource>& own) const;

  std::vector<std::unique_ptr<Optimizer>> parts_;
  std::vector<int64_t> param_offset_, group_offset_;  // per part
};

}  // namespace lathe::optim
