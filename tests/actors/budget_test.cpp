#include <catch2/catch.hpp>

#include "actors/budget.hpp"

using kiln::query_budget;

TEST_CASE("the query budget grants up to the limit per task, then refuses") {
  query_budget b{3};
  for (int i = 1; i <= 3; ++i) {
    auto g = b.take("a");
    CHECK(g.granted);
    CHECK(g.used == i);
    CHECK(g.limit == 3);
  }
  auto refused = b.take("a");
  CHECK_FALSE(refused.granted);
  CHECK(refused.used == 3);
  CHECK(b.take("b").granted); // tasks have budgets of their own
  CHECK(b.used("a") == 3);
  CHECK(b.used("b") == 1);
  CHECK(b.used("never") == 0);
  CHECK(b.total() == 4);
}

TEST_CASE("a zero budget refuses the first query") {
  query_budget b{0};
  CHECK_FALSE(b.take("a").granted);
  CHECK(b.total() == 0);
}
