// selection_sum ARRAY: prints np.sum(ARRAY) as a user's program computes it through the
// C++ API, with ooc's default options: ooc::reduce(ooc::map_file(ARRAY), Sum{}). ARRAY may
// carry a selection ("X.npy[:, 2]", "X.npy[@keep.npy]"); with a second argument SELECTION
// the selection is made on the named array instead (x.select(SELECTION), x kept).
// tests/interop/test_memory_bound.py measures its resident memory.
//
// Exit status: 0 ok, 1 the array could not be read, 2 bad arguments.

#include <ooc/ooc.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: selection_sum ARRAY [SELECTION]\n");
    return 2;
  }
  try {
    const ooc::MappedArray x = ooc::map_file(argv[1]);
    const double sum = argc == 2 ? ooc::reduce(x, ooc::kernels::Sum{}).as_double()
                                 : ooc::reduce(x.select(argv[2]), ooc::kernels::Sum{}).as_double();
    std::printf("%.17g\n", sum);
  } catch (const ooc::Error& e) {
    std::fprintf(stderr, "selection_sum: %s\n", e.what());
    return e.kind() == ooc::ErrorKind::usage || e.kind() == ooc::ErrorKind::index ? 2 : 1;
  }
  return 0;
}
