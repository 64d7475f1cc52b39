// app ARRAY.npy [sum|prod]: prints a reduction of the array, as JSON, the way numpy's
// a.sum() / a.prod() computes it. Built against the installed package only (see
// CMakeLists.txt next to this file), without -fwrapv and with signed overflow trapping.
//
// Without a kernel name: ooc::reduce(a, Sum{}), the instantiation the library holds
// (extern template). With one: ooc::reduce(ooc::inputs(a), ...), instantiated here, in
// this program's flags: an integer overflow of ooc's templates that relied on -fwrapv
// would stop the program instead of wrapping as numpy's does.
// `app --overflow-traps` overflows an int64 on purpose: it must not return.

#include <ooc/ooc.hpp>

#include <cstdint>
#include <exception>
#include <iostream>
#include <limits>
#include <string>

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--overflow-traps") {
    volatile std::int64_t big = std::numeric_limits<std::int64_t>::max();
    const std::int64_t wrapped = big + 1;  // undefined: the sanitizer's trap stops us here
    std::cout << wrapped << "\n";
    return 0;
  }
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: app ARRAY.npy [sum|prod]\n";
    return 2;
  }
  try {
    const ooc::MappedArray a = ooc::map_file(argv[1]);
    const std::string kernel = argc == 3 ? argv[2] : "";
    if (kernel.empty()) {
      std::cout << ooc::reduce(a, ooc::kernels::Sum{}).to_json() << "\n";
    } else if (kernel == "sum") {
      std::cout << ooc::reduce(ooc::inputs(a), ooc::kernels::Sum{}).to_json() << "\n";
    } else if (kernel == "prod") {
      std::cout << ooc::reduce(ooc::inputs(a), ooc::kernels::Prod{}).to_json() << "\n";
    } else {
      std::cerr << "app: unknown kernel '" << kernel << "' (sum or prod)\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "app: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
