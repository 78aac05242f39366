// Training-state checkpoints (serialize/checkpoint.h): the five failures docs/design.md lists, each as a
// real save -> read -> restore -> continue cycle through a file, on the host-backed sim device (and
// on CUDA where a GPU exists); and damaged checkpoints, each refused with an error naming the file
// and the fault.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "core/backend.h"
#include "core/ops.h"
#include "core/storage.h"
#include "nn/gpt.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/prodigy.h"
#include "optim/sgd.h"
#include "serialize/checkpoint.h"
#include "serialize/checksum.h"
#include "tests/gpu_cases.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using lathe::testing::TempDir;
using lathe::testing::error_of;
using namespace lathe::optim;
using lathe::serialize::TrainingCheckpoint;
namespace fs = std::filesystem;

namespace {

// Each case with an accelerator runs on the host-backed sim device, and again as "<name> on cuda"
// on the first GPU: skipped as every GPU case is where there is none (a failure under
// LATHE_REQUIRE_GPU=1), run by the CUDA emulator as the ctest tests "emu:...".
#define ACCELERATOR_CASES(name, body)         \
  TEST_CASE(name) { body(Device::sim(0)); } \
  TEST_CASE(name " on cuda") {                \
    GPU_CASE();                               \
    body(Device::cuda(0));                    \
  }

nn::GPTConfig small_config() {
  nn::GPTConfig c;
  c.vocab_size = 32;
  c.block_size = 8;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 16;
  c.dropout = 0.0;
  return c;
}

// One training run: a model, an optimizer over (some of) its parameters, maybe a loss scaler.
struct Run {
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<GradScaler> scaler;
  int64_t step = 0;

  using MakeOpt = std::function<std::unique_ptr<Optimizer>(nn::GPT&)>;
  Run(Device model_device, const MakeOpt& make, bool with_scaler = false) {
    model = std::make_unique<nn::GPT>(small_config(), /*seed=*/5, model_device);
    opt = make(*model);
    if (with_scaler) scaler = std::make_unique<GradScaler>(GradScalerOptions{.init_scale = 1e38});
  }

  // Tokens drawn on the model's device, from the step number: the same batch in every run.
  double train_step() {
    const Device d = model->parameters()[0].device();
    Tensor x = Tensor::randint(0, 32, {2, 8}, 100 + uint64_t(step), 0, DType::i64, d);
    Tensor y = Tensor::randint(0, 32, {2, 8}, 200 + uint64_t(step), 0, DType::i64, d);
    Tensor loss = model->forward(x, y).loss;
    if (scaler) {
      scaler->scale(loss).backward();
      scaler->step(*opt);
      scaler->update();
    } else {
      loss.backward();
      opt->step();
    }
    opt->zero_grad();
    model->zero_grad();
    ++step;
    return loss.item();
  }

  void save(const std::string& path) const {
    serialize::TrainingStateRef ref;
    ref.model = model.get();
    ref.optimizer = opt.get();
    ref.scaler = scaler.get();
    ref.step = step;
    ref.model_description = small_config().to_json();
    ref.program = {{"note", "test"}};
    serialize::save_training_state(path, ref);
  }

  void restore(const std::string& path) {
    const TrainingCheckpoint ckpt = TrainingCheckpoint::read(path);
    ckpt.restore(*model, *opt, scaler.get());
    step = ckpt.step();
  }
};

std::unique_ptr<Optimizer> all_params_adamw(nn::GPT& m, bool fused) {
  return std::make_unique<AdamW>(m.parameters(), nlohmann::json{{"lr", 1e-2}}, fused);
}

// Bitwise equality of every parameter and every optimizer state tensor.
void check_same_state(const Run& a, const Run& b) {
  const auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    INFO("parameter ", pa[i].first);
    CHECK(serialize::tensor_checksum(pa[i].second) == serialize::tensor_checksum(pb[i].second));
  }
  const auto sa = a.opt->state_entries(), sb = b.opt->state_entries();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO("state ", sa[i].name);
    CHECK(sa[i].name == sb[i].name);
    CHECK(serialize::tensor_checksum(sa[i].tensor) == serialize::tensor_checksum(sb[i].tensor));
  }
}

// Every state tensor sits where its policy says for where the parameters are now.
void check_placement(const Optimizer& opt, Device param_device) {
  for (const auto& e : opt.state_entries()) {
    INFO("state ", e.name, " policy ", placement_name(e.placement), " on ", e.tensor.device().str());
    CHECK(e.tensor.device() == (e.placement == Placement::host ? Device::cpu() : param_device));
  }
}

}  // namespace

static void prodigy_group_state_placement(const Device acc) {
  INFO("device ", acc.str());
  TempDir dir("prodigy");
  auto make = [](nn::GPT& m) { return std::make_unique<Prodigy>(m.parameters(), nlohmann::json{{"d0", 1e-4}}); };
  Run ref(acc, make);
  for (int i = 0; i < 3; ++i) ref.train_step();
  ref.save(dir.file("p.safetensors"));
  for (int i = 0; i < 2; ++i) ref.train_step();

  Run resumed(acc, make);  // a fresh process: model built on the target device, then restore
  resumed.restore(dir.file("p.safetensors"));
  check_placement(*resumed.opt, acc);
  for (const auto& e : resumed.opt->state_entries()) {
    if (e.scope == StateScope::group) {
      // The plain Prodigy step reads d, d_max, ... on the host every step: its policy is host,
      // whatever device the checkpoint was written from. Moments stay with their parameters.
      CHECK(e.placement == Placement::host);
      CHECK(e.dtype == DType::f64);
    }
    // Moments with their parameters; the per-parameter step counter is host state.
    if (e.scope == StateScope::param)
      CHECK(e.tensor.device() == (e.placement == Placement::host ? Device::cpu() : acc));
  }
  CHECK(resumed.opt->group_state_tensor(0, "d").defined());
  for (int i = 0; i < 2; ++i) resumed.train_step();  // no device mismatch
  check_same_state(ref, resumed);
}
ACCELERATOR_CASES("checkpoint failure 1: Prodigy's group state, restored, sits where its policy puts it", prodigy_group_state_placement)

static void state_placement_around_module_to(const Device acc) {
  INFO("device ", acc.str());
  TempDir dir("order");
  for (bool fused : {false, true}) {
    INFO("fused ", fused);
    auto make = [fused](nn::GPT& m) { return all_params_adamw(m, fused); };
    Run ref(acc, make);
    for (int i = 0; i < 3; ++i) ref.train_step();
    ref.save(dir.file("o.safetensors"));
    for (int i = 0; i < 2; ++i) ref.train_step();

    // Restore on the cpu, then move the model: the state follows at the next step.
    Run load_then_move(Device::cpu(), make);
    load_then_move.restore(dir.file("o.safetensors"));
    check_placement(*load_then_move.opt, Device::cpu());
    load_then_move.model->to(acc);
    for (int i = 0; i < 2; ++i) load_then_move.train_step();
    check_placement(*load_then_move.opt, acc);
    check_same_state(ref, load_then_move);

    // Move first (optimizer created on the cpu), then restore: created on sim directly.
    Run move_then_load(Device::cpu(), make);
    move_then_load.model->to(acc);
    move_then_load.restore(dir.file("o.safetensors"));
    check_placement(*move_then_load.opt, acc);
    for (int i = 0; i < 2; ++i) move_then_load.train_step();
    check_same_state(ref, move_then_load);
  }
}
ACCELERATOR_CASES("checkpoint failure 2: state loaded before or after Module::to ends where its policy says", state_placement_around_module_to)

static void scaled_fused_adamw_resume(const Device acc) {
  INFO("device ", acc.str());
  TempDir dir("scaler");
  auto make = [](nn::GPT& m) { return all_params_adamw(m, /*fused=*/true); };
  Run ref(acc, make, /*with_scaler=*/true);
  for (int i = 0; i < 4; ++i) ref.train_step();  // the first steps overflow and back off
  CHECK(ref.scaler->get_scale() < 1e38);
  ref.save(dir.file("s.safetensors"));
  const double scale = ref.scaler->get_scale();
  const int64_t tracker = ref.scaler->growth_tracker();
  for (int i = 0; i < 3; ++i) ref.train_step();

  Run resumed(acc, make, /*with_scaler=*/true);
  resumed.restore(dir.file("s.safetensors"));
  CHECK(resumed.scaler->get_scale() == scale);
  CHECK(resumed.scaler->growth_tracker() == tracker);
  for (const auto& e : resumed.scaler->state_entries()) CHECK(e.tensor.device() == Device::cpu());
  check_placement(*resumed.opt, acc);
  CHECK(resumed.opt->state(0, "step").device() == acc);  // fused: the counter lives with the parameter
  for (int i = 0; i < 3; ++i) resumed.train_step();
  CHECK(resumed.scaler->get_scale() == ref.scaler->get_scale());
  check_same_state(ref, resumed);

  // A run without a scaler cannot silently drop the checkpoint's scaler state.
  Run no_scaler(acc, make);
  CHECK(error_of([&] { no_scaler.restore(dir.file("s.safetensors")); }).find("loss-scaler") != std::string::npos);
}
ACCELERATOR_CASES("checkpoint failure 3: resume with loss scaling and fused AdamW: no device mismatch, scaler restored", scaled_fused_adamw_resume)

static void subset_optimizer_tracking(const Device acc) {
  INFO("device ", acc.str());
  TempDir dir("subset");
  // Frozen: the position embedding. Left out of the optimizer (but trainable): LayerNorms and biases.
  auto make = [](nn::GPT& m) {
    std::vector<Tensor> matrices;
    for (const auto& [name, p] : m.named_parameters())
      if (p.dim() == 2 && name != "transformer.wpe.weight") matrices.push_back(p);
    return std::make_unique<SGD>(matrices, nlohmann::json{{"lr", 0.1}, {"momentum", 0.9}});
  };
  auto freeze = [](Run& r) {
    for (auto& [name, p] : r.model->named_parameters())
      if (name == "transformer.wpe.weight") p.requires_grad_(false);
  };
  Run ref(acc, make);
  freeze(ref);
  for (int i = 0; i < 2; ++i) ref.train_step();
  ref.save(dir.file("f.safetensors"));
  for (int i = 0; i < 2; ++i) ref.train_step();

  Run resumed(acc, make);
  freeze(resumed);
  const Tensor wpe_before = resumed.model->named_parameters()[1].second.clone();
  resumed.restore(dir.file("f.safetensors"));
  REQUIRE(resumed.opt->num_params() == ref.opt->num_params());
  const auto named = resumed.model->named_parameters();
  for (size_t i = 0; i < resumed.opt->num_params(); ++i) {
    const Tensor& p = resumed.opt->param(int64_t(i));
    bool is_matrix = false;
    for (const auto& [name, q] : named) is_matrix |= q.id() == p.id() && q.dim() == 2 && name != "transformer.wpe.weight";
    CHECK(is_matrix);
  }
  const auto ln_f_weight = [](Run& r) { return serialize::tensor_checksum(r.model->named_parameters().back().second); };
  const std::string ln_f_after_restore = ln_f_weight(resumed);
  for (int i = 0; i < 2; ++i) resumed.train_step();
  check_same_state(ref, resumed);
  CHECK(ln_f_weight(resumed) == ln_f_after_restore);  // trainable, has gradients, not in the optimizer
  // The frozen and the left-out parameters never move after the restore.
  const Tensor wpe = resumed.model->named_parameters()[1].second;
  CHECK(serialize::tensor_checksum(wpe) == serialize::tensor_checksum(wpe_before));
  CHECK(serialize::tensor_checksum(wpe) == serialize::tensor_checksum(ref.model->named_parameters()[1].second));
  for (const auto& e : resumed.opt->state_entries())
    if (e.scope == StateScope::param) CHECK(resumed.opt->param(e.index).dim() == 2);

  // An optimizer rebuilt from all the module's parameters is refused, naming the mismatch.
  Run rebuilt(acc, [](nn::GPT& m) { return std::make_unique<SGD>(m.parameters(), nlohmann::json{{"lr", 0.1}}); });
  const std::string err = error_of([&] { rebuilt.restore(dir.file("f.safetensors")); });
  CHECK(err.find("f.safetensors") != std::string::npos);
  CHECK(err.find("parameters") != std::string::npos);
}
ACCELERATOR_CASES("checkpoint failure 4: an optimizer over a subset, plus frozen parameters, tracks the same ones", subset_optimizer_tracking)

static void adam_step_counter_on_host(const Device acc) {
  INFO("device ", acc.str());
  TempDir dir("transfers");
  auto make = [](nn::GPT& m) { return std::make_unique<Adam>(m.parameters(), nlohmann::json{{"lr", 1e-2}}); };
  Run ref(acc, make);
  for (int i = 0; i < 3; ++i) ref.train_step();
  ref.save(dir.file("t.safetensors"));
  reset_transfer_stats();
  ref.train_step();
  const TransferStats fresh = transfer_stats();

  Run resumed(acc, make);
  resumed.restore(dir.file("t.safetensors"));
  for (size_t i = 0; i < resumed.opt->num_params(); ++i) {
    CHECK(resumed.opt->state(int64_t(i), "step").device() == Device::cpu());
    CHECK(resumed.opt->state(int64_t(i), "exp_avg").device() == acc);
  }
  reset_transfer_stats();
  resumed.train_step();
  CHECK(transfer_stats() == fresh);
  check_same_state(ref, resumed);
}
ACCELERATOR_CASES("checkpoint failure 5: after a resume the plain Adam step counter is host state, transfers equal a fresh run's", adam_step_counter_on_host)

static void device_file_onto_cpu_and_back(const Device acc) {
  INFO("device ", acc.str());
  TempDir dir("devices");
  auto make = [](nn::GPT& m) { return all_params_adamw(m, false); };
  for (auto [from, to] : {std::pair{acc, Device::cpu()}, std::pair{Device::cpu(), acc}}) {
    Run ref(from, make);
    for (int i = 0; i < 2; ++i) ref.train_step();
    ref.save(dir.file("d.safetensors"));
    ref.train_step();
    Run resumed(to, make);
    resumed.restore(dir.file("d.safetensors"));
    check_placement(*resumed.opt, to);
    resumed.train_step();
    // sim runs the cpu's kernels: the same bits. CUDA's kernels round differently from the cpu's.
    if (acc.type == DeviceType::sim) check_same_state(ref, resumed);
  }
}
ACCELERATOR_CASES("checkpoint: a file written from a device restores onto the cpu, and the other way", device_file_onto_cpu_and_back)

TEST_CASE("checkpoint: wrong model, optimizer kind or version are errors naming the file") {
  TempDir dir("mismatch");
  Run ref(Device::cpu(), [](nn::GPT& m) { return all_params_adamw(m, false); });
  ref.train_step();
  const std::string path = dir.file("m.safetensors");
  ref.save(path);

  Run sgd(Device::cpu(), [](nn::GPT& m) { return std::make_unique<SGD>(m.parameters(), nlohmann::json{{"lr", 0.1}}); });
  std::string err = error_of([&] { sgd.restore(path); });
  CHECK(err.find(path) != std::string::npos);
  CHECK(err.find("adamw") != std::string::npos);

  nn::GPTConfig bigger = small_config();
  bigger.n_layer = 2;
  nn::GPT other(bigger, 1);
  AdamW other_opt(other.parameters());
  err = error_of([&] { TrainingCheckpoint::read(path).restore(other, other_opt); });
  CHECK(err.find(path) != std::string::npos);
  CHECK(err.find("parameters") != std::string::npos);

  // A newer format version than this lathe reads.
  serialize::SafetensorsFile f = serialize::read_safetensors(path);
  nlohmann::json doc = nlohmann::json::parse(f.metadata.at("lathe"));
  doc["format_version"] = 99;
  f.metadata["lathe"] = doc.dump();
  serialize::write_safetensors(dir.file("v.safetensors"), f.tensors, f.metadata);
  err = error_of([&] { TrainingCheckpoint::read(dir.file("v.safetensors")); });
  CHECK(err.find("v.safetensors") != std::string::npos);
  CHECK(err.find("format version 99") != std::string::npos);
}

TEST_CASE("checkpoint damaged: every kind of damage is refused, naming the file and the fault") {
  TempDir dir("damaged");
  Run ref(Device::cpu(), [](nn::GPT& m) { return all_params_adamw(m, false); });
  ref.train_step();
  const std::string good = dir.file("good.safetensors");
  ref.save(good);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const std::string header = bytes.substr(8, header_len);

  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir.file(name), std::ios::binary) << content;
    return dir.file(name);
  };
  auto with_header = [&](std::string h) {
    h.resize(std::max(h.size(), size_t(header_len)), ' ');  // keep the data offsets valid
    uint64_t n = h.size();
    return std::string(reinterpret_cast<const char*>(&n), 8) + h + bytes.substr(8 + header_len);
  };
  auto le64 = [](uint64_t n) { return std::string(reinterpret_cast<const char*>(&n), 8); };
  // The header with one field of the first tensor's entry (data offset 0) changed.
  const nlohmann::json parsed = nlohmann::json::parse(header);
  std::string first_name;
  for (const auto& [name, v] : parsed.items())
    if (name != "__metadata__" && v["data_offsets"][0] == 0) first_name = name;
  REQUIRE(!first_name.empty());
  const nlohmann::json first_value = parsed[first_name];
  auto entry_with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json h = parsed;
    h[first_name][key] = value;
    return h.dump();
  };
  std::string flipped = bytes;
  flipped[bytes.size() - 3] ^= 0x10;
  nlohmann::json no_meta = parsed;
  no_meta.erase("__metadata__");
  nlohmann::json garbled = parsed;
  garbled["__metadata__"]["lathe"] = "{not json";
  // A well-formed file that lacks one tensor its document lists.
  {
    serialize::SafetensorsFile f = serialize::read_safetensors(good);
    f.tensors.erase(f.tensors.begin());
    serialize::write_safetensors(dir.file("missing_tensor.safetensors"), f.tensors, f.metadata);
  }

  const std::vector<std::pair<std::string, std::string>> cases = {
      {write("empty.safetensors", ""), "empty"},
      {write("short.safetensors", bytes.substr(0, 5)), "too short"},
      {write("truncated.safetensors", bytes.substr(0, bytes.size() - 100)), ""},
      {write("huge_header.safetensors", le64(uint64_t(1) << 40) + bytes.substr(8)), "header"},
      {write("past_end.safetensors", le64(bytes.size()) + bytes.substr(8)), "header"},
      {write("not_json.safetensors", with_header("{this is not json")), "JSON"},
      {write("offsets_past_end.safetensors", with_header(entry_with("data_offsets", {0, bytes.size()}))), ""},
      {write("overlap.safetensors",
             with_header(entry_with("data_offsets", {0, first_value["data_offsets"][1].get<uint64_t>() + 4}))), ""},
      {write("dtype_bytes.safetensors", with_header(entry_with("dtype", "F16"))), ""},
      {write("dtype_same_width.safetensors", with_header(entry_with("dtype", "F64"))), "checkpoint document"},
      {write("shape_bytes.safetensors", with_header(entry_with("shape", {1, 2, 3}))), ""},
      {write("unknown_dtype.safetensors", with_header(entry_with("dtype", "F12"))), "F12"},
      {dir.file("missing_tensor.safetensors"), "missing"},
      {write("missing_metadata.safetensors", with_header(no_meta.dump())), "lathe"},
      {write("garbled_metadata.safetensors", with_header(garbled.dump())), "lathe"},
      {write("flipped.safetensors", flipped), "checksum"},
  };
  for (const auto& [path, fault] : cases) {
    INFO("file ", path);
    const std::string err = error_of([&] { TrainingCheckpoint::read(path); });
    CHECK(!err.empty());
    CHECK(err.find(path) != std::string::npos);
    if (!fault.empty()) CHECK(err.find(fault) != std::string::npos);
  }
  CHECK(error_of([&] { TrainingCheckpoint::read(good); }).empty());
}

static void read_creates_each_tensor_on_target(const Device d) {
  CAPTURE(d.str());
  TempDir dir("ckpt_target");
  auto make = [](nn::GPT& m) { return all_params_adamw(m, /*fused=*/false); };
  Run run(d, make);
  for (int i = 0; i < 2; ++i) run.train_step();
  run.save(dir.file("t.safetensors"));

  // Reading for the target: weights and moments go to the device, the plain step counter (host
  // policy) stays on the host, and nothing comes back from the device.
  reset_transfer_stats();
  const TrainingCheckpoint ckpt = TrainingCheckpoint::read(dir.file("t.safetensors"), d);
  CHECK(transfer_stats().host_to_device > 0);
  CHECK(transfer_stats().device_to_host == 0);

  Run resumed(d, make);
  reset_transfer_stats();
  ckpt.restore(*resumed.model, *resumed.opt);
  resumed.step = ckpt.step();
  CHECK(transfer_stats().host_to_device == 0);
  CHECK(transfer_stats().device_to_host == 0);
  for (const auto& e : resumed.opt->state_entries()) {
    INFO("state ", e.name);
    CHECK(e.tensor.device() == (e.placement == Placement::host ? Device::cpu() : d));
  }
  CHECK(run.train_step() == resumed.train_step());
  check_same_state(run, resumed);
}
ACCELERATOR_CASES("checkpoints: read names its target and creates each tensor where it is used, restore then copies nothing through the host", read_creates_each_tensor_on_target)
