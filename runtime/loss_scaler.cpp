#include "runtime/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

namespace kiln::runtime {

std::string LossScaleSpec::toString() const {
  std::ostringstream os;
  switch (kind) {
  case Kind::None:
    return "none";
  case Kind::Fixed:
    os << "fixed:" << init;
    return os.str();
  case Kind::Dynamic:
    os << "dynamic:" << init << "," << factor << "," << window;
    return os.str();
  }
  return "?";
}

Expected<LossScaleSpec> parseLossScale(const std::string &text) {
  auto bad = [&](const std::string &why) {
    return Error("--loss-scale '" + text + "': " + why +
                 " (expected dynamic, dynamic:INIT,FACTOR,WINDOW, mindformers, fixed:S or none)");
  };
  auto number = [](const std::string &s, double &out) {
    try {
      size_t used = 0;
      out = std::stod(s, &used);
      return used == s.size();
    } catch (...) {
      return false;
    }
  };
  LossScaleSpec spec;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string args = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "none" && colon == std::string::npos) {
    spec.kind = LossScaleSpec::Kind::None;
    spec.init = 1;
    return spec;
  }
  if (kind == "mindformers" && colon == std::string::npos) {
    spec.init = 65536;
    spec.window = 1000;
    return spec;
  }
  if (kind == "fixed") {
    spec.kind = LossScaleSpec::Kind::Fixed;
    if (!number(args, spec.init) || !std::isfinite(spec.init) || spec.init <= 0 ||
        spec.init > kMaxLossScale)
      return bad("fixed needs a finite scale above 0 and at most 2^64");
    return spec;
  }
  if (kind != "dynamic")
    return bad("unknown kind '" + kind + "'");
  if (colon == std::string::npos)
    return spec;
  std::vector<std::string> parts;
  std::stringstream ss(args);
  for (std::string p; std::getline(ss, p, ',');)
    parts.push_back(p);
  double window = 0;
  if (parts.size() != 3 || !number(parts[0], spec.init) || !number(parts[1], spec.factor) ||
      !number(parts[2], window))
    return bad("dynamic takes three numbers");
  // Written so that NaN fails every test.
  if (!(spec.init >= 1 && spec.init <= kMaxLossScale) || !(spec.factor > 1 && spec.factor <= 1e6) ||
      !(window >= 1 && window <= 1e15) ||
      window != static_cast<double>(static_cast<int64_t>(window)))
    return bad("need 1 <= INIT <= 2^64, 1 < FACTOR <= 1e6 and a whole WINDOW >= 1");
  spec.window = static_cast<int64_t>(window);
  return spec;
}

LossScaler::LossScaler(const LossScaleSpec &spec) : spec_(spec), scale_(spec.init) {}

Status LossScaler::update(bool overflow) {
  if (!overflow) {
    overflows_in_a_row_ = 0;
    if (spec_.kind == LossScaleSpec::Kind::Dynamic && ++good_steps_ >= spec_.window) {
      scale_ = std::min(scale_ * spec_.factor, kMaxLossScale);
      good_steps_ = 0;
    }
    return Status::ok();
  }
  good_steps_ = 0;
  if (++overflows_in_a_row_ > kMaxConsecutiveOverflows)
    return Error("the gradients overflowed in " + std::to_string(overflows_in_a_row_) +
                 " steps in a row (loss scale " + std::to_string(scale_) +
                 "): the model diverged; kiln debug overflow finds the first op that overflows");
  if (spec_.kind == LossScaleSpec::Kind::Dynamic)
    scale_ = std::max(scale_ / spec_.factor, 1.0);
  return Status::ok();
}

void LossScaler::restore(double scale, int64_t good_steps, int64_t overflows_in_a_row) {
  scale_ = scale;
  good_steps_ = good_steps;
  overflows_in_a_row_ = overflows_in_a_row;
}

} // namespace kiln::runtime
