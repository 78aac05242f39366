#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

#include "core/autograd.h"
#include "core/device_collectives.h"
#include "core/finite.h"
#include "core/format.h"
#include "core/ops.h"
#include "core/system_info.h"
#include "data/bpe_tokenizer.h"
#include "data/chat.h"
#include "data/model_tokenizer.h"
#include "nn/sampling.h"
#include "optim/registry.h"
#include "serialize/atomic_file.h"
#include "serialize/directory_lock.h"
#include "serialize/model_file.h"
#include "train/distributed/agreement.h"
#include "train/evaluation.h"
#include "train/muon_groups.h"
#include "train/nanogpt_groups.h"
#include "train/run_checkpoints.h"
#include "train/run_directory.h"
#include "train/run_report.h"
#include "train/train_step.h"

namespace lathe::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Random streams of a run, each from its own derived seed.
enum Stream : uint64_t { kWeights = 1, kBatches = 2, kEvaluation = 3, kSampling = 4 };

// The optimizer of a run: --optimizer from the registry with the run's hyperparameters under
// their PyTorch names, over nanoGPT's groups (weight decay on 2-D parameters only). muon: Muon on
// the hidden matrices at --lr beside AdamW on the rest at --adam-lr (train/muon_groups.h), both
// decaying their 2-D parameters by --weight-decay.
std::unique_ptr<optim::Optimizer> make_run_optimizer(const TrainOptions& o, const nn::GPT& model, Device device) {
  const nlohmann::json betas = {o.beta1, o.beta2};
  // The fused path runs one multi-tensor kernel per group: fewer launches on a GPU.
  const bool cuda = device.type == DeviceType::cuda;
  const optim::OptimizerKind& kind = optim::optimizer_kind(o.optimizer, "--optimizer");
  if (kind.adamw_beside)
    return make_muon_adamw(model, {{"lr", o.lr}, {"weight_decay", o.weight_decay}},
                           {{"lr", o.adam_lr}, {"betas", betas}, {"weight_decay", o.weight_decay}}, o.fused || cuda);
  // SGD's momentum is beta1 (it has no second moment).
  const nlohmann::json defaults = kind.betas ? nlohmann::json{{"lr", o.lr}, {"betas", betas}}
                                             : nlohmann::json{{"lr", o.lr}, {"momentum", o.beta1}};
  auto opt = optim::make_optimizer(o.optimizer, defaults, o.fused || (cuda && kind.has_fused));
  add_nanogpt_param_groups(*opt, model, {{"weight_decay", o.weight_decay}});
  return opt;
}

bool all_finite(const Tensor& t) { return first_non_finite(t) < 0; }

}  // namespace

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  // splitmix64's finaliser over (seed, stream): nearby seeds give unrelated streams.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Trainer::Trainer(TrainOptions options, dist::Communicator* comm) : Trainer(std::move(options), nullptr, nullptr, comm) {}

Trainer::Trainer(TrainOptions options, const serialize::TrainingCheckpoint* resume, const ProgramState* program,
                 dist::Communicator* comm)
    : options_(std::move(options)), comm_(comm) {
  if (!comm_) {
    own_comm_ = std::make_unique<dist::SingleProcessCommunicator>();
    comm_ = own_comm_.get();
  }
  validate(options_);
  comm_->set_timeout(options_.dist_timeout);  // before the run's first collective, the agreement on starting
  std::optional<InitialWeights> init = choose_model(resume, program);
  set_up_machine();
  open_data(resume, program, init);
  check_model_size(resume, init);
  split_batch();
  build_model(init, resume != nullptr);
  build_optimizer();
  state_.data_gen = Generator(derive_seed(options_.seed, kBatches), 0);
  state_.step = 0;
  if (resume) restore(*resume, *program);
}

std::optional<InitialWeights> Trainer::choose_model(const serialize::TrainingCheckpoint* resume,
                                                    const ProgramState* program) {
  std::optional<InitialWeights> init;
  if (resume) {
    // The model is the checkpoint's, whatever --config names today (a JSON file may have changed).
    state_.model_choice.name = program->model_name;
    state_.model_choice.config = nn::GPTConfig::from_json(resume->model_description());
    serialize::check_file_holds(state_.model_choice.config, resume->file(), resume->path() + ": model config",
                                serialize::is_training_state);
    state_.model_choice.default_batch = program->batch;
  } else if (!options_.init_from.empty()) {
    init.emplace(load_initial_weights(options_));
    state_.model_choice = init->model_choice;
  } else {
    state_.model_choice = resolve_model_config(options_.config);
  }
  if (options_.out.empty()) options_.out = "runs/" + state_.model_choice.name;
  return init;
}

void Trainer::set_up_machine() {
  std::string warning;
  options_.threads = capped_threads(options_.threads, &warning);
  if (!warning.empty()) std::fprintf(stderr, "lathe: warning: %s\n", warning.c_str());
  threads_ = std::make_unique<ThreadGovernor>(options_.threads);
  device_ = Device::parse(options_.device);
  set_allow_tf32(options_.tf32);
  set_attention_backward(parse_attention_backward(options_.attention_backward));
  if (options_.tf32 && device_.type != DeviceType::cuda)
    std::fprintf(stderr, "lathe: note: --tf32 is for f32 products on cuda; the %s device ignores it\n",
                 device_.str().c_str());
}

void Trainer::open_data(const serialize::TrainingCheckpoint* resume, const ProgramState* program,
                        const std::optional<InitialWeights>& init) {
  nn::GPTConfig& cfg = state_.model_choice.config;
  if (!options_.sft.empty()) {
    // Conversations, tokenized by the model's own tokenizer and lathe's chat tokens after it: the
    // weights' recorded one for a fresh fine-tuning, the checkpoint's for a resumed one.
    LATHE_CHECK(resume || init, "--sft fine-tunes a trained model: give --init-from MODEL (or --resume a "
                "fine-tuning run)");
    if (resume) {
      sft_base_ = std::make_unique<data::BpeTokenizer>(
          program->tokenizer.is_null()
              ? data::load_tokenizer("bytes")
              : data::load_tokenizer(data::TokenizerIdentity::from_json(program->tokenizer, resume->path()),
                                     "checkpoint " + resume->path()));
    } else {
      sft_base_ = std::make_unique<data::BpeTokenizer>(data::model_tokenizer(init->loaded, options_.init_from, ""));
    }
    auto conversations = std::make_unique<data::ConversationDataset>(options_.sft, *sft_base_, cfg.block_size);
    for (size_t i = 0; i < conversations->skipped().size() && i < 10; ++i)
      std::fprintf(stderr, "lathe: note: --sft %s line %lld skipped: %s\n", printable(options_.sft).c_str(),
                   (long long)conversations->skipped()[i].line, printable(conversations->skipped()[i].reason).c_str());
    data_ = std::move(conversations);
    // The chat tokens follow the tokenizer's ids: the model's vocabulary grows to hold them.
    if (!resume) cfg.vocab_size = std::max(cfg.vocab_size, data_->tokenizer().vocab_size());
  } else {
    data_ = data::open_dataset(options_.data, cfg.block_size);
  }
  if (!options_.eval_mc.empty()) {
    // Read and fitted to the model now: a bad file is refused before the run, not at its first evaluation.
    eval_mc_ = data::read_multiple_choice(options_.eval_mc);
    LATHE_CHECK(items_that_fit(*eval_mc_, data_->tokenizer(), cfg.block_size) > 0, "--eval-mc ", options_.eval_mc,
                ": no item fits the model's block_size ", cfg.block_size, " (context and endings together)");
  }
  const data::Tokenizer& tokenizer = data_->tokenizer();
  // Most presets are sized for bytes: a fresh run on data of a named tokenizer grows its
  // vocabulary to the tokenizer's ids. A larger one is kept (the gpt2 preset pads GPT-2's 50,257
  // to 50,304 for faster matrix products; ids past the tokenizer's are never drawn). A resumed run
  // keeps its checkpoint's, which must still hold every id of the data, and so does a run from
  // --init-from's weights.
  if (!resume && !init && tokenizer.identity() != nullptr) cfg.vocab_size = std::max(cfg.vocab_size, tokenizer.vocab_size());
  if (init) {
    const auto recorded = init->loaded.metadata.find("tokenizer");
    check_init_tokenizer(recorded == init->loaded.metadata.end() ? "" : recorded->second, tokenizer,
                         options_.init_from, options_.data);
  }
}

void Trainer::check_model_size(const serialize::TrainingCheckpoint* resume, const std::optional<InitialWeights>& init) {
  const nn::GPTConfig& cfg = state_.model_choice.config;
  // Refused before anything is allocated: an absurd size would otherwise fail deep inside an
  // allocation, or overflow. A GPU's memory is not the host's, so there only overflow is checked.
  const std::string config_what = resume ? resume->path() + ": model config"
                                 : init ? "--init-from " + options_.init_from
                                        : "--config " + options_.config;
  if (device_.type == DeviceType::cuda) checked_param_count(cfg, config_what);
  else check_model_fits_memory(cfg, config_what);
  const data::Tokenizer& tokenizer = data_->tokenizer();
  const bool named_tokenizer = tokenizer.identity() != nullptr;  // token shards' (bytes are no file)
  const int64_t ids = tokenizer.vocab_size();
  LATHE_CHECK(cfg.vocab_size >= ids, config_what, ": vocab_size ", cfg.vocab_size, " is smaller than the ",
              named_tokenizer ? "tokenizer's " : "byte vocabulary (", ids, named_tokenizer ? " ids" : ")");
}

void Trainer::split_batch() {
  batch_ = options_.batch > 0 ? options_.batch : state_.model_choice.default_batch;
  const int world = comm_->size();
  LATHE_CHECK(batch_ % world == 0, "--batch ", batch_, " (the global batch: sequences per step over all processes) is not "
              "divisible by the ", world, " processes of the run; each process trains an equal slice of it");
  const int64_t slices = options_.grad_slices > 0 ? options_.grad_slices : world;
  LATHE_CHECK(slices % world == 0, "--grad-slices ", slices, " is not divisible by the ", world,
              " processes of the run; each process runs an equal number of slices");
  LATHE_CHECK(batch_ % slices == 0, "--batch ", batch_, " is not divisible by --grad-slices ", slices);
  slices_per_rank_ = slices / world;
  LATHE_CHECK(world == 1 || device_.is_cpu() || has_device_collectives(device_.type), "--device ", options_.device,
              ": data parallel training across ", world, " processes needs collectives for that device; this lathe has "
              "them for cpu (MPI)", device_.type == DeviceType::cuda ? " and not for cuda (build it where NCCL is found)" : "");
  // `--device cuda` under mpirun: each process of a machine takes its own GPU.
  if (world > 1 && device_.type == DeviceType::cuda && options_.device == "cuda") device_ = Device::cuda(dist::local_rank());
}

void Trainer::build_model(std::optional<InitialWeights>& init, bool resuming) {
  const nn::GPTConfig& config = state_.model_choice.config;
  const uint64_t seed = derive_seed(options_.seed, kWeights);
  state_.model = init || resuming ? std::make_unique<nn::GPT>(config, nn::GPT::kToBeLoaded, device_, seed)
                                  : std::make_unique<nn::GPT>(config, seed, device_);
  if (init) {
    if (!options_.sft.empty()) load_for_chat(init->loaded.model->state_dict());
    else state_.model->load_state_dict(init->loaded.model->state_dict());
    init.reset();  // the host copy is not needed any more
  }
  state_.model->train(true);
  const nn::Precision precision = nn::parse_precision(options_.precision, "--precision");
  state_.model->set_precision(precision);  // an error here names a kernel without a 16-bit path
  if (nn::needs_loss_scaling(precision)) {
    optim::GradScalerOptions so;
    so.init_scale = options_.init_scale;
    so.growth_interval = options_.scale_growth_interval;
    state_.scaler = std::make_unique<optim::GradScaler>(so);
  }
  // Frozen before the optimizer exists: it tracks them, but they never get a gradient or state.
  if (!options_.freeze.empty()) {
    const std::regex pattern = freeze_pattern(options_.freeze);
    std::string names;
    for (auto& [name, p] : state_.model->named_parameters()) {
      names += (names.empty() ? "" : ", ") + name;
      if (!std::regex_search(name, pattern)) continue;
      p.requires_grad_(false);
      frozen_.push_back(name);
    }
    LATHE_CHECK(!frozen_.empty(), "--freeze \"", options_.freeze, "\" matches no parameter of the model (", names, ")");
    LATHE_CHECK(frozen_.size() < state_.model->named_parameters().size(), "--freeze \"", options_.freeze,
                "\" matches every parameter of the model: nothing would train");
  }
}

void Trainer::build_optimizer() {
  state_.optimizer = make_run_optimizer(options_, *state_.model, device_);
  weight_copies_ = connect_weight_copies(*state_.model, *state_.optimizer);
  if (comm_->size() > 1 || options_.zero == 1 || slices_per_rank_ > 1) {
    dp_ = std::make_unique<dist::DataParallel>(*comm_, *state_.optimizer, options_.zero == 1);
    dp_->set_slices_per_rank(slices_per_rank_);
  }
  // nanoGPT's schedule with lr_decay_iters = max_iters; warm-up shorter than the run. Each group
  // follows it from its own peak, its lr as built (PyTorch schedulers' initial_lr): --lr, or
  // --adam-lr for muon's AdamW groups.
  const int64_t warmup = std::min(options_.warmup, options_.steps - 1);
  state_.schedule = std::make_unique<optim::WarmupCosineLr>(options_.lr, warmup, options_.steps,
                                                            options_.effective_min_lr());
  for (size_t g = 0; g < state_.optimizer->param_groups().size(); ++g) {
    const double peak = state_.optimizer->lr(g);
    state_.group_schedules.push_back(
        std::make_unique<optim::WarmupCosineLr>(peak, warmup, options_.steps, options_.min_lr_for(peak)));
  }
}

void Trainer::restore(const serialize::TrainingCheckpoint& ckpt, const ProgramState& program) {
  try {
    // The tokenizer first: with another one, even a stream of the same length means other text.
    const std::string had = program.tokenizer.is_null() ? "bytes"
                                                        : data::TokenizerIdentity::from_json(program.tokenizer, "tokenizer").describe();
    const std::string had_sum = program.tokenizer.is_null() ? "" : program.tokenizer.value("checksum", "");
    const std::string have = data_->tokenizer().describe();
    const std::string have_sum = data_->tokenizer().checksum();
    const std::string data_flag = options_.sft.empty() ? "--data " + options_.data : "--sft " + options_.sft;
    LATHE_CHECK(had_sum == have_sum, "the run was trained on tokens of ", had,
                had_sum.empty() ? "" : " (checksum " + had_sum + ")", ", but ", data_flag, " holds tokens of ",
                have, have_sum.empty() ? "" : " (checksum " + have_sum + ")", "; a resume needs the same tokenizer");
    LATHE_CHECK(program.corpus_bytes == data_->stream_size(), data_flag, ": ", data_->stream_size(), " ", data_->unit(),
                " of ", data_->kind(), ", but the run was trained on ", program.corpus_bytes, " ", data_->unit(),
                ": the data windows would differ");
    // The scaler's state (scale, growth tracker) comes back with the rest; a checkpoint of another
    // precision never gets here (--precision is one of the settings a resume keeps).
    ckpt.restore(*state_.model, *state_.optimizer, state_.scaler.get());
    // ZeRO-1: every rank read the whole state; each keeps its shard.
    state_.optimizer->release_unowned_state();
    state_.data_gen.set_state(program.data_generator.seed, program.data_generator.offset);
    state_.model->dropout_generator().set_state(program.dropout_generator.seed, program.dropout_generator.offset);
    last_val_loss_ = program.last_val_loss;
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(ckpt.path(), 0) == 0) throw;
    LATHE_FAIL(ckpt.path(), ": ", msg);
  }
  state_.step = ckpt.step();
  resumed_from_ = ckpt.path();
  LATHE_CHECK(state_.step <= options_.steps, ckpt.path(), ": the checkpoint is at step ", state_.step,
              ", past --steps ", options_.steps);
  resumed_ = true;
}

nlohmann::json Trainer::applied_options() const {
  nlohmann::json j = to_json(options_);
  j["batch"] = batch_;
  j["min_lr"] = options_.effective_min_lr();
  j["grad_slices"] = slices_per_rank_ * comm_->size();
  return j;
}

data::Batch Trainer::local_slice(const data::Batch& b) const {
  return {batch_slice(b.x, comm_->rank(), comm_->size()), batch_slice(b.y, comm_->rank(), comm_->size())};
}

StepResult Trainer::train_step() {
  const auto t0 = Clock::now();
  StepResult r = queue_step();
  read_step(r);
  r.seconds = seconds_since(t0);
  return r;
}

StepResult Trainer::queue_step() {
  const auto t0 = Clock::now();
  comm_->set_activity("step " + std::to_string(state_.step + 1));
  StepResult r;
  // The global batch is drawn as in one process (so the data does not depend on the world size);
  // this rank trains its slice.
  const data::Batch b = local_slice(data_->sample(data::Split::train, batch_, state_.data_gen, device_));
  r.lr = state_.schedule->lr(state_.step);
  // Dropout across ranks: one process with S slices draws slice j's masks at base + j * d (d: what
  // one slice's forward draws), so rank r starts at its first slice's place and every rank ends
  // where that process ends. d is measured once, by a forward without gradients.
  Generator& dropout = state_.model->dropout_generator();
  const uint64_t base = dropout.offset();
  const bool place_dropout = comm_->size() > 1 && state_.model_choice.config.dropout > 0;
  if (place_dropout) {
    if (dropout_draws_per_slice_ == 0) {
      NoGradGuard no_grad;
      state_.model->forward(batch_slice(b.x, 0, slices_per_rank_));
      dropout_draws_per_slice_ = dropout.offset() - base;
    }
    dropout.set_state(dropout.seed(), base + uint64_t(comm_->rank() * slices_per_rank_) * dropout_draws_per_slice_);
  }
  for (size_t g = 0; g < state_.group_schedules.size(); ++g)
    state_.optimizer->set_lr(g, state_.group_schedules[g]->lr(state_.step));
  r.queued = train::train_step(*state_.model, *state_.optimizer, b.x, b.y, options_.grad_clip, std::nullopt,
                               state_.scaler.get(), dp_.get(), slices_per_rank_);
  if (place_dropout)
    dropout.set_state(dropout.seed(), base + uint64_t(comm_->size() * slices_per_rank_) * dropout_draws_per_slice_);
  r.skipped = r.queued.skipped;
  r.scale = r.queued.scale;
  r.step = ++state_.step;
  r.seconds = seconds_since(t0);
  return r;
}

void Trainer::read_step(StepResult& r) {
  const double loss = r.queued.loss();
  r.loss = dp_ ? dp_->mean_over_ranks(loss) : loss;
  r.grad_norm = r.queued.grad_norm_value();
  r.queued = StepOutcome{};
  // The loss is the same on every rank, so every rank stops here with the same error.
  if (!std::isfinite(r.loss))
    throw dist::CollectiveError(detail::cat("training diverged: the loss is ", r.loss, " at step ", r.step, " (lr ",
                                            r.lr, "); ", divergence_advice()),
                                1, comm_->rank() == 0);
}

double Trainer::evaluate(data::Split split) {
  comm_->set_activity("the evaluation at step " + std::to_string(state_.step));
  NoGradGuard no_grad;
  nn::GPT& model = *state_.model;
  const bool was_training = model.is_training();
  model.train(false);
  Generator gen(derive_seed(options_.seed, kEvaluation), 0);
  // Summed per slice, then over slices and ranks, in the order a step reduces (--grad-slices), so
  // that one process with S slices measures what S processes measure.
  std::vector<double> totals(size_t(slices_per_rank_), 0.0);
  for (int64_t i = 0; i < options_.eval_iters; ++i) {
    const data::Batch b = local_slice(data_->sample(split, batch_, gen, device_));
    for (int64_t k = 0; k < slices_per_rank_; ++k) {
      const Tensor x = batch_slice(b.x, k, slices_per_rank_), y = batch_slice(b.y, k, slices_per_rank_);
      totals[size_t(k)] += model.loss(x, y).item();
    }
  }
  model.train(was_training);
  double total = 0;
  for (double t : totals) total += t;
  total /= double(slices_per_rank_);
  if (dp_) total = dp_->mean_over_ranks(total);
  const double mean = total / double(options_.eval_iters);
  if (split == data::Split::val) last_val_loss_ = mean;
  return mean;
}

void Trainer::load_for_chat(const nn::NamedTensors& weights) {
  // The weights of --init-from into a model whose vocabulary holds the chat tokens too: the rows of
  // the token embedding (and of an untied head) that the weights lack, and the rows of the chat
  // tokens whatever the weights hold there (a padded vocabulary's unused rows), start as the mean of
  // the tokenizer's ordinary tokens' rows -- what the model already makes of "a token" -- as
  // transformers' resize_token_embeddings(mean_resizing=True) does.
  const data::ChatTokens chat = data::ChatTokens::after(*sft_base_);
  const int64_t ordinary = int64_t(sft_base_->model().size());
  NoGradGuard no_grad;
  nn::NamedTensors grown;
  for (const auto& [name, t] : weights) {
    if (name != "transformer.wte.weight" && name != "lm_head.weight") {
      grown.emplace_back(name, t);
      continue;
    }
    const int64_t V = state_.model_choice.config.vocab_size, C = t.size(1);
    const Tensor host = t.detach().to(Device::cpu()).to(DType::f32).contiguous();
    const Tensor mean = lathe::mean(host.narrow(0, 0, ordinary), {0}, /*keepdim=*/true);
    std::vector<Tensor> rows = {host.narrow(0, 0, std::min(V, t.size(0)))};
    if (V > t.size(0)) rows.push_back(mean.expand({V - t.size(0), C}).contiguous());
    Tensor w = cat(rows, 0).contiguous();
    for (int64_t id = chat.system; id <= chat.end; ++id) w.narrow(0, id, 1).copy_(mean);
    grown.emplace_back(name, w);
  }
  state_.model->load_state_dict(grown);
}

std::string Trainer::divergence_advice() const {
  const TrainOptions& o = options_;
  // Decoupled weight decay multiplies each matrix by 1 - lr x wd a step: at 1 or more it zeroes or
  // flips them, whatever the learning rate does otherwise.
  const double decay =
      std::max(o.lr, optim::optimizer_kind(o.optimizer, "--optimizer").adamw_beside ? o.adam_lr : 0.0) * o.weight_decay;
  if (decay >= 1)
    return detail::cat("--weight-decay ", o.weight_decay, " at this lr scales the weights by 1 - lr x wd = ", 1 - decay,
                       " a step, which zeroes or flips them: lower --weight-decay (0.1 is usual)");
  return "try a lower --lr or a --grad-clip";
}

void Trainer::check_finite_state(bool with_optimizer) const {
  const std::string step = std::to_string(state_.step);
  for (const auto& [name, p] : state_.model->named_parameters())
    LATHE_CHECK(all_finite(p), "training diverged at step ", step, ": parameter ", name,
                " holds a non-finite value after the update (lr ", options_.lr,
                "); nothing was saved, earlier checkpoints are kept; ", divergence_advice());
  if (!with_optimizer) return;
  for (const optim::StateEntry& e : state_.optimizer->state_entries())
    LATHE_CHECK(all_finite(e.tensor), "training diverged at step ", step, ": optimizer state optim.", e.name,
                " holds a non-finite value (lr ", options_.lr,
                "); nothing was saved, earlier checkpoints are kept; ", divergence_advice());
}

void Trainer::save_weights(const std::string& path) const {
  check_finite_state(/*with_optimizer=*/false);
  serialize::Metadata meta;
  meta["step"] = std::to_string(state_.step);
  meta["preset"] = printable(state_.model_choice.name);
  if (last_val_loss_ >= 0) meta["val_loss"] = std::to_string(last_val_loss_);
  if (const data::TokenizerIdentity* id = data_->tokenizer().identity()) meta["tokenizer"] = id->to_json().dump();
  // Metadata values are text: a path that is not UTF-8 is recorded escaped (it only says where from).
  if (!options_.init_from.empty()) meta["init_from"] = printable(options_.init_from);
  if (sft_base_) meta["chat_template"] = data::ChatTokens::after(*sft_base_).to_json().dump();
  serialize::save_model(path, *state_.model, meta);
}

void Trainer::save_checkpoint(const std::string& path) const {
  comm_->set_activity("the checkpoint at step " + std::to_string(state_.step));
  if (dp_) {
    // Every rank: the replicas must agree before rank 0 writes for all of them, and ZeRO-1's
    // shards come to rank 0, which writes one file as a single process would (docs/design.md).
    dp_->check_replicas_agree(state_.step);
    dp_->gather_state_to_root();
    if (comm_->rank() != 0) return;
  }
  struct Release {  // rank 0 drops the gathered shards again, written or not
    dist::DataParallel* dp;
    ~Release() {
      if (dp) dp->release_gathered_state();
    }
  } release{dp_.get()};
  check_finite_state(/*with_optimizer=*/true);
  serialize::TrainingStateRef ref;
  ref.model = state_.model.get();
  ref.optimizer = state_.optimizer.get();
  ref.scaler = state_.scaler.get();
  ref.step = state_.step;
  ref.model_description = state_.model_choice.config.to_json();
  ProgramState program;
  program.options = options_;
  program.model_name = state_.model_choice.name;
  program.batch = batch_;
  program.corpus_bytes = data_->stream_size();
  if (const data::TokenizerIdentity* id = data_->tokenizer().identity()) program.tokenizer = id->to_json();
  program.data_generator = {state_.data_gen.seed(), state_.data_gen.offset()};
  program.dropout_generator = {state_.model->dropout_generator().seed(), state_.model->dropout_generator().offset()};
  program.last_val_loss = last_val_loss_;
  ref.program = to_json(program);
  serialize::save_training_state(path, ref);
}

std::string Trainer::sample(const std::string& prompt, int64_t tokens) const {
  const std::string text = prompt.empty() ? std::string("\n") : prompt;
  const data::Tokenizer& tokenizer = data_->tokenizer();
  const std::vector<int64_t> ids = tokenizer.encode(text);
  Tensor idx = Tensor::from_vector(ids, {1, int64_t(ids.size())}, device_);
  // Only ids the tokenizer can decode: a vocabulary padded past it (gpt2's on bytes) draws bytes only.
  Tensor out = state_.model->generate(idx, tokens, 0.8, 0, derive_seed(options_.seed, kSampling), true,
                                      tokenizer.vocab_size());
  return tokenizer.decode(out.to(Device::cpu()).flatten().to_vector<int64_t>());
}

double Trainer::bits_per_byte(double val_loss) const {
  return val_loss / std::log(2.0) / data_->val_bytes_per_token();
}

TrainSummary Trainer::run(std::FILE* log, const StepHook& on_step) {
  const auto run_start = Clock::now();
  const TrainOptions& o = options_;
  const nn::GPTConfig& cfg = state_.model_choice.config;
  const int64_t first_step = state_.step;  // > 0 when resumed
  const double tokens_per_step = double(batch_) * double(cfg.block_size);
  // Rank 0 alone writes the run directory and prints; the other ranks train beside it.
  const std::string dir = std::filesystem::path(o.out).string();
  RunReport report({.log = log, .quiet = o.quiet, .writer = comm_->rank() == 0, .dir = dir, .steps = o.steps,
                    .first_step = first_step, .tokens_per_step = tokens_per_step,
                    .progress_seconds = o.progress_seconds, .grad_clip = o.grad_clip > 0,
                    .loss_scaling = state_.scaler != nullptr});
  const bool writer = report.writer();
  std::optional<serialize::DirectoryLock> lock;  // held until run() returns: no second run writes this directory
  // The directory's checks are rank 0's, and every rank stops with its error (printed once).
  dist::on_every_rank(*comm_, [&] {
    if (!writer) return;
    if (resumed_) {
      std::error_code ec;
      std::filesystem::create_directories(o.out, ec);
      LATHE_CHECK(!ec, "--out ", o.out, ": cannot create the directory: ", ec.message());
      lock.emplace(dir, "lathe train", "run directory");
      // The metrics first: a bad line fails the resume before any checkpoint is moved.
      report.restore_metrics(state_.step);
      const std::string aside = move_aside_superseded(dir, state_.step, resumed_from_);
      if (!aside.empty())
        std::fprintf(stderr, "lathe: moved the checkpoints of %s that a run resumed at step %lld does not continue into %s\n",
                     dir.c_str(), (long long)state_.step, aside.c_str());
    } else {
      prepare_fresh_run_directory(dir, o.overwrite, {o.data, o.init_from}, lock);
    }
  });
  if (resumed_ && state_.step == o.steps) return finish_complete_run(dir, report);
  const std::filesystem::path data_path = std::filesystem::path(o.data).lexically_normal();
  const std::string data_name =
      (data_path.has_filename() ? data_path : data_path.parent_path()).filename().string();
  report.open("lathe train: " + state_.model_choice.name + " on " + data_name + ", " + std::to_string(o.steps) +
                  " steps of " + std::to_string(batch_) + " x " + std::to_string(cfg.block_size) + " " + data_->unit(),
              resumed_);
  describe_run(report);

  // What a step reports once its loss is read: the metrics record, the progress line, and at its
  // intervals the evaluation and the checkpoint.
  auto report_step = [&](const StepResult& r) {
    const int64_t step = r.step;
    if (dp_ && step == first_step + 1) {
      // After the first update every rank holds all of its state: each one's share, once.
      const std::vector<size_t> bytes = dp_->state_bytes_per_rank();
      std::string list;
      size_t total = 0;
      for (size_t b : bytes) {
        list += (list.empty() ? "" : ", ") + format_bytes(b);
        total += b;
      }
      report.say("optimizer state per process: %s (%s)\n", list.c_str(),
                 dp_->zero() ? ("ZeRO-1: sharded, " + format_bytes(total) + " in all").c_str() : "each a full copy");
    }
    report.step(r);
    const bool last = step == o.steps;
    if (last || (o.eval_interval > 0 && step % o.eval_interval == 0)) {
      const auto t0 = Clock::now();
      const double val = evaluate(data::Split::val);
      report.evaluation(step, val, bits_per_byte(val), o.eval_iters, seconds_since(t0));
      if (eval_mc_ && writer) {
        // Scored by rank 0 alone (it writes the metrics); no random number is drawn, so the run's
        // bits are those of a run without it.
        const auto t1 = Clock::now();
        const MultipleChoiceResult mc =
            evaluate_multiple_choice(*state_.model, data_->tokenizer(), *eval_mc_, std::max<int64_t>(batch_, 16));
        report.multiple_choice(step, mc, seconds_since(t1));
      }
      report.write_plot();
    }
    report.end_step(dp_ ? std::optional<double>(dp_->comm_seconds()) : std::nullopt);
    if (last || (o.ckpt_interval > 0 && step % o.ckpt_interval == 0)) {
      // The new checkpoint is durable before any older one goes; neither it nor the one this run
      // resumed from is ever pruned (train/run_checkpoints.h).
      const std::string ckpt = checkpoint_path(dir, step);
      save_checkpoint(ckpt);  // every rank: ZeRO-1 gathers the state to rank 0, which writes
      if (writer) {
        prune_checkpoints(dir, o.keep_last, {ckpt, resumed_from_});
        save_weights(dir + "/model.safetensors");
      }
    }
    if (on_step) on_step(r);
  };

  // On a device that computes apart from the host (cuda), a step's loss and gradient norm are read
  // while the next step runs: the host queues step k + 1 before it waits for step k's numbers, so
  // the device never idles for a read, and no step waits inside itself. A step that evaluates,
  // checkpoints or ends the run is read at once, since what it reports is the state it leaves; on
  // the CPU, which computes as it queues, every step is. (sim takes the device's path, so that it
  // is tested without a GPU.) A step's time is then the time between two reads, the device's pace.
  const bool read_behind = device_.type != DeviceType::cpu;
  std::optional<StepResult> pending;
  auto last_read = Clock::now();
  auto read_and_report = [&](StepResult& r) {
    read_step(r);
    if (read_behind) r.seconds = seconds_since(last_read);
    report_step(r);
    last_read = Clock::now();
  };
  while (state_.step < o.steps) {
    threads_->update();
    StepResult r = queue_step();
    if (pending) {
      read_and_report(*pending);
      pending.reset();
    }
    const bool reports_state = r.step == o.steps || (o.eval_interval > 0 && r.step % o.eval_interval == 0) ||
                               (o.ckpt_interval > 0 && r.step % o.ckpt_interval == 0);
    if (read_behind && !reports_state) pending = std::move(r);
    else read_and_report(r);
  }
  report.write_plot();

  TrainSummary summary = report.summary(state_.step);
  summary.seconds = seconds_since(run_start);
  const int64_t steps_run = summary.steps - first_step;
  const double train_seconds = report.train_seconds();
  report.say("done: %lld steps in %s (%s tok/s in training steps); val loss %.4f nats/token, %.4f bits/byte\n",
             (long long)steps_run, format_duration(summary.seconds).c_str(),
             format_rate(steps_run ? tokens_per_step * double(steps_run) / train_seconds : 0.0).c_str(),
             summary.final_val_loss, summary.final_val_bpb);
  if (state_.scaler)
    report.say("loss scaling: %lld of %lld steps skipped (inf or nan in the gradients); scale now %g\n",
               (long long)summary.skipped_steps, (long long)summary.steps, state_.scaler->get_scale());
  report.say("wrote %s, %s/model.safetensors, %s/metrics.jsonl, %s/loss.svg\n",
             checkpoint_path(dir, state_.step).c_str(), dir.c_str(), dir.c_str(), dir.c_str());
  if (dp_ && comm_->size() > 1)
    report.say("communication: %.1f s of the training steps' %.1f s in collectives (%.1f%%)\n", dp_->comm_seconds(),
               train_seconds, train_seconds > 0 ? 100.0 * dp_->comm_seconds() / train_seconds : 0.0);
  if (o.sample_tokens > 0 && writer) {
    const std::string text = sample("\n", o.sample_tokens);
    report.say("---- sample (%lld tokens, temperature 0.8) ----%s\n", (long long)o.sample_tokens, text.c_str());
  }
  return summary;
}

void Trainer::describe_run(const RunReport& report) const {
  const TrainOptions& o = options_;
  const nn::GPTConfig& cfg = state_.model_choice.config;
  report.say("%s\n", data_->describe().c_str());
  report.say("model %s: %lld layers, %lld heads, %lld embd, block %lld, %.2fM parameters on %s\n",
             state_.model_choice.name.c_str(), (long long)cfg.n_layer, (long long)cfg.n_head, (long long)cfg.n_embd,
             (long long)cfg.block_size, double(state_.model->num_params()) / 1e6, device_.str().c_str());
  if (resumed_) report.say("resuming at step %lld of %lld\n", (long long)state_.step, (long long)o.steps);
  if (dp_ && comm_->size() > 1)
    report.say("data parallel: %s, global batch %lld (%lld per process), gradients all-reduced in %lld bucket%s%s\n",
               comm_->describe().c_str(), (long long)batch_, (long long)(batch_ / comm_->size()),
               (long long)dp_->buckets(), dp_->buckets() == 1 ? "" : "s",
               dp_->zero() ? "; optimizer state sharded (ZeRO-1)" : "");
  if (!frozen_.empty()) {
    std::string names;
    for (const std::string& n : frozen_) names += (names.empty() ? "" : ", ") + n;
    report.say("frozen (--freeze %s): %s\n", o.freeze.c_str(), names.c_str());
  }
  report.say("training %lld steps of %lld x %lld tokens with %s%s (lr %g -> %g, warmup %lld, weight decay %g, "
             "clip %g), %d thread%s%s\n",
             (long long)o.steps, (long long)batch_, (long long)cfg.block_size, o.optimizer.c_str(),
             state_.optimizer->fused() ? " (fused)" : "", o.lr, o.effective_min_lr(),
             (long long)std::min(o.warmup, o.steps - 1), o.weight_decay, o.grad_clip, openmp_max_threads(),
             openmp_max_threads() == 1 ? "" : "s",
             threads_->governs() ? " (the default: as many as other processes leave cores free)" : "");
  if (optim::optimizer_kind(o.optimizer, "--optimizer").adamw_beside)
    report.say("%s: on the blocks' matrices at that lr; AdamW on the embeddings, head, gains and biases at lr "
               "%g -> %g (--adam-lr)\n",
               o.optimizer.c_str(), o.adam_lr, o.min_lr_for(o.adam_lr));
  if (o.precision != "f32") {
    char scaling[96] = "";
    if (state_.scaler)
      std::snprintf(scaling, sizeof scaling, "; dynamic loss scale %g, doubling after %lld good steps",
                    state_.scaler->get_scale(), (long long)o.scale_growth_interval);
    const nn::PrecisionPolicy& policy = state_.model->precision_policy();
    const bool low_logits = policy.dtype(nn::OpClass::loss) != DType::f32;
    report.say("precision %s: products, activations%s in %s; f32 master weights, gradients, optimizer state, "
               "residual stream, LayerNorm statistics and softmax%s%s\n",
               o.precision.c_str(), low_logits ? ", LayerNorm outputs and logits" : " and LayerNorm outputs",
               dtype_name(nn::low_dtype(state_.model->precision())), low_logits ? "" : ", logits", scaling);
  }
  if (o.tf32 && device_.type == DeviceType::cuda) report.say("f32 products on TF32 tensor cores (--tf32)\n");
  if (attention_backward() == AttentionBackward::atomic && device_.type == DeviceType::cuda)
    report.say("attention's backward in one kernel, dQ summed by atomics (--attention-backward atomic)\n");
}

TrainSummary Trainer::finish_complete_run(const std::string& dir, const RunReport& report) {
  // Nothing to train and nothing to evaluate (metrics.jsonl is already cut back to the
  // checkpoint): model.safetensors is rewritten from the checkpoint (the run that stopped may have
  // died before writing it, or written it from a later state), and killed writers' temporary
  // files are removed.
  const auto t0 = Clock::now();
  if (report.writer()) {
    save_weights(dir + "/model.safetensors");
    prune_checkpoints(dir, options_.keep_last, {resumed_from_});
  }
  report.say("the run is complete: %s is at step %lld of %lld; nothing to train (rewrote %s/model.safetensors)\n",
             resumed_from_.c_str(), (long long)state_.step, (long long)options_.steps, dir.c_str());
  TrainSummary summary;
  summary.steps = state_.step;
  summary.final_val_loss = last_val_loss_;  // -1 when the run never evaluated
  summary.seconds = seconds_since(t0);
  return summary;
}

}  // namespace lathe::train
