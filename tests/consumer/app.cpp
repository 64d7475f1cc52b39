// app ARRAY.npy: prints the sum of the array, as JSON, the way numpy's a.sum() computes it.
// Built against the installed package only (see CMakeLists.txt next to this file).

#include <ooc/ooc.hpp>

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: app ARRAY.npy\n";
    return 2;
  }
  try {
    const ooc::MappedArray a = ooc::map_file(argv[1]);
    std::cout << ooc::reduce(a, ooc::kernels::Sum{}).to_json() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "app: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
