// Chapter 1 of the tutorial (docs/tutorial/01-tensors.md): storage, shapes, strides, views and
// broadcasting.
#include <iostream>

#include "core/ops.h"
#include "core/tensor.h"
#include "tutorial.h"

using namespace lathe;

int main() {
  std::cout << std::boolalpha;
  tutorial::part("create");
  // [tutorial:create]
  Tensor a = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  std::cout << a << "\n";
  std::cout << "desc " << a.desc() << ", strides " << shape_str(a.strides())
            << ", offset " << a.offset() << ", " << a.nbytes() << " bytes\n";
  // [/tutorial:create]

  tutorial::part("views");
  // [tutorial:views]
  Tensor t = a.t();              // a view: same storage, strides swapped
  Tensor row = a.select(0, 1);   // the second row, a view with offset 3
  Tensor col = a.select(1, 2);   // the third column, stride 3
  std::cout << "t   " << t.desc() << " strides " << shape_str(t.strides())
            << " contiguous " << t.is_contiguous() << "\n";
  std::cout << "row " << row.desc() << " offset " << row.offset() << "\n";
  std::cout << "col " << col.desc() << " strides " << shape_str(col.strides()) << "\n";
  std::cout << "same storage: " << (t.storage() == a.storage() && col.storage() == a.storage()) << "\n";
  col.fill_(-1);                 // writes through the view into a's storage
  std::cout << a << "\n";
  // [/tutorial:views]

  tutorial::part("contiguous");
  // [tutorial:contiguous]
  Tensor tc = t.contiguous();    // a copy in row-major order, with its own storage
  std::cout << "tc strides " << shape_str(tc.strides()) << ", same storage as a: "
            << (tc.storage() == a.storage()) << "\n";
  std::cout << "a.view({3, 2}):      " << a.view({3, 2}).desc() << "\n";
  try {
    t.view({6});                 // a transposed view cannot be flattened without a copy
  } catch (const Error& e) {
    std::cout << "t.view({6}) refused: " << e.what() << "\n";
  }
  std::cout << "t.reshape({6}):      " << t.reshape({6}) << "\n";
  // [/tutorial:contiguous]

  tutorial::part("broadcast");
  // [tutorial:broadcast]
  Tensor bias = Tensor::from_vector<float>({10, 20, 30}, {3});
  Tensor wide = bias.expand({2, 3});  // stride 0 along the new dim: no copy
  std::cout << "expanded strides " << shape_str(wide.strides()) << "\n";
  std::cout << a + bias << "\n";      // [2, 3] + [3] -> [2, 3]
  Tensor column = Tensor::from_vector<float>({100, 200}, {2, 1});
  std::cout << "shape of [2, 1] + [3]: " << shape_str(broadcast_shapes(column.shape(), bias.shape(), "add"))
            << "\n";
  std::cout << column + bias << "\n";
  // [/tutorial:broadcast]
  return 0;
}
