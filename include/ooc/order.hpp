#pragma once
/// Order statistics out of core: numpy's quantile, percentile and median (and their nan
/// forms) of every element or along one axis, found by a radix select over the values'
/// ordered bit patterns rather than by sorting: a few reads of the array, memory bounded
/// by a budget, numpy 1.24's bits.

#include "ooc/dtype.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/shape.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ooc {

/// numpy's quantile methods that ooc computes (numpy 1.24's formulas for each).
enum class QuantileMethod { linear, lower, higher, nearest, midpoint };

/// "linear" -> QuantileMethod::linear. Throws UsageError (kind value: numpy's ValueError)
/// for another name, in numpy's words.
QuantileMethod parse_quantile_method(std::string_view name);
const char* quantile_method_name(QuantileMethod method);

/// What to compute. Either np.median (`median`: the np.mean of the middle value or two), or
/// np.quantile at each of `q` (fractions in [0, 1]; percentiles are divided by 100 first).
struct QuantileSpec {
  std::vector<double> q;
  QuantileMethod method = QuantileMethod::linear;
  bool median = false;
  /// The nan forms (np.nanquantile, np.nanmedian): NaNs are left out of each slice; a slice
  /// of NaNs only gives NaN (numpy warns "All-NaN slice encountered").
  bool skip_nan = false;
  /// q was a scalar (numpy's result then has no q axis): numpy gives the NaN of a 0-d
  /// result in the input's dtype, not float64, and so does ooc.
  bool scalar_q = false;
  /// Bytes the values collected for the final selection may take; a bucket larger than
  /// this is narrowed by one more read instead.
  std::uint64_t memory_budget = std::uint64_t{256} << 20;
};

/// numpy's result dtype for `input` (native order), before the NaN cases QuantileResult::dtype
/// tells (a 0-d NaN, a nan form's all-NaN first slice: the input's dtype). Throws UsageError for bool with linear
/// or midpoint (numpy's TypeError: "numpy boolean subtract ...").
DType quantile_dtype(DType input, const QuantileSpec& spec);

struct QuantileResult {
  /// Values in C order, of shape (q.size(),) + the reduced shape (without q's axis for a
  /// median); the reduced shape is () for every element, the input's without `axis` else.
  std::vector<std::byte> bytes;
  DType dtype = dtype_of<double>;
  Shape shape;
  /// Slices whose values were all NaN (nan forms; numpy warns once for each).
  std::int64_t all_nan_slices = 0;
  /// Slices without any value (median of an empty axis: numpy warns "Mean of empty slice").
  std::int64_t empty_slices = 0;
  /// Reads of the array the selection took.
  int passes = 0;
};

/// The quantiles (or median) of every element of `in` (axis empty) or along `axis`
/// (negative counts from the end). Reads `in` through the streaming API, so selections and
/// masks work as any input. Throws IndexError where numpy raises IndexError (quantiles of
/// an empty axis), UsageError for a q outside [0, 1] or an axis out of range.
QuantileResult quantile(const MappedArray& in, const QuantileSpec& spec, std::optional<int> axis = std::nullopt,
                        const PipelineOptions& options = {});

/// np.unique of the flattened array, with each value's count (np.unique(a,
/// return_counts=True)): NaNs collapse into one, last, as numpy 1.24's equal_nan=True does;
/// -0.0 and 0.0 are one value (-0.0 where both occur). A hash table per thread, merged: one
/// read. More distinct values than `memory_budget` bytes of tables hold is an Error (kind
/// out_of_memory) saying so: unique_to (below) writes any number of them to a file.
struct UniqueResult {
  std::vector<std::byte> values;  ///< ascending, in the input's dtype, native order
  DType dtype = dtype_of<double>;
  std::vector<std::int64_t> counts;
  int passes = 0;
};
UniqueResult unique(const MappedArray& in, std::uint64_t memory_budget = std::uint64_t{256} << 20,
                    const PipelineOptions& options = {});

/// np.sort(a, axis, kind='stable') or np.argsort(a, axis, kind='stable') (`indices`): NaNs
/// last, equal values (-0.0 and 0.0 among them, NaNs among themselves) in their order in
/// the input, numpy's flattened C order for axis None.
struct SortSpec {
  std::optional<int> axis = -1;  ///< nullopt: the flattened array (numpy's axis=None)
  bool indices = false;          ///< argsort: each value's index along the axis, int64
  /// Where the sorted runs go when the array is larger than `memory_budget`; empty: the
  /// output's directory. The runs are one file there, unlinked as it is made, so that no
  /// end of the run (success, error, Ctrl-C, kill -9) leaves it behind.
  std::string temp_dir;
  /// Bytes the run generation and the merge may take (the sort's resident memory).
  std::uint64_t memory_budget = std::uint64_t{256} << 20;
};

/// The result's dtype: the input's (byte order included, as np.sort keeps it), or int64 in
/// native order for argsort.
DType sort_dtype(const MappedArray& in, const SortSpec& spec);
/// The result's shape: the input's, or (size,) for axis None.
Shape sort_shape(const MappedArray& in, const SortSpec& spec);

struct SortResult {
  int reads = 0;                ///< reads of the input
  std::int64_t runs = 0;        ///< sorted runs written to the temporary file (0: sorted in memory)
  std::uint64_t run_bytes = 0;  ///< the temporary file's size
  /// Key ranges the runs were merged by, each sorted in memory (0: a k-way merge).
  std::int64_t merge_parts = 0;
};

/// Sorts `in` (any array, selection or masked selection) into `out`, which the caller
/// created with sort_dtype, sort_shape and in.order() and commits afterwards (np.sort of a
/// Fortran-ordered array is Fortran-ordered too). A slab along the axis that fits a tile
/// is sorted where it lies, in one read (axis=-1 of an (N, 8) array); otherwise tile-sized
/// runs are sorted on every core (a stable radix sort on the keys) and merged in one pass.
/// Throws UsageError for an axis out of range or an output of another shape or dtype,
/// Error (kind no_space) when the temporary directory cannot hold the runs, checked before
/// any work, naming the bytes needed and free.
SortResult sort(const MappedArray& in, MappedArray& out, const SortSpec& spec, const PipelineOptions& options = {});

/// np.unique of the flattened array into a new 1-d array, for any number of distinct values:
/// ooc::unique's tables when they fit `how.memory_budget`, else ooc::sort of the flattened
/// array into a hidden temporary .npy (in how.temp_dir, default the directory of the
/// output's file; never given a name) and one read of it. make_output(distinct) creates the
/// output (a mapped one: create_array's .npy or HDF5 dataset) in the values' dtype (`in`'s,
/// native order); this fills it and hands it back in `output` for the caller to commit. With `counts`, each value's count is returned too; more
/// distinct values than the budget holds as counts is an Error (kind out_of_memory).
struct UniqueToResult {
  std::int64_t distinct = 0;
  std::vector<std::int64_t> counts;  ///< with `counts`
  int reads = 0;                     ///< reads of `in` (1 by tables; 1 + the sort's by sorting)
  bool sorted = false;               ///< the tables did not hold the values: sorted instead
  std::optional<MappedArray> output;  ///< what make_output made, filled, not committed
};
UniqueToResult unique_to(const MappedArray& in, const std::function<MappedArray(std::int64_t distinct)>& make_output,
                         bool counts, const SortSpec& how, const PipelineOptions& options = {});

}  // namespace ooc
