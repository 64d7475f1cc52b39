#include "ooc/shape.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

TEST_CASE("a 0-d shape has one element and an empty dimension makes the array empty") {
  CHECK(ooc::element_count({}) == 1);
  CHECK(ooc::element_count({3, 0, 5}) == 0);
  CHECK(ooc::element_count({2, 3, 4}) == 24);
}

TEST_CASE("negative dimensions and overflowing products have no element count") {
  CHECK_FALSE(ooc::element_count({-1}).has_value());
  CHECK_FALSE(ooc::element_count({std::numeric_limits<std::int64_t>::max(), 2}).has_value());
  CHECK(ooc::element_count({std::numeric_limits<std::int64_t>::max()}) == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("a 0 dimension does not hide an overflow of the others; the itemsize counts") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  CHECK_FALSE(ooc::element_count({0, kMax, kMax}).has_value());
  CHECK_FALSE(ooc::element_count({kMax, 0, 2}).has_value());
  CHECK(ooc::element_count({0, kMax}) == 0);
  CHECK(ooc::byte_count({0, kMax}, 1) == 0);
  CHECK_FALSE(ooc::byte_count({0, kMax}, 2).has_value());
  CHECK_FALSE(ooc::byte_count({std::int64_t{1} << 60, 0}, 8).has_value());
  CHECK(ooc::byte_count({(std::int64_t{1} << 60) - 1, 0}, 8) == 0);
  CHECK(ooc::byte_count({(std::int64_t{1} << 60) - 1}, 8) == kMax - 7);
  CHECK(ooc::byte_count({}, 8) == 8);
  CHECK_FALSE(ooc::byte_count({3, -1, 0}, 8).has_value());
}

TEST_CASE("shapes print as numpy prints the tuple") {
  CHECK(ooc::shape_repr({}) == "()");
  CHECK(ooc::shape_repr({3}) == "(3,)");
  CHECK(ooc::shape_repr({2, 3}) == "(2, 3)");
}

TEST_CASE("element_strides are numpy's strides over the itemsize, in either order") {
  CHECK(ooc::element_strides({3, 4, 5}, ooc::Order::c) == ooc::Shape{20, 5, 1});
  CHECK(ooc::element_strides({3, 4, 5}, ooc::Order::fortran) == ooc::Shape{1, 3, 12});
  CHECK(ooc::element_strides({}, ooc::Order::c).empty());
  CHECK(ooc::element_strides({7}, ooc::Order::fortran) == ooc::Shape{1});
  // np.empty((5, 0, 2)).strides == (16, 16, 8): a 0 extent counts as 1.
  CHECK(ooc::element_strides({5, 0, 2}, ooc::Order::c) == ooc::Shape{2, 2, 1});
}
