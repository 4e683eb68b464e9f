#include "kforge/evaluator.hpp"

#include <algorithm>

#include "kforge/error.hpp"

namespace kf {

std::vector<trial> evaluator::evaluate(std::vector<evaluation_request> requests) {
  std::vector<std::uint64_t> order;
  order.reserve(requests.size());
  for (const auto& r : requests)
    order.push_back(r.sequence);
  submit(std::move(requests));
  std::vector<trial> got;
  while (got.size() < order.size()) {
    auto more = collect(true);
    if (more.empty() && in_flight() == 0) break;
    for (auto& t : more)
      got.push_back(std::move(t));
  }
  if (got.size() != order.size())
    throw error("evaluator returned " + std::to_string(got.size()) + " trials for " +
                std::to_string(order.size()) + " requests");
  std::vector<trial> out;
  out.reserve(got.size());
  for (auto seq : order) {
    auto it = std::find_if(got.begin(), got.end(), [&](const trial& t) { return t.sequence == seq; });
    if (it == got.end()) throw error("evaluator lost the trial of sequence " + std::to_string(seq));
    out.push_back(std::move(*it));
  }
  return out;
}

registry<evaluator, const evaluator_context&>& evaluator_registry() {
  static registry<evaluator, const evaluator_context&> r("evaluator");
  return r;
}

}  // namespace kf
