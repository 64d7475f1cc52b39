// libFuzzer target for the selection parser and its layout (src/selection.cpp): any
// text after an array's name either selects (and every selected element is read) or
// throws ooc::Error. Seed corpus in selection/.

#include "parser_fuzz_support.hpp"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ooc::fuzz::FuzzArrays arrays;
  std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find('@') != std::string::npos) return 0;  // index files: any path on this machine
  for (const std::string& path : {arrays.matrix, arrays.cube, arrays.column}) {
    try {
      const ooc::MappedArray a = ooc::map_file(path).select(text);
      // Summed as double: a sum of the int arrays in their own type overflows, which is
      // undefined without -fwrapv (ooc no longer adds it to the code that includes it).
      ooc::for_each_tile(a, [](const ooc::Tile&, const auto& x) { (void)x.template cast<double>().sum(); });
    } catch (const ooc::Error&) {
    }
  }
  return 0;
}
