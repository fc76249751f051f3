// Charts as inline SVG text for `kiln report`: line charts (linear or log2
// axis, marked steps), a scatter with a limit line, horizontal bars. Every
// string that reaches the page goes through escapeHtml; the charts use no
// script and no external resource.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::report {

// Text safe inside an HTML element or a quoted attribute: & < > " ' escaped,
// control characters other than tab and newline dropped.
std::string escapeHtml(std::string_view text);

// How an axis writes its values: numbers ("0.25", "33.5k") or sizes ("1.2 MiB").
enum class AxisFormat { Number, Bytes };
// A value as an axis or a table writes it.
std::string formatValue(double value, AxisFormat format = AxisFormat::Number);

struct Series {
  std::string name;
  std::string color;                             // a CSS colour
  std::vector<std::pair<double, double>> points; // (x, y), x ascending
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_y = false; // a log2 axis (loss scales are powers of 2); y <= 0 is left out
  std::vector<Series> series;
  std::vector<double> marks; // x positions drawn as red vertical lines (overflow steps)
  std::string mark_label;    // what a mark means, in its tooltip ("overflow at step")
};
std::string svgLineChart(const LineChart &chart);

struct ScatterPoint {
  double x = 0, y = 0;
  std::string tooltip;
  enum Kind { Fits, DoesNotFit, Highlighted } kind = Fits;
};

struct ScatterChart {
  std::string title, x_label, y_label;
  AxisFormat x_format = AxisFormat::Number;
  std::vector<ScatterPoint> points;
  std::optional<double> x_limit; // a vertical line (the device memory)
  std::string x_limit_label;
};
std::string svgScatterChart(const ScatterChart &chart);

struct Bar {
  std::string label;
  double value = 0;
  std::string tooltip;
};

struct BarChart {
  std::string title, value_label;
  std::vector<Bar> bars; // drawn top to bottom in this order
};
std::string svgBarChart(const BarChart &chart);

} // namespace kiln::report
