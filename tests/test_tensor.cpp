// Tensors: creation, views that share storage, broadcasting, device rules, printing.
#include <doctest/doctest.h>

#include "core/autograd.h"
#include "core/ops.h"

using namespace lathe;

TEST_CASE("creation and item") {
  Tensor z = Tensor::zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.numel() == 6);
  CHECK(z.dtype() == DType::f32);
  CHECK(z.is_contiguous());
  CHECK(Tensor::full({}, 2.5).item() == 2.5);
  Tensor a = Tensor::arange(0, 5);
  CHECK(a.dtype() == DType::i64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}).item(), doctest::Contains("2 elements"), Error);
}

TEST_CASE("views share storage") {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = x.t();
  CHECK(t.shape() == Shape{3, 2});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.storage() == x.storage());
  CHECK(t.contiguous().to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor row = x.select(0, 1);
  CHECK(row.to_vector<float>() == std::vector<float>{3, 4, 5});
  row.fill_(9);
  CHECK(x.to_vector<float>() == std::vector<float>{0, 1, 2, 9, 9, 9});
  Tensor e = Tensor::from_vector<float>({1, 2}, {2, 1}).expand({2, 3});
  CHECK(e.strides() == Strides{1, 0});
  CHECK(e.contiguous().to_vector<float>() == std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(x.view({3, 2}).shape() == Shape{3, 2});
  CHECK(x.view({-1}).shape() == Shape{6});
  CHECK_THROWS_AS(x.t().view({6}), Error);
  CHECK(x.t().reshape({6}).to_vector<float>() == std::vector<float>{0, 9, 1, 9, 2, 9});
  CHECK(x.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(x.unsqueeze(0).squeeze(0).shape() == Shape{2, 3});
  CHECK(x.slice(1, 0, 3, 2).to_vector<float>() == std::vector<float>{0, 2, 9, 9});
}

TEST_CASE("broadcasting arithmetic") {
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {1, 3});
  Tensor b = Tensor::from_vector<float>({10, 20}, {2, 1});
  Tensor c = a + b;
  CHECK(c.shape() == Shape{2, 3});
  CHECK(c.to_vector<float>() == std::vector<float>{11, 12, 13, 21, 22, 23});
  CHECK((a * 2.0).to_vector<float>() == std::vector<float>{2, 4, 6});
  CHECK_THROWS_WITH_AS(Tensor::zeros({2, 3}) + Tensor::zeros({4}), doctest::Contains("cannot be broadcast"), Error);
}

TEST_CASE("reductions") {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(sum(x).item() == 21);
  CHECK(sum(x, {0}).to_vector<float>() == std::vector<float>{5, 7, 9});
  CHECK(sum(x, {1}).to_vector<float>() == std::vector<float>{6, 15});
  CHECK(sum(x, {1}, true).shape() == Shape{2, 1});
  CHECK(mean(x, {1}).to_vector<float>() == std::vector<float>{2, 5});
  CHECK(sum(x.t(), {1}).to_vector<float>() == std::vector<float>{5, 7, 9});
}

TEST_CASE("mixing devices is an error that names both") {
  Tensor a = Tensor::ones({2});
  Tensor b = Tensor::ones({2}, DType::f32, Device::sim());
  CHECK_THROWS_WITH_AS(a + b, doctest::Contains("cpu"), Error);
  CHECK_THROWS_WITH_AS(a + b, doctest::Contains("sim:0"), Error);
  reset_transfer_stats();
  Tensor c = a.to(Device::sim()) + b;
  CHECK(transfer_stats().host_to_device == 1);
  CHECK(c.device() == Device::sim());
  CHECK(c.to(Device::cpu()).to_vector<float>() == std::vector<float>{2, 2});
  CHECK(transfer_stats().device_to_host == 1);
}

TEST_CASE("autograd basics") {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3}).requires_grad_();
  Tensor y = sum(mul(x, x));
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 4, 6});
  Tensor y2 = sum(x * 3.0);
  y2.backward();  // accumulates
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, 7, 9});
}
