#include "ooc/kernels/reductions.hpp"

#include "several.hpp"

#include "ooc/error.hpp"
#include "ooc/kernel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace ooc::kernels {

// ---- Moments (var, std) -------------------------------------------------------------

namespace {

// pairwise_sum's steps, over the deviations d = a[i] - mean and over their squares d * d
// at once: the two sums pairwise_sum gives of arrays of them, in one traversal of `a`
// and none of a stored copy (with sum, mean, min and max beside it, var's block moments
// were the largest part of the work: five traversals, two of them stores).
void pairwise_deviation_sums(const double* a, std::int64_t n, double mean, double& sum, double& squares) {
  if (n < 8) {
    sum = 0;
    squares = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = a[i] - mean;
      sum += d;
      squares += d * d;
    }
    return;
  }
  if (n <= 128) {
    // pairwise_sum's eight accumulators, as lanes (the loop vectorises; each lane's sums
    // are the same IEEE operations in the same order).
    using Lanes = Eigen::Array<double, 8, 1>;
    Lanes r = Eigen::Map<const Lanes>(a) - mean;
    Lanes q = r * r;
    std::int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      const Lanes d = Eigen::Map<const Lanes>(a + i) - mean;
      r += d;
      q += d * d;
    }
    sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    squares = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
    for (; i < n; ++i) {
      const double d = a[i] - mean;
      sum += d;
      squares += d * d;
    }
    return;
  }
  std::int64_t n2 = n / 2;
  n2 -= n2 % 8;
  double sum_left, squares_left, sum_right, squares_right;
  pairwise_deviation_sums(a, n2, mean, sum_left, squares_left);
  pairwise_deviation_sums(a + n2, n - n2, mean, sum_right, squares_right);
  sum = sum_left + sum_right;
  squares = squares_left + squares_right;
}

}  // namespace

Moments Moments::of_block(const ConstArrayMap<double>& x) {
  const std::int64_t n = x.size();
  Moments block;
  if (n == 0) return block;
  const double count = static_cast<double>(n);
  block.count = n;
  block.mean = pairwise_sum<double>(x.data(), n) / count;
  double deviation_sum = 0;
  pairwise_deviation_sums(x.data(), n, block.mean, deviation_sum, block.m2);
  // Where the values or their sum overflowed the sum of deviations is infinite or NaN,
  // and the variance is already what numpy's is (infinite, or NaN).
  if (std::isfinite(deviation_sum)) {
    block.mean_low = deviation_sum / count;
    block.m2 -= deviation_sum * block.mean_low;
  }
  return block;
}

namespace {

// a + b as the rounded sum and what its rounding lost (Knuth's TwoSum, exact in IEEE
// arithmetic whatever the magnitudes).
std::pair<double, double> two_sum(double a, double b) {
  const double sum = a + b;
  const double b_rounded = sum - a;
  const double lost = (a - (sum - b_rounded)) + (b - b_rounded);
  return {sum, std::isfinite(lost) ? lost : 0.0};
}

}  // namespace

void Moments::merge(const Moments& right) {
  if (right.count == 0) return;
  if (count == 0) {
    *this = right;
    return;
  }
  const double n_left = static_cast<double>(count);
  const double n_right = static_cast<double>(right.count);
  const double n = n_left + n_right;
  // The means' difference from their high parts (exact when they are close) and then
  // their low parts: precise even where the means share most of their digits.
  const double delta = (right.mean - mean) + (right.mean_low - mean_low);
  std::tie(mean, mean_low) = two_sum(mean, mean_low + delta * (n_right / n));
  m2 += right.m2 + delta * delta * (n_left * n_right / n);
  count += right.count;
}

double Moments::variance(std::int64_t ddof) const {
  const double dof = static_cast<double>(std::max<std::int64_t>(count - ddof, 0));
  return m2 / dof;  // 0/0 is NaN (empty), x/0 infinity: numpy's answers
}

// ---- argmin, argmax ---------------------------------------------------------------

template <bool kMin>
ArgExtremum<kMin>::ArgExtremum(Shape shape, Order order)
    : shape_(std::move(shape)), c_strides_(element_strides(shape_, Order::c)),
      reorder_(order == Order::fortran && shape_.size() > 1) {}

template <bool kMin>
std::int64_t ArgExtremum<kMin>::c_index(std::int64_t memory_index) const {
  if (!reorder_) return memory_index;
  // Fortran order: the first axis varies fastest in memory; C order wants it slowest.
  std::int64_t c = 0;
  for (std::size_t axis = 0; axis < shape_.size(); ++axis) {
    c += (memory_index % shape_[axis]) * c_strides_[axis];
    memory_index /= shape_[axis];
  }
  return c;
}

template class ArgExtremum<true>;
template class ArgExtremum<false>;

// ---- histogram -----------------------------------------------------------------------

Histogram::Histogram(std::int64_t bins, double lo, double hi, DType edges, std::optional<double> width)
    : bins_(bins), edge_size_(edges.itemsize()), norm_(static_cast<double>(bins) / width.value_or(hi - lo)) {
  norm_float_ = static_cast<float>(norm_);
  convert(dtype_of<double>, &norm_, dtype_of<half>, &norm_half_, 1);
  // The product (x - lo) * norm is computed in result_type(E array, norm): norm counts by
  // value, so a float16 array multiplies in float32 when norm is beyond float16.
  multiply_size_ = result_type(edges, PyScalar::of_double(norm_)).itemsize();
  // np.linspace(lo, hi, bins + 1): i * step + lo in float64, the last edge exactly hi,
  // then rounded once to E.
  const double delta = hi - lo;
  const double step = delta / static_cast<double>(bins);
  edges_.resize(static_cast<std::size_t>(bins) + 1);
  for (std::int64_t i = 0; i <= bins; ++i) {
    double edge = step == 0 ? static_cast<double>(i) / static_cast<double>(bins) * delta + lo
                            : static_cast<double>(i) * step + lo;
    if (i == bins) edge = hi;
    edges_[static_cast<std::size_t>(i)] = rounded_to(edges, edge);
  }
  // Values are kept by comparison with lo and hi in the edges' dtype, not with the first
  // edge: np.linspace gives NaN there when hi - lo overflows, and numpy keeps values.
  low_.value = rounded_to(edges, lo);
  high_.value = rounded_to(edges, hi);
}

double Histogram::rounded_to(DType dtype, double value) {
  double rounded = 0;
  visit_dtype(dtype, [&]<class E>(std::type_identity<E>) {
    E e;
    convert(dtype_of<double>, &value, dtype_of<E>, &e, 1);
    rounded = static_cast<double>(e);
  });
  return rounded;
}

void Histogram::overflowed(int edge_size) {
  throw std::range_error("histogram: (x - lo) * bins / (hi - lo) overflows float" + std::to_string(8 * edge_size) +
                         ", the edges' dtype, for this range and bin count, and numpy fails there (IndexError); "
                         "use fewer bins or a narrower range");
}

void Histogram::compare_exactly(DType array, const PyScalar& lo, const PyScalar& hi) {
  if (array.kind() != Kind::signed_int && array.kind() != Kind::unsigned_int) return;
  if (array.itemsize() != 8) return;  // smaller integers are exact in float64
  auto exact = [&](Bound& b, const PyScalar& bound) {
    if (!bound.is_integer) return;
    if (array.kind() == Kind::signed_int) {
      if (bound.negative || bound.uint_value <= static_cast<std::uint64_t>(INT64_MAX)) {
        b.kind = Bound::Kind::int64;
        b.int_value = bound.negative ? bound.int_value : static_cast<std::int64_t>(bound.uint_value);
      }
    } else if (!bound.negative) {
      b.kind = Bound::Kind::uint64;
      b.uint_value = bound.uint_value;
    }
  };
  exact(low_, lo);
  exact(high_, hi);
}

DType Histogram::edge_dtype(DType array, const PyScalar& lo, const PyScalar& hi) {
  // numpy converts a boolean array to uint8 first.
  const DType a = array.kind() == Kind::boolean ? DType(Kind::unsigned_int, 1) : array.native();
  const Operand operands[] = {Operand::python(lo), Operand::python(hi), Operand::array(a)};
  const DType t = result_type(operands);
  return t.kind() == Kind::floating ? t : DType(Kind::floating, 8);
}

// ---- ReduceOp ----------------------------------------------------------------------

namespace {

// Python's order of two range bounds: exact when both are ints (numpy compares the
// Python numbers), -1, 0 or 1.
int compare_bounds(const PyScalar& a, const PyScalar& b) {
  if (a.is_integer && b.is_integer) return a.as_int128() < b.as_int128() ? -1 : a.as_int128() > b.as_int128() ? 1 : 0;
  return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
}

struct NamedReduction {
  std::string_view name;
  ReduceOp::Code code;
};

constexpr NamedReduction kReductions[] = {
    {"sum", ReduceOp::Code::sum},         {"prod", ReduceOp::Code::prod},
    {"mean", ReduceOp::Code::mean},       {"min", ReduceOp::Code::min},
    {"max", ReduceOp::Code::max},         {"argmin", ReduceOp::Code::argmin},
    {"argmax", ReduceOp::Code::argmax},   {"var", ReduceOp::Code::var},
    {"std", ReduceOp::Code::std},         {"count_nonzero", ReduceOp::Code::count_nonzero},
    {"any", ReduceOp::Code::any},         {"all", ReduceOp::Code::all},
    {"nansum", ReduceOp::Code::nansum},   {"nanmean", ReduceOp::Code::nanmean},
    {"nanmin", ReduceOp::Code::nanmin},   {"nanmax", ReduceOp::Code::nanmax},
    {"norm", ReduceOp::Code::norm},       {"histogram", ReduceOp::Code::histogram},
};

constexpr std::string_view kKnownReductions =
    "sum, prod, mean, min, max, argmin, argmax, var, std, count_nonzero, any, all, nansum, nanmean, nanmin, "
    "nanmax, norm, histogram";

}  // namespace

ReduceOp ReduceOp::parse(std::string_view name, Params params) {
  ReduceOp op;
  op.name_ = std::string(name);
  op.params_ = params;
  const auto known = std::find_if(std::begin(kReductions), std::end(kReductions),
                                  [&](const NamedReduction& r) { return r.name == name; });
  if (known == std::end(kReductions))
    throw UsageError("unknown reduction '" + op.name_ + "' (known: " + std::string(kKnownReductions) + ")");
  op.code_ = known->code;
  if (params.ddof < 0) throw UsageError(std::string(), "ddof must not be negative", "ddof");
  if (op.code_ == Code::histogram) {
    if (params.bins <= 0) throw UsageError("histogram: `bins` must be positive, when an integer");
    if (params.range) {
      const double lo = params.range->first.as_double(), hi = params.range->second.as_double();
      if (!std::isfinite(lo) || !std::isfinite(hi))
        throw UsageError("histogram: supplied range of [" + format_float(lo, 8) + ", " + format_float(hi, 8) +
                                 "] is not finite");
      if (compare_bounds(params.range->first, params.range->second) > 0)
        throw UsageError("histogram: max must be larger than min in range parameter.");
    }
  }
  return op;
}

Scalar ReduceOp::run(const MappedArray& in, const PipelineOptions& options) const {
  if (code_ == Code::histogram) throw UsageError(in.path(), "histogram gives counts and edges, not one value");
  return with_kernel(in.shape(), in.order(), [&](const auto& kernel) -> Scalar { return reduce(in, kernel, options); });
}

namespace {

// A reduction's value as the Python number numpy takes a histogram bound as.
PyScalar python_number(const Scalar& s) {
  switch (s.dtype().kind()) {
    case Kind::floating: return PyScalar::of_double(s.as_double());
    case Kind::unsigned_int: return PyScalar::of_uint(s.as<std::uint64_t>());
    default: return PyScalar::of_int(s.as<std::int64_t>());
  }
}

// Whether np.histogram(in) must first find the data's min and max: no range given, and
// some data (an empty array's default range is [0, 1]).
bool needs_extremes(const ReduceParams& params, const MappedArray& in) { return !params.range && in.size() > 0; }

// The histogram of `in` with `params`' bins and range, or (where needs_extremes) over the
// data's `extremes`, min and max, as numpy's default range.
Histogram histogram_kernel(const ReduceParams& params, const MappedArray& in,
                           const std::optional<std::pair<Scalar, Scalar>>& extremes) {
  PyScalar lo = PyScalar::of_int(0), hi = PyScalar::of_int(1);
  if (params.range) {
    std::tie(lo, hi) = *params.range;
  } else if (extremes) {
    lo = python_number(extremes->first);
    hi = python_number(extremes->second);
    if (!std::isfinite(lo.as_double()) || !std::isfinite(hi.as_double()))
      throw Error(in.path(), "histogram: autodetected range of [" + format_float(lo.as_double(), 8) + ", " +
                                 format_float(hi.as_double(), 8) + "] is not finite");
  }
  if (compare_bounds(lo, hi) == 0) {  // numpy widens an empty range
    lo = PyScalar::of_double(lo.as_double() - 0.5);
    hi = PyScalar::of_double(hi.as_double() + 0.5);
  }
  // numpy's norm divides by hi - lo taken in the bounds' own type: exact for two ints
  // (in uint64, as _unsigned_subtract does), where the doubles of 1.7e18 and 1.7e18 + 100
  // would be equal.
  double width = hi.as_double() - lo.as_double();
  if (lo.is_integer && hi.is_integer) width = static_cast<double>(static_cast<std::uint64_t>(hi.as_int128() - lo.as_int128()));
  const DType edges = Histogram::edge_dtype(in.dtype(), lo, hi);
  Histogram histogram(params.bins, lo.as_double(), hi.as_double(), edges, width);
  histogram.compare_exactly(in.dtype(), lo, hi);
  return histogram;
}

}  // namespace

HistogramResult ReduceOp::histogram(const MappedArray& in, const PipelineOptions& options) const {
  std::optional<std::pair<Scalar, Scalar>> extremes;
  if (needs_extremes(params_, in)) {
    // numpy's default range: the data's min and max, found in one read.
    auto [lo, hi] = reduce(in, Min{}, Max{}, options);
    extremes.emplace(lo, hi);
  }
  return reduce(in, histogram_kernel(params_, in, extremes), options);
}

}  // namespace ooc::kernels

namespace ooc {

// The extern templates of reductions.hpp, one for one.
template detail::reduce_result_t<kernels::Sum> reduce(const MappedArray&, const kernels::Sum&, const PipelineOptions&);
template detail::reduce_result_t<kernels::Prod> reduce(const MappedArray&, const kernels::Prod&, const PipelineOptions&);
template detail::reduce_result_t<kernels::Mean> reduce(const MappedArray&, const kernels::Mean&, const PipelineOptions&);
template detail::reduce_result_t<kernels::Min> reduce(const MappedArray&, const kernels::Min&, const PipelineOptions&);
template detail::reduce_result_t<kernels::Max> reduce(const MappedArray&, const kernels::Max&, const PipelineOptions&);
template detail::reduce_result_t<kernels::ArgMin> reduce(const MappedArray&, const kernels::ArgMin&, const PipelineOptions&);
template detail::reduce_result_t<kernels::ArgMax> reduce(const MappedArray&, const kernels::ArgMax&, const PipelineOptions&);
template detail::reduce_result_t<kernels::Var> reduce(const MappedArray&, const kernels::Var&, const PipelineOptions&);
template detail::reduce_result_t<kernels::CountNonzero> reduce(const MappedArray&, const kernels::CountNonzero&, const PipelineOptions&);
template detail::reduce_result_t<kernels::Any> reduce(const MappedArray&, const kernels::Any&, const PipelineOptions&);
template detail::reduce_result_t<kernels::All> reduce(const MappedArray&, const kernels::All&, const PipelineOptions&);
template detail::reduce_result_t<kernels::NanSum> reduce(const MappedArray&, const kernels::NanSum&, const PipelineOptions&);
template detail::reduce_result_t<kernels::NanMean> reduce(const MappedArray&, const kernels::NanMean&, const PipelineOptions&);
template detail::reduce_result_t<kernels::NanMin> reduce(const MappedArray&, const kernels::NanMin&, const PipelineOptions&);
template detail::reduce_result_t<kernels::NanMax> reduce(const MappedArray&, const kernels::NanMax&, const PipelineOptions&);
template detail::reduce_result_t<kernels::Norm> reduce(const MappedArray&, const kernels::Norm&, const PipelineOptions&);

}  // namespace ooc

namespace ooc {

namespace {

using kernels::histogram_kernel;
using kernels::needs_extremes;
using kernels::Reduction;
using kernels::ReduceOp;
// A whole-array reduction of several, whatever its name.
using Member = kernels::several::OneOf<Reduction, kernels::Sum, kernels::Prod, kernels::Mean, kernels::Min, kernels::Max,
                                       kernels::ArgMin, kernels::ArgMax, kernels::Var, kernels::CountNonzero,
                                       kernels::Any, kernels::All, kernels::NanSum, kernels::NanMean, kernels::NanMin,
                                       kernels::NanMax, kernels::Norm, kernels::Histogram>;
using Outcome = kernels::several::Outcome<Reduction>;
// member_of's marks: a histogram counted in the second read; a mean divided from the sum.
constexpr std::size_t kSecondRead = SIZE_MAX, kDerived = SIZE_MAX - 1;

}  // namespace

Reductions reduce_together(const MappedArray& in, std::span<const ReduceOp> ops, const PipelineOptions& options) {
  if (ops.empty()) throw UsageError(in.path(), "no reduction to take");
  Reductions answer;
  const PipelineOptions counted = kernels::several::counting_reads(options, answer.passes);
  // The first read: every reduction but the histograms that need the data's range first,
  // and, for those, the data's min and max (the last two members).
  std::vector<Member> members;
  std::vector<std::size_t> member_of(ops.size());  // ops[i]'s member in the first read
  bool extremes_needed = false;
  // float32 and float64: the mean's state is the sum's (the same block sums, added into a
  // total of the same type), so beside a sum the mean is divided from its total.
  const auto sum_op = std::find_if(ops.begin(), ops.end(), [](const ReduceOp& op) { return op.code() == ReduceOp::Code::sum; });
  const bool mean_from_sum = sum_op != ops.end() && in.dtype().kind() == Kind::floating && in.dtype().itemsize() >= 4;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    member_of[i] = members.size();
    if (mean_from_sum && ops[i].code() == ReduceOp::Code::mean) {
      member_of[i] = kDerived;
    } else if (ops[i].code() != ReduceOp::Code::histogram) {
      ops[i].with_kernel(in.shape(), in.order(), [&](const auto& kernel) { members.emplace_back(kernel); });
    } else if (needs_extremes(ops[i].params(), in)) {
      extremes_needed = true;
      member_of[i] = kSecondRead;
    } else {
      members.emplace_back(histogram_kernel(ops[i].params(), in, std::nullopt));
    }
  }
  const std::size_t min_member = members.size();
  if (extremes_needed) {
    members.emplace_back(kernels::Min{});
    members.emplace_back(kernels::Max{});
  }
  try {
    std::vector<Outcome> first = visit_dtype(in.dtype().native(), [&]<class T>(std::type_identity<T>) {
      return kernels::several::reduce_all<T>(in, members, counted);
    });
    std::vector<Outcome> outcomes(ops.size(), Outcome(std::in_place_index<1>));
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (member_of[i] == kDerived) {
        const Scalar total = std::get<Scalar>(std::get<0>(first[member_of[static_cast<std::size_t>(sum_op - ops.begin())]]));
        outcomes[i] = visit_dtype(in.dtype().native(), [&]<class T>(std::type_identity<T>) -> Outcome {
          if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
            return Reduction(kernels::detail::mean_value<T>(total.as<T>(), in.size(), false));
          else
            throw std::logic_error("a mean is divided from a float sum only");
        });
      } else if (member_of[i] != kSecondRead) {
        outcomes[i] = first[member_of[i]];
      }
    }
    if (extremes_needed) {
      // The second read: the histograms over the data's range, unless a reduction before
      // the first of them failed (that error is the answer, as the first of separate runs).
      std::vector<std::size_t> pending;
      std::vector<Member> histograms;
      using kernels::several::value_of;
      const std::pair<Scalar, Scalar> extremes{std::get<Scalar>(value_of(std::move(first[min_member]))),
                                               std::get<Scalar>(value_of(std::move(first[min_member + 1])))};
      bool failed_before = false;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        if (member_of[i] != kSecondRead) {
          failed_before = failed_before || (pending.empty() && outcomes[i].index() == 1);
          continue;
        }
        try {
          histograms.emplace_back(histogram_kernel(ops[i].params(), in, extremes));
          pending.push_back(i);
        } catch (...) {
          outcomes[i] = ooc::detail::current_exception_naming(in.path());
          if (pending.empty()) failed_before = true;
        }
      }
      if (!histograms.empty() && !failed_before) {
        std::vector<Outcome> second = visit_dtype(in.dtype().native(), [&]<class T>(std::type_identity<T>) {
          return kernels::several::reduce_all<T>(in, histograms, counted);
        });
        for (std::size_t k = 0; k < pending.size(); ++k) outcomes[pending[k]] = std::move(second[k]);
      }
    }
    for (Outcome& outcome : outcomes) answer.values.push_back(kernels::several::value_of(std::move(outcome)));
  } catch (...) {
    ooc::detail::rethrow_naming(in.path());
  }
  return answer;
}

}  // namespace ooc
