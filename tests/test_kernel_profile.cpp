// The kernel profile behind `lathe bench --profile` (core/kernel_profile.h): rows by kernel, a
// product's operations, a kernel inside a kernel counted once, nothing recorded while it is off.
#include <doctest/doctest.h>

#include "core/kernel_profile.h"
#include "core/ops.h"

using namespace lathe;

namespace {

const profile::KernelRow* row_of(const std::vector<profile::KernelRow>& rows, const std::string& name) {
  for (const profile::KernelRow& r : rows)
    if (r.kernel == name) return &r;
  return nullptr;
}

struct ProfileOn {
  ProfileOn() {
    profile::take();
    profile::set_enabled(true);
  }
  ~ProfileOn() { profile::set_enabled(false); }
};

}  // namespace

TEST_CASE("kernel profile: a product's row counts its calls and 2 M N K operations") {
  const Tensor a = Tensor::randn({3, 5, 7}, 1), b = Tensor::randn({7, 4}, 2);
  std::vector<profile::KernelRow> rows;
  {
    ProfileOn on;
    matmul(a, b);
    matmul(a, b);
    rows = profile::take();
  }
  const profile::KernelRow* mm = row_of(rows, "matmul");
  REQUIRE(mm != nullptr);
  CHECK(mm->calls == 2);
  CHECK(mm->flops == doctest::Approx(2 * 2.0 * 3 * 5 * 4 * 7));
  CHECK(mm->seconds >= 0);
}

TEST_CASE("kernel profile: a 16-bit product's conversions are inside its row, not rows of their own") {
  const Tensor a = Tensor::randn({8, 8}, 1).to(DType::bf16), b = Tensor::randn({8, 8}, 2).to(DType::bf16);
  std::vector<profile::KernelRow> rows;
  {
    ProfileOn on;
    matmul(a, b);
    rows = profile::take();
  }
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == "matmul");
  CHECK(rows[0].calls == 1);
}

TEST_CASE("kernel profile: off, nothing is recorded, take() starts afresh") {
  profile::take();
  const Tensor a = Tensor::randn({4, 4}, 1);
  add(a, a);
  CHECK(profile::take().empty());
  {
    ProfileOn on;
    add(a, a);
    softmax(a, -1);
  }
  const std::vector<profile::KernelRow> rows = profile::take();
  CHECK(row_of(rows, "add") != nullptr);
  CHECK(row_of(rows, "softmax") != nullptr);
  CHECK(profile::take().empty());
}
