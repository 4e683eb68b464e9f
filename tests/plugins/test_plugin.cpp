// Plug-ins for tests/unit/plugin_test.cpp, built three ways (cmake/kforge_install.cmake):
//   KFORGE_TEST_PLUGIN_GOOD       registers strategy "test_plugin_first" (always proposes the first unseen
//                                 valid configuration) and transform "test_plugin_noop"
//   KFORGE_TEST_PLUGIN_WRONG_ABI  the same code as if built against headers of another kforge ABI
//   KFORGE_TEST_PLUGIN_THROWS     registers a name that is taken ("random"), so registration throws
#include "kforge/plugin.hpp"

#ifdef KFORGE_TEST_PLUGIN_WRONG_ABI
#undef KFORGE_PLUGIN_ABI_VERSION
#define KFORGE_PLUGIN_ABI_VERSION 9999
#endif

namespace {
struct first_unseen {
  std::vector<kf::config> propose(const kf::search_state& s, std::size_t n) {
    std::vector<kf::config> out;
    const auto& valid = s.space().valid();
    for (std::size_t i = 0; i < valid.size() && out.size() < n; ++i) {
      auto c = valid.at(i);
      if (!s.seen(c)) out.push_back(std::move(c));
    }
    return out;
  }
  void observe(const kf::search_state&, std::span<const kf::trial>) {}
};

struct noop_transform {
  std::vector<kf::transform_param> parameters() const { return {}; }
  kf::transform_result apply(const std::string& src, const kf::transform_values&,
                             const kf::transform_context&) const {
    return {src, {}, {}};
  }
};
}  // namespace

KFORGE_PLUGIN(host) {
#ifdef KFORGE_TEST_PLUGIN_THROWS
  host.strategies().add(
      {"random", "taken", {}, [](const kf::options&) { return kf::strategy(first_unseen{}); }});
#else
  host.strategies().add(
      {"test_plugin_first", "the first unseen valid configuration, in order", {}, [](const kf::options&) {
         return kf::strategy(first_unseen{}, "test_plugin_first");
       }});
  host.transforms().add(
      {"test_plugin_noop",
       "leaves the source as it is",
       {},
       [](const kf::options&, const kf::transform_site&) { return kf::transform(noop_transform{}); }});
#endif
}
