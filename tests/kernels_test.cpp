#include "ooc/ooc.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <vector>

using ooc::testing::ScratchDir;

namespace {

template <class T>
ooc::MappedArray make_array(const std::string& path, const std::vector<T>& data,
                            ooc::DType dtype = ooc::dtype_of<T>) {
  ooc::MappedArray out = ooc::create_npy(path, dtype, {static_cast<std::int64_t>(data.size())});
  auto buffer = std::make_unique<T[]>(data.size());  // vector<bool> has no data()
  std::copy(data.begin(), data.end(), buffer.get());
  ooc::convert(ooc::dtype_of<T>, buffer.get(), dtype, out.writable_bytes().data(), static_cast<std::int64_t>(data.size()));
  out.commit();
  return ooc::map_file(path);
}

std::vector<double> normal_values(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist;
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng) * 1e3;
  return v;
}

ooc::PipelineOptions with(int threads, std::uint64_t tile_bytes) {
  ooc::PipelineOptions o;
  o.threads = threads;
  o.tile_bytes = tile_bytes;
  return o;
}

std::uint64_t bits(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

}  // namespace

TEST_CASE("pairwise_sum adds fewer than eight values left to right") {
  const double v[5] = {1e16, 1.0, -1e16, 1.0, 1.0};
  CHECK(ooc::kernels::pairwise_sum<double>(v, 5) == ((((0.0 + 1e16) + 1.0) + -1e16) + 1.0) + 1.0);
}

TEST_CASE("a float sum is bit-identical for 1, 2 and 7 threads and any tile size above a block") {
  ScratchDir dir;
  const auto a = make_array(dir.file("a.npy"), normal_values(300001, 1));
  const double reference = ooc::reduce(a, ooc::kernels::Sum{}, with(1, 64 << 10)).as_double();
  for (int threads : {1, 2, 7})
    for (std::uint64_t tile : {std::uint64_t{1}, std::uint64_t{64 << 10}, std::uint64_t{1 << 20}, std::uint64_t{64 << 20}})
      CHECK(bits(ooc::reduce(a, ooc::kernels::Sum{}, with(threads, tile)).as_double()) == bits(reference));
}

TEST_CASE("a big-endian float64 file sums to the same bits as its native twin") {
  ScratchDir dir;
  const auto values = normal_values(100000, 2);
  const auto native = make_array(dir.file("le.npy"), values);
  const auto big = make_array(dir.file("be.npy"), values, ooc::DType(ooc::Kind::floating, 8, ooc::ByteOrder::big));
  CHECK(bits(ooc::reduce(big, ooc::kernels::Sum{}).as_double()) == bits(ooc::reduce(native, ooc::kernels::Sum{}).as_double()));
}

TEST_CASE("sum, mean, min and max have numpy's result dtypes") {
  ScratchDir dir;
  const auto u8 = make_array<std::uint8_t>(dir.file("u8.npy"), {250, 250, 250});
  CHECK(ooc::reduce(u8, ooc::kernels::Sum{}).dtype() == ooc::dtype_of<std::uint64_t>);
  CHECK(ooc::reduce(u8, ooc::kernels::Sum{}).to_json() == "750");
  CHECK(ooc::reduce(u8, ooc::kernels::Mean{}).dtype() == ooc::dtype_of<double>);
  CHECK(ooc::reduce(u8, ooc::kernels::Min{}).dtype() == ooc::dtype_of<std::uint8_t>);
  const auto b = make_array<bool>(dir.file("b.npy"), {true, false, true});
  CHECK(ooc::reduce(b, ooc::kernels::Sum{}).to_json() == "2");
  CHECK(ooc::reduce(b, ooc::kernels::Sum{}).dtype() == ooc::dtype_of<std::int64_t>);
  CHECK(ooc::reduce(b, ooc::kernels::Min{}).to_json() == "false");
  const auto f4 = make_array<float>(dir.file("f4.npy"), {1.0f, 2.0f});
  CHECK(ooc::reduce(f4, ooc::kernels::Mean{}).dtype() == ooc::dtype_of<float>);
  const auto f2 = make_array<ooc::half>(dir.file("f2.npy"), {ooc::half(1.0f), ooc::half(2.0f)});
  CHECK(ooc::reduce(f2, ooc::kernels::Sum{}).dtype() == ooc::dtype_of<ooc::half>);
  CHECK(ooc::reduce(f2, ooc::kernels::Mean{}).to_json() == "1.5");
}

TEST_CASE("min and max propagate NaN and refuse an empty array") {
  ScratchDir dir;
  const auto a = make_array<double>(dir.file("nan.npy"), {1.0, NAN, -3.0});
  CHECK(std::isnan(ooc::reduce(a, ooc::kernels::Min{}).as_double()));
  CHECK(std::isnan(ooc::reduce(a, ooc::kernels::Max{}).as_double()));
  const auto empty = make_array<double>(dir.file("empty.npy"), {});
  CHECK_THROWS_WITH_AS(ooc::reduce(empty, ooc::kernels::Min{}), doctest::Contains("empty.npy: zero-size array"), ooc::Error);
  CHECK(ooc::reduce(empty, ooc::kernels::Sum{}).to_json() == "0.0");
  CHECK(std::isnan(ooc::reduce(empty, ooc::kernels::Mean{}).as_double()));
}

// A user reduction written to the contract in kernel.hpp: the count of values above a
// threshold, for every element type.
struct CountAbove {
  double threshold;
  struct State {
    std::int64_t count = 0;
    std::vector<std::int64_t> block_starts;  // to check what partial sees
  };
  template <class Values>
  void partial(State& s, const Values& x) const {
    s.count += (x.template cast<double>() > threshold).count();
    s.block_starts.push_back(x.size());
  }
  void merge(State& left, State&& right) const {
    left.count += right.count;
    left.block_starts.insert(left.block_starts.end(), right.block_starts.begin(), right.block_starts.end());
  }
  State result(const State& s) const { return s; }
};

TEST_CASE("a user reduction sees blocks of at most kBlockElements and merges in order") {
  ScratchDir dir;
  std::vector<std::int32_t> values(50000);
  std::iota(values.begin(), values.end(), 0);
  const auto a = make_array(dir.file("i.npy"), values);
  const auto state = ooc::reduce(a, CountAbove{24999.5}, with(2, 1));
  CHECK(state.count == 25000);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < state.block_starts.size(); ++i) {
    CHECK(state.block_starts[i] <= ooc::kBlockElements);
    if (i + 1 < state.block_starts.size()) CHECK(state.block_starts[i] == ooc::kBlockElements);
    total += state.block_starts[i];
  }
  CHECK(total == 50000);
}

struct FloatsOnly {
  struct State { double sum = 0; };
  template <class T> static constexpr bool accepts = ooc::is_floating_v<T>;
  template <class Values> void partial(State& s, const Values& x) const { s.sum += x.template cast<double>().sum(); }
  void merge(State& l, State&& r) const { l.sum += r.sum; }
  double result(const State& s) const { return s.sum; }
};

TEST_CASE("a kernel that refuses a dtype gives a usage error naming the file") {
  ScratchDir dir;
  const auto ints = make_array<std::int32_t>(dir.file("i.npy"), {1, 2});
  CHECK_THROWS_WITH_AS(ooc::reduce(ints, FloatsOnly{}), doctest::Contains("does not accept int32"), ooc::UsageError);
  const auto floats = make_array<float>(dir.file("f.npy"), {1.5f, 2.0f});
  CHECK(ooc::reduce(floats, FloatsOnly{}) == 3.5);
}

TEST_CASE("transform computes in the output's type and writes every element once") {
  ScratchDir dir;
  std::vector<std::int16_t> values(70000);
  std::iota(values.begin(), values.end(), std::int16_t{-30000});
  const auto in = make_array(dir.file("in.npy"), values, ooc::DType(ooc::Kind::signed_int, 2, ooc::ByteOrder::big));
  ooc::MappedArray out = ooc::create_npy(dir.file("out.npy"), ooc::dtype_of<double>, in.shape());
  ooc::transform_as<double>(in, out, [](const auto& x) { return x * 0.5 + 1; }, with(7, 4096));
  out.commit();
  const ooc::MappedArray result = ooc::map_file(dir.file("out.npy"));
  const auto back = result.values<double>();
  for (std::size_t i = 0; i < values.size(); i += 997) CHECK(back(static_cast<Eigen::Index>(i)) == values[i] * 0.5 + 1);
}

TEST_CASE("transform with a lambda generic over the element type works for any output dtype") {
  ScratchDir dir;
  const auto in = make_array<std::uint8_t>(dir.file("in.npy"), {1, 2, 255});
  ooc::MappedArray out = ooc::create_npy(dir.file("out.npy"), ooc::dtype_of<std::uint8_t>, in.shape());
  ooc::transform(in, out, [](const auto& x) {
    using T = typename std::decay_t<decltype(x)>::Scalar;
    return x + T(1);
  });
  CHECK(out.values<std::uint8_t>()(2) == 0);  // wraps, as numpy's uint8 + 1
}

TEST_CASE("transform in place rewrites a big-endian array in its own byte order") {
  ScratchDir dir;
  make_array<std::int32_t>(dir.file("a.npy"), {1, 2, 3}, ooc::DType(ooc::Kind::signed_int, 4, ooc::ByteOrder::big));
  ooc::MappedArray a = ooc::map_file(dir.file("a.npy"), ooc::Access::read_write);
  ooc::transform_as<std::int32_t>(a, a, [](const auto& x) { return x + 10; });
  a.commit();
  const auto back = ooc::map_file(dir.file("a.npy"));
  CHECK(back.dtype().byte_order() == ooc::ByteOrder::big);
  std::int32_t native[3];
  ooc::convert(back.dtype(), back.bytes().data(), ooc::dtype_of<std::int32_t>, native, 3);
  CHECK(native[0] == 11);
  CHECK(native[2] == 13);
}

TEST_CASE("transform refuses a read-only output and mismatched shapes") {
  ScratchDir dir;
  const auto a = make_array<double>(dir.file("a.npy"), {1, 2, 3});
  ooc::MappedArray ro = ooc::map_file(dir.file("a.npy"));
  CHECK_THROWS_WITH_AS(ooc::transform(a, ro, [](const auto& x) { return x; }), doctest::Contains("read-only"),
                       ooc::UsageError);
  ooc::MappedArray other = ooc::create_npy(dir.file("b.npy"), ooc::dtype_of<double>, {4});
  CHECK_THROWS_WITH_AS(ooc::transform(a, other, [](const auto& x) { return x; }), doctest::Contains("differs"), ooc::UsageError);
}

TEST_CASE("for_each_tile visits every element exactly once") {
  ScratchDir dir;
  std::vector<std::uint8_t> values(100000, 1);
  const auto a = make_array(dir.file("a.npy"), values);
  std::mutex m;
  std::int64_t seen = 0;
  std::vector<std::int64_t> starts;
  ooc::for_each_tile(a, [&](const ooc::Tile& piece, const auto& x) {
    std::lock_guard lock(m);
    seen += x.template cast<std::int64_t>().sum();
    CHECK(piece.size() == x.size());
    starts.push_back(piece.begin);
  }, with(2, 16384));
  CHECK(seen == 100000);
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 0; i < starts.size(); ++i) CHECK(starts[i] == static_cast<std::int64_t>(i) * ooc::kBlockElements);
}

TEST_CASE("python constants are read as Python reads them") {
  using ooc::kernels::PyScalar;
  CHECK(PyScalar::parse("18446744073709551615").uint_value == ~0ull);
  CHECK(PyScalar::parse("-9223372036854775808").int_value == INT64_MIN);
  CHECK(PyScalar::parse("-0").is_integer);
  CHECK_FALSE(PyScalar::parse("-0").negative);
  CHECK_FALSE(PyScalar::parse("2.").is_integer);
  CHECK(std::isinf(PyScalar::parse("-inf").float_value));
  CHECK_THROWS_AS(PyScalar::parse("18446744073709551616"), ooc::UsageError);
  CHECK_THROWS_AS(PyScalar::parse("0x10"), ooc::UsageError);
  CHECK_THROWS_AS(PyScalar::parse("1.5.2"), ooc::UsageError);
  CHECK_THROWS_AS(PyScalar::parse(""), ooc::UsageError);
}

TEST_CASE("a constant that does not parse is a UsageError that names no file, for the caller to place") {
  try {
    ooc::kernels::PyScalar::parse("1.5.2");
    FAIL("parsed");
  } catch (const ooc::UsageError& e) {
    CHECK(e.path().empty());
    CHECK(std::string(e.what()) == "'1.5.2' is not a number");
    CHECK(e.problem() == e.what());
  }
}

TEST_CASE("result_type follows numpy 1.24's value-based casting") {
  using ooc::DType;
  using ooc::Kind;
  using ooc::kernels::PyScalar;
  auto rt = [](DType a, const char* c) { return ooc::kernels::result_type(a, PyScalar::parse(c)).name(); };
  const DType b1(Kind::boolean, 1), i1(Kind::signed_int, 1), u1(Kind::unsigned_int, 1), u8(Kind::unsigned_int, 8),
      i8(Kind::signed_int, 8), f2(Kind::floating, 2), f4(Kind::floating, 4);
  // Each expectation is numpy 1.24's (np.zeros(3, dtype) + constant).dtype.
  CHECK(rt(b1, "1") == "int64");
  CHECK(rt(b1, "2.5") == "float64");
  CHECK(rt(b1, "9223372036854775808") == "uint64");
  CHECK(rt(u1, "1") == "uint8");
  CHECK(rt(u1, "-1") == "int16");
  CHECK(rt(u1, "300") == "uint16");
  CHECK(rt(i1, "300") == "int16");
  CHECK(rt(i1, "200") == "int16");
  CHECK(rt(u8, "-1") == "float64");
  CHECK(rt(i8, "9223372036854775808") == "float64");
  CHECK(rt(u1, "2.5") == "float64");
  CHECK(rt(f2, "300") == "float32");
  CHECK(rt(f2, "70000") == "float64");
  CHECK(rt(f2, "2.5") == "float16");
  CHECK(rt(f2, "1e300") == "float64");
  CHECK(rt(f4, "1e40") == "float64");
}

TEST_CASE("operation names parse, and bad ones are usage errors") {
  CHECK(ooc::kernels::ElementwiseOp::parse("add-one").result_dtype(ooc::dtype_of<std::uint8_t>) == ooc::dtype_of<std::uint8_t>);
  CHECK(ooc::kernels::ElementwiseOp::parse("scale:0.5").result_dtype(ooc::dtype_of<std::int32_t>) == ooc::dtype_of<double>);
  CHECK_THROWS_AS(ooc::kernels::ElementwiseOp::parse("add"), ooc::UsageError);
  CHECK_THROWS_AS(ooc::kernels::ElementwiseOp::parse("add:x"), ooc::UsageError);
  CHECK_THROWS_AS(ooc::kernels::ElementwiseOp::parse("add-one:3"), ooc::UsageError);
  CHECK_THROWS_AS(ooc::kernels::ElementwiseOp::parse("frob"), ooc::UsageError);
  CHECK_THROWS_AS(ooc::kernels::ReduceOp::parse("median"), ooc::UsageError);
}

TEST_CASE("in place is refused when numpy's same_kind rule would refuse it") {
  ScratchDir dir;
  make_array<std::int32_t>(dir.file("i.npy"), {1, 2});
  ooc::MappedArray a = ooc::map_file(dir.file("i.npy"), ooc::Access::read_write);
  CHECK_THROWS_WITH_AS(ooc::kernels::ElementwiseOp::parse("add:2.5").apply(a, a), doctest::Contains("same_kind"),
                       ooc::UsageError);
  ooc::kernels::ElementwiseOp::parse("add:300").apply(a, a);
  CHECK(a.values<std::int32_t>()(1) == 302);
}

TEST_CASE("a reduction over a file that shrank under it fails instead of answering") {
  ScratchDir dir;
  const auto a = make_array(dir.file("a.npy"), normal_values(200000, 5));
  std::filesystem::resize_file(dir.file("a.npy"), 64 * 1024);
  for (int threads : {1, 2, 7}) {
    CHECK_THROWS_WITH_AS(ooc::reduce(a, ooc::kernels::Sum{}, with(threads, 64 * 1024)),
                         doctest::Contains("a.npy: file shrank while being read"), ooc::Error);
  }
}

TEST_CASE("a transform from a file that shrank under it fails and leaves no output") {
  ScratchDir dir;
  const auto in = make_array(dir.file("in.npy"), normal_values(200000, 6));
  std::filesystem::resize_file(dir.file("in.npy"), 64 * 1024);
  {
    ooc::MappedArray out = ooc::create_npy(dir.file("out.npy"), ooc::dtype_of<double>, in.shape());
    CHECK_THROWS_WITH_AS(ooc::transform_as<double>(in, out, [](const auto& x) { return x + 1; }, with(2, 64 * 1024)),
                         doctest::Contains("in.npy: file shrank while being read"), ooc::Error);
  }
  CHECK(dir.entries() == 1);  // the input only
}

namespace {

// Same dtype and same bits (NaN payloads aside, which JSON does not show either).
bool same_scalar(const ooc::Scalar& a, const ooc::Scalar& b) {
  if (a.dtype() != b.dtype() || a.to_json() != b.to_json()) return false;
  return a.dtype().kind() != ooc::Kind::floating || std::isnan(a.as_double()) ||
         bits(a.as_double()) == bits(b.as_double());
}

// What ooc::mpi::reduce does on `parts` ranks, done here in one process: each part maps
// only its share, reduces its tiles to one state each, and the running state is handed
// from part to part as bytes, each part merging its tile states into it in order.
template <class Kernel>
ooc::detail::reduce_result_t<Kernel> reduce_in_parts(const std::string& path, const Kernel& kernel, int parts,
                                                     std::uint64_t tile_bytes) {
  const ooc::ArrayInfo info = ooc::read_info(path);
  return ooc::visit_dtype(info.dtype, [&]<class T>(std::type_identity<T>) -> ooc::detail::reduce_result_t<Kernel> {
    if constexpr (ooc::detail::kernel_in_order<Kernel, T>()) {
      throw std::logic_error("an in-order reduction has no tile states to hand on");
    } else {
    using State = ooc::detail::kernel_state_t<Kernel, T>;
    const auto plan = ooc::TilePlan::contiguous(info.size(), info.dtype.itemsize(), tile_bytes);
    std::vector<std::byte> passed;
    for (int part = 0; part < parts; ++part) {
      const ooc::TilePlan mine = plan.slice(plan.share(part, parts));
      const ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_only, {mine.begin(), mine.end()});
      std::vector<State> tiles;
      ooc::reduce_tiles<T>(a, kernel, mine, with(2, tile_bytes),
                           [&](const ooc::Tile&, State&& s) { tiles.push_back(std::move(s)); });
      State total = ooc::detail::kernel_identity<T>(kernel);
      if (part > 0) {
        ooc::StateReader in(passed);
        ooc::load_state(total, in);
        CHECK(in.done());
      }
      for (State& s : tiles) kernel.merge(total, std::move(s));
      ooc::StateWriter out;
      ooc::save_state(total, out);
      passed = std::move(out).take();
    }
    State total = ooc::detail::kernel_identity<T>(kernel);
    ooc::StateReader in(passed);
    ooc::load_state(total, in);
    return ooc::detail::kernel_result<T>(kernel, total);
    }
  });
}

}  // namespace

TEST_CASE("reductions handed on from part to part as bytes give the single-process bits") {
  ScratchDir dir;
  const auto values = normal_values(200003, 7);
  std::vector<std::int64_t> ints(values.size());
  std::transform(values.begin(), values.end(), ints.begin(), [](double v) { return static_cast<std::int64_t>(v * 1e6); });
  make_array(dir.file("f8.npy"), values);
  make_array(dir.file("f4be.npy"), values, ooc::DType(ooc::Kind::floating, 4, ooc::ByteOrder::big));
  make_array(dir.file("f2.npy"), values, ooc::DType(ooc::Kind::floating, 2));
  make_array(dir.file("i1.npy"), ints, ooc::DType(ooc::Kind::signed_int, 1));
  make_array(dir.file("u8be.npy"), ints, ooc::DType(ooc::Kind::unsigned_int, 8, ooc::ByteOrder::big));
  for (const char* name : {"f8.npy", "f4be.npy", "f2.npy", "i1.npy", "u8be.npy"}) {
    const ooc::MappedArray a = ooc::map_file(dir.file(name));
    for (const char* op : {"sum", "mean", "min", "max", "argmin", "argmax", "var", "std", "count_nonzero", "any",
                           "all", "nansum", "nanmean", "nanmin", "nanmax", "norm"}) {
      for (std::uint64_t tile : {std::uint64_t{64 << 10}, std::uint64_t{256 << 10}}) {
        const ooc::Scalar whole = ooc::kernels::ReduceOp::parse(op).run(a, with(2, tile));
        for (int parts : ooc::testing::kSanitized ? std::vector<int>{3, 40} : std::vector<int>{1, 2, 3, 4, 7, 40}) {
          CAPTURE(name);
          CAPTURE(op);
          CAPTURE(tile);
          CAPTURE(parts);
          const ooc::Scalar handed = ooc::kernels::ReduceOp::parse(op).with_kernel(
              a.shape(), a.order(),
              [&](const auto& kernel) { return reduce_in_parts(dir.file(name), kernel, parts, tile); });
          CHECK(same_scalar(handed, whole));
        }
      }
    }
  }
}

TEST_CASE("merging each part's own sum instead would change a float sum's bits") {
  // Why the running state is handed on: the parts' totals re-associate the additions.
  ScratchDir dir;
  const auto a = make_array(dir.file("a.npy"), normal_values(400000, 3));
  const auto plan = ooc::TilePlan::for_array(a, 64 << 10);
  const double whole = ooc::reduce(a, ooc::kernels::Sum{}, with(1, 64 << 10)).as_double();
  bool differs = false;
  for (int parts : {2, 3, 4, 5}) {
    double by_totals = 0;
    for (int part = 0; part < parts; ++part) {
      ooc::PipelineOptions o = with(1, 64 << 10);
      o.tiles = plan.slice(plan.share(part, parts)).tiles();
      by_totals += ooc::reduce(a, ooc::kernels::Sum{}, o).as_double();
    }
    differs = differs || bits(by_totals) != bits(whole);
  }
  CHECK(differs);
}

TEST_CASE("options.tiles reduces just those tiles: numpy's answer for the elements they cover") {
  ScratchDir dir;
  const auto values = normal_values(100000, 4);
  const auto a = make_array(dir.file("a.npy"), values);
  const auto plan = ooc::TilePlan::for_array(a, 64 << 10);  // 8192 float64s a tile
  ooc::PipelineOptions o = with(2, 64 << 10);
  o.tiles = {3, 9};
  const std::vector<double> part(values.begin() + plan[3].begin, values.begin() + plan[8].end);
  const auto alone = make_array(dir.file("part.npy"), part);
  CHECK(same_scalar(ooc::reduce(a, ooc::kernels::Sum{}, o), ooc::reduce(alone, ooc::kernels::Sum{})));
  CHECK(same_scalar(ooc::reduce(a, ooc::kernels::Max{}, o), ooc::reduce(alone, ooc::kernels::Max{})));
  // ... and from a mapping of only those elements.
  const auto window = ooc::map_file(dir.file("a.npy"), ooc::Access::read_only, {plan[3].begin, plan[8].end});
  CHECK(same_scalar(ooc::reduce(window, ooc::kernels::Sum{}, o), ooc::reduce(alone, ooc::kernels::Sum{})));
}

TEST_CASE("transform with options.tiles writes just those tiles, through windows of both arrays") {
  ScratchDir dir;
  const auto values = normal_values(50000, 5);
  make_array(dir.file("a.npy"), values);
  const auto plan = ooc::TilePlan::contiguous(50000, 8, 64 << 10);
  ooc::PipelineOptions o = with(2, 64 << 10);
  o.tiles = {2, 4};
  const ooc::ElementRange part{plan[2].begin, plan[3].end};
  const auto in = ooc::map_file(dir.file("a.npy"), ooc::Access::read_only, part);
  auto out = ooc::create_npy(dir.file("out.npy"), ooc::dtype_of<double>, {50000}, ooc::Order::c, part);
  ooc::transform_as<double>(in, out, [](const auto& x) { return x + 1.0; }, o);
  out.commit();
  const auto back = ooc::map_file(dir.file("out.npy"));
  const auto v = back.values<double>();
  for (std::int64_t i = 0; i < 50000; ++i) {
    const double expected = i >= part.begin && i < part.end ? values[static_cast<std::size_t>(i)] + 1.0 : 0.0;
    if (v(i) != expected) {
      CHECK(v(i) == expected);
      CAPTURE(i);
      break;
    }
  }
}

TEST_CASE("a run over elements an array does not map is a usage error naming it") {
  ScratchDir dir;
  make_array(dir.file("a.npy"), normal_values(50000, 6));
  const auto part = ooc::map_file(dir.file("a.npy"), ooc::Access::read_only, {0, 8192});
  CHECK_THROWS_WITH_AS(ooc::reduce(part, ooc::kernels::Sum{}, with(1, 64 << 10)),
                       doctest::Contains("maps elements [0, 8192) but the run needs [0, 50000)"), ooc::UsageError);
  ooc::PipelineOptions o = with(1, 64 << 10);
  o.tiles = {0, 1};
  CHECK_NOTHROW(ooc::reduce(part, ooc::kernels::Sum{}, o));
  auto out = ooc::create_npy(dir.file("o.npy"), ooc::dtype_of<double>, {50000}, ooc::Order::c, {8192, 50000});
  CHECK_THROWS_AS(ooc::transform_as<double>(part, out, [](const auto& x) { return x; }, o), ooc::UsageError);
}

TEST_CASE("reduction states survive the trip through bytes") {
  ooc::kernels::Sum::state_for<double> sum;
  sum.total = 2.5;
  sum.blocks = {1.0, -0.0, 3e300};
  sum.count = 24577;
  ooc::StateWriter out;
  ooc::save_state(sum, out);
  ooc::kernels::Min::state_for<ooc::half> low{ooc::half(-3.5f), true, {}};
  ooc::save_state(low, out);
  const std::vector<std::byte> bytes = std::move(out).take();

  ooc::StateReader in(bytes);
  ooc::kernels::Sum::state_for<double> sum_back;
  ooc::load_state(sum_back, in);
  ooc::kernels::Min::state_for<ooc::half> low_back;
  ooc::load_state(low_back, in);
  CHECK(in.done());
  CHECK(sum_back.total == 2.5);
  CHECK(sum_back.count == 24577);
  REQUIRE(sum_back.blocks.size() == 3);
  CHECK(std::signbit(sum_back.blocks[1]));
  CHECK(sum_back.blocks[2] == 3e300);
  CHECK(low_back.seen);
  CHECK(static_cast<float>(low_back.value) == -3.5f);

  ooc::StateReader short_read(std::span<const std::byte>(bytes).first(12));
  ooc::kernels::Sum::state_for<double> broken;
  CHECK_THROWS_AS(ooc::load_state(broken, short_read), std::runtime_error);
  static_assert(ooc::TransferableState<ooc::kernels::Mean::state_for<std::int8_t>>);
  static_assert(!ooc::TransferableState<std::vector<double>>);
}

// A reduction that is not associative: concatenating digits. in_order kernels see every
// block on the running state, in array order, whatever the threads and tiles.
struct Digits {
  using State = std::vector<std::int32_t>;
  template <class T> static constexpr bool in_order = true;
  template <class Values>
  void partial(State& s, const Values& x, std::int64_t first) const {
    if (!s.empty() || first == 0) s.push_back(static_cast<std::int32_t>(first));
    CHECK(static_cast<std::int64_t>(s.size() - 1) * ooc::kBlockElements == first);
    (void)x;
  }
  void merge(State&, State&&) const { FAIL("merge is never called for an in_order kernel"); }
  State result(const State& s) const { return s; }
};

TEST_CASE("an in_order kernel sees the blocks on the running state in array order, with their index") {
  ScratchDir dir;
  const auto a = make_array(dir.file("a.npy"), std::vector<double>(100000, 1.0));
  for (int threads : {1, 3}) {
    const auto blocks = ooc::reduce(a, Digits{}, with(threads, 1));
    CHECK(blocks.size() == 13);
  }
}

TEST_CASE("Moments merged block by block agree with a two-pass variance") {
  const auto values = normal_values(100000, 5);
  ooc::kernels::Moments m;
  for (std::size_t at = 0; at < values.size(); at += 8192) {
    const auto n = static_cast<Eigen::Index>(std::min<std::size_t>(8192, values.size() - at));
    m.merge(ooc::kernels::Moments::of_block(ooc::ConstArrayMap<double>(values.data() + at, n)));
  }
  double mean = 0;
  for (double v : values) mean += v;
  mean /= static_cast<double>(values.size());
  double m2 = 0;
  for (double v : values) m2 += (v - mean) * (v - mean);
  CHECK(m.count == 100000);
  CHECK(m.mean == doctest::Approx(mean).epsilon(1e-12));
  CHECK(m.variance(1) == doctest::Approx(m2 / 99999).epsilon(1e-12));
  CHECK(std::isnan(ooc::kernels::Moments{}.variance(0)));
}

TEST_CASE("Moments keep the variance of values with a large common offset") {
  // Timestamps in milliseconds, or readings with a bias: 1e12 + U(0, 1). The reference
  // takes two passes over the values less the offset (exact differences), in long
  // double: a mean of the values themselves rounded to a double can be 6e-5 off at
  // 1e12, which puts n * 6e-5^2 (4e-8 of it) into the squared deviations.
  for (double offset : {1e6, 1e8, 1e10, 1e12}) {
    CAPTURE(offset);
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> unit(0, 1);
    std::vector<double> values(20000);
    for (double& v : values) v = offset + unit(rng);
    ooc::kernels::Moments m;
    for (std::size_t at = 0; at < values.size(); at += 8192) {
      const auto n = static_cast<Eigen::Index>(std::min<std::size_t>(8192, values.size() - at));
      m.merge(ooc::kernels::Moments::of_block(ooc::ConstArrayMap<double>(values.data() + at, n)));
    }
    long double mean = 0;
    for (double v : values) mean += v - offset;
    mean /= static_cast<long double>(values.size());
    long double m2 = 0;
    for (double v : values) m2 += (v - offset - mean) * (v - offset - mean);
    const double exact = static_cast<double>(m2 / static_cast<long double>(values.size()));
    CHECK(m.variance(0) == doctest::Approx(exact).epsilon(1e-12));
  }
}

TEST_CASE("var of float16 overflows to infinity where numpy's float16 sums do") {
  ScratchDir dir;
  std::vector<ooc::half> big(2000, ooc::half(300.0f));
  for (std::size_t i = 0; i < big.size(); i += 2) big[i] = ooc::half(-300.0f);
  const auto a = make_array(dir.file("h.npy"), big);
  CHECK(std::isinf(ooc::reduce(a, ooc::kernels::Var{}).as_double()));
  const auto small = make_array(dir.file("s.npy"), std::vector<ooc::half>{ooc::half(1.0f), ooc::half(3.0f)});
  CHECK(ooc::reduce(small, ooc::kernels::Var{}).to_json() == "1.0");
  CHECK(ooc::reduce(small, ooc::kernels::Var{}).dtype() == ooc::dtype_of<ooc::half>);
}

TEST_CASE("argmin of a Fortran array counts positions in C order") {
  ScratchDir dir;
  // Shape (2, 3) in Fortran order: memory holds a[0,0], a[1,0], a[0,1], a[1,1], a[0,2], a[1,2].
  ooc::MappedArray out = ooc::create_npy(dir.file("f.npy"), ooc::dtype_of<std::int32_t>, {2, 3}, ooc::Order::fortran);
  const std::int32_t memory[6] = {5, 0, 0, 7, 7, 1};
  std::memcpy(out.writable_bytes().data(), memory, sizeof memory);
  out.commit();
  const auto a = ooc::map_file(dir.file("f.npy"));
  CHECK(ooc::reduce(a, ooc::kernels::ArgMin(a.shape(), a.order())).to_json() == "1");  // a[0,1], not a[1,0] (= 3)
  CHECK(ooc::reduce(a, ooc::kernels::ArgMax(a.shape(), a.order())).to_json() == "2");  // a[0,2], not a[1,1] (= 4)
}

TEST_CASE("histogram edges take numpy's dtype from the array and the range by value") {
  using ooc::kernels::Histogram;
  using ooc::kernels::PyScalar;
  const ooc::DType f2(ooc::Kind::floating, 2), i4(ooc::Kind::signed_int, 4), b1(ooc::Kind::boolean, 1);
  CHECK(Histogram::edge_dtype(f2, PyScalar::parse("0"), PyScalar::parse("1")).name() == "float16");
  CHECK(Histogram::edge_dtype(f2, PyScalar::parse("0"), PyScalar::parse("100000")).name() == "float64");
  CHECK(Histogram::edge_dtype(f2, PyScalar::parse("0"), PyScalar::parse("100000.0")).name() == "float32");
  CHECK(Histogram::edge_dtype(i4, PyScalar::parse("0"), PyScalar::parse("1")).name() == "float64");
  CHECK(Histogram::edge_dtype(b1, PyScalar::parse("0"), PyScalar::parse("1")).name() == "float64");
}

TEST_CASE("reduction names and parameters are checked before any work") {
  using ooc::kernels::ReduceOp;
  ooc::kernels::ReduceParams params;
  params.bins = 0;
  CHECK_THROWS_WITH_AS(ReduceOp::parse("histogram", params), doctest::Contains("positive"), ooc::UsageError);
  params.bins = 3;
  params.range = {ooc::kernels::PyScalar::parse("2"), ooc::kernels::PyScalar::parse("1")};
  CHECK_THROWS_AS(ReduceOp::parse("histogram", params), ooc::UsageError);
  params.ddof = -1;
  CHECK_THROWS_AS(ReduceOp::parse("var", params), ooc::UsageError);
  CHECK(ReduceOp::parse("count_nonzero").code() == ReduceOp::Code::count_nonzero);
}

// A reduction over two inputs: numpy's sum(a*b) for float64, blocks side by side.
struct Dot {
  template <class T> using input_for = double;
  using State = ooc::kernels::BlockedSum<double, double>;
  void partial(State& s, const ooc::ConstArrayMap<double>& a, const ooc::ConstArrayMap<double>& b) const {
    std::vector<double> product(static_cast<std::size_t>(a.size()));
    for (Eigen::Index i = 0; i < a.size(); ++i) product[static_cast<std::size_t>(i)] = a[i] * b[i];
    s.add_block(ooc::ConstArrayMap<double>(product.data(), a.size()));
  }
  void merge(State& left, State&& right) const { left.append(std::move(right)); }
  double result(const State& s) const { return s.total; }
};

TEST_CASE("a reduction over two inputs sees matching blocks and is thread-count independent") {
  ScratchDir dir;
  const auto values = normal_values(100003, 7);
  std::vector<float> other(values.size());
  for (std::size_t i = 0; i < other.size(); ++i) other[i] = static_cast<float>(values[i] * 0.5 + 1);
  const auto a = make_array(dir.file("a.npy"), values, ooc::DType(ooc::Kind::floating, 8, ooc::ByteOrder::big));
  const auto b = make_array(dir.file("b.npy"), other);
  std::vector<double> products(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) products[i] = values[i] * static_cast<double>(other[i]);
  const auto expected = make_array(dir.file("p.npy"), products);
  const double reference = ooc::reduce(expected, ooc::kernels::Sum{}).as_double();
  for (int threads : {1, 2, 7})
    CHECK(bits(ooc::reduce(ooc::inputs(a, b), Dot{}, with(threads, 8192))) == bits(reference));
  // Read with O_DIRECT, each input through its own buffers (tmpfs falls back to mapping).
  ooc::PipelineOptions direct = with(2, 64 * 1024);
  direct.io = ooc::Io::direct;
  CHECK(bits(ooc::reduce(ooc::inputs(a, b), Dot{}, direct)) == bits(reference));
}

TEST_CASE("a transform over two inputs computes in C and writes in out's dtype") {
  ScratchDir dir;
  std::vector<std::int16_t> x(20000);
  std::iota(x.begin(), x.end(), std::int16_t{-10000});
  std::vector<float> y(x.size(), 0.25f);
  const auto a = make_array(dir.file("x.npy"), x, ooc::DType(ooc::Kind::signed_int, 2, ooc::ByteOrder::big));
  const auto b = make_array(dir.file("y.npy"), y);
  ooc::MappedArray out = ooc::create_npy(dir.file("out.npy"), ooc::dtype_of<float>, a.shape());
  ooc::transform_as<double>(ooc::inputs(a, b), out, [](const auto& p, const auto& q) { return p * q + 1; },
                            with(3, 4096));
  for (std::size_t i = 0; i < x.size(); i += 777) CHECK(out.values<float>()(static_cast<Eigen::Index>(i)) == x[i] * 0.25f + 1);
  ooc::MappedArray sum = ooc::create_npy(dir.file("sum.npy"), ooc::dtype_of<std::int32_t>, a.shape());
  ooc::transform(ooc::inputs(a, a, a), sum, [](const auto& p, const auto& q, const auto& r) { return p + q + r; });
  CHECK(sum.values<std::int32_t>()(0) == -30000);  // computed in int32, the output's type
}

TEST_CASE("inputs of different shapes or orders are refused") {
  ScratchDir dir;
  const auto a = make_array<double>(dir.file("a.npy"), {1, 2, 3});
  const auto b = make_array<double>(dir.file("b.npy"), {1, 2});
  CHECK_THROWS_WITH_AS(ooc::reduce(ooc::inputs(a, b), Dot{}), doctest::Contains("do not broadcast"), ooc::UsageError);
  ooc::MappedArray out = ooc::create_npy(dir.file("o.npy"), ooc::dtype_of<double>, a.shape());
  // b is the one that differs, not the output
  CHECK_THROWS_WITH_AS(ooc::transform(ooc::inputs(a, b), out, [](const auto& p, const auto& q) { return p + q; }),
                       doctest::Contains((dir.file("b.npy") + ": shape (2,) differs from").c_str()), ooc::UsageError);
}

// ooc::inputs of a temporary would point at an array gone at the end of the statement.
template <class... Arrays>
concept InputsCompile = requires(Arrays&&... arrays) { ooc::inputs(std::forward<Arrays>(arrays)...); };
static_assert(InputsCompile<ooc::MappedArray&, const ooc::MappedArray&>);
static_assert(!InputsCompile<ooc::MappedArray>);
static_assert(!InputsCompile<ooc::MappedArray&, ooc::MappedArray>);

TEST_CASE("var and std do not depend on the tile size or the thread count") {
  ScratchDir dir;
  const auto a = make_array(dir.file("v.npy"), normal_values(200001, 9));
  const double reference = ooc::reduce(a, ooc::kernels::Var{}, with(1, 8192 * 8)).as_double();
  for (int threads : {1, 2, 7})
    for (std::uint64_t tile : {std::uint64_t{1}, std::uint64_t{1 << 20}, std::uint64_t{64 << 20}})
      CHECK(bits(ooc::reduce(a, ooc::kernels::Var{}, with(threads, tile)).as_double()) == bits(reference));
}

// ---- several kernels together (ooc::together, ooc::reduce_together) -------------------

namespace {

// Every dtype's sample of `n` values: floats of mixed magnitude with a NaN-free run,
// integers across their range.
std::vector<std::string> together_arrays(const ScratchDir& dir, std::size_t n) {
  const auto values = normal_values(n, 21);
  std::vector<std::int64_t> ints(values.size());
  std::transform(values.begin(), values.end(), ints.begin(), [](double v) { return static_cast<std::int64_t>(v * 1e13); });
  std::vector<std::string> paths;
  auto add = [&](const std::string& name, auto data, ooc::DType dtype) {
    make_array(dir.file(name), data, dtype);
    paths.push_back(dir.file(name));
  };
  add("f8.npy", values, ooc::dtype_of<double>);
  add("f8be.npy", values, ooc::DType(ooc::Kind::floating, 8, ooc::ByteOrder::big));
  add("f4.npy", values, ooc::dtype_of<float>);
  add("f2.npy", std::vector<double>(values.begin(), values.end()), ooc::DType(ooc::Kind::floating, 2));
  add("i4.npy", ints, ooc::DType(ooc::Kind::signed_int, 4));
  add("u8be.npy", ints, ooc::DType(ooc::Kind::unsigned_int, 8, ooc::ByteOrder::big));
  add("b1.npy", ints, ooc::DType(ooc::Kind::boolean, 1));
  return paths;
}

}  // namespace

TEST_CASE("kernels reduced together give each one's own bits, for every dtype, tile size and thread count") {
  using namespace ooc::kernels;
  ScratchDir dir;
  for (const std::string& path : together_arrays(dir, 300007)) {
    const ooc::MappedArray a = ooc::map_file(path);
    for (const auto& options : {with(1, 64 << 10), with(2, 1 << 20), with(3, 1)}) {
      CAPTURE(path);
      CAPTURE(options.tile_bytes);
      const auto [sum, mean, std1, low, high, where, norm] =
          ooc::reduce(a, Sum{}, Mean{}, Var{.ddof = 1, .std = true}, Min{}, Max{}, ArgMax(a.shape(), a.order()),
                      Norm{}, options);
      CHECK(same_scalar(sum, ooc::reduce(a, Sum{}, options)));
      CHECK(same_scalar(mean, ooc::reduce(a, Mean{}, options)));
      CHECK(same_scalar(std1, ooc::reduce(a, Var{.ddof = 1, .std = true}, options)));
      CHECK(same_scalar(low, ooc::reduce(a, Min{}, options)));
      CHECK(same_scalar(high, ooc::reduce(a, Max{}, options)));
      CHECK(same_scalar(where, ooc::reduce(a, ArgMax(a.shape(), a.order()), options)));
      CHECK(same_scalar(norm, ooc::reduce(a, Norm{}, options)));
    }
  }
}

TEST_CASE("with a float product among them, kernels together run in order and keep each one's bits") {
  using namespace ooc::kernels;
  ScratchDir dir;
  std::vector<double> values = normal_values(100003, 4);
  for (double& v : values) v = 1 + v * 1e-6;  // a product that stays finite
  values[500] = -0.0;
  const auto a = make_array(dir.file("p.npy"), values);
  const auto options = with(2, 64 << 10);
  const auto [product, sum, low, nansum] = ooc::reduce(a, Prod{}, Sum{}, Min{}, NanSum{}, options);
  CHECK(same_scalar(product, ooc::reduce(a, Prod{}, options)));
  CHECK(same_scalar(sum, ooc::reduce(a, Sum{}, options)));
  CHECK(same_scalar(low, ooc::reduce(a, Min{}, options)));
  CHECK(same_scalar(nansum, ooc::reduce(a, NanSum{}, options)));
}

TEST_CASE("together, the first kernel that fails is the error") {
  using namespace ooc::kernels;
  ScratchDir dir;
  const auto empty = make_array<double>(dir.file("e.npy"), {});
  const auto [sum, mean] = ooc::reduce(empty, Sum{}, Mean{});
  CHECK(sum.as_double() == 0);
  CHECK(std::isnan(mean.as_double()));
  CHECK_THROWS_WITH_AS(ooc::reduce(empty, Sum{}, ArgMin{}, Min{}), doctest::Contains("argmin of an empty sequence"),
                       ooc::Error);
}

TEST_CASE("kernels together hand their states on as bytes, as ooc::mpi::reduce does") {
  using namespace ooc::kernels;
  ScratchDir dir;
  make_array(dir.file("t.npy"), normal_values(200003, 8));
  const ooc::MappedArray a = ooc::map_file(dir.file("t.npy"));
  const auto kernels = ooc::together(Sum{}, Max{}, Var{.std = true});
  const auto whole = ooc::reduce(a, kernels, with(2, 64 << 10));
  for (int parts : {1, 3, 7}) {
    const auto handed = reduce_in_parts(dir.file("t.npy"), kernels, parts, 64 << 10);
    CHECK(same_scalar(std::get<0>(handed), std::get<0>(whole)));
    CHECK(same_scalar(std::get<1>(handed), std::get<1>(whole)));
    CHECK(same_scalar(std::get<2>(handed), std::get<2>(whole)));
  }
}

TEST_CASE("reductions named at run time together: each one's own value, one read, two for a histogram's range") {
  using ooc::kernels::ReduceOp;
  ScratchDir dir;
  const std::vector<std::string> names{"sum", "prod", "mean", "min", "max", "argmin", "argmax", "var", "std",
                                       "count_nonzero", "any", "all", "nansum", "nanmean", "nanmin", "nanmax", "norm"};
  for (const std::string& path : together_arrays(dir, 100003)) {
    const ooc::MappedArray a = ooc::map_file(path);
    const auto options = with(2, 64 << 10);
    ooc::kernels::ReduceParams params;
    params.ddof = 1;
    params.bins = 7;
    std::vector<ReduceOp> ops;
    for (const auto& name : names) ops.push_back(ReduceOp::parse(name, params));
    ops.push_back(ReduceOp::parse("histogram", params));
    CAPTURE(path);
    const ooc::Reductions together = ooc::reduce_together(a, ops, options);
    CHECK(together.passes == 2);  // the histogram's range, then its counts
    for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
      CAPTURE(ops[i].name());
      CHECK(same_scalar(std::get<ooc::Scalar>(together.values[i]), ops[i].run(a, options)));
    }
    const auto& histogram = std::get<ooc::kernels::HistogramResult>(together.values.back());
    const ooc::kernels::HistogramResult alone = ops.back().histogram(a, options);
    CHECK(histogram.counts == alone.counts);
    CHECK(histogram.edges == alone.edges);
    CHECK(histogram.edge_dtype == alone.edge_dtype);
    // With a range, or without the histogram, everything is one read.
    ooc::kernels::ReduceParams ranged_params;
    ranged_params.range = {ooc::kernels::PyScalar::of_int(-3), ooc::kernels::PyScalar::of_int(3)};
    const std::vector<ReduceOp> ranged{ReduceOp::parse("mean"), ReduceOp::parse("histogram", ranged_params)};
    CHECK(ooc::reduce_together(a, ranged, options).passes == 1);
    CHECK(ooc::reduce_together(a, std::span(ops).first(names.size()), options).passes == 1);
  }
}

TEST_CASE("a histogram without a range reads the array twice: its min and max together, then the counts") {
  ScratchDir dir;
  const auto a = make_array(dir.file("h.npy"), normal_values(50000, 5));
  int runs = 0;
  ooc::PipelineOptions options = with(2, 64 << 10);
  options.on_progress = [&](const ooc::Progress& p) { runs += p.tiles_done == p.tiles; };
  ooc::kernels::ReduceOp::parse("histogram").histogram(a, options);
  CHECK(runs == 2);
}

TEST_CASE("reductions together: errors in the order named, and nothing read for an empty array") {
  using ooc::kernels::ReduceOp;
  ScratchDir dir;
  const auto empty = make_array<double>(dir.file("e.npy"), {});
  const std::vector<ReduceOp> fine{ReduceOp::parse("sum"), ReduceOp::parse("mean"), ReduceOp::parse("histogram")};
  const ooc::Reductions r = ooc::reduce_together(empty, fine);
  CHECK(r.passes == 0);
  CHECK(std::isnan(std::get<ooc::Scalar>(r.values[1]).as_double()));
  CHECK(std::get<ooc::kernels::HistogramResult>(r.values[2]).edges.front() == 0.0);
  const std::vector<ReduceOp> failing{ReduceOp::parse("sum"), ReduceOp::parse("argmax"), ReduceOp::parse("min")};
  CHECK_THROWS_WITH_AS(ooc::reduce_together(empty, failing), doctest::Contains("argmax of an empty sequence"),
                       ooc::Error);
  // The data's range is NaN: the histogram's error, not the max after it.
  const auto nan = make_array<double>(dir.file("n.npy"), {1.0, NAN, 2.0});
  const std::vector<ReduceOp> nan_range{ReduceOp::parse("sum"), ReduceOp::parse("histogram"), ReduceOp::parse("max")};
  CHECK_THROWS_WITH_AS(ooc::reduce_together(nan, nan_range), doctest::Contains("autodetected range of [nan, nan]"),
                       ooc::Error);
  CHECK_THROWS_WITH_AS(ooc::reduce_together(nan, std::vector<ReduceOp>{}), doctest::Contains("no reduction"),
                       ooc::UsageError);
}

TEST_CASE("a block's moments are the pairwise sums of its stored deviations and of their squares") {
  // Moments::of_block sums the deviations and their squares in one traversal; these are the
  // sums of arrays of them, taken as numpy's pairwise_sum takes them.
  std::mt19937_64 rng(17);
  std::normal_distribution<double> normal;
  for (std::int64_t n : {1, 7, 8, 9, 127, 128, 129, 1000, 8191, 8192}) {
    for (double offset : {0.0, 1e8, -3e12}) {
      std::vector<double> x(static_cast<std::size_t>(n)), deviations(x.size()), squares(x.size());
      for (double& v : x) v = offset + normal(rng);
      double sum = ooc::kernels::pairwise_sum<double>(x.data(), n);
      const double mean = sum / static_cast<double>(n);
      for (std::size_t i = 0; i < x.size(); ++i) {
        deviations[i] = x[i] - mean;
        squares[i] = deviations[i] * deviations[i];
      }
      const double deviation_sum = ooc::kernels::pairwise_sum<double>(deviations.data(), n);
      double m2 = ooc::kernels::pairwise_sum<double>(squares.data(), n);
      const double count = static_cast<double>(n);
      m2 -= deviation_sum * (deviation_sum / count);
      const auto block = ooc::kernels::Moments::of_block(ooc::ConstArrayMap<double>(x.data(), n));
      CAPTURE(n);
      CAPTURE(offset);
      CHECK(bits(block.mean) == bits(mean));
      CHECK(bits(block.mean_low) == bits(deviation_sum / count));
      CHECK(bits(block.m2) == bits(m2));
    }
  }
}
