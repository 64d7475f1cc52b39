// The C++ snippet of DESIGN.md (the overview), compiled with the examples; see
// readme.cpp for how the regions and the document are kept the same.

// [snippet: overview]
#include <ooc/ooc.hpp>
// [end snippet]

void overview() {
  // [snippet: overview]
  auto a   = ooc::map_file("pressure.npy");                 // read-only mapping
  auto out = ooc::create_npy("p1.npy", a.dtype(), a.shape());
  ooc::transform<ooc::Floating>(a, out, [](const auto& x) { return x + 1; });  // tile by tile, in parallel
  double total = ooc::reduce(a, ooc::kernels::Sum{}).value<double>();  // deterministic, checked
  // [end snippet]
  (void)total;
}

// Code quoted in the headers' comments (tests/interop/test_doc_snippets.py finds each
// region's text in the header named).
void header_examples(const ooc::MappedArray& in, ooc::MappedArray& out, const ooc::MappedArray& a) {
  // [snippet: kernel_hpp]
  ooc::transform<ooc::Floating>(in, out, [](const auto& x) { return x * 2 + 1; });
  // [end snippet]
  // [snippet: scalar_hpp]
  double total = ooc::reduce(a, ooc::kernels::Sum{}).value<double>();
  // [end snippet]
  (void)total;
}
