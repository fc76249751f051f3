// Non-finite values in tensors: a scan of the bits (an all-ones exponent is
// inf or NaN in every float format), so checking a 28 GB checkpoint costs
// about as much as reading it from the page cache.
#include "ir/finite_values.h"

#include <algorithm>
#include <cmath>

namespace kiln {
namespace {

// The first element whose exponent bits (`exponent`, of a `Bits`-wide
// format) are all ones.
template <typename Bits> std::optional<int64_t> firstWithExponent(const Tensor &t, Bits exponent) {
  const auto *bits = static_cast<const Bits *>(t.data());
  const int64_t n = t.numElements();
  // Blocks without a hit are the common case: test a block at once, branch-free.
  constexpr int64_t kBlock = 256;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    bool any = false;
    for (int64_t k = start; k < end; ++k)
      any |= (bits[k] & exponent) == exponent;
    if (!any)
      continue;
    for (int64_t k = start; k < end; ++k)
      if ((bits[k] & exponent) == exponent)
        return k;
  }
  return std::nullopt;
}

std::string valueText(float v) {
  if (std::isnan(v))
    return "nan";
  return v > 0 ? "inf" : "-inf";
}

} // namespace

std::optional<int64_t> firstNonFiniteElement(const Tensor &t) {
  switch (t.dtype()) {
  case DType::F32:
    return firstWithExponent<uint32_t>(t, 0x7f800000u);
  case DType::F16:
    return firstWithExponent<uint16_t>(t, 0x7c00u);
  case DType::BF16:
    return firstWithExponent<uint16_t>(t, 0x7f80u);
  default:
    return std::nullopt;
  }
}

std::vector<NonFiniteTensor> nonFiniteTensors(const std::map<std::string, Tensor> &tensors) {
  std::vector<NonFiniteTensor> bad;
  for (const auto &[name, t] : tensors)
    if (std::optional<int64_t> k = firstNonFiniteElement(t))
      bad.push_back({name, *k, t.getFloat(*k)});
  return bad;
}

std::string describeNonFinite(const std::vector<NonFiniteTensor> &bad, const std::string &file) {
  if (bad.empty())
    return "";
  const NonFiniteTensor &first = bad.front();
  std::string text = file + ": tensor '" + first.name + "' element " +
                     std::to_string(first.element) + " is " + valueText(first.value);
  if (bad.size() > 1)
    text += " (and " + std::to_string(bad.size() - 1) +
            (bad.size() > 2 ? " more tensors hold" : " more tensor holds") +
            " NaN or inf, the next '" + bad[1].name + "')";
  return text;
}

Status refuseNonFinite(const std::map<std::string, Tensor> &tensors, const std::string &file,
                       const std::string &why) {
  const std::vector<NonFiniteTensor> bad = nonFiniteTensors(tensors);
  if (bad.empty())
    return Status::ok();
  return Error(describeNonFinite(bad, file) + ": " + why);
}

} // namespace kiln
