#include "ir/tensor_compare.h"

#include <cmath>
#include <sstream>

namespace kiln {

std::string firstMismatch(const Tensor &got, const Tensor &want, double rtol, double atol) {
  if (!(got.type() == want.type()))
    return "type " + typeToString(got.type()) + ", expected " + typeToString(want.type());
  for (int64_t i = 0; i < want.numElements(); ++i) {
    if (!isFloat(want.dtype())) {
      if (got.getInt(i) != want.getInt(i))
        return "element " + std::to_string(i) + " is " + std::to_string(got.getInt(i)) +
               ", expected " + std::to_string(want.getInt(i));
      continue;
    }
    const double g = got.getFloat(i), w = want.getFloat(i);
    if (std::isnan(w) && std::isnan(g))
      continue;
    if (std::isinf(w) && g == w)
      continue;
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      std::ostringstream os;
      os.precision(9);
      os << "element " << i << " is " << g << ", expected " << w << " (|diff| " << std::fabs(g - w)
         << ", allowed " << atol + rtol * std::fabs(w) << ")";
      return os.str();
    }
  }
  return {};
}

} // namespace kiln
