// The sim device, lathe's stand-in for an accelerator in CI: its own allocator and statistics,
// errors when mixed with cpu tensors (naming the op and both devices), counted copies for every
// way data crosses the host boundary, and Device::parse.
#include <doctest/doctest.h>

#include "core_test_util.h"

using namespace lathe;
using core_test::same_bits;

namespace {
const Device kSim = Device::sim();
const Device kSim1 = Device::sim(1);
}  // namespace

TEST_CASE("devices: parse and print") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("sim") == Device::sim(0));
  CHECK(Device::parse("sim:1") == Device::sim(1));
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::sim(1).str() == "sim:1");
  CHECK(Device::cpu().str() == "cpu");
  CHECK(Device::cuda(2).str() == "cuda:2");
  CHECK(Device::parse(Device::sim(1).str()) == Device::sim(1));
  CHECK(Device::cpu().host_accessible());
  CHECK(kSim.host_accessible());
  CHECK_FALSE(Device::cuda().host_accessible());

  CHECK_THROWS_WITH_AS(Device::parse("gpu"), doctest::Contains("invalid device 'gpu' (expected cpu, sim[:N] or cuda[:N])"),
                       Error);
  CHECK_THROWS_WITH_AS(Device::parse(""), doctest::Contains("invalid device ''"), Error);
  CHECK_THROWS_WITH_AS(Device::parse("cpu:1"), doctest::Contains("only one cpu device"), Error);
  CHECK_THROWS_WITH_AS(Device::parse("sim:2"), doctest::Contains("sim devices are sim:0 to sim:1"), Error);
  CHECK_THROWS_WITH_AS(Device::parse("sim:-1"), doctest::Contains("must be a non-negative integer"), Error);
  CHECK_THROWS_WITH_AS(Device::parse("sim:x"), doctest::Contains("must be a non-negative integer"), Error);
  CHECK_THROWS_WITH_AS(Device::parse("cuda:1x"), doctest::Contains("must be a non-negative integer"), Error);
  CHECK_THROWS_WITH_AS(Device::parse("sim:"), doctest::Contains("must be a non-negative integer"), Error);
  CHECK_THROWS_AS(Device::parse("CPU"), Error);
}

TEST_CASE("devices: a device that does not exist fails by name") {
  if (!backend_available(DeviceType::cuda)) {
    CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f32, Device::cuda()),
                         doctest::Contains("device cuda:0 is not available"), Error);
    CHECK_THROWS_WITH_AS(Tensor::zeros({2}).to(Device::cuda()), doctest::Contains("cuda:0 is not available"), Error);
  }
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f32, Device::sim(5)), doctest::Contains("device sim:5 does not exist"),
                       Error);
}

TEST_CASE("devices: sim has its own allocator and statistics") {
  const size_t mib = size_t(1) << 20;
  const MemoryStats cpu0 = memory_stats(Device::cpu());
  const MemoryStats sim0 = memory_stats(kSim);
  const MemoryStats sim1 = memory_stats(kSim1);
  reset_peak_memory(kSim);
  {
    Tensor t = Tensor::zeros({int64_t(mib / 4)}, DType::f32, kSim);  // 1 MiB
    CHECK(t.device() == kSim);
    CHECK(t.storage()->device() == kSim);
    CHECK(memory_stats(kSim).allocated == sim0.allocated + mib);
    CHECK(memory_stats(kSim).peak_allocated >= sim0.allocated + mib);
    CHECK(memory_stats(kSim).num_allocs == sim0.num_allocs + 1);
    CHECK(memory_stats(Device::cpu()).allocated == cpu0.allocated);  // nothing on the host
    CHECK(memory_stats(kSim1).allocated == sim1.allocated);          // nor on the other sim
    Tensor u = Tensor::ones({int64_t(mib / 8)}, DType::f64, kSim1);
    CHECK(memory_stats(kSim1).allocated == sim1.allocated + mib);
  }
  // Freed blocks are returned (and cached for reuse: reserved stays).
  CHECK(memory_stats(kSim).allocated == sim0.allocated);
  CHECK(memory_stats(kSim).peak_allocated == sim0.allocated + mib);
  CHECK(memory_stats(kSim).reserved >= mib);
  const size_t reserved = memory_stats(kSim).reserved;
  { Tensor again = Tensor::empty({int64_t(mib / 4)}, DType::f32, kSim); }
  CHECK(memory_stats(kSim).reserved == reserved);  // served from the cache
  reset_peak_memory(kSim);
  CHECK(memory_stats(kSim).peak_allocated == memory_stats(kSim).allocated);
  allocator_for(kSim).empty_cache();
  CHECK(memory_stats(kSim).reserved < reserved);
}

TEST_CASE("devices: mixing cpu and sim operands fails, naming the op and both devices") {
  Tensor c = Tensor::ones({2, 2});
  Tensor s = Tensor::ones({2, 2}, DType::f32, kSim);
  Tensor s1 = Tensor::ones({2, 2}, DType::f32, kSim1);
  auto expect = [](const std::function<void()>& f, const std::string& op, const std::string& d0,
                   const std::string& d1) {
    try {
      f();
      FAIL("no error for ", op);
    } catch (const Error& e) {
      std::string m = e.what();
      CAPTURE(m);
      CHECK(m.find(op) != std::string::npos);
      CHECK(m.find(d0) != std::string::npos);
      CHECK(m.find(d1) != std::string::npos);
    }
  };
  expect([&] { add(c, s); }, "add", "on cpu", "on sim:0");
  expect([&] { mul(s, c); }, "mul", "on sim:0", "on cpu");
  expect([&] { div(s, s1); }, "div", "on sim:0", "on sim:1");
  expect([&] { maximum(c, s); }, "maximum", "on cpu", "on sim:0");
  expect([&] { lt(c, s); }, "lt", "on cpu", "on sim:0");
  expect([&] { where(gt(s, s), c, s); }, "where", "on sim:0", "on cpu");
  expect([&] { matmul(c, s); }, "matmul", "on cpu", "on sim:0");
  expect([&] { cat({s, c}); }, "cat", "on sim:0", "on cpu");
  expect([&] { stack({c, s}); }, "stack", "on cpu", "on sim:0");
  expect([&] { index_select(s, 0, Tensor::zeros({1}, DType::i64)); }, "index_select", "on sim:0", "on cpu");
  expect([&] { gather(c, 0, Tensor::zeros({1, 1}, DType::i64, kSim)); }, "gather", "on cpu", "on sim:0");
  expect([&] { embedding(s, Tensor::zeros({1}, DType::i64)); }, "embedding", "on sim:0", "on cpu");
}

TEST_CASE("devices: ops on sim give the cpu's results, on sim") {
  Tensor a = Tensor::randn({3, 4}, 1), b = Tensor::randn({4}, 2);
  Tensor as = a.to(kSim), bs = b.to(kSim);
  Tensor r = gelu(a * b + exp(a)), rs = gelu(as * bs + exp(as));
  CHECK(rs.device() == kSim);
  CHECK(same_bits(r, rs));
  CHECK(same_bits(sum(a, {1}), sum(as, {1})));
  CHECK(same_bits(matmul(a, a.t()), matmul(as, as.t())));
  Tensor idx = core_test::i64({2, 0}, {2});
  CHECK(same_bits(index_select(a, 0, idx), index_select(as, 0, idx.to(kSim))));
  CHECK(same_bits(cat({a, a}, 1), cat({as, as}, 1)));
}

TEST_CASE("devices: every host-device copy is counted") {
  Tensor h = Tensor::ones({4, 4});  // 64 bytes
  reset_transfer_stats();
  Tensor s = h.to(kSim);
  TransferStats t = transfer_stats();
  CHECK(t.host_to_device == 1);
  CHECK(t.device_to_host == 0);
  CHECK(t.bytes == 64);
  CHECK(t.syncs == 0);

  // to() of the same device copies nothing.
  CHECK(s.to(kSim).id() == s.id());
  CHECK(transfer_stats() == t);

  // item() and to_vector() read the device: one copy and one sync each.
  reset_transfer_stats();
  CHECK(sum(s).item() == 16.0);
  CHECK(transfer_stats().device_to_host == 1);
  CHECK(transfer_stats().syncs == 1);
  CHECK(transfer_stats().bytes == 4);
  reset_transfer_stats();
  CHECK(s.to_vector<float>().size() == 16);
  CHECK(transfer_stats().device_to_host == 1);
  CHECK(transfer_stats().syncs == 1);
  CHECK(transfer_stats().bytes == 64);

  // copy_ across devices, either way, and between two sims.
  reset_transfer_stats();
  Tensor dst = Tensor::zeros({4, 4});
  dst.copy_(s);
  CHECK(transfer_stats().device_to_host == 1);
  s.copy_(dst);
  CHECK(transfer_stats().host_to_device == 1);
  Tensor s1 = Tensor::zeros({4, 4}, DType::f32, kSim1);
  s1.copy_(s);
  CHECK(transfer_stats().device_to_device == 1);
  CHECK(s.to(kSim1).device() == kSim1);
  CHECK(transfer_stats().device_to_device == 2);
  CHECK(transfer_stats().bytes == 4 * 64);

  // A broadcast source copies only its own (small) bytes across.
  reset_transfer_stats();
  s.copy_(Tensor::scalar(3));
  CHECK(transfer_stats().host_to_device == 1);
  CHECK(transfer_stats().bytes == 4);
  CHECK(sum(s).item() == 48.0);

  // cpu work and sim work alone cost nothing.
  reset_transfer_stats();
  Tensor x = add(h, h);
  Tensor y = mul(s, s);
  Tensor z = Tensor::rand({8}, 0, 0, DType::f32, kSim);
  CHECK(transfer_stats() == TransferStats{});
  CHECK(x.numel() + y.numel() + z.numel() == 40);
}

TEST_CASE("devices: gradients flow back across a device move") {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3}).requires_grad_(true);
  Tensor w = Tensor::from_vector<double>({4, 5, 6}, {3}, kSim);
  Tensor y = sum(mul(x.to(kSim), w));
  CHECK(y.device() == kSim);
  reset_transfer_stats();
  y.backward();
  CHECK(x.grad().device() == Device::cpu());
  CHECK(x.grad().to_vector<double>() == std::vector<double>{4, 5, 6});
  CHECK(transfer_stats().device_to_host == 1);  // the gradient's way back
  // A gradcheck across the move.
  Tensor a = Tensor::randn({2, 3}, 4, 0, DType::f64).requires_grad_(true);
  CHECK(gradcheck([](const std::vector<Tensor>& v) { return tanh(v[0].to(kSim)).to(Device::cpu()); }, {a}) == "");
}
