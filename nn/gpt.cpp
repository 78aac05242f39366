#include "nn/gpt.h"

#include <cmath>
#include <regex>

#include "core/autograd.h"
#include "core/format.h"
#include "core/memory_info.h"
#include "core/ops.h"

namespace lathe::nn {

namespace {

// The config, checked before a byte of the model is allocated: valid, and its weights within the
// memory of the host when they go there (a GPU's memory is the device's to refuse).
const GPTConfig& validated(const GPTConfig& c, Device device) {
  c.validate();
  const int64_t params = c.parameter_count();
  if (device.type != DeviceType::cuda) {
    const int64_t available = physical_memory_bytes();
    LATHE_CHECK(params <= available / 4, "GPT: the model (vocab_size ", c.vocab_size, ", n_embd ", c.n_embd,
                ", n_layer ", c.n_layer, ", block_size ", c.block_size, ") has ", params, " parameters, ",
                format_bytes(size_t(params) * 4), " of f32 weights, more than the ", format_bytes(size_t(available)),
                " of this machine's memory");
  }
  return c;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Smallest and largest value of an integer tensor in host-accessible memory.
std::pair<int64_t, int64_t> host_min_max(const Tensor& t) {
  int64_t lo = 0, hi = 0;
  LATHE_DISPATCH_INDEX(t.dtype(), "GPT", [&]<class T>() {
    Tensor c = t.contiguous();
    const T* p = c.data<T>();
    lo = hi = int64_t(p[0]);
    for (int64_t i = 1; i < c.numel(); ++i) {
      lo = std::min<int64_t>(lo, p[i]);
      hi = std::max<int64_t>(hi, p[i]);
    }
  });
  return {lo, hi};
}

}  // namespace

Transformer::Transformer(const GPTConfig& c, std::shared_ptr<Generator> gen, LayerOptions opt)
    : rotary(c.rope ? std::make_shared<const RotaryTables>(c.block_size, c.head_size(), c.rope_base) : nullptr),
      wte(c.vocab_size, c.n_embd, opt),
      drop(c.dropout, gen),
      ln_f(make_norm(c.norm, c.n_embd, c.norm_weight, c.bias, opt)) {
  register_module("wte", &wte);
  if (!c.rope) register_module("wpe", &wpe.emplace(c.block_size, c.n_embd, opt));
  register_module("drop", &drop);
  const BlockOptions block{c.norm, c.norm_weight, c.activation, rotary, c.qk_norm};
  for (int64_t i = 0; i < c.n_layer; ++i) h.emplace_back(c.n_embd, c.n_head, c.bias, c.dropout, gen, opt, block);
  register_module("h", &h);
  register_module("ln_f", ln_f.get());
}

GPT::GPT(const GPTConfig& config, ToBeLoaded, Device device, uint64_t dropout_seed)
    : GPT(config, device, std::make_shared<Generator>(dropout_seed)) {}

GPT::GPT(const GPTConfig& config, Device device, std::shared_ptr<Generator> dropout_gen)
    : config_(validated(config, device)),
      dropout_gen_(std::move(dropout_gen)),
      transformer(config_, dropout_gen_, {DType::f32, device, PolicyRef(precision_.policy)}),
      lm_head(config_.n_embd, config_.vocab_size, /*bias=*/false, {DType::f32, device, PolicyRef(precision_.policy)}) {
  if (config_.tie_embeddings) lm_head.tie_weight(transformer.wte.weight);
  register_module("transformer", &transformer);
  register_module("lm_head", &lm_head);
}

GPT::GPT(const GPTConfig& config, uint64_t seed, Device device)
    : GPT(config, device, std::make_shared<Generator>(seed)) {
  NoGradGuard no_grad;
  const double std_residual = 0.02 / std::sqrt(2.0 * double(config_.n_layer));
  uint64_t offset = 0;
  for (auto& [name, p] : named_parameters()) {
    if (p.dim() == 2) {  // Linear and Embedding weights; norm weights and biases keep 1 and 0
      const double std = ends_with(name, "c_proj.weight") ? std_residual : 0.02;
      p.copy_(mul(Tensor::randn(p.shape(), seed, offset, p.dtype(), p.device()), std));
    }
    offset += uint64_t(p.numel());
  }
}

void GPT::set_precision(Precision p) {
  check_precision_supported(p, device());
  *precision_.policy = PrecisionPolicy(p);
}

bool GPT::ignored_state_key(const std::string& key) const {
  static const std::regex mask_buffer(R"(transformer\.h\.\d+\.attn\.(bias|masked_bias))");
  return std::regex_match(key, mask_buffer);
}

int64_t GPT::num_params(bool exclude_position_embeddings) const {
  int64_t n = Module::num_params();
  return exclude_position_embeddings && transformer.wpe ? n - transformer.wpe->weight.numel() : n;
}

void GPT::check_token_ids(const char* what, const Tensor& t, bool allow_ignore) const {
  LATHE_CHECK(t.dim() == 2, "GPT: ", what, " must be [B, T], got ", t.desc());
  LATHE_CHECK(t.dtype() == DType::i64 || t.dtype() == DType::i32, "GPT: ", what, " must hold i64 or i32 token ids, got ",
              t.desc());
  LATHE_CHECK(t.size(1) >= 1 && t.size(1) <= config_.block_size, "GPT: ", what, " has sequence length ", t.size(1),
              " but block_size is ", config_.block_size, " (it must be 1 to ", config_.block_size, ")");
  // Device memory is checked by the embedding and cross-entropy kernels instead: reading it here
  // would cost a synchronisation every step.
  if (t.numel() == 0 || !t.device().host_accessible()) return;
  auto [lo, hi] = host_min_max(t);
  const int64_t low_limit = allow_ignore ? -1 : 0;
  LATHE_CHECK(hi < config_.vocab_size, "GPT: ", what, " holds token id ", hi, " but vocab_size is ",
              config_.vocab_size, " (ids must be below it)");
  LATHE_CHECK(lo >= low_limit, "GPT: ", what, " holds token id ", lo, " (ids must be >= ", low_limit,
              allow_ignore ? "; -1 marks a position to ignore" : "", ")");
}

Residual GPT::hidden_states(const Tensor& idx, int64_t pos0, std::vector<KVCache>* caches) const {
  const int64_t T = idx.size(1);
  LATHE_CHECK(pos0 + T <= config_.block_size, "GPT: positions ", pos0, "..", pos0 + T - 1,
              " exceed block_size ", config_.block_size);
  const PrecisionPolicy& p = *precision_.policy;
  Tensor x = p.cast(OpClass::embedding, transformer.wte.forward(idx));
  // Positions are consecutive, so their embeddings are a slice of wpe (a view, no gather). Rotary
  // embeddings act in attention instead, from the caches' lengths.
  if (transformer.wpe) x = add(x, p.cast(OpClass::embedding, transformer.wpe->weight.narrow(0, pos0, T)));
  Residual r{transformer.drop.forward(x), Tensor()};
  for (size_t i = 0; i < transformer.h.size(); ++i) r = transformer.h[i].forward(r, caches ? &(*caches)[i] : nullptr);
  return r;
}

Tensor GPT::logits_of(const Residual& hidden) const {
  // The classifier (and whoever reads the logits) works in the policy's loss dtype; so does the
  // soft-capping, in f32 arithmetic rounded once (bf16 logits in, bf16 capped logits out). Its
  // backward keeps the capped logits, so the classifier cannot write its gradient over them.
  Tensor logits = precision_.policy->cast(OpClass::loss, lm_head.forward(transformer.ln_f->forward(hidden).normed));
  return config_.logit_softcap > 0 ? softcap(logits, config_.logit_softcap) : logits;
}

Tensor GPT::last_logits(const Residual& hidden) const {
  const int64_t B = hidden.stream.size(0), T = hidden.stream.size(1);
  const PrecisionPolicy& p = *precision_.policy;
  return p.cast(OpClass::softmax, logits_of(hidden.narrow(1, T - 1, 1))).view({B, config_.vocab_size});
}

void GPT::check_inputs(const Tensor& idx, const Tensor& targets) const {
  check_token_ids("idx", idx, /*allow_ignore=*/false);
  LATHE_CHECK(idx.device() == device(), "GPT: idx is on ", idx.device().str(), " but the model is on ", device().str());
  if (targets.defined()) {
    check_token_ids("targets", targets, /*allow_ignore=*/true);
    LATHE_CHECK(targets.device() == device(), "GPT: targets is on ", targets.device().str(), " but the model is on ",
                device().str());
    LATHE_CHECK(targets.shape() == idx.shape(), "GPT: targets ", targets.desc(), " must have the shape of idx ",
                idx.desc());
  }
}

GPTOutput GPT::forward(const Tensor& idx, const Tensor& targets) const {
  check_inputs(idx, targets);
  GPTOutput out;
  out.logits = logits_of(hidden_states(idx, 0, nullptr));
  // The output keeps the logits, so the classifier writes their gradient apart from them.
  if (targets.defined()) out.loss = fused_cross_entropy(out.logits, targets, /*ignore_index=*/-1);
  return out;
}

Tensor GPT::loss(const Tensor& idx, const Tensor& targets) const {
  LATHE_CHECK(targets.defined(), "GPT::loss: needs targets");
  check_inputs(idx, targets);
  Tensor logits = logits_of(hidden_states(idx, 0, nullptr));
  return fused_cross_entropy(std::move(logits), targets, /*ignore_index=*/-1);
}

}  // namespace lathe::nn
