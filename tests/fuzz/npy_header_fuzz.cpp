// libFuzzer target for the .npy header parser (src/format/npy.cpp): built with clang's
// -fsanitize=fuzzer,address,undefined when OOC_FUZZ=ON; seed corpus in npy_header/.

#include "npy_header_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ooc::fuzz::check_npy_header(std::span(reinterpret_cast<const std::byte*>(data), size));
  return 0;
}
