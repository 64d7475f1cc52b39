// libFuzzer target for oocrun eval's expression parser and type checker
// (kernels/expr/): any text, with names bound to small arrays, either compiles and
// evaluates or throws ooc::Error; nothing else (a crash, a sanitizer report, another
// exception) is acceptable. Seed corpus in expr/.

#include "parser_fuzz_support.hpp"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ooc::fuzz::FuzzArrays arrays;
  static const ooc::MappedArray m = ooc::map_file(arrays.matrix), c = ooc::map_file(arrays.column),
                                k = ooc::map_file(arrays.cube), s = ooc::map_file(arrays.scalar);
  const std::vector<ooc::kernels::Binding> bindings = {{"a", &m}, {"b", &c}, {"k", &k}, {"s", &s}};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto expression = ooc::kernels::Expression::compile(text, bindings);
    if (expression.reduction()) (void)expression.reduce();
    else (void)expression.evaluate();
  } catch (const ooc::Error&) {
  } catch (const std::domain_error&) {  // a reduction of nothing (argmin of an empty array)
  }
  return 0;
}
