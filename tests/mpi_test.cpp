// Tests for include/ooc/mpi.hpp and src/mpi/mpi.cpp, run by ctest under
// `mpirun -np N` for N = 1..4: every rank runs every case; each compares what the ranks
// computed together with what this process computes alone, bit for bit.

#define DOCTEST_CONFIG_IMPLEMENT
#include "ooc/mpi.hpp"

#include "ooc/ooc.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

const ooc::mpi::Communicator& world() {
  static const ooc::mpi::Communicator comm;
  return comm;
}

// A directory every rank sees, made by rank 0 and removed by it when every rank is done.
class SharedDir {
 public:
  SharedDir() {
    std::string name;
    if (world().rank() == 0) {
      const char* root = std::getenv("OOC_TEST_TMP");
      const std::filesystem::path base = root ? root : std::filesystem::temp_directory_path();
      name = (base / ("ooc-mpi-" + std::to_string(std::random_device{}()))).string();
      std::filesystem::create_directories(name);
    }
    path_ = world().broadcast(name, 0);
  }
  ~SharedDir() {
    world().barrier();
    if (world().rank() == 0) std::filesystem::remove_all(path_);
  }
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    return names;
  }

 private:
  std::filesystem::path path_;
};

// Rank 0 writes `values` as an array of `dtype` (any byte order), then every rank may read it.
void write_array(const std::string& path, const std::vector<double>& values, ooc::DType dtype,
                 const ooc::Shape& shape, ooc::Order order = ooc::Order::c) {
  if (world().rank() == 0) {
    ooc::MappedArray out = ooc::create_npy(path, dtype, shape, order);
    ooc::convert(ooc::dtype_of<double>, values.data(), dtype, out.writable_bytes().data(),
                 static_cast<std::int64_t>(values.size()));
    out.commit();
  }
  world().barrier();
}

std::vector<double> sample(std::size_t n, unsigned seed, bool with_nan) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist;
  const double scales[] = {1e-3, 1.0, 1e4};
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng) * scales[rng() % 3];
  if (with_nan && n > 3) v[n / 3] = std::nan("");
  return v;
}

std::uint64_t bits(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

bool same_scalar(const ooc::Scalar& a, const ooc::Scalar& b) {
  if (a.dtype() != b.dtype() || a.to_json() != b.to_json()) return false;
  return a.dtype().kind() != ooc::Kind::floating || std::isnan(a.as_double()) ||
         bits(a.as_double()) == bits(b.as_double());
}

ooc::PipelineOptions tiles_of(std::uint64_t tile_bytes, int threads = 2) {
  ooc::PipelineOptions o;
  o.tile_bytes = tile_bytes;
  o.threads = threads;
  return o;
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Checks on every rank that the ranks' reduction of `path` is this process's own.
void check_reductions(const std::string& path, std::uint64_t tile_bytes) {
  const ooc::MappedArray whole = ooc::map_file(path);
  const ooc::MappedArray share = ooc::mpi::map_share(world(), path, ooc::Access::read_only, tiles_of(tile_bytes));
  for (const char* name : {"sum", "mean", "min", "max"}) {
    const auto op = ooc::kernels::ReduceOp::parse(name);
    if (whole.size() == 0 && (op.name() == "min" || op.name() == "max")) {
      CHECK_THROWS_WITH_AS(ooc::mpi::reduce(world(), share, op, tiles_of(tile_bytes)),
                           doctest::Contains("zero-size array"), ooc::Error);
      continue;
    }
    const ooc::Scalar alone = op.run(whole, tiles_of(tile_bytes));
    const ooc::Scalar together = ooc::mpi::reduce(world(), share, op, tiles_of(tile_bytes));
    CAPTURE(path);
    CAPTURE(name);
    CAPTURE(tile_bytes);
    CAPTURE(alone.to_json());
    CAPTURE(together.to_json());
    CHECK(same_scalar(together, alone));
  }
}

// A user's reduction: how many values exceed a limit.
struct CountAbove {
  double limit;
  using State = std::int64_t;
  void partial(State& s, const ooc::ConstArrayMap<double>& x) const { s += (x > limit).count(); }
  void merge(State& left, State&& right) const { left += right; }
  std::int64_t result(const State& s) const { return s; }
  template <class T> static constexpr bool accepts = std::is_same_v<T, double>;
};

}  // namespace

TEST_CASE("the ranks' sum, mean, min and max are one process's bits, for every dtype and order") {
  SharedDir dir;
  const ooc::Shape shape{401, 503};  // 201703 elements: many tiles, a short last one
  struct Case {
    const char* name;
    ooc::DType dtype;
    ooc::Order order;
    bool nan;
  };
  const Case cases[] = {
      {"f8.npy", ooc::DType(ooc::Kind::floating, 8), ooc::Order::c, false},
      {"f8be_fortran.npy", ooc::DType(ooc::Kind::floating, 8, ooc::ByteOrder::big), ooc::Order::fortran, false},
      {"f4be.npy", ooc::DType(ooc::Kind::floating, 4, ooc::ByteOrder::big), ooc::Order::c, false},
      {"f4_nan.npy", ooc::DType(ooc::Kind::floating, 4), ooc::Order::fortran, true},
      {"f2.npy", ooc::DType(ooc::Kind::floating, 2), ooc::Order::c, false},
      {"i1.npy", ooc::DType(ooc::Kind::signed_int, 1), ooc::Order::c, false},
      {"i4be.npy", ooc::DType(ooc::Kind::signed_int, 4, ooc::ByteOrder::big), ooc::Order::fortran, false},
      {"u8.npy", ooc::DType(ooc::Kind::unsigned_int, 8), ooc::Order::c, false},
      {"b1.npy", ooc::DType(ooc::Kind::boolean, 1), ooc::Order::c, false},
  };
  for (const Case& c : cases) {
    std::vector<double> values = sample(401 * 503, 11, c.nan);
    if (c.dtype.kind() != ooc::Kind::floating)
      for (double& v : values) v = std::round(v * 1e3);
    write_array(dir.file(c.name), values, c.dtype, shape, c.order);
    for (std::uint64_t tile : {std::uint64_t{64 << 10}, std::uint64_t{200 << 10}, std::uint64_t{16 << 20}})
      check_reductions(dir.file(c.name), tile);
  }
}

TEST_CASE("more ranks than tiles, an empty array and a 0-d array reduce as in one process") {
  SharedDir dir;
  write_array(dir.file("one_tile.npy"), sample(5000, 3, false), ooc::DType(ooc::Kind::floating, 8), {5000});
  write_array(dir.file("empty.npy"), {}, ooc::DType(ooc::Kind::floating, 4), {3, 0});
  write_array(dir.file("scalar.npy"), {2.5}, ooc::DType(ooc::Kind::floating, 8, ooc::ByteOrder::big), {});
  for (const char* name : {"one_tile.npy", "empty.npy", "scalar.npy"}) check_reductions(dir.file(name), 64 << 10);
}

TEST_CASE("each rank maps only the elements of its own tiles") {
  SharedDir dir;
  write_array(dir.file("a.npy"), sample(100000, 5, false), ooc::DType(ooc::Kind::floating, 8), {100000});
  const auto options = tiles_of(64 << 10);
  const ooc::MappedArray share = ooc::mpi::map_share(world(), dir.file("a.npy"), ooc::Access::read_only, options);
  const ooc::TilePlan plan = ooc::TilePlan::contiguous(100000, 8, 64 << 10);
  const ooc::TilePlan mine = plan.slice(plan.share(world().rank(), world().size()));
  CHECK(share.window().begin == mine.begin());
  CHECK(share.window().end == mine.end());
  CHECK(share.bytes().size() == static_cast<std::size_t>(mine.elements()) * 8);
}

TEST_CASE("a user reduction with a trivially copyable state runs on the ranks") {
  SharedDir dir;
  write_array(dir.file("a.npy"), sample(300000, 8, false), ooc::DType(ooc::Kind::floating, 8), {300000});
  const auto options = tiles_of(64 << 10);
  const auto share = ooc::mpi::map_share(world(), dir.file("a.npy"), ooc::Access::read_only, options);
  CHECK(ooc::mpi::reduce(world(), share, CountAbove{0.5}, options) ==
        ooc::reduce(ooc::map_file(dir.file("a.npy")), CountAbove{0.5}, options));
}

TEST_CASE("the ranks' elementwise output is byte for byte one process's, new or in place") {
  SharedDir dir;
  const ooc::Shape shape{300, 701};
  write_array(dir.file("in.npy"), sample(300 * 701, 9, true), ooc::DType(ooc::Kind::floating, 4, ooc::ByteOrder::big),
              shape, ooc::Order::fortran);
  const auto options = tiles_of(64 << 10);
  for (const char* spec : {"add-one", "scale:0.5", "add:300"}) {
    CAPTURE(spec);
    const auto op = ooc::kernels::ElementwiseOp::parse(spec);
    {
      const auto in = ooc::mpi::map_share(world(), dir.file("in.npy"), ooc::Access::read_only, options);
      auto out = ooc::mpi::create_npy(world(), dir.file("together.npy"), op.result_dtype(in.dtype()).native(),
                                      in.shape(), in.order(), in.window());
      ooc::mpi::apply(world(), op, in, out, options);
      ooc::mpi::commit(world(), out);
    }
    if (world().rank() == 0) {
      const auto in = ooc::map_file(dir.file("in.npy"));
      auto out = ooc::create_npy(dir.file("alone.npy"), op.result_dtype(in.dtype()).native(), in.shape(), in.order());
      op.apply(in, out, options);
      out.commit();
      CHECK(file_bytes(dir.file("together.npy")) == file_bytes(dir.file("alone.npy")));
      CHECK(dir.entries().size() == 3);  // in, together, alone: no temporary left
    }
    world().barrier();
  }
  // In place: every rank rewrites its share of the file itself.
  if (world().rank() == 0) std::filesystem::copy_file(dir.file("in.npy"), dir.file("inplace.npy"));
  world().barrier();
  const auto op = ooc::kernels::ElementwiseOp::parse("add-one");
  {
    auto a = ooc::mpi::map_share(world(), dir.file("inplace.npy"), ooc::Access::read_write, options);
    ooc::mpi::apply(world(), op, a, a, options);
    ooc::mpi::commit(world(), a);
  }
  if (world().rank() == 0) {
    auto a = ooc::map_file(dir.file("in.npy"), ooc::Access::read_write);
    op.apply(a, a, options);
    a.commit();
    CHECK(file_bytes(dir.file("inplace.npy")) == file_bytes(dir.file("in.npy")));
  }
}

TEST_CASE("a failure on one rank is every rank's failure, with that rank's message") {
  const int last = world().size() - 1;
  CHECK_THROWS_WITH_AS(world().all_or_none([&] {
    if (world().rank() == last) throw ooc::UsageError("x.npy", "rank " + std::to_string(last) + " refuses");
  }),
                       ("x.npy: rank " + std::to_string(last) + " refuses").c_str(), ooc::UsageError);
  // The lowest failing rank speaks; a plain exception arrives elsewhere as an ooc::Error.
  const int lowest = std::min(1, last);
  CHECK_THROWS_WITH_AS(world().all_or_none([&] {
    if (world().rank() >= lowest) throw std::runtime_error("plain " + std::to_string(world().rank()));
  }),
                       ("plain " + std::to_string(lowest)).c_str(), std::runtime_error);
  CHECK(world().all_or_none([] { return 7; }) == 7);
}

TEST_CASE("a run cancelled on one rank is cancelled on all") {
  SharedDir dir;
  write_array(dir.file("a.npy"), sample(100000, 2, false), ooc::DType(ooc::Kind::floating, 8), {100000});
  std::atomic<bool> stop{world().rank() == world().size() - 1};
  auto options = tiles_of(64 << 10);
  options.cancel = &stop;
  const auto share = ooc::mpi::map_share(world(), dir.file("a.npy"), ooc::Access::read_only, options);
  CHECK_THROWS_AS(ooc::mpi::reduce(world(), share, ooc::kernels::Sum{}, options), ooc::Cancelled);
}

TEST_CASE("an output some rank fails to write never appears, and its temporary goes") {
  SharedDir dir;
  write_array(dir.file("in.npy"), sample(100000, 4, false), ooc::DType(ooc::Kind::floating, 8), {100000});
  const auto options = tiles_of(64 << 10);
  const auto op = ooc::kernels::ElementwiseOp::parse("add-one");
  std::atomic<bool> stop{world().rank() == world().size() - 1};
  auto failing = options;
  failing.cancel = &stop;  // the last rank's part fails
  {
    const auto in = ooc::mpi::map_share(world(), dir.file("in.npy"), ooc::Access::read_only, options);
    auto out = ooc::mpi::create_npy(world(), dir.file("out.npy"), ooc::dtype_of<double>, in.shape(), in.order(),
                                    in.window());
    if (world().rank() == 0) CHECK(dir.entries().size() == 2);  // the input and the temporary
    CHECK_THROWS_AS(ooc::mpi::apply(world(), op, in, out, failing), ooc::Cancelled);
  }
  world().barrier();
  if (world().rank() == 0) CHECK(dir.entries() == std::vector<std::string>{"in.npy"});
  // Creating in a missing directory fails on rank 0, so on every rank.
  const auto in = ooc::mpi::map_share(world(), dir.file("in.npy"), ooc::Access::read_only, options);
  CHECK_THROWS_WITH_AS(ooc::mpi::create_npy(world(), dir.file("no/out.npy"), ooc::dtype_of<double>, in.shape(),
                                            in.order(), in.window()),
                       doctest::Contains("cannot create output"), ooc::Error);
}

TEST_CASE("ranks that see different arrays are refused, all of them") {
  ooc::ArrayInfo info;
  info.shape = {100000 + (world().size() > 1 ? world().rank() * 10000 : 0)};
  if (world().size() > 1) {
    CHECK_THROWS_WITH_AS(world().share(info, tiles_of(64 << 10)), doctest::Contains("do not see the same array"),
                         ooc::UsageError);
  } else {
    CHECK(world().share(info, tiles_of(64 << 10)).size() == 13);
  }
}

TEST_CASE("a process an MPI launcher started knows it from its environment") {
  CHECK(ooc::mpi::launched_by_mpi());  // oocrun's side, a plain start, is in test_cli_mpi.py
}

int main(int argc, char** argv) {
  ooc::mpi::Session session(argc, argv);
  doctest::Context context(argc, argv);
  if (world().rank() != 0) {  // rank 0 reports; the others only their failures
    context.setOption("minimal", true);
    context.setOption("no-colors", true);
  }
  const int failed = context.run() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, world().get());
  return any;
}
