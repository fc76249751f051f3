// Inline SVG charts for `kiln report`.
#include "compiler/report/report_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "support/byte_size.h"

namespace kiln::report {
namespace {

// The plot area inside a chart of kWidth x kHeight.
constexpr double kWidth = 560, kHeight = 320;
constexpr double kLeft = 72, kRight = 20, kTop = 34, kBottom = 48;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

struct Range {
  double lo = 0, hi = 1;
};

// The data's range, padded by 5 %; a single value gets a range around it.
Range paddedRange(double lo, double hi) {
  if (!(lo <= hi))
    return {0, 1};
  if (hi == lo) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    return {lo - pad, hi + pad};
  }
  const double pad = (hi - lo) * 0.05;
  return {lo - pad, hi + pad};
}

// About `count` round values (1, 2 or 5 times a power of ten) inside `r`.
std::vector<double> niceTicks(Range r, int count) {
  const double raw = (r.hi - r.lo) / count;
  if (!(raw > 0) || !std::isfinite(raw))
    return {r.lo};
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
  std::vector<double> ticks;
  for (double v = std::ceil(r.lo / step) * step; v <= r.hi + step * 1e-9; v += step)
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return ticks;
}

// A scale from data to pixels, linear or log2.
struct Scale {
  Range range;
  double from = 0, to = 1; // pixels
  bool log2 = false;
  double operator()(double v) const {
    const double lo = log2 ? std::log2(range.lo) : range.lo;
    const double hi = log2 ? std::log2(range.hi) : range.hi;
    const double x = log2 ? std::log2(v) : v;
    return from + (x - lo) / (hi - lo) * (to - from);
  }
};

std::string text(double x, double y, const std::string &content, const std::string &attrs = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + (attrs.empty() ? "" : " " + attrs) +
         ">" + escapeHtml(content) + "</text>";
}

std::string line(double x1, double y1, double x2, double y2, const std::string &attrs) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
         num(y2) + "\" " + attrs + "/>";
}

std::string open(const std::string &kind, const std::string &title) {
  return "<svg class=\"chart " + kind + "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         num(kWidth) + "\" height=\"" + num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " +
         num(kHeight) + "\" role=\"img\" aria-label=\"" + escapeHtml(title) + "\">" +
         "<rect class=\"frame\" x=\"0\" y=\"0\" width=\"" + num(kWidth) + "\" height=\"" +
         num(kHeight) + "\"/>" + text(kLeft, 20, title, "class=\"title\"");
}

// The axes with their ticks and labels; `ys` may be log2.
std::string axes(const Scale &xs, const std::vector<std::string> &x_ticks_text,
                 const std::vector<double> &x_ticks, const Scale &ys,
                 const std::vector<double> &y_ticks, const std::vector<std::string> &y_ticks_text,
                 const std::string &x_label, const std::string &y_label) {
  std::string s = "<g class=\"axes\">";
  for (size_t i = 0; i < y_ticks.size(); ++i) {
    const double y = ys(y_ticks[i]);
    s += line(kLeft, y, kLeft + kPlotW, y, "class=\"grid\"");
    s += text(kLeft - 6, y + 4, y_ticks_text[i], "text-anchor=\"end\"");
  }
  for (size_t i = 0; i < x_ticks.size(); ++i) {
    const double x = xs(x_ticks[i]);
    s += line(x, kTop + kPlotH, x, kTop + kPlotH + 5, "class=\"tick\"");
    s += text(x, kTop + kPlotH + 18, x_ticks_text[i], "text-anchor=\"middle\"");
  }
  s += line(kLeft, kTop, kLeft, kTop + kPlotH, "class=\"axis\"");
  s += line(kLeft, kTop + kPlotH, kLeft + kPlotW, kTop + kPlotH, "class=\"axis\"");
  s += text(kLeft + kPlotW / 2, kHeight - 8, x_label, "text-anchor=\"middle\" class=\"label\"");
  s += text(14, kTop + kPlotH / 2, y_label,
            "text-anchor=\"middle\" class=\"label\" transform=\"rotate(-90 14 " +
                num(kTop + kPlotH / 2) + ")\"");
  return s + "</g>";
}

std::vector<std::string> formatted(const std::vector<double> &values, AxisFormat format) {
  std::vector<std::string> out;
  for (double v : values)
    out.push_back(formatValue(v, format));
  return out;
}

std::string empty(const std::string &kind, const std::string &title, const std::string &why) {
  return open(kind, title) + text(kWidth / 2, kHeight / 2, why, "text-anchor=\"middle\"") +
         "</svg>";
}

} // namespace

std::string escapeHtml(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n')
        out += c;
    }
  }
  return out;
}

std::string formatValue(double v, AxisFormat format) {
  if (!std::isfinite(v))
    return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
  if (format == AxisFormat::Bytes)
    return formatBytes(static_cast<int64_t>(std::llround(v)));
  char buf[32];
  const double a = std::abs(v);
  if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3gG", v / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  else if (a >= 1e4)
    std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string svgLineChart(const LineChart &chart) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const Series &s : chart.series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (chart.log_y && y <= 0))
        continue;
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  if (!(x_lo <= x_hi))
    return empty("line", chart.title, "no values to draw");
  for (double m : chart.marks)
    x_lo = std::min(x_lo, m), x_hi = std::max(x_hi, m);

  Scale xs{x_lo == x_hi ? Range{x_lo - 1, x_hi + 1} : Range{x_lo, x_hi}, kLeft, kLeft + kPlotW};
  Scale ys{paddedRange(y_lo, y_hi), kTop + kPlotH, kTop};
  std::vector<double> y_ticks;
  std::vector<std::string> y_text;
  if (chart.log_y) {
    // Powers of two, at most about six of them.
    int lo = static_cast<int>(std::floor(std::log2(y_lo))) - (y_lo == y_hi ? 1 : 0);
    int hi = static_cast<int>(std::ceil(std::log2(y_hi))) + (y_lo == y_hi ? 1 : 0);
    if (lo == hi)
      ++hi;
    ys = Scale{{std::exp2(lo), std::exp2(hi)}, kTop + kPlotH, kTop, true};
    const int stride = std::max(1, (hi - lo + 5) / 6);
    for (int e = lo; e <= hi; e += stride) {
      y_ticks.push_back(std::exp2(e));
      y_text.push_back("2^" + std::to_string(e));
    }
  } else {
    y_ticks = niceTicks(ys.range, 5);
    y_text = formatted(y_ticks, AxisFormat::Number);
  }
  std::vector<double> x_ticks = niceTicks(xs.range, 6);
  // Steps are whole numbers: no tick between two of them.
  std::erase_if(x_ticks, [](double v) { return v != std::floor(v); });

  std::string s = open("line", chart.title);
  s += axes(xs, formatted(x_ticks, AxisFormat::Number), x_ticks, ys, y_ticks, y_text, chart.x_label,
            chart.y_label);
  for (double m : chart.marks)
    s += "<g class=\"mark\"><title>" + escapeHtml(chart.mark_label + " " + formatValue(m)) +
         "</title>" + line(xs(m), kTop, xs(m), kTop + kPlotH, "class=\"mark\"") + "</g>";
  double legend_x = kLeft + kPlotW;
  for (const Series &series : chart.series) {
    std::string points;
    for (auto [x, y] : series.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (chart.log_y && y <= 0))
        continue;
      points += num(xs(x)) + "," + num(ys(y)) + " ";
    }
    s += "<polyline class=\"series\" fill=\"none\" stroke=\"" + escapeHtml(series.color) +
         "\" stroke-width=\"2\" points=\"" + points + "\"><title>" + escapeHtml(series.name) +
         "</title></polyline>";
    if (series.points.size() == 1) // a one-step log still shows its point
      s += "<circle cx=\"" + num(xs(series.points[0].first)) + "\" cy=\"" +
           num(ys(series.points[0].second)) + "\" r=\"3\" fill=\"" + escapeHtml(series.color) +
           "\"/>";
    if (chart.series.size() > 1) {
      s += text(legend_x, 20, series.name,
                "text-anchor=\"end\" fill=\"" + escapeHtml(series.color) + "\"");
      legend_x -= 8 + 7 * static_cast<double>(series.name.size());
    }
  }
  return s + "</svg>";
}

std::string svgScatterChart(const ScatterChart &chart) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const ScatterPoint &p : chart.points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y))
      continue;
    x_lo = std::min(x_lo, p.x), x_hi = std::max(x_hi, p.x);
    y_lo = std::min(y_lo, p.y), y_hi = std::max(y_hi, p.y);
  }
  if (!(x_lo <= x_hi))
    return empty("scatter", chart.title, "no values to draw");
  // The limit line is drawn when it is near the points; far off, a plot
  // that reaches it would squeeze them into one corner.
  const bool show_limit = chart.x_limit && *chart.x_limit <= 3 * x_hi && *chart.x_limit >= 0;
  if (show_limit)
    x_lo = std::min(x_lo, *chart.x_limit), x_hi = std::max(x_hi, *chart.x_limit);
  Scale xs{paddedRange(x_lo, x_hi), kLeft, kLeft + kPlotW};
  Scale ys{paddedRange(y_lo, y_hi), kTop + kPlotH, kTop};
  const std::vector<double> x_ticks = niceTicks(xs.range, 5), y_ticks = niceTicks(ys.range, 5);

  std::string s = open("scatter", chart.title);
  s += axes(xs, formatted(x_ticks, chart.x_format), x_ticks, ys, y_ticks,
            formatted(y_ticks, AxisFormat::Number), chart.x_label, chart.y_label);
  if (show_limit) {
    const double x = xs(*chart.x_limit);
    s += line(x, kTop, x, kTop + kPlotH, "class=\"limit\"");
    // Above the plot, where no point can hide it.
    s += text(std::min(x, kLeft + kPlotW - 60), kTop - 2, chart.x_limit_label,
              "text-anchor=\"middle\" class=\"limit\"");
  }
  // The highlighted point last, on top of the others.
  std::vector<const ScatterPoint *> order;
  for (const ScatterPoint &p : chart.points)
    if (std::isfinite(p.x) && std::isfinite(p.y))
      order.push_back(&p);
  std::stable_partition(order.begin(), order.end(),
                        [](const ScatterPoint *p) { return p->kind != ScatterPoint::Highlighted; });
  for (const ScatterPoint *p : order) {
    const std::string cx = num(xs(p->x)), cy = num(ys(p->y));
    const std::string tip = "<title>" + escapeHtml(p->tooltip) + "</title>";
    switch (p->kind) {
    case ScatterPoint::Fits:
      s +=
          "<circle class=\"fits\" cx=\"" + cx + "\" cy=\"" + cy + "\" r=\"5\">" + tip + "</circle>";
      break;
    case ScatterPoint::DoesNotFit:
      s += "<circle class=\"nofit\" cx=\"" + cx + "\" cy=\"" + cy + "\" r=\"5\">" + tip +
           "</circle>";
      break;
    case ScatterPoint::Highlighted:
      s += "<circle class=\"best\" cx=\"" + cx + "\" cy=\"" + cy + "\" r=\"9\">" + tip +
           "</circle>" + text(xs(p->x) + 12, ys(p->y) + 4, "recommended", "class=\"best\"");
      break;
    }
  }
  return s + "</svg>";
}

std::string svgBarChart(const BarChart &chart) {
  if (chart.bars.empty())
    return empty("bars", chart.title, "no values to draw");
  // Horizontal bars: long kernel names need the width; the chart grows with
  // the bars.
  constexpr double kRow = 22, kLabelW = 300, kWide = 1100;
  const double height = kTop + kRow * static_cast<double>(chart.bars.size()) + 30;
  double top = 0;
  for (const Bar &b : chart.bars)
    top = std::max(top, b.value);
  if (!(top > 0))
    top = 1;
  const double bar_w = kWide - kLabelW - 110;
  std::string s = "<svg class=\"chart bars\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  num(kWide) + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(kWide) +
                  " " + num(height) + "\" role=\"img\" aria-label=\"" + escapeHtml(chart.title) +
                  "\"><rect class=\"frame\" x=\"0\" y=\"0\" width=\"" + num(kWide) +
                  "\" height=\"" + num(height) + "\"/>" +
                  text(12, 20, chart.title, "class=\"title\"");
  for (size_t i = 0; i < chart.bars.size(); ++i) {
    const Bar &b = chart.bars[i];
    const double y = kTop + kRow * static_cast<double>(i);
    const double w = std::max(1.0, bar_w * std::max(0.0, b.value) / top);
    // Long names keep their end, where a scoped name says what the kernel is.
    std::string label = b.label;
    if (label.size() > 44)
      label = "..." + label.substr(label.size() - 41);
    s += "<g class=\"bar\"><title>" + escapeHtml(b.tooltip.empty() ? b.label : b.tooltip) +
         "</title>" + text(kLabelW - 8, y + 15, label, "text-anchor=\"end\"") + "<rect x=\"" +
         num(kLabelW) + "\" y=\"" + num(y + 3) + "\" width=\"" + num(w) + "\" height=\"" +
         num(kRow - 6) + "\"/>" +
         text(kLabelW + w + 6, y + 15, formatValue(b.value) + " " + chart.value_label) + "</g>";
  }
  return s + "</svg>";
}

} // namespace kiln::report
