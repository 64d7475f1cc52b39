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

TEST_CASE("shapes print as numpy prints the tuple") {
  CHECK(ooc::shape_repr({}) == "()");
  CHECK(ooc::shape_repr({3}) == "(3,)");
  CHECK(ooc::shape_repr({2, 3}) == "(2, 3)");
}
