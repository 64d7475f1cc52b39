// ooc._ooc: the Python binding, a caller of the public C++ API like oocrun.
//
// Every call maps its arrays afresh (as each oocrun command does), runs on a worker
// thread with the GIL released, and is watched from the calling thread: every 50 ms it
// takes the GIL to run Python's signal handlers (PyErr_CheckSignals) and to draw
// progress. Ctrl-C sets the pipeline's cancel flag, the same path oocrun's SIGINT takes:
// the run stops at the next tile, an uncommitted output's temporary is removed, and
// KeyboardInterrupt is raised once the worker has unwound.

#include "ooc/zarr.hpp"
#include "ooc/runtime.hpp"
#include "ooc/blocks.hpp"
#include "ooc/ooc.hpp"
#include "ooc/order.hpp"
#include "ooc/linalg_qr.hpp"
#include "ooc/text.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

namespace py = pybind11;

namespace {

// An array as Python names it: what map_file takes ("x.npy", "run.h5:/p", "x.npy[::5]"),
// then selections applied one after another (ooc.Array.__getitem__ of a selection); or
// the values of a lazy expression (eval's `expression`, its `names` bound to the arrays
// `bound`), computed as they are read (ooc::kernels::map_expression).
struct Source {
  std::string path;
  std::vector<std::string> selections;
  std::string expression;
  std::vector<std::string> names;
  std::vector<Source> bound;
};

ooc::MappedArray open_source(const Source& source, ooc::Access access = ooc::Access::read_only) {
  if (!source.expression.empty()) {
    if (access != ooc::Access::read_only) throw ooc::UsageError(source.path, "a lazy expression cannot be modified in place");
    std::vector<ooc::MappedArray> arrays;
    for (const Source& bound : source.bound) {
      arrays.push_back(open_source(bound));
      ooc::check_not_in_place(arrays.back());
    }
    return ooc::kernels::map_expression(source.expression, source.names, std::move(arrays), source.path);
  }
  ooc::MappedArray array = ooc::map_file(source.path, access);
  for (const std::string& selection : source.selections) array = std::move(array).select(selection);
  return array;
}

// What every call takes: threads=, tile_bytes=, io=, prefetch=, as ooc::RunOptions reads
// them (oocrun's --threads, --tile-bytes, --io, --prefetch): checked once, per call.
struct CallOptions {
  ooc::PipelineOptions pipeline;
};

CallOptions call_options(int threads, const py::object& tile_bytes, const std::string& io, int prefetch) {
  ooc::RunOptions run;
  run.threads = threads;
  if (py::isinstance<py::str>(tile_bytes)) {
    run.tile_bytes = tile_bytes.cast<std::string>();
  } else {
    const long long value = tile_bytes.cast<long long>();
    if (value < 0) throw ooc::UsageError(std::string(), "tile_bytes must be positive", "tile_bytes");
    run.tile_bytes = std::to_string(value);
  }
  run.io = io;
  run.prefetch = prefetch;
  return CallOptions{run.pipeline_options()};
}

// The state a call's worker shares with the thread that watches it.
struct Run {
  std::atomic<bool> cancel{false};
  std::atomic<std::int64_t> done_bytes{0};
  std::atomic<std::int64_t> total_bytes{0};
  std::atomic<std::int64_t> before_bytes{0};

  ooc::PipelineOptions pipeline(const CallOptions& call, int itemsize) {
    ooc::PipelineOptions options = call.pipeline;
    options.cancel = &cancel;
    options.on_progress = [this, itemsize](const ooc::Progress& p) {
      total_bytes = p.elements * itemsize;
      before_bytes = p.elements_before * itemsize;
      done_bytes = p.elements_done * itemsize;
    };
    return options;
  }
};

// Runs work(run) on a worker thread with the GIL released; the calling thread polls for
// signals and draws progress (progress(done_bytes, total_bytes, bytes_done_before) when
// not None: a resumed in-place run starts with tiles done before).
void run_watched(const py::object& progress, const std::function<void(Run&)>& work) {
  Run run;
  std::exception_ptr error;
  std::mutex mutex;
  std::condition_variable finished_cv;
  bool finished = false;
  std::thread worker;
  {
    py::gil_scoped_release nogil;
    worker = std::thread([&] {
      try {
        work(run);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex);
      finished = true;
      finished_cv.notify_all();
    });
  }
  auto join = [&] {
    py::gil_scoped_release nogil;
    worker.join();
  };
  std::int64_t shown = -1;
  auto show_progress = [&] {
    const std::int64_t done = run.done_bytes.load();
    if (progress.is_none() || done == shown) return;
    shown = done;
    progress(done, run.total_bytes.load(), run.before_bytes.load());
  };
  while (true) {
    bool over = false;
    {
      py::gil_scoped_release nogil;
      std::unique_lock lock(mutex);
      over = finished_cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return finished; });
    }
    if (over) break;
    try {
      // Python's signal handlers run here, in the calling thread: Ctrl-C's
      // KeyboardInterrupt (or whatever a handler raises) stops the run.
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      show_progress();
    } catch (py::error_already_set& raised) {
      run.cancel = true;
      join();
      if (error && raised.matches(PyExc_KeyboardInterrupt)) {
        try {
          std::rethrow_exception(error);
        } catch (const ooc::Cancelled& e) {  // say how far the run got, as oocrun does
          PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
          throw py::error_already_set();
        } catch (...) {
        }
      }
      throw;
    } catch (...) {
      run.cancel = true;
      join();
      throw;
    }
  }
  join();
  if (error) std::rethrow_exception(error);
  show_progress();
}

// Bytes this process may still allocate: MemAvailable, or less where the memory cgroup
// it is in (or one above it) has a limit: the limit less the usage, cgroup v1 or v2.
std::uint64_t available_memory() {
  std::uint64_t available = std::numeric_limits<std::uint64_t>::max();
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") available = kib * 1024;
  }
  auto read_number = [](const std::filesystem::path& path) -> std::optional<std::uint64_t> {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") return std::nullopt;
    try {
      return std::stoull(text);
    } catch (...) {
      return std::nullopt;
    }
  };
  // /proc/self/cgroup: "ID:CONTROLLERS:PATH"; v1's memory controller names "memory", v2's
  // one line is "0::PATH".
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    const std::size_t first = line.find(':');
    const std::size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string group = line.substr(second + 1);
    std::filesystem::path root;
    const char* limit_name = nullptr;
    const char* usage_name = nullptr;
    if (controllers.find("memory") != std::string::npos) {
      root = "/sys/fs/cgroup/memory";
      limit_name = "memory.limit_in_bytes";
      usage_name = "memory.usage_in_bytes";
    } else if (controllers.empty()) {
      root = "/sys/fs/cgroup";
      limit_name = "memory.max";
      usage_name = "memory.current";
    } else {
      continue;
    }
    for (std::filesystem::path at = root / std::filesystem::path(group).relative_path();; at = at.parent_path()) {
      const auto limit = read_number(at / limit_name);
      const auto usage = read_number(at / usage_name);
      if (limit && usage) available = std::min(available, *limit > *usage ? *limit - *usage : 0);
      if (at == root || !at.has_parent_path() || at.parent_path() == at) break;
    }
  }
  return available;
}

[[noreturn]] void refuse_memory(std::uint64_t bytes, const std::string& what) {
  PyErr_SetString(PyExc_MemoryError, (what + ": " + std::to_string(bytes) + " bytes do not fit in the " +
                                      std::to_string(available_memory()) +
                                      " bytes of memory available; write it to a file with out=")
                                         .c_str());
  throw py::error_already_set();
}

// Raises MemoryError (with the GIL held) when `bytes` would not fit in memory.
void require_memory(std::uint64_t bytes, const std::string& what) {
  if (bytes > available_memory()) refuse_memory(bytes, what);
}

py::dtype numpy_dtype(ooc::DType dtype) { return py::dtype(dtype.descr()); }

std::vector<py::ssize_t> byte_strides(const ooc::Shape& shape, ooc::Order order, int itemsize) {
  std::vector<py::ssize_t> strides;
  for (std::int64_t elements : ooc::element_strides(shape, order)) strides.push_back(elements * itemsize);
  return strides;
}

// A new numpy array of this dtype, shape and memory order.
py::array new_array(ooc::DType dtype, const ooc::Shape& shape, ooc::Order order) {
  return py::array(numpy_dtype(dtype), std::vector<py::ssize_t>(shape.begin(), shape.end()),
                   byte_strides(shape, order, dtype.itemsize()));
}

py::object numpy_scalar(const ooc::Scalar& value) {
  py::object type = py::module_::import("numpy").attr("dtype")(value.dtype().name()).attr("type");
  switch (value.dtype().kind()) {
    case ooc::Kind::boolean: return type(value.as<bool>());
    case ooc::Kind::signed_int: return type(value.as<std::int64_t>());
    case ooc::Kind::unsigned_int: return type(value.as<std::uint64_t>());
    case ooc::Kind::floating: default: return type(value.as_double());
  }
}

ooc::kernels::PyScalar python_number(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return ooc::kernels::PyScalar::of_int(value.cast<bool>() ? 1 : 0);
  if (py::isinstance<py::int_>(value)) {
    const bool negative = value.attr("__lt__")(0).cast<bool>();
    const py::object low = py::int_(std::numeric_limits<std::int64_t>::min());
    const py::object high = py::int_(std::numeric_limits<std::uint64_t>::max());
    if (negative && !value.attr("__lt__")(low).cast<bool>())
      return ooc::kernels::PyScalar::of_int(value.cast<std::int64_t>());
    if (!negative && !value.attr("__gt__")(high).cast<bool>())
      return ooc::kernels::PyScalar::of_uint(value.cast<std::uint64_t>());
    // Beyond 64 bits: numpy takes such a bound as a float too.
  }
  return ooc::kernels::PyScalar::of_double(value.cast<double>());
}

// A reader of arrays, as oocrun's: refused while an in-place run holds it, and sized so
// that a sparse selection still has a tile per thread.
void prepare_input(const ooc::MappedArray& array, ooc::PipelineOptions& options) {
  ooc::check_not_in_place(array);
  options.tile_bytes = ooc::tile_bytes_spanning(array, options.tile_bytes);
  options.tiles_span_source = false;
}

// copy onto the array it reads (through any name of its file, or the same HDF5
// dataset) is refused before anything is made; another dataset of its HDF5 file is a
// new array. An expression's arrays are each its input.
void refuse_copy_onto_input(const Source& source, const std::string& out) {
  for (const Source& bound : source.bound) refuse_copy_onto_input(bound, out);
  if (!source.expression.empty()) return;
  auto dataset_name = [](const std::string& dataset) {
    std::string name;
    for (char c : dataset)
      if (c != '/' || name.empty() || name.back() != '/') name += c;
    if (name.size() > 1 && name.back() == '/') name.pop_back();
    return name.empty() || name[0] != '/' ? "/" + name : name;
  };
  const ooc::ArrayPath in = ooc::ArrayPath::parse(source.path);
  const ooc::ArrayPath to = ooc::ArrayPath::parse(out);
  std::error_code ec;
  if (!std::filesystem::equivalent(in.file, to.file, ec)) return;
  if (in.in_hdf5() && to.in_hdf5() && dataset_name(in.dataset) != dataset_name(to.dataset)) return;
  throw ooc::UsageError(out, "copy: the output is the input " + source.path + " (copy writes a new array)");
}

void check_not_input(const std::string& input, const std::string& out) {
  std::error_code ec;
  if (std::filesystem::equivalent(input, out, ec))
    throw ooc::UsageError(out, "the output is the input file; use inplace=True to modify it");
}

// Runs `write` (which fills and commits the output `out`); a cancelled run says that
// nothing was written, as oocrun does.
template <class Write>
void write_output(const std::string& out, Write&& write) {
  try {
    write();
  } catch (const ooc::Cancelled& e) {
    throw ooc::Cancelled(out, e.problem() + "; no output written");
  }
}

// Commits `out` unless the run was cancelled in the meantime (a KeyboardInterrupt that
// arrived after the last tile still leaves no output).
void commit_unless_cancelled(ooc::MappedArray& out, const Run& run) {
  if (run.cancel) throw ooc::Cancelled(out.path(), "cancelled before the output was committed");
  out.commit();
}

// np.quantile / np.median and their nan forms (ooc::quantile): (values of shape (len(q),) +
// the reduced shape, or the reduced shape for a median; slices all NaN; slices empty;
// reads of the array).
py::tuple quantile(const Source& source, const std::vector<double>& q, bool scalar_q, const std::string& method,
                   bool median, bool skip_nan, std::optional<int> axis, std::uint64_t memory_budget, const CallOptions& call,
                   const py::object& progress) {
  ooc::QuantileSpec spec;
  spec.q = q;
  spec.scalar_q = scalar_q;
  spec.method = ooc::parse_quantile_method(method);
  spec.median = median;
  spec.skip_nan = skip_nan;
  if (memory_budget > 0) spec.memory_budget = memory_budget;
  ooc::QuantileResult result;
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    result = ooc::quantile(a, spec, axis, options);
  });
  py::array values = new_array(result.dtype, result.shape, ooc::Order::c);
  if (!result.bytes.empty()) std::memcpy(values.mutable_data(), result.bytes.data(), result.bytes.size());
  return py::make_tuple(values, result.all_nan_slices, result.empty_slices, result.passes);
}

// np.unique(a, return_counts=True) (ooc::unique): (values, counts, reads of the array).
py::tuple unique(const Source& source, std::uint64_t memory_budget, const CallOptions& call, const py::object& progress) {
  ooc::UniqueResult result;
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    result = memory_budget > 0 ? ooc::unique(a, memory_budget, options) : ooc::unique(a, std::uint64_t{256} << 20, options);
  });
  const auto distinct = static_cast<std::int64_t>(result.counts.size());
  py::array values = new_array(result.dtype, {distinct}, ooc::Order::c);
  if (!result.values.empty()) std::memcpy(values.mutable_data(), result.values.data(), result.values.size());
  py::array_t<std::int64_t> counts(distinct);
  if (distinct > 0) std::memcpy(counts.mutable_data(), result.counts.data(), result.counts.size() * sizeof(std::int64_t));
  return py::make_tuple(values, counts, result.passes);
}

py::dict info(const Source& source) {
  ooc::ArrayInfo information;
  std::string path;
  {
    py::gil_scoped_release nogil;
    const ooc::MappedArray array = open_source(source);
    information = array.info();
    path = array.path();
  }
  py::dict result;
  result["shape"] = py::tuple(py::cast(information.shape));
  result["descr"] = information.dtype.descr();
  result["order"] = information.order == ooc::Order::c ? "C" : "F";
  result["format"] = information.format;
  result["data_offset"] = information.data_offset;
  return result;
}

py::object reduce(const Source& source, const std::string& name, std::int64_t ddof, const CallOptions& call,
                  const py::object& progress) {
  ooc::kernels::ReduceParams params;
  params.ddof = ddof;
  const auto op = ooc::kernels::ReduceOp::parse(name, params);
  std::optional<ooc::Scalar> value;
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    value = op.run(a, options);
  });
  return numpy_scalar(*value);
}

// An axis reduction: into a new numpy array, or into the file `out` (returns None).
py::object reduce_axis(const Source& source, const std::string& name, std::int64_t ddof, int axis,
                       const std::optional<std::string>& out, bool overwrite, const CallOptions& call,
                       const py::object& progress) {
  ooc::kernels::ReduceParams params;
  params.ddof = ddof;
  const auto op = ooc::kernels::ReduceOp::parse(name, params);
  if (op.code() == ooc::kernels::ReduceOp::Code::histogram)
    throw ooc::UsageError("histogram takes no axis (numpy's has none)");
  ooc::Shape shape;
  ooc::DType dtype = ooc::dtype_of<double>;
  ooc::Order order = ooc::Order::c;
  int normalized = 0;
  {
    py::gil_scoped_release nogil;
    const ooc::MappedArray a = open_source(source);
    try {
      normalized = ooc::kernels::normalize_axis(axis, a.ndim());
    } catch (const ooc::UsageError& e) {
      throw ooc::UsageError(a.path(), e.problem());
    }
    shape = ooc::kernels::drop_axis(a.shape(), normalized);
    dtype = op.result_dtype(a.dtype());
    order = a.order();
  }
  py::object result = py::none();
  std::span<std::byte> values;
  if (!out) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(*ooc::element_count(shape)) * dtype.itemsize();
    require_memory(bytes, name + " along axis " + std::to_string(normalized));
    py::array array = new_array(dtype, shape, order);
    values = std::span<std::byte>(static_cast<std::byte*>(array.mutable_data()), bytes);
    result = array;
  }
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    if (out) {
      check_not_input(a.path(), *out);
      write_output(*out, [&] {
        ooc::MappedArray file = ooc::create_array(*out, dtype, shape, order, overwrite);
        op.run_axis(a, normalized, file.writable_bytes(), options);
        commit_unless_cancelled(file, run);
      });
    } else {
      op.run_axis(a, normalized, values, options);
    }
  });
  return result;
}

// np.histogram's (counts, edges): int64 counts, edges in their dtype.
py::tuple histogram_arrays(const ooc::kernels::HistogramResult& h) {
  py::array_t<std::int64_t> counts(static_cast<py::ssize_t>(h.counts.size()));
  std::memcpy(counts.mutable_data(), h.counts.data(), h.counts.size() * sizeof(std::int64_t));
  py::array edges = new_array(h.edge_dtype, {static_cast<std::int64_t>(h.edges.size())}, ooc::Order::c);
  ooc::convert(ooc::dtype_of<double>, h.edges.data(), h.edge_dtype, edges.mutable_data(),
               static_cast<std::int64_t>(h.edges.size()));
  return py::make_tuple(counts, edges);
}

py::tuple histogram(const Source& source, std::int64_t bins, const py::object& range, const CallOptions& call,
                    const py::object& progress) {
  ooc::kernels::ReduceParams params;
  params.bins = bins;
  if (!range.is_none()) {
    const py::sequence bounds = range.cast<py::sequence>();
    if (bounds.size() != 2) throw ooc::UsageError("histogram: range must be (lo, hi)");
    params.range = {python_number(bounds[0]), python_number(bounds[1])};
  }
  const auto op = ooc::kernels::ReduceOp::parse("histogram", params);
  ooc::kernels::HistogramResult h;
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    h = op.histogram(a, options);
  });
  return histogram_arrays(h);
}

// ooc.reduce: several reductions over one read (two where numpy's var/std along an axis,
// or a histogram without a range, needs two), as a list of what each one's own call
// returns: numpy scalars, (counts, edges), or with an axis numpy arrays.
py::list reduce_together(const Source& source, const std::vector<std::string>& names, std::int64_t ddof,
                         std::int64_t bins, const py::object& range, const std::optional<int>& axis,
                         const CallOptions& call, const py::object& progress) {
  ooc::kernels::ReduceParams params;
  params.ddof = ddof;
  params.bins = bins;
  if (!range.is_none()) {
    const py::sequence bounds = range.cast<py::sequence>();
    if (bounds.size() != 2) throw ooc::UsageError("histogram: range must be (lo, hi)");
    params.range = {python_number(bounds[0]), python_number(bounds[1])};
  }
  std::vector<ooc::kernels::ReduceOp> ops;
  for (const std::string& name : names) ops.push_back(ooc::kernels::ReduceOp::parse(name, params));
  if (axis) {
    // The results are made in memory: each must fit, as an axis reduction's numpy array must.
    std::uint64_t bytes = 0;
    {
      py::gil_scoped_release nogil;
      const ooc::MappedArray a = open_source(source);
      int normalized = 0;
      try {
        normalized = ooc::kernels::normalize_axis(*axis, a.ndim());
      } catch (const ooc::UsageError& e) {
        throw ooc::UsageError(a.path(), e.problem());
      }
      const std::int64_t count = *ooc::element_count(ooc::kernels::drop_axis(a.shape(), normalized));
      for (const auto& op : ops)
        if (op.code() != ooc::kernels::ReduceOp::Code::histogram)
          bytes += static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(op.result_dtype(a.dtype()).itemsize());
    }
    require_memory(bytes, "reductions along axis " + std::to_string(*axis));
  }
  ooc::Reductions full;
  ooc::AxisReductions along;
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    if (axis) along = ooc::reduce_axis_together(a, *axis, ops, options);
    else full = ooc::reduce_together(a, ops, options);
  });
  py::list values;
  if (axis) {
    for (const ooc::ReducedArray& r : along.arrays) {
      py::array array = new_array(r.dtype, r.shape, r.order);
      std::memcpy(array.mutable_data(), r.bytes.data(), r.bytes.size());
      values.append(array);
    }
  } else {
    for (const ooc::kernels::Reduction& r : full.values) {
      if (const auto* h = std::get_if<ooc::kernels::HistogramResult>(&r)) values.append(histogram_arrays(*h));
      else values.append(numpy_scalar(std::get<ooc::Scalar>(r)));
    }
  }
  return values;
}

// apply: into `out`, or in place (journalled unless journal=False). Returns the path
// written.
std::string apply(const std::string& spec, const Source& source, const std::optional<std::string>& out,
                  bool in_place, bool journal, bool overwrite, const CallOptions& call, const py::object& progress) {
  const auto op = ooc::kernels::ElementwiseOp::parse(spec);
  if (in_place == out.has_value()) throw ooc::UsageError("apply needs out=PATH or inplace=True (one of them)");
  if (!in_place && !journal) throw ooc::UsageError("journal=False goes with inplace=True");
  std::string written;
  run_watched(progress, [&](Run& run) {
    if (in_place) {
      if (!source.selections.empty())
        throw ooc::UsageError(source.path, "a selection cannot be modified in place");
      ooc::MappedArray a = open_source(source, ooc::Access::read_write);
      const ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
      try {
        // The command oocrun journals: a run stopped in Python is finished by the same
        // call again, or by that oocrun command.
        ooc::apply_in_place(
            a, "oocrun apply " + op.spec() + " --in-place", options,
            [&](ooc::MappedArray& array, const ooc::PipelineOptions& resumed) { op.apply(array, array, resumed); },
            journal);
      } catch (const ooc::UsageError&) {
        throw;
      } catch (const ooc::Error& e) {  // no room or no right to write the journal beside the array
        if (e.path() != ooc::journal_path(a.path()) || std::filesystem::exists(e.path())) throw;
        throw ooc::Error(e.path(), e.problem() + " (journal=False runs in place without one)", e.kind());
      }
      written = a.path();
    } else {
      const ooc::MappedArray a = open_source(source);
      ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
      prepare_input(a, options);
      check_not_input(a.path(), *out);
      write_output(*out, [&] {
        ooc::MappedArray file =
            ooc::create_array(*out, op.result_dtype(a.dtype(), a.ndim()), a.shape(), a.order(), overwrite);
        op.apply(a, file, options);
        commit_unless_cancelled(file, run);
      });
      written = *out;
    }
  });
  return written;
}

// np.unique into the new file `out` (ooc::unique_to: sorted first when the tables cannot
// hold the values): (distinct values, counts or None, reads of the array, sorted).
py::tuple unique_to(const Source& source, const std::string& out, bool counts, const std::optional<std::string>& temp_dir,
                    std::uint64_t memory_budget, bool overwrite, const CallOptions& call, const py::object& progress) {
  ooc::SortSpec how;
  if (memory_budget > 0) how.memory_budget = memory_budget;
  how.temp_dir = temp_dir ? *temp_dir
                          : std::filesystem::absolute(ooc::ArrayPath::parse(out).file).parent_path().string();
  ooc::UniqueToResult result;
  run_watched(progress, [&](Run& run) {
    refuse_copy_onto_input(source, out);
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    write_output(out, [&] {
      result = ooc::unique_to(
          a, [&](std::int64_t distinct) {
            return ooc::create_array(out, a.dtype().native(), {distinct}, ooc::Order::c, overwrite);
          },
          counts, how, options);
      commit_unless_cancelled(*result.output, run);
    });
  });
  py::object counted = py::none();
  if (counts) {
    py::array_t<std::int64_t> values(static_cast<py::ssize_t>(result.counts.size()));
    if (!result.counts.empty())
      std::memcpy(values.mutable_data(), result.counts.data(), result.counts.size() * sizeof(std::int64_t));
    counted = values;
  }
  return py::make_tuple(result.distinct, counted, result.reads, result.sorted);
}

// np.sort / np.argsort (ooc::sort): into the new file `out` (None: returned as an ndarray,
// through a temporary file that is never given a name).
py::object sort(const Source& source, std::optional<int> axis, bool indices, const std::optional<std::string>& out,
                const std::optional<std::string>& temp_dir, std::uint64_t memory_budget, bool overwrite,
                const CallOptions& call, const py::object& progress) {
  ooc::SortSpec spec;
  spec.axis = axis;
  spec.indices = indices;
  if (temp_dir) spec.temp_dir = *temp_dir;
  if (memory_budget > 0) spec.memory_budget = memory_budget;
  std::optional<ooc::MappedArray> scratch;
  ooc::Order order = ooc::Order::c;
  run_watched(progress, [&](Run& run) {
    if (out) refuse_copy_onto_input(source, *out);
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    const ooc::Shape shape = ooc::sort_shape(a, spec);
    const ooc::DType dtype = ooc::sort_dtype(a, spec);
    if (out) {
      write_output(*out, [&] {
        ooc::MappedArray file = ooc::create_array(*out, dtype, shape, a.order(), overwrite);
        ooc::sort(a, file, spec, options);
        commit_unless_cancelled(file, run);
      });
      return;
    }
    const std::filesystem::path dir = temp_dir ? std::filesystem::path(*temp_dir) : std::filesystem::temp_directory_path();
    order = a.order();
    scratch.emplace(ooc::create_npy((dir / "ooc-sort-result.npy").string(), dtype, shape, order));
    ooc::sort(a, *scratch, spec, options);
    if (run.cancel) throw ooc::Cancelled(a.path(), "sort cancelled");
  });
  if (!scratch) return py::none();
  py::array values = new_array(scratch->dtype(), scratch->shape(), order);
  const std::span<const std::byte> bytes = scratch->bytes();
  if (!bytes.empty()) std::memcpy(values.mutable_data(), bytes.data(), bytes.size());
  return values;
}

// copy: the array into the new file `out` as np.save(out, a) writes it (its dtype, byte
// order included, shape and memory order), chunked and compressed where asked.
void copy(const Source& source, const std::string& out, bool overwrite, const std::optional<std::string>& chunks,
          const std::optional<std::string>& compression, bool shuffle, const CallOptions& call,
          const py::object& progress) {
  std::optional<ooc::Compression> how;
  if (chunks || compression || shuffle) {
    how.emplace();
    if (compression) how->parse_codec(*compression);
    how->shuffle = shuffle;
    if (chunks && *chunks != "auto") {
      const std::string& rows = *chunks;
      if (rows.empty() || rows.size() > 15 || rows.find_first_not_of("0123456789") != std::string::npos ||
          std::stoll(rows) == 0)
        throw ooc::UsageError(out, "chunks=" + rows + ": give a number of rows (of the first axis) or \"auto\"");
      how->chunk_rows = std::stoll(rows);
    }
  }
  run_watched(progress, [&](Run& run) {
    refuse_copy_onto_input(source, out);
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    const auto op = ooc::kernels::ElementwiseOp::parse("cast:" + a.dtype().descr());
    write_output(out, [&] {
      const bool zarr = ooc::is_zarr(out);
      if (how && !zarr && !ooc::ArrayPath::parse(out).in_hdf5())
        throw ooc::UsageError(out, "chunks=, compression= and shuffle= make HDF5 datasets or Zarr arrays: name the "
                                   "output FILE.h5:/dataset or OUT.zarr");
      if (how && !zarr && a.order() == ooc::Order::fortran && a.ndim() > 1)
        throw ooc::UsageError(out, "HDF5 datasets are stored in C order; a Fortran-order array cannot be written to one");
      ooc::MappedArray file = how && zarr ? ooc::create_zarr(out, a.dtype(), a.shape(), a.order(), *how)
                              : how       ? ooc::create_compressed(out, a.dtype(), a.shape(), *how, overwrite)
                                          : ooc::create_array(out, a.dtype(), a.shape(), a.order(), overwrite);
      op.apply(a, file, options);
      commit_unless_cancelled(file, run);
    });
  });
}

// eval: a numpy scalar for a reduction, else a numpy array, or None once written to `out`.
// Text in and out (ooc::import_text / export_text, as oocrun import / export): one
// character or none (0) for a delimiter or comment marker given from Python.
char one_character(const std::optional<std::string>& text, const char* what) {
  if (!text || text->empty()) return 0;
  if (text->size() != 1) throw ooc::UsageError(std::string(what) + ": one character, or None");
  return (*text)[0];
}

py::dict import_text(const std::string& text_path, const std::string& out, const std::string& dtype,
                     const std::optional<std::string>& delimiter, const std::optional<std::string>& comments,
                     std::int64_t skip_rows, bool header, const std::vector<int>& columns,
                     const std::optional<std::string>& missing, int ndmin, bool overwrite, const CallOptions& call,
                     const py::object& progress) {
  ooc::TextImportOptions text;
  text.dtype = ooc::DType::from_numpy(dtype);
  text.delimiter = one_character(delimiter, "delimiter");
  if (delimiter && delimiter->empty()) throw ooc::UsageError("delimiter: one character, or None for whitespace");
  text.comment = comments ? *comments : std::string();
  if (text.comment.find_first_of("\r\n") != std::string::npos)
    throw ooc::UsageError("comments: a line end cannot start a comment");
  if (skip_rows < 0) throw ooc::UsageError("skiprows must be 0 or more");
  text.skip_rows = skip_rows;
  text.header = header;
  text.columns = columns;
  text.missing = missing;
  text.ndmin = ndmin;
  text.overwrite = overwrite;
  ooc::TextImportResult result;
  run_watched(progress, [&](Run& run) {
    ooc::PipelineOptions options = run.pipeline(call, 1);
    text.on_bytes = [&run](std::uint64_t done, std::uint64_t total) {
      run.done_bytes = static_cast<std::int64_t>(done);
      run.total_bytes = static_cast<std::int64_t>(total);
    };
    result = ooc::import_text(text_path, out, text, options);
  });
  py::dict d;
  d["rows"] = result.rows;
  d["lines"] = result.lines;
  d["bytes"] = result.bytes;
  d["empty_input"] = result.empty_input;
  return d;
}

void export_text(const Source& source, const std::string& text_path, const std::optional<std::string>& delimiter,
                 const std::string& fmt, const std::string& header, const CallOptions& call,
                 const py::object& progress) {
  ooc::TextExportOptions text;
  text.delimiter = one_character(delimiter, "delimiter");
  if (text.delimiter == 0) throw ooc::UsageError(text_path, "delimiter: one character");
  text.fmt = fmt;
  text.header = header;
  if (!source.expression.empty())
    throw ooc::UsageError(text_path, "export_text of a lazy expression: write it with ooc.copy(expression, out=...) first");
  // export_text opens the array by its text, where one selection can ride along.
  if (source.selections.size() > 1)
    throw ooc::UsageError(source.path, "export of a selection of a selection: select once, or write it out first");
  const std::string array_text = source.selections.empty() ? source.path : source.path + "[" + source.selections[0] + "]";
  const int itemsize = open_source(source).dtype().itemsize();
  run_watched(progress, [&](Run& run) {
    ooc::export_text(array_text, text_path, text, run.pipeline(call, itemsize));
  });
}

py::object evaluate(const std::string& text, const std::vector<std::string>& names, const std::vector<Source>& sources,
                    const std::optional<std::string>& out, bool overwrite, const CallOptions& call,
                    const py::object& progress) {
  if (names.size() != sources.size()) throw std::logic_error("eval: names and arrays differ in number");
  // Compiled first, with the GIL released (mapping and index files), to learn the
  // result's size before any evaluation.
  std::vector<ooc::MappedArray> arrays;
  std::optional<ooc::kernels::Expression> expression;
  {
    py::gil_scoped_release nogil;
    arrays.reserve(sources.size());
    for (const Source& source : sources) {
      arrays.push_back(open_source(source));
      ooc::check_not_in_place(arrays.back());
    }
    std::vector<ooc::kernels::Binding> bindings;
    for (std::size_t i = 0; i < names.size(); ++i) bindings.push_back({names[i], &arrays[i]});
    expression.emplace(ooc::kernels::Expression::compile(text, bindings));
    if (expression->reduction() && out) throw ooc::UsageError(*out, "eval: a reduction gives one value; drop out=");
    for (const ooc::MappedArray& a : arrays)
      if (out) check_not_input(a.path(), *out);
  }
  const ooc::DType dtype = expression->dtype();
  std::optional<ooc::Scalar> value;
  py::object result = py::none();
  std::byte* memory = nullptr;
  if (!expression->reduction() && !out) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(*ooc::element_count(expression->shape())) * dtype.itemsize();
    require_memory(bytes, "eval " + text);
    py::array array = new_array(dtype, expression->shape(), expression->order());
    memory = static_cast<std::byte*>(array.mutable_data());
    result = array;
  }
  run_watched(progress, [&](Run& run) {
    ooc::PipelineOptions options = run.pipeline(call, dtype.itemsize());
    const std::uint64_t asked = options.tile_bytes;
    for (const ooc::MappedArray& a : arrays)  // the sparsest selection sizes the tiles
      options.tile_bytes = std::min(options.tile_bytes, ooc::tile_bytes_spanning(a, asked));
    if (expression->reduction()) {
      value = expression->reduce(options);
    } else if (out) {
      write_output(*out, [&] {
        ooc::MappedArray file = ooc::create_array(*out, dtype, expression->shape(), expression->order(), overwrite);
        expression->evaluate(file, options);
        commit_unless_cancelled(file, run);
      });
    } else {
      const std::vector<std::byte> values = expression->evaluate(options);
      std::memcpy(memory, values.data(), values.size());
    }
  });
  if (value) return numpy_scalar(*value);
  return result;
}

// Every element, into a new numpy array of the array's dtype (byte order included) and
// memory order, streamed through the pipeline as any run (selections, chunked HDF5).
py::array read_array(const Source& source, const CallOptions& call, const py::object& progress) {
  ooc::ArrayInfo information;
  {
    py::gil_scoped_release nogil;
    information = open_source(source).info();
  }
  require_memory(information.nbytes(), "reading " + source.path);
  py::array array = new_array(information.dtype, information.shape, information.order);
  auto* memory = static_cast<std::byte*>(array.mutable_data());
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    ooc::read(a, ooc::ElementRange{0, a.size()},
              std::span<std::byte>(memory, static_cast<std::size_t>(a.nbytes())), options);
  });
  return array;
}

// A Python object a pipeline stage holds: released with the GIL taken, whichever thread
// drops it (a cancelled run drops results on a TBB thread).
class HeldObject {
 public:
  HeldObject() = default;
  explicit HeldObject(py::object object) : object_(object.release().ptr()) {}
  HeldObject(HeldObject&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  HeldObject& operator=(HeldObject&& other) noexcept {
    std::swap(object_, other.object_);
    return *this;
  }
  ~HeldObject() {
    if (object_ == nullptr) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(object_);
  }
  /// The object, owned by the caller (the GIL held).
  py::object take() { return py::reinterpret_steal<py::object>(std::exchange(object_, nullptr)); }

 private:
  PyObject* object_ = nullptr;
};

std::string shape_text(const std::vector<py::ssize_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// map_blocks: f(block of each input) per tile of whole rows along the slowest axis (the
// first in C order, the last in Fortran order). With out: each result is written to its
// rows of the new array `out` (dtype, shape), committed at the end; returns None.
// Without: returns the results in order.
py::object map_blocks(const py::function& f, const std::vector<Source>& sources, const std::optional<std::string>& out,
                      const std::optional<std::string>& out_dtype, const std::optional<std::vector<std::int64_t>>& out_shape,
                      bool overwrite, const CallOptions& call, const py::object& progress) {
  if (sources.empty()) throw ooc::UsageError("map_blocks needs at least one array");
  py::module_ numpy = py::module_::import("numpy");
  py::list results;
  py::object shares_memory = numpy.attr("may_share_memory");
  py::object asarray = numpy.attr("asarray");
  py::object copyto = numpy.attr("copyto");
  run_watched(progress, [&](Run& run) {
    std::vector<ooc::MappedArray> arrays;
    arrays.reserve(sources.size());
    for (const Source& source : sources) arrays.push_back(open_source(source));
    const ooc::MappedArray& first = arrays.front();
    for (const ooc::MappedArray& a : arrays) {
      ooc::check_not_in_place(a);
      if (a.shape() != first.shape() || (a.order() != first.order() && a.ndim() > 1))
        throw ooc::UsageError(a.path(), "map_blocks: shape " + ooc::shape_repr(a.shape()) + " (" +
                                            (a.order() == ooc::Order::c ? "C" : "Fortran") + " order) differs from " +
                                            first.path() + "'s " + ooc::shape_repr(first.shape()) + " (" +
                                            (first.order() == ooc::Order::c ? "C" : "Fortran") +
                                            " order); blocks are cut alike only from arrays of one shape and order");
    }
    ooc::PipelineOptions options = run.pipeline(call, first.dtype().itemsize());
    const ooc::Shape& shape = first.shape();
    const ooc::Order order = first.order();
    const bool c_order = order == ooc::Order::c || first.ndim() < 2;
    const std::size_t slow_axis = first.ndim() == 0 ? 0 : c_order ? 0 : static_cast<std::size_t>(first.ndim() - 1);
    const std::int64_t rows = first.ndim() == 0 ? 1 : shape[slow_axis];
    const std::int64_t row_elements = rows == 0 ? 0 : first.size() / rows;

    std::optional<ooc::MappedArray> output;
    ooc::DType output_dtype = first.dtype().native();
    ooc::Shape output_shape = shape;
    std::int64_t output_row_elements = row_elements;
    if (out) {
      if (out_dtype) {
        try {
          output_dtype = ooc::DType::from_numpy(*out_dtype);
        } catch (const ooc::UsageError& e) {
          throw ooc::UsageError(*out, "map_blocks: dtype: " + e.problem());
        }
      }
      if (out_shape) output_shape = *out_shape;
      if (static_cast<int>(output_shape.size()) != first.ndim() ||
          (first.ndim() > 0 && output_shape[slow_axis] != rows))
        throw ooc::UsageError(*out, "map_blocks: out's shape " + ooc::shape_repr(output_shape) + " must have " +
                                        std::to_string(first.ndim()) + " axes and " + std::to_string(rows) +
                                        " rows along axis " + std::to_string(slow_axis) + " (the inputs' " +
                                        ooc::shape_repr(shape) + ")");
      for (const ooc::MappedArray& a : arrays) check_not_input(a.path(), *out);
      const auto count = ooc::element_count(output_shape);
      if (!count) throw ooc::UsageError(*out, "map_blocks: shape " + ooc::shape_repr(output_shape) + " is not valid");
      output_row_elements = rows == 0 ? 0 : *count / rows;
      output.emplace(ooc::create_array(*out, output_dtype, output_shape, order, overwrite));
    }
    if (first.size() == 0 || (output && output->size() == 0)) {
      if (output) commit_unless_cancelled(*output, run);
      return;
    }
    // Tiles of whole rows: at least one row, however long, per block.
    int widest = 1;
    for (const ooc::MappedArray& a : arrays) widest = std::max(widest, a.dtype().itemsize());
    const std::uint64_t row_bytes = static_cast<std::uint64_t>(row_elements) * static_cast<std::uint64_t>(widest);
    const ooc::TilePlan plan = ooc::TilePlan::slabs(rows, row_elements, widest, std::max(options.tile_bytes, row_bytes));
    std::vector<const ooc::MappedArray*> inputs;
    for (const ooc::MappedArray& a : arrays) inputs.push_back(&a);
    // An output whose rows are as long as the inputs' has the same tiles: it streams with
    // them (direct writes, pages released behind the run). Otherwise (shape= changes the
    // other axes) each block's rows are written through the output's mapping.
    const bool output_streams = output && output_row_elements == row_elements;
    std::span<std::byte> output_bytes;
    if (output && !output_streams) output_bytes = output->writable_bytes();
    auto output_block = [&](const ooc::Block& block, std::int64_t first_row) -> std::byte* {
      if (output_streams) return block.output;
      return output_bytes.data() + first_row * output_row_elements * output_dtype.itemsize();
    };

    auto block_shape = [&](const ooc::Shape& whole, std::int64_t k) {
      std::vector<py::ssize_t> block(whole.begin(), whole.end());
      if (!block.empty()) block[slow_axis] = k;
      return block;
    };
    auto run_blocks = [&] {
      ooc::for_each_block(
          inputs, output_streams ? &*output : nullptr, plan, options,
          [&](const ooc::Block& block) {
            const ooc::Tile& tile = block.tile;
            const std::int64_t k = row_elements == 0 ? 0 : tile.size() / row_elements;
            const std::int64_t first_row = row_elements == 0 ? 0 : tile.begin / row_elements;
            py::gil_scoped_acquire gil;
            py::tuple views(arrays.size());
            const std::vector<py::ssize_t> in_block = block_shape(shape, k);
            for (std::size_t i = 0; i < arrays.size(); ++i) {
              const ooc::MappedArray& a = arrays[i];
              // A view of the tile's bytes where they lie (the mapping, or the run's
              // buffer), read-only; its base keeps numpy from copying them.
              py::array view(numpy_dtype(a.dtype()), in_block,
                             byte_strides(ooc::Shape(in_block.begin(), in_block.end()), order, a.dtype().itemsize()),
                             block.inputs[i], py::none());
              view.attr("flags").attr("writeable") = false;
              views[i] = view;
            }
            py::object value = f(*views);
            const std::string where = "map_blocks: block " + std::to_string(tile.index) + " (rows " +
                                      std::to_string(first_row) + ":" + std::to_string(first_row + k) + " of axis " +
                                      std::to_string(slow_axis) + ")";
            if (output) {
              py::array result = asarray(value);
              const std::vector<py::ssize_t> expected = block_shape(output_shape, k);
              const std::vector<py::ssize_t> got(result.shape(), result.shape() + result.ndim());
              if (got != expected)
                throw ooc::UsageError(*out, where + " gave shape " + shape_text(got) + "; expected " + shape_text(expected));
              py::array target(numpy_dtype(output_dtype), expected,
                               byte_strides(ooc::Shape(expected.begin(), expected.end()), order, output_dtype.itemsize()),
                               output_block(block, first_row), py::none());
              try {
                copyto(target, result, py::arg("casting") = "same_kind");
              } catch (py::error_already_set& e) {
                if (!e.matches(PyExc_TypeError)) throw;
                throw ooc::UsageError(*out, where + " gave " + py::str(result.dtype()).cast<std::string>() +
                                                ", which does not cast to out's " + output_dtype.name() +
                                                " (same_kind)");
              }
              return HeldObject();
            }
            if (py::isinstance<py::array>(value)) {
              for (const py::handle& view : views)  // a result may not outlive the run's buffers
                if (shares_memory(value, view).cast<bool>()) {
                  value = value.attr("copy")();
                  break;
                }
            }
            return HeldObject(std::move(value));
          },
          [&](const ooc::Tile&, HeldObject&& result) {
            if (output) return;
            py::gil_scoped_acquire gil;
            results.append(result.take());
          });
    };
    if (!output) return run_blocks();
    write_output(*out, [&] {
      run_blocks();
      commit_unless_cancelled(*output, run);
    });
  });
  if (out) return py::none();
  return results;
}

// gram, cov, corrcoef, qr (R), svd (s) (ooc::linalg, as oocrun linalg): the result as a new numpy array
// and numpy's RuntimeWarnings for it, which the ooc package raises.
py::tuple linalg(const Source& source, const std::string& op, bool rowvar, bool bias,
                 const std::optional<std::int64_t>& ddof, const CallOptions& call, const py::object& progress) {
  ooc::linalg::Matrix result;
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    if (op == "gram") {
      result = ooc::linalg::gram(a, options);
    } else if (op == "qr") {
      result = ooc::linalg::qr_r(a, options);
    } else if (op == "svd") {
      result = ooc::linalg::singular_values(a, options);
    } else if (op == "cov") {
      ooc::linalg::CovOptions how;
      how.rowvar = rowvar;
      how.bias = bias;
      how.ddof = ddof;
      result = ooc::linalg::cov(a, how, options);
    } else {
      result = ooc::linalg::corrcoef(a, rowvar, options);
    }
  });
  const std::vector<std::byte> bytes = result.bytes();
  py::array values = new_array(result.dtype, result.shape, ooc::Order::c);
  if (!bytes.empty()) std::memcpy(values.mutable_data(), bytes.data(), bytes.size());
  return py::make_tuple(values, py::cast(result.warnings));
}

// x @ w (ooc::linalg::matmul, as oocrun matmul), w a C-contiguous numpy array: a new
// numpy array, or None once written to the file `out`.
py::object matmul(const Source& source, const py::array& w, const std::optional<std::string>& out, bool overwrite,
                  const CallOptions& call, const py::object& progress) {
  const ooc::linalg::InMemory weights{static_cast<const std::byte*>(w.data()),
                                      ooc::DType::parse(py::str(w.dtype().attr("str")).cast<std::string>()),
                                      ooc::Shape(w.shape(), w.shape() + w.ndim()), ooc::Order::c};
  ooc::Shape shape;
  ooc::DType dtype = weights.dtype;
  {
    py::gil_scoped_release nogil;
    const ooc::MappedArray a = open_source(source);
    shape = ooc::linalg::matmul_shape(a, weights.shape);
    dtype = ooc::linalg::matmul_dtype(a.dtype(), weights.dtype);
  }
  py::object result = py::none();
  std::byte* into = nullptr;
  if (!out) {
    const std::int64_t bytes = ooc::byte_count(shape, dtype.itemsize()).value_or(-1);
    require_memory(static_cast<std::uint64_t>(bytes), "the matmul result");
    py::array values = new_array(dtype, shape, ooc::Order::c);
    into = static_cast<std::byte*>(values.mutable_data());
    result = values;
  }
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    if (!out) {
      const std::size_t bytes = static_cast<std::size_t>(*ooc::element_count(shape)) * dtype.itemsize();
      ooc::linalg::matmul(a, weights, std::span<std::byte>(into, bytes), options);
      return;
    }
    check_not_input(source.path, *out);
    write_output(*out, [&] {
      ooc::MappedArray file = ooc::create_array(*out, dtype, shape, ooc::Order::c, overwrite);
      ooc::linalg::matmul(a, weights, file.writable_bytes(), options);
      commit_unless_cancelled(file, run);
    });
  });
  return result;
}

// np.linalg.lstsq's four results (ooc::linalg::lstsq, as oocrun linalg lstsq).
py::tuple lstsq(const Source& x_source, const Source& y_source, const std::optional<double>& rcond,
                const CallOptions& call, const py::object& progress) {
  std::optional<ooc::linalg::LeastSquares> fit;
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray x = open_source(x_source);
    const ooc::MappedArray y = open_source(y_source);
    ooc::PipelineOptions options = run.pipeline(call, x.dtype().itemsize());
    prepare_input(x, options);
    ooc::check_not_in_place(y);
    fit = ooc::linalg::lstsq(x, y, rcond, options);
  });
  auto array = [](const ooc::linalg::Matrix& m) {
    const std::vector<std::byte> bytes = m.bytes();
    py::array values = new_array(m.dtype, m.shape, ooc::Order::c);
    if (!bytes.empty()) std::memcpy(values.mutable_data(), bytes.data(), bytes.size());
    return values;
  };
  return py::make_tuple(array(fit->solution), array(fit->residuals), fit->rank, array(fit->singular_values));
}

// np.linalg.qr(mode='reduced')'s (Q, R) and np.linalg.svd(full_matrices=False)'s (U, s, Vt)
// (ooc::linalg::qr/svd, as oocrun linalg qr|svd -o): Q or U a new numpy array (refused
// with MemoryError when it cannot fit) or, with `out`, written to that file (None in its
// place). `op` is "qr" or "svd".
py::tuple factor(const Source& source, const std::string& op, const std::optional<std::string>& out, bool overwrite,
                 const CallOptions& call, const py::object& progress) {
  ooc::Shape shape;
  ooc::DType dtype = ooc::dtype_of<double>;
  {
    py::gil_scoped_release nogil;
    const ooc::MappedArray a = open_source(source);
    shape = ooc::linalg::q_shape(a);
    dtype = ooc::linalg::factor_dtype(a);
  }
  py::object q = py::none();
  std::byte* into = nullptr;
  if (!out) {
    const std::int64_t bytes = ooc::byte_count(shape, dtype.itemsize()).value_or(-1);
    require_memory(static_cast<std::uint64_t>(bytes), op == "qr" ? "Q" : "U");
    py::array values = new_array(dtype, shape, ooc::Order::c);
    into = static_cast<std::byte*>(values.mutable_data());
    q = values;
  }
  ooc::linalg::Matrix r;
  ooc::linalg::SingularValueDecomposition svd;
  run_watched(progress, [&](Run& run) {
    const ooc::MappedArray a = open_source(source);
    ooc::PipelineOptions options = run.pipeline(call, a.dtype().itemsize());
    prepare_input(a, options);
    auto compute = [&](std::span<std::byte> into_q) {
      if (op == "qr") {
        r = ooc::linalg::qr(a, into_q, options);
      } else {
        svd = ooc::linalg::svd(a, into_q, options);
      }
    };
    if (!out) {
      compute(std::span<std::byte>(into, static_cast<std::size_t>(*ooc::element_count(shape)) * dtype.itemsize()));
      return;
    }
    check_not_input(source.path, *out);
    write_output(*out, [&] {
      ooc::MappedArray file = ooc::create_array(*out, dtype, shape, ooc::Order::c, overwrite);
      compute(file.writable_bytes());
      commit_unless_cancelled(file, run);
    });
  });
  auto array = [](const ooc::linalg::Matrix& m) {
    const std::vector<std::byte> bytes = m.bytes();
    py::array values = new_array(m.dtype, m.shape, ooc::Order::c);
    if (!bytes.empty()) std::memcpy(values.mutable_data(), bytes.data(), bytes.size());
    return values;
  };
  if (op == "qr") return py::make_tuple(q, array(r));
  return py::make_tuple(q, array(svd.s), array(svd.vt));
}

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

// Raises `type` with the one-line message, its `kind` attribute the Error's kind's name.
// An index error's message is numpy's words alone, as numpy's IndexError says them.
void raise(PyObject* type, const ooc::Error& e) {
  const auto* index_error = dynamic_cast<const ooc::IndexError*>(&e);
  const std::string message = one_line(index_error ? index_error->numpy_text() : e.what());
  PyObject* value = PyObject_CallFunction(type, "s", message.c_str());
  if (value == nullptr) return;  // the call's own exception stands
  if (PyObject_SetAttrString(value, "kind", py::str(ooc::kind_name(e.kind())).ptr()) != 0) PyErr_Clear();
  PyErr_SetObject(type, value);
  Py_DECREF(value);
}

}  // namespace

PYBIND11_MODULE(_ooc, m) {
  m.doc() = "ooc's C++ engine; use the ooc package";
  // A damaged HDF5 file can crash the HDF5 library; here that must raise, not end the
  // interpreter: each file is probed in a child process first (ooc::probe_hdf5_files_in_child).
  ooc::probe_hdf5_files_in_child(true);

  static py::exception<ooc::Error> error_type(m, "Error", PyExc_OSError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ooc::Error& e) {
      // By the error's kind, never its words: the OS's own causes get Python's own
      // exceptions, and what numpy refuses (the minimum of an empty array) numpy's
      // ValueError, with numpy's own words (ooc's kernels throw them as they are).
      PyObject* type = error_type.ptr();
      switch (e.kind()) {
        case ooc::ErrorKind::cancelled: type = PyExc_KeyboardInterrupt; break;
        case ooc::ErrorKind::usage: case ooc::ErrorKind::value: type = PyExc_ValueError; break;
        case ooc::ErrorKind::index: type = PyExc_IndexError; break;
        case ooc::ErrorKind::not_found: type = PyExc_FileNotFoundError; break;
        case ooc::ErrorKind::permission: type = PyExc_PermissionError; break;
        case ooc::ErrorKind::out_of_memory: type = PyExc_MemoryError; break;
        default: break;  // other, no_space, corrupt, busy: ooc.Error (an OSError)
      }
      raise(type, e);
    }
  });

  py::class_<Source>(m, "Source")
      .def(py::init([](std::string path, std::vector<std::string> selections) {
             return Source{std::move(path), std::move(selections), {}, {}, {}};
           }),
           py::arg("path"), py::arg("selections"))
      .def_static(
          "of_expression",
          [](const std::string& text, std::vector<std::string> names, std::vector<Source> bound, std::string label) {
            if (text.empty()) throw ooc::UsageError("eval: an empty expression");
            return Source{std::move(label), {}, text, std::move(names), std::move(bound)};
          },
          py::arg("text"), py::arg("names"), py::arg("bound"), py::arg("label"))
      .def_readonly("path", &Source::path)
      .def_readonly("selections", &Source::selections);
  py::class_<CallOptions>(m, "CallOptions");
  m.def("call_options", &call_options, py::arg("threads"), py::arg("tile_bytes"), py::arg("io"), py::arg("prefetch"));

  m.def("info", &info, py::arg("source"));
  m.def("reduce", &reduce, py::arg("source"), py::arg("op"), py::arg("ddof"), py::arg("options"), py::arg("progress"));
  m.def("reduce_axis", &reduce_axis, py::arg("source"), py::arg("op"), py::arg("ddof"), py::arg("axis"),
        py::arg("out"), py::arg("overwrite"), py::arg("options"), py::arg("progress"));
  m.def("reduce_together", &reduce_together, py::arg("source"), py::arg("ops"), py::arg("ddof"), py::arg("bins"),
        py::arg("range"), py::arg("axis"), py::arg("options"), py::arg("progress"));
  m.def("quantile", &quantile, py::arg("source"), py::arg("q"), py::arg("scalar_q"), py::arg("method"), py::arg("median"),
        py::arg("skip_nan"), py::arg("axis"), py::arg("memory_budget"), py::arg("options"), py::arg("progress"));
  m.def("unique", &unique, py::arg("source"), py::arg("memory_budget"), py::arg("options"), py::arg("progress"));
  m.def("histogram", &histogram, py::arg("source"), py::arg("bins"), py::arg("range"), py::arg("options"),
        py::arg("progress"));
  m.def("apply", &apply, py::arg("op"), py::arg("source"), py::arg("out"), py::arg("inplace"), py::arg("journal"),
        py::arg("overwrite"), py::arg("options"), py::arg("progress"));
  m.def("unique_to", &unique_to, py::arg("source"), py::arg("out"), py::arg("counts"), py::arg("temp_dir"),
        py::arg("memory_budget"), py::arg("overwrite"), py::arg("options"), py::arg("progress"));
  m.def("sort", &sort, py::arg("source"), py::arg("axis"), py::arg("indices"), py::arg("out"), py::arg("temp_dir"),
        py::arg("memory_budget"), py::arg("overwrite"), py::arg("options"), py::arg("progress"));
  m.def("copy", &copy, py::arg("source"), py::arg("out"), py::arg("overwrite"), py::arg("chunks"),
        py::arg("compression"), py::arg("shuffle"), py::arg("options"), py::arg("progress"));
  m.def("import_text", &import_text, py::arg("text"), py::arg("out"), py::arg("dtype"), py::arg("delimiter"),
        py::arg("comments"), py::arg("skip_rows"), py::arg("header"), py::arg("columns"), py::arg("missing"),
        py::arg("ndmin"), py::arg("overwrite"), py::arg("options"), py::arg("progress"));
  m.def("export_text", &export_text, py::arg("source"), py::arg("text"), py::arg("delimiter"), py::arg("fmt"),
        py::arg("header"), py::arg("options"), py::arg("progress"));
  m.def("eval", &evaluate, py::arg("expr"), py::arg("names"), py::arg("sources"), py::arg("out"),
        py::arg("overwrite"), py::arg("options"), py::arg("progress"));
  m.def("read", &read_array, py::arg("source"), py::arg("options"), py::arg("progress"));
  m.def("matmul", &matmul, py::arg("source"), py::arg("w"), py::arg("out"), py::arg("overwrite"), py::arg("options"),
        py::arg("progress"));
  m.def("factor", &factor, py::arg("source"), py::arg("op"), py::arg("out"), py::arg("overwrite"), py::arg("options"),
        py::arg("progress"));
  m.def("lstsq", &lstsq, py::arg("x"), py::arg("y"), py::arg("rcond"), py::arg("options"), py::arg("progress"));
  m.def("linalg", &linalg, py::arg("source"), py::arg("op"), py::arg("rowvar"), py::arg("bias"), py::arg("ddof"),
        py::arg("options"), py::arg("progress"));
  m.def("map_blocks", &map_blocks, py::arg("f"), py::arg("sources"), py::arg("out"), py::arg("dtype"),
        py::arg("shape"), py::arg("overwrite"), py::arg("options"), py::arg("progress"));
  m.def("available_memory", &available_memory, "bytes this process may still allocate (MemAvailable, cgroup limit)");
  m.attr("default_tile_bytes") = ooc::kDefaultTileBytes;
}
