#include "kforge/transform.hpp"

#include <sstream>

namespace kf {

registry<transform, const transform_site&>& transform_registry() {
  static registry<transform, const transform_site&> r("transform");
  return r;
}

std::vector<annotation> find_annotations(const std::string& source) {
  std::vector<annotation> out;
  std::size_t pos = 0;
  while (pos < source.size()) {
    const std::size_t eol = source.find('\n', pos);
    const std::size_t end = eol == std::string::npos ? source.size() : eol;
    std::size_t p = source.find_first_not_of(" \t", pos);
    if (p != std::string::npos && p < end && source.compare(p, 5, "//@kf") == 0) {
      annotation a;
      a.line_begin = pos;
      a.line_end = eol == std::string::npos ? source.size() : eol + 1;
      std::istringstream words(source.substr(p + 5, end - p - 5));
      std::string w;
      if (words >> w) a.op = w;
      if (words >> w) a.site = w;
      while (words >> w) {
        const auto eq = w.find('=');
        if (eq == std::string::npos) a.args[w] = "";
        else a.args[w.substr(0, eq)] = w.substr(eq + 1);
      }
      out.push_back(std::move(a));
    }
    pos = end + 1;
  }
  return out;
}

}  // namespace kf
