#include "optim/prodigy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/ops.h"

namespace lathe::optim {

namespace {
const char* const kGroupScalars[] = {"d", "d0", "d_max", "d_numerator", "d_denom", "d_hat", "k"};

StateSchema make_schema() {
  StateSchema s = {
      param_state("s", Placement::with_param, std::nullopt, std::nullopt, /*shaped_like_param=*/false),
      param_state("p0", Placement::with_param, std::nullopt, std::nullopt, /*shaped_like_param=*/false),
      param_state("exp_avg", Placement::with_param),
      param_state("exp_avg_sq", Placement::with_param),
  };
  for (const char* key : kGroupScalars)
    s.push_back(group_state(key, Placement::host, DType::f64, /*fused:*/ Placement::with_group));
  return s;
}

nlohmann::json prodigy_defaults(const nlohmann::json& overrides) {
  nlohmann::json d = {{"lr", 1.0},
                      {"betas", {0.9, 0.999}},
                      {"beta3", nullptr},
                      {"eps", 1e-8},
                      {"weight_decay", 0.0},
                      {"decouple", true},
                      {"use_bias_correction", false},
                      {"safeguard_warmup", false},
                      {"d0", 1e-6},
                      {"d_coef", 1.0},
                      {"growth_rate", nullptr},
                      {"slice_p", 1}};
  nlohmann::json o = overrides;
  merge_defaults("prodigy", o, d);
  return o;
}

double growth_rate_of(const nlohmann::json& v) {
  if (v.is_null()) return std::numeric_limits<double>::infinity();
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    LATHE_CHECK(s == "inf" || s == "Infinity", "prodigy: invalid growth_rate \"", s,
                "\" (a number > 0, or null / \"inf\" for no limit)");
    return std::numeric_limits<double>::infinity();
  }
  LATHE_CHECK(v.is_number(), "prodigy: invalid growth_rate ", v.dump(), " (a number > 0, or null / \"inf\")");
  return v.get<double>();
}
}  // namespace

const StateSchema Prodigy::schema = make_schema();

Prodigy::Prodigy(const nlohmann::json& defaults) : Optimizer(prodigy_defaults(defaults), schema, /*fused=*/false) {
  nlohmann::json check = prodigy_defaults(defaults);
  validate_options(check);
}

Prodigy::Prodigy(const std::vector<Tensor>& params, const nlohmann::json& options) : Prodigy(options) {
  add_param_group(params);
}

void Prodigy::validate_options(nlohmann::json& o) const {
  ParamGroup g;
  g.options = o;
  check_lr("prodigy", g.number("lr"));
  auto [b1, b2] = g.pair("betas");
  check_beta("prodigy", "beta parameter at index 0 (betas[0])", b1);
  check_beta("prodigy", "beta parameter at index 1 (betas[1])", b2);
  if (!g.is_null("beta3")) check_beta("prodigy", "beta3", g.number("beta3"));
  const double eps = g.number("eps");
  LATHE_CHECK(eps > 0, "prodigy: invalid epsilon value eps = ", eps, " (must be > 0)");
  check_nonnegative("prodigy", "weight_decay value", g.number("weight_decay"));
  g.flag("decouple");
  g.flag("use_bias_correction");
  g.flag("safeguard_warmup");
  check_positive("prodigy", "d0", g.number("d0"));
  check_positive("prodigy", "d_coef", g.number("d_coef"));
  check_positive("prodigy", "growth_rate", growth_rate_of(o["growth_rate"]));
  const auto& sp = o["slice_p"];
  LATHE_CHECK(sp.is_number_integer() && sp.get<int64_t>() >= 1, "prodigy: invalid slice_p = ", sp.dump(),
              " (must be an integer >= 1)");
}

void Prodigy::init_group_state(size_t g) {
  const double d0 = groups_[g].number("d0");
  for (const char* key : kGroupScalars) {
    const std::string k = key;
    double v = (k == "d" || k == "d0" || k == "d_max") ? d0 : 0.0;
    set_group_state(g, k, Tensor::scalar(v, DType::f64));
  }
}

double& Prodigy::scalar(size_t g, const char* key) {
  // Host policy: plain host memory, read without touching any device.
  return group_state_ref(g, key).data<double>()[0];
}

nlohmann::json Prodigy::group_scalars(size_t g) const {
  nlohmann::json j = nlohmann::json::object();
  for (const char* key : kGroupScalars) {
    Tensor t = group_state_tensor(g, key);
    double v = t.to(Device::cpu()).item();
    if (std::string(key) == "k") j[key] = int64_t(v);
    else j[key] = v;
  }
  return j;
}

void Prodigy::update() {
  const ParamGroup& g0 = groups_[0];
  const bool use_bias_correction = g0.flag("use_bias_correction");
  const auto [beta1, beta2] = g0.pair("betas");
  const double beta3 = g0.is_null("beta3") ? std::sqrt(beta2) : g0.number("beta3");
  const double k0 = scalar(0, "k");
  double d = scalar(0, "d");
  double d_max = scalar(0, "d_max");
  const double d_coef = g0.number("d_coef");
  double lr = 0;
  for (const auto& g : groups_) lr = std::max(lr, g.number("lr"));
  const double bias_correction =
      use_bias_correction ? std::sqrt(1 - std::pow(beta2, k0 + 1)) / (1 - std::pow(beta1, k0 + 1)) : 1.0;
  const double dlr = d * lr * bias_correction;
  const double growth_rate = growth_rate_of(g0.options["growth_rate"]);
  const bool decouple = g0.flag("decouple");

  // Every group's lr must be the largest or 0.
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const double glr = groups_[gi].number("lr");
    if (glr != lr && glr != 0.0) {
      std::string all;
      for (const auto& g : groups_) all += (all.empty() ? "" : ", ") + std::to_string(g.number("lr"));
      LATHE_FAIL("prodigy: param groups must share one lr, or have lr 0; group ", gi, " has lr ", glr,
                 " but the largest is ", lr, " (lrs: ", all, ")");
    }
  }

  double d_numerator = scalar(0, "d_numerator") * beta3;
  double d_denom = 0.0;
  // The gradient each parameter uses in both passes (coupled weight decay folded in).
  std::vector<std::vector<Tensor>> grads(groups_.size());
  double last_d0 = 0;

  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const double decay = g.number("weight_decay"), group_lr = g.number("lr");
    const double d0 = scalar(gi, "d0");
    last_d0 = d0;
    const bool safeguard_warmup = g.flag("safeguard_warmup");
    const int64_t slice_p = g.integer("slice_p");
    grads[gi].resize(g.params.size());
    for (size_t j = 0; j < g.params.size(); ++j) {
      const Tensor& p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      Tensor grad = p.grad();
      if (decay != 0 && !decouple) grad = add(grad, mul(p, decay));
      grads[gi][j] = grad;

      const Tensor p_flat = p.reshape({-1});
      const int64_t n = p_flat.numel();
      if (!find_state(i, "exp_avg_sq")) {
        const Tensor p_sliced = p_flat.slice(0, 0, n, slice_p);
        set_state(i, "s", Tensor::zeros(p_sliced.shape(), p.dtype(), p.device()));
        // An all-zero parameter keeps a scalar 0 as p0 (the reference's memory saving).
        const bool any = sum(abs(p_flat)).to(DType::f64).to(Device::cpu()).item() != 0;
        set_state(i, "p0", any ? p_sliced.clone() : Tensor::zeros({}, p.dtype(), p.device()));
        if (beta1 > 0) state_or_zeros(i, "exp_avg");
        state_or_zeros(i, "exp_avg_sq");
      }
      if (group_lr > 0.0) {
        Tensor& s = *find_state(i, "s");
        const Tensor& p0 = *find_state(i, "p0");
        const Tensor sliced_grad = grad.reshape({-1}).slice(0, 0, n, slice_p);
        const Tensor p_sliced = p_flat.slice(0, 0, n, slice_p);
        const double dot = sum(mul(sliced_grad, sub(p0, p_sliced))).to(Device::cpu()).item();
        d_numerator += (d / d0) * dlr * dot;
        if (beta1 > 0) {
          Tensor& exp_avg = *find_state(i, "exp_avg");
          exp_avg.copy_(add(mul(exp_avg, beta1), mul(grad, d * (1 - beta1))));
        }
        Tensor& exp_avg_sq = *find_state(i, "exp_avg_sq");
        exp_avg_sq.copy_(add(mul(exp_avg_sq, beta2), mul(mul(grad, d * d * (1 - beta2)), grad)));
        const double alpha = safeguard_warmup ? (d / d0) * d : (d / d0) * dlr;
        s.copy_(add(mul(s, beta3), mul(sliced_grad, alpha)));
        d_denom += sum(abs(s)).to(Device::cpu()).item();
      }
    }
  }

  // No progress possible (no gradients, or all zero): the reference returns before changing
  // anything, group state included.
  if (d_denom == 0) return;

  double d_hat = d;
  if (lr > 0.0) {
    d_hat = d_coef * d_numerator / d_denom;
    if (d == last_d0) d = std::max(d, d_hat);
    d_max = std::max(d_max, d_hat);
    d = std::min(d_max, d * growth_rate);
  }

  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    scalar(gi, "d_numerator") = d_numerator;
    scalar(gi, "d_denom") = d_denom;
    scalar(gi, "d") = d;
    scalar(gi, "d_max") = d_max;
    scalar(gi, "d_hat") = d_hat;
    const double decay = g.number("weight_decay"), eps = g.number("eps");
    for (size_t j = 0; j < g.params.size(); ++j) {
      Tensor p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      const Tensor& exp_avg_sq = *find_state(i, "exp_avg_sq");
      // The step size uses the old d (in dlr), the denominator the new d.
      const Tensor denom = add(sqrt(exp_avg_sq), d * eps);
      if (decay != 0 && decouple) p.copy_(add(p, mul(p, -decay * dlr)));
      if (beta1 > 0) p.copy_(add(p, div(mul(*find_state(i, "exp_avg"), -dlr), denom)));
      else p.copy_(add(p, div(mul(grads[gi][j], -dlr * d), denom)));
    }
    scalar(gi, "k") += 1;
  }
}

}  // namespace lathe::optim
