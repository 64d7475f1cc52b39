// add_constant: OUT = IN + C, element by element, for arrays larger than memory.
//
//   add_constant IN OUT C [--tile-bytes BYTES]
// IN and OUT are .npy paths or HDF5 datasets ("run.h5:/sim/pressure").
//
// The elementwise example: a user lambda over Eigen arrays, streamed tile by tile.
//
// C is read as Python reads a literal ("2" is an int; "2.5", "1e-3", "inf", "nan" are
// floats), and OUT gets the dtype numpy 1.24 gives `a + C` for such a Python scalar:
// uint8 + 3 stays uint8 (and wraps, as numpy's does), int16 + 2.5 is float64,
// float32 + 2.5 stays float32, bool + 1 is int64. OUT keeps IN's shape and C/Fortran
// order, is always in native byte order (as numpy's result is), and loads in numpy.load
// to exactly np.add(np.load(IN), C).
//
// Exit status: 0 ok, 1 the arrays could not be read or written, 2 bad arguments.
// Errors are one line on stderr.

#include <ooc/ooc.hpp>

#include <charconv>
#include <cstdint>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

std::uint64_t parse_size(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value == 0)
    throw ooc::UsageError("--tile-bytes wants a positive number of bytes, not '" + std::string(text) + "'");
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view usage = "usage: add_constant IN OUT C [--tile-bytes BYTES]";
  ooc::PipelineOptions options;
  std::vector<std::string> args;
  ooc::kernels::PyScalar constant;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--tile-bytes" && i + 1 < argc) options.tile_bytes = parse_size(argv[++i]);
      else args.emplace_back(arg);
    }
    if (args.size() != 3) throw ooc::UsageError("expected IN OUT C");
    constant = ooc::kernels::PyScalar::parse(args[2]);
  } catch (const ooc::UsageError& e) {  // what PyScalar::parse throws for a bad C, too
    std::cerr << "add_constant: " << e.what() << " (" << usage << ")\n";
    return 2;
  }

  try {
    // Read-only: the pages are mapped PROT_READ, so no bug below can change IN.
    const ooc::MappedArray in = ooc::map_file(args[0]);

    // The output's dtype is decided once, up front, as numpy decides it; the kernel below
    // then computes in that type (transform converts IN's values to it, block by block).
    const ooc::DType dtype = ooc::kernels::result_type(in.dtype(), constant);

    // Same shape and memory order as IN, so element i of OUT's bytes is element i of
    // IN's, and the kernel never needs to know about strides. OUT is pre-allocated now
    // (a full disk fails here, not halfway) and written under a temporary name.
    ooc::MappedArray out = ooc::create_array(args[1], dtype, in.shape(), in.order());

    // The kernel: one generic lambda, instantiated for every element type T that
    // ooc::transform might compute in. x is an Eigen array of T (up to kBlockElements
    // values); return an Eigen expression of the same length. Eigen does not mix scalar
    // types in `x + c`, so the constant is converted to T inside, as numpy converts a
    // Python scalar to its loop type.
    ooc::transform(
        in, out,
        [constant](const auto& x) {
          using T = typename std::decay_t<decltype(x)>::Scalar;
          return x + constant.template as<T>();
        },
        options);

    // Only now does OUT appear under its name, complete and flushed. Without commit()
    // (an exception above) the temporary file is removed and OUT is left untouched.
    out.commit();
  } catch (const ooc::UsageError& e) {
    std::cerr << "add_constant: " << e.what() << "\n";
    return 2;
  } catch (const ooc::Error& e) {  // what() names the file and the problem
    std::cerr << "add_constant: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "add_constant: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
