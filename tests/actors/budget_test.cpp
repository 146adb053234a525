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

TEST_CASE("dollars: a query reserves its worst case, settles at its cost, caps hold") {
  query_budget b{100, /*usd_total=*/1.0, /*usd_per_task=*/0.5};
  auto g = b.take("a", 0.3);
  REQUIRE(g.granted);
  // In flight: 0.3 reserved; another 0.3 for the same task would pass 0.5.
  auto refused = b.take("a", 0.3);
  CHECK_FALSE(refused.granted);
  CHECK(refused.reason.find("usd_per_task") != std::string::npos);
  b.settle("a", 0.3, 0.1); // it cost less than its worst case
  CHECK(b.spent("a") == Approx(0.1));
  CHECK(b.reserved_total() == Approx(0));
  CHECK(b.take("a", 0.3).granted); // 0.1 spent + 0.3 reserved <= 0.5
  b.settle("a", 0.3, 0.3);
  CHECK(b.take("b", 0.5).granted);
  // The run: 0.4 spent, 0.5 reserved; 0.2 more would pass 1.0.
  auto over = b.take("c", 0.2);
  CHECK_FALSE(over.granted);
  CHECK(over.reason.find("usd_total") != std::string::npos);
  b.settle("b", 0.5, 0); // a failed query costs nothing
  CHECK(b.take("c", 0.2).granted);
  CHECK(b.spent_total() == Approx(0.4));
}

TEST_CASE("dollars: concurrent reservations never sum past the cap") {
  query_budget b{1000, 0.0, 1.0};
  int granted = 0;
  for (int i = 0; i < 50; ++i)
    granted += b.take("a", 0.09).granted ? 1 : 0; // none settled yet: all in flight at once
  CHECK(granted == 11);
  CHECK(b.reserved_total() <= 1.0 + 1e-9);
}

TEST_CASE("dollars: no caps when both are zero") {
  query_budget b{5};
  for (int i = 0; i < 5; ++i)
    CHECK(b.take("a", 100.0).granted);
}

TEST_CASE("dollars: a refusal caused only by queries in flight says wait") {
  query_budget b{10, 0.05, 0};
  REQUIRE(b.take("a", 0.039).granted);
  auto g = b.take("a", 0.039);
  CHECK_FALSE(g.granted);
  CHECK(g.wait); // fits once the first settles
  b.settle("a", 0.039, 0.03);
  auto h = b.take("a", 0.039);
  CHECK_FALSE(h.granted);
  CHECK_FALSE(h.wait); // 0.03 spent + 0.039 > 0.05 whatever settles
}
