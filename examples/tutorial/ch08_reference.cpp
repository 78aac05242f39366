// Chapter 8 of the tutorial (docs/tutorial/08-reference.md): check another implementation against
// lathe with a reference case -- here an AdamW step written in plain C++ loops.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "ref/case_registry.h"
#include "serialize/safetensors.h"
#include "core/system_info.h"
#include "tutorial.h"

using namespace lathe;
namespace fs = std::filesystem;

// [tutorial:independent]
// The implementation under test: AdamW as PyTorch documents it, in double precision, with no lathe
// in it. One call is one step t (1-based) on one parameter.
struct AdamWState {
  std::vector<double> m, v;
};
void adamw_step(std::vector<double>& p, const std::vector<double>& g, AdamWState& s, int t, double lr,
                double beta1, double beta2, double eps, double weight_decay) {
  if (s.m.empty()) s.m.assign(p.size(), 0.0), s.v.assign(p.size(), 0.0);
  const double bias1 = 1 - std::pow(beta1, t), bias2 = 1 - std::pow(beta2, t);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1 - lr * weight_decay;  // decoupled weight decay
    s.m[i] = beta1 * s.m[i] + (1 - beta1) * g[i];
    s.v[i] = beta2 * s.v[i] + (1 - beta2) * g[i] * g[i];
    const double denom = std::sqrt(s.v[i]) / std::sqrt(bias2) + eps;
    p[i] -= lr / bias1 * s.m[i] / denom;
  }
}
// [/tutorial:independent]

// [tutorial:compare]
// Element by element: |got - want| <= atol + rtol * |want|. Returns how many elements fail.
int mismatches(const Tensor& got, const std::vector<double>& want, double atol, double rtol) {
  std::vector<double> g = got.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(g[i] - want[i]) <= atol + rtol * std::abs(want[i]))) ++bad;
  return bad;
}
// [/tutorial:compare]

int main() {
  std::cout << std::boolalpha;
  set_cpu_threads(1);  // one thread: small work, and bitwise reproducible
  const fs::path dir = fs::temp_directory_path() / ("lathe-tutorial-ch08-" + std::to_string(getpid()));
  fs::create_directories(dir);

  tutorial::part("case");
  // [tutorial:case]
  // The case: two parameters, three steps of gradients, AdamW with one changed option.
  const int steps = 3;
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.emplace_back("param.0", Tensor::randn({2, 3}, /*seed=*/10));
  tensors.emplace_back("param.1", Tensor::randn({4}, /*seed=*/11));
  for (int t = 0; t < steps; ++t)
    for (int i = 0; i < 2; ++i)
      tensors.emplace_back("grad." + std::to_string(t) + "." + std::to_string(i),
                           Tensor::randn(tensors[size_t(i)].second.shape(), /*seed=*/20 + t, /*offset=*/100 * i));
  nlohmann::json doc = {{"kind", "optim"}, {"optimizer", "adamw"}, {"steps", steps},
                        {"groups", {{{"params", {0, 1}}, {"lr", 0.01}}}}};
  const std::string case_path = (dir / "adamw.case.safetensors").string();
  serialize::write_safetensors(case_path, tensors, {{"case", doc.dump()}});
  std::cout << "case document: " << doc.dump() << "\n";
  // [/tutorial:case]

  tutorial::part("run");
  // [tutorial:run]
  // What `lathe ref CASE OUT` does, as a library call: read the case, run its kind on a device.
  serialize::SafetensorsFile c = serialize::read_safetensors(case_path);
  ref::RefOutput lathe_out = ref::run_reference_case(c, Device::cpu());
  for (const auto& [name, t] : lathe_out.tensors) std::cout << "  " << name << " " << t.desc() << "\n";
  // [/tutorial:run]

  tutorial::part("check");
  // [tutorial:check]
  std::map<std::string, Tensor> got(lathe_out.tensors.begin(), lathe_out.tensors.end());
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    std::vector<double> p = c.at("param." + n).to_vector<double>();
    AdamWState s;
    for (int t = 0; t < steps; ++t)
      adamw_step(p, c.at("grad." + std::to_string(t) + "." + n).to_vector<double>(), s, t + 1,
                 /*lr=*/0.01, /*beta1=*/0.9, /*beta2=*/0.999, /*eps=*/1e-8, /*weight_decay=*/0.01);
    // lathe computes in f32 and the case's inputs are f32: tolerances of f32 arithmetic.
    const double atol = 1e-6, rtol = 1e-5;
    std::printf("param.%d: %d of %zu values off; exp_avg: %d off; exp_avg_sq: %d off\n", i,
                mismatches(got.at("param." + n), p, atol, rtol), p.size(),
                mismatches(got.at("state." + n + ".exp_avg"), s.m, atol, rtol),
                mismatches(got.at("state." + n + ".exp_avg_sq"), s.v, atol, rtol));
  }
  // [/tutorial:check]

  tutorial::part("bug");
  // [tutorial:bug]
  // A plausible bug: weight decay applied as L2 (added to the gradient, Adam's way) instead of
  // decoupled. The same comparison finds it.
  std::vector<double> p = c.at("param.0").to_vector<double>();
  AdamWState s;
  for (int t = 0; t < steps; ++t) {
    std::vector<double> g = c.at("grad." + std::to_string(t) + ".0").to_vector<double>();
    for (size_t k = 0; k < g.size(); ++k) g[k] += 0.01 * p[k];
    adamw_step(p, g, s, t + 1, 0.01, 0.9, 0.999, 1e-8, /*weight_decay=*/0.0);
  }
  std::printf("L2 instead of decoupled decay: param.0: %d of %zu values off\n",
              mismatches(got.at("param.0"), p, 1e-6, 1e-5), p.size());
  // [/tutorial:bug]
  fs::remove_all(dir);
  return 0;
}
