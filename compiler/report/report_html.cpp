// The HTML page of `kiln report`.
#include "compiler/report/report_html.h"

#include <algorithm>
#include <cstdio>

#include "compiler/report/report_svg.h"
#include "support/byte_size.h"

namespace kiln::report {
namespace {

const char *const kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccc; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { background: #fafafa; }
svg .frame { fill: #fafafa; stroke: #ddd; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
svg text.title { font-size: 13px; font-weight: 600; }
svg text.label { font-size: 12px; }
svg .axis, svg .tick { stroke: #555; }
svg .grid { stroke: #e4e4e4; }
svg line.mark { stroke: #d62728; stroke-width: 1.5; stroke-dasharray: 4 3; }
svg line.limit { stroke: #d62728; stroke-dasharray: 6 4; stroke-width: 1.5; }
svg text.limit { fill: #d62728; }
svg circle.fits { fill: #2ca02c; fill-opacity: 0.75; }
svg circle.nofit { fill: none; stroke: #999; stroke-width: 1.5; }
svg circle.best { fill: #ff7f0e; stroke: #222; stroke-width: 2; }
svg text.best { font-weight: 600; }
svg .bar rect { fill: #1f77b4; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { padding: 2px 10px; border-bottom: 1px solid #eee; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f3f3f3; padding: 1px 4px; word-break: break-all; }
.note { color: #666; }
)";

std::string e(std::string_view text) { return escapeHtml(text); }

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string row(std::initializer_list<std::string> cells) {
  std::string s = "<tr>";
  for (const std::string &c : cells)
    s += c;
  return s + "</tr>";
}
std::string td(const std::string &text) { return "<td>" + e(text) + "</td>"; }
std::string tdn(const std::string &text) { return "<td class=\"n\">" + e(text) + "</td>"; }

Series series(const std::string &name, const std::string &color, const TrainingLog &log,
              std::optional<double> TrainingStep::*field) {
  Series s{name, color, {}};
  for (const TrainingStep &step : log.steps)
    if (step.*field)
      s.points.emplace_back(static_cast<double>(step.step), *(step.*field));
  return s;
}

} // namespace

std::string trainingSection(const TrainingLog &log) {
  std::vector<double> overflows;
  double tokens = 0;
  int64_t timed = 0;
  std::optional<double> best;
  for (const TrainingStep &s : log.steps) {
    if (s.overflow)
      overflows.push_back(static_cast<double>(s.step));
    if (s.tokens_per_s)
      tokens += *s.tokens_per_s, ++timed;
    if (s.loss)
      best = std::min(best.value_or(*s.loss), *s.loss);
  }
  const TrainingStep &last = log.steps.back();

  std::string html = "<section class=\"training\"><h2>Training: " + e(log.source) + "</h2>";
  html += "<table>" +
          row({td("steps"),
               tdn(std::to_string(log.steps.front().step) + " to " + std::to_string(last.step))}) +
          row({td("last loss"), tdn(last.loss ? fixed(*last.loss, 4) : "none (not finite)")}) +
          row({td("lowest loss"), tdn(best ? fixed(*best, 4) : "none")}) +
          row({td("overflow steps (update skipped)"), tdn(std::to_string(overflows.size()))}) +
          row({td("mean tokens/s"), tdn(timed ? formatValue(tokens / timed) : "none")}) +
          "</table>";

  auto chart = [&](std::string title, std::string y_label, std::vector<Series> lines,
                   bool log_y = false) {
    LineChart c{std::move(title), "step",    std::move(y_label), log_y,
                std::move(lines), overflows, "overflow at step"};
    return svgLineChart(c);
  };
  std::vector<Series> loss{series("loss", "#1f77b4", log, &TrainingStep::loss)};
  // Evaluation fields with "loss" in their name share the loss chart; others get their own.
  std::map<std::string, Series> eval;
  const char *const colors[] = {"#ff7f0e", "#9467bd", "#8c564b", "#e377c2"};
  for (const TrainingStep &s : log.steps)
    for (const auto &[key, value] : s.eval) {
      auto [it, added] = eval.try_emplace(key, Series{key, colors[eval.size() % 4], {}});
      it->second.points.emplace_back(static_cast<double>(s.step), value);
    }
  std::vector<Series> other_eval;
  for (auto &[key, s] : eval)
    (key.find("loss") != std::string::npos ? loss : other_eval).push_back(std::move(s));

  html += "<div class=\"charts\">";
  html += chart("Loss", "loss", std::move(loss));
  html += chart("Loss scale", "loss scale (log2)",
                {series("loss scale", "#2ca02c", log, &TrainingStep::loss_scale)}, true);
  html += chart("Gradient norm", "grad norm",
                {series("grad norm", "#9467bd", log, &TrainingStep::grad_norm)});
  html += chart("Throughput", "tokens/s",
                {series("tokens/s", "#8c564b", log, &TrainingStep::tokens_per_s)});
  for (Series &s : other_eval) {
    const std::string name = s.name;
    html += chart(name, name, {std::move(s)});
  }
  html += "</div>";
  if (!overflows.empty())
    html += "<p class=\"note\">Red dashed lines: steps whose gradients overflowed; the update "
            "was skipped and the loss scale lowered (their gradient norm is not drawn).</p>";
  return html + "</section>";
}

std::string planSection(const LayoutPlan &plan) {
  ScatterChart chart;
  chart.title = "Layouts: peak memory and predicted speed per device";
  chart.x_label = "peak memory per device";
  chart.y_label = "tokens/s per device";
  chart.x_format = AxisFormat::Bytes;
  if (plan.device_memory > 0) {
    chart.x_limit = static_cast<double>(plan.device_memory);
    chart.x_limit_label = "device memory " + formatBytes(plan.device_memory);
  }
  int64_t fitting = 0;
  const PlanCandidate *best = nullptr;
  for (const PlanCandidate &c : plan.candidates) {
    fitting += c.fits;
    if (c.recommended)
      best = &c;
    std::string tip = c.flags + "\npeak " + formatBytes(c.peak_bytes) + ", " +
                      formatValue(c.tokens_per_s_per_device) + " tokens/s per device";
    if (!c.fits)
      tip += "\ndoes not fit" + (c.reason.empty() ? "" : ": " + c.reason);
    chart.points.push_back({static_cast<double>(c.peak_bytes), c.tokens_per_s_per_device, tip,
                            c.recommended ? ScatterPoint::Highlighted
                            : c.fits      ? ScatterPoint::Fits
                                          : ScatterPoint::DoesNotFit});
  }

  std::string html = "<section class=\"plan\"><h2>Plan: " + e(plan.source) + "</h2><table>";
  if (plan.devices > 0 || !plan.target.empty())
    html += row(
        {td("devices"),
         tdn(std::to_string(plan.devices) + " x " + plan.target +
             (plan.device_memory > 0 ? ", " + formatBytes(plan.device_memory) + " each" : ""))});
  html += row({td("layouts planned"), tdn(std::to_string(plan.candidates.size()))}) +
          row({td("fit"), tdn(std::to_string(fitting))});
  if (best)
    html += row({td("recommended"),
                 tdn(best->flags + ": " + formatBytes(best->peak_bytes) + ", " +
                     formatValue(best->tokens_per_s_per_device) + " tokens/s per device")});
  html += "</table><div class=\"charts\">" + svgScatterChart(chart);
  if (best && !best->memory.empty()) {
    BarChart memory;
    memory.title = "Memory per device of the recommended layout, at its peak" +
                   (best->memory_at.empty() ? "" : " (the " + best->memory_at + ")");
    memory.value_label = "MiB";
    for (const auto &[part, bytes] : best->memory)
      memory.bars.push_back(
          {part, static_cast<double>(bytes) / (1 << 20),
           part + ": " + formatBytes(bytes) + " of the peak " + formatBytes(best->peak_bytes)});
    html += svgBarChart(memory);
  }
  html += "</div>";
  html += "<p class=\"note\">Green: fits; grey ring: does not fit; orange: recommended. "
          "Hover a point for its flags.";
  int64_t largest = 0;
  for (const PlanCandidate &c : plan.candidates)
    largest = std::max(largest, c.peak_bytes);
  if (chart.x_limit && *chart.x_limit > 3 * static_cast<double>(largest))
    html += " The device memory (" + e(formatBytes(plan.device_memory)) +
            ") is far to the right of every peak and not drawn.";
  html += "</p>";
  if (!plan.command.empty())
    html += "<p>Run the best: <code>" + e(plan.command) + "</code></p>";
  return html + "</section>";
}

std::string profileSection(const Profile &profile, size_t top) {
  auto bars = [&](const std::vector<TimedEntry> &entries, bool kernels) {
    BarChart chart;
    chart.title = kernels ? "Top kernels by total time" : "Top op types by total time";
    chart.value_label = "ms";
    for (size_t i = 0; i < entries.size() && i < top; ++i) {
      const TimedEntry &t = entries[i];
      const double share = profile.total_us > 0 ? 100 * t.total_us / profile.total_us : 0;
      std::string tip = t.name + " (" + t.op_type + ", " + t.task_type + ")\n" +
                        std::to_string(t.count) + " launches, " + fixed(t.total_us / 1000, 3) +
                        " ms, " + fixed(share, 1) + " % of the profile";
      if (!t.formed_by.empty())
        tip += "\nformed by " + t.formed_by;
      chart.bars.push_back({t.name, t.total_us / 1000, tip});
    }
    return svgBarChart(chart);
  };

  std::string html = "<section class=\"profile\"><h2>Profile: " + e(profile.source) + "</h2>";
  html += "<p>" + std::to_string(profile.steps) + " step(s) on " + std::to_string(profile.devices) +
          " device(s), " + e(fixed(profile.total_us / 1000, 3)) + " ms of timed work in all.</p>";
  html += "<div class=\"charts\">" + bars(profile.kernels, true) + bars(profile.op_types, false) +
          "</div>";
  html += "<table><tr><th>kernel</th><th>op type</th><th>task</th><th>formed by</th>"
          "<th>launches</th><th>ms</th><th>share</th></tr>";
  for (size_t i = 0; i < profile.kernels.size() && i < top; ++i) {
    const TimedEntry &t = profile.kernels[i];
    html += row(
        {td(t.name), td(t.op_type), td(t.task_type), td(t.formed_by), tdn(std::to_string(t.count)),
         tdn(fixed(t.total_us / 1000, 3)),
         tdn(profile.total_us > 0 ? fixed(100 * t.total_us / profile.total_us, 1) + " %" : "")});
  }
  return html + "</table></section>";
}

std::string renderReport(const std::vector<ReportInput> &inputs, const std::string &title) {
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                     "style-src 'unsafe-inline'\">"
                     "<meta name=\"generator\" content=\"kiln report\"><title>" +
                     e(title) + "</title><style>" + kStyle + "</style></head><body><h1>" +
                     e(title) + "</h1>\n";
  for (const ReportInput &input : inputs)
    html += std::visit(
                [](const auto &in) -> std::string {
                  using T = std::decay_t<decltype(in)>;
                  if constexpr (std::is_same_v<T, TrainingLog>)
                    return trainingSection(in);
                  else if constexpr (std::is_same_v<T, LayoutPlan>)
                    return planSection(in);
                  else
                    return profileSection(in);
                },
                input) +
            "\n";
  return html + "</body></html>\n";
}

} // namespace kiln::report
