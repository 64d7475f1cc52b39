// The C++ snippets of README.md ("The C++ API"), compiled with the examples: each
// `// [snippet: NAME]` ... `// [end snippet]` region is what README shows under
// `<!-- snippet: examples/snippets/readme.cpp NAME -->` (regions of one name joined in
// order); tests/interop/test_doc_snippets.py checks that the two agree. Compiled only,
// never run: the files they name are placeholders.

// [snippet: first_steps]
#include <ooc/ooc.hpp>
// [end snippet]

#include <iostream>
#include <span>
#include <vector>

void first_steps() {
  // [snippet: first_steps]
  auto a   = ooc::map_file("pressure.npy");                        // or "run.h5:/sim/pressure"
  auto out = ooc::create_npy("p1.npy", a.dtype().native(), a.shape(), a.order());
  ooc::transform_as<double>(a, out, [](const auto& x) { return x * 0.5 + 1; });
  out.commit();                                                     // flush, fsync, rename
  ooc::Scalar total = ooc::reduce(a, ooc::kernels::Sum{});          // numpy's bits
  double t = total.value<double>();        // checked: throws if a double cannot hold it exactly
  // [end snippet]
  (void)t;
}

void column_statistics() {
  // [snippet: column_statistics]
  auto x = ooc::map_file("X.npy");                                        // (N, M) float64
  ooc::ReducedArray means = ooc::reduce_axis(x, 0, ooc::kernels::Mean{});  // np.mean(x, axis=0)
  ooc::ReducedArray stds = ooc::reduce_axis(x, 0, ooc::kernels::Var{.ddof = 1, .std = true});
  for (double m : means.values<double>()) std::cout << m << "\n";        // values<T>() checks the dtype
  auto y = ooc::create_npy("log.npy", x.dtype().native(), x.shape(), x.order());
  ooc::transform<ooc::Floating>(x, y, [](const auto& v) { return v.abs().log1p() * 2; });
  y.commit();                                 // an integer x is a one-line ooc::UsageError, not a compile error
  auto column = ooc::map_file("X.npy[::10, 1]");                           // any numpy basic selection
  // [end snippet]
  (void)stds;
  (void)column;
}

void restartable() {
  // [snippet: restartable]
  auto b = ooc::map_file("pressure.npy", ooc::Access::read_write);
  ooc::PipelineOptions options;
  auto journal = ooc::InPlaceJournal::open(b, "my-tool scale-by-half", options);  // resumes if needed
  ooc::transform_as<double>(b, b, [](const auto& x) { return x * 0.5; }, options);
  b.commit();
  journal->finish();
  // [end snippet]
}

void restartable_in_one_call() {
  // [snippet: apply-in-place]
  auto b = ooc::map_file("pressure.npy", ooc::Access::read_write);
  const bool resumed = ooc::apply_in_place(b, "my-tool scale-by-half", {}, [](auto& array, const auto& options) {
    ooc::transform_as<double>(array, array, [](const auto& x) { return x * 0.5; }, options);
  });
  // [end snippet]
  (void)resumed;
}

void read_rows() {
  // [snippet: read]
  const auto x = ooc::map_file("log.npy[1000:2000, 3]");  // any array or selection
  std::vector<double> column(static_cast<std::size_t>(x.size()));
  ooc::read(x, {0, x.size()}, std::as_writable_bytes(std::span(column)));
  // [end snippet]
}
