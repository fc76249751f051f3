// kiln report's page: the SVG charts each section draws, and every string
// from a file escaped, so a hostile name cannot inject markup or script.
#include <gtest/gtest.h>

#include "compiler/report/report_html.h"
#include "compiler/report/report_svg.h"

namespace kiln::report {
namespace {

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TrainingLog log() {
  TrainingLog log{"run<1>.jsonl", {}};
  for (int64_t s = 1; s <= 5; ++s) {
    TrainingStep step;
    step.step = s;
    step.loss = 6.0 - 0.1 * static_cast<double>(s);
    step.loss_scale = s == 3 ? 32768 : 65536;
    step.grad_norm = s == 3 ? std::nullopt : std::optional<double>(1.5);
    step.tokens_per_s = 1000;
    step.overflow = s == 3;
    log.steps.push_back(step);
  }
  return log;
}

LayoutPlan plan() {
  LayoutPlan plan;
  plan.source = "plan.json";
  plan.target = "ascend910b";
  plan.device_memory = 2000;
  plan.devices = 4;
  plan.command = "kiln train M --flag '<b>'";
  plan.candidates = {
      {"--tp 1", 1000, 50, true, true, "", {{"weights", 600}, {"optimizer state", 400}}, "update"},
      {"--tp 2", 1500, 60, true, false, ""},
      {"--tp 4 <img src=x onerror=alert(1)>", 3000, 80, false, false, "too big"}};
  return plan;
}

Profile profile() {
  Profile p;
  p.source = "prof";
  p.kernels = {{"fused.h.0.mlp", "matmul_fixpipe", "AI_CORE", "MatmulPass", 2, 50},
               {"<script>alert(1)</script>", "eltwise", "AI_VECTOR_CORE", "", 1, 10}};
  p.op_types = {{"matmul_fixpipe", "matmul_fixpipe", "AI_CORE", "", 2, 50}};
  p.total_us = 65;
  p.steps = 2;
  p.devices = 1;
  return p;
}

TEST(ReportHtml, EscapesMarkupAndDropsControlCharacters) {
  EXPECT_EQ(escapeHtml("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(escapeHtml(std::string("a\x01\x1b[31mb\tc\n", 11)), "a[31mb\tc\n");
}

TEST(ReportHtml, TrainingDrawsFourLineChartsWithTheOverflowStepMarked) {
  const std::string html = trainingSection(log());
  EXPECT_EQ(count(html, "<svg class=\"chart line\""), 4u) << html;
  EXPECT_EQ(count(html, "<polyline"), 4u);
  EXPECT_EQ(count(html, "class=\"mark\"/>"), 4u) << "one overflow line per chart";
  EXPECT_NE(html.find("overflow at step 3"), std::string::npos);
  EXPECT_NE(html.find("2^16"), std::string::npos) << "the loss scale's log2 axis";
  EXPECT_NE(html.find("run&lt;1&gt;.jsonl"), std::string::npos);
  EXPECT_EQ(html.find("run<1>"), std::string::npos);
}

TEST(ReportHtml, EvaluationLossSharesTheLossChart) {
  TrainingLog l = log();
  l.steps[4].eval["eval_loss"] = 5.0;
  l.steps[4].eval["eval_accuracy"] = 0.5;
  const std::string html = trainingSection(l);
  EXPECT_EQ(count(html, "<svg class=\"chart line\""), 5u); // accuracy gets its own
  EXPECT_NE(html.find("eval_loss"), std::string::npos);
}

TEST(ReportHtml, PlanDrawsEveryCandidateTheDeviceMemoryAndTheRecommendedOne) {
  const std::string html = planSection(plan());
  EXPECT_EQ(count(html, "<svg class=\"chart scatter\""), 1u);
  EXPECT_EQ(count(html, "<circle class=\"fits\""), 1u);
  EXPECT_EQ(count(html, "<circle class=\"nofit\""), 1u);
  EXPECT_EQ(count(html, "<circle class=\"best\""), 1u);
  EXPECT_NE(html.find("class=\"limit\""), std::string::npos);
  EXPECT_NE(html.find("device memory 2.0 KiB"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("kiln train M --flag &#39;&lt;b&gt;&#39;"), std::string::npos);
}

TEST(ReportHtml, PlanDrawsTheRecommendedLayoutsMemoryByPart) {
  const std::string html = planSection(plan());
  EXPECT_EQ(count(html, "<svg class=\"chart bars\""), 1u);
  EXPECT_EQ(count(html, "<g class=\"bar\">"), 2u);
  EXPECT_NE(html.find("Memory per device of the recommended layout, at its peak (the update)"),
            std::string::npos);
  EXPECT_NE(html.find("optimizer state: 400 B of the peak"), std::string::npos);
  LayoutPlan none = plan();
  none.candidates.front().memory.clear(); // a plan written before the breakdown was
  EXPECT_EQ(count(planSection(none), "<svg class=\"chart bars\""), 0u);
}

TEST(ReportHtml, ADeviceMemoryFarAboveEveryPeakIsNotDrawn) {
  LayoutPlan p = plan();
  p.device_memory = int64_t{64} << 30;
  const std::string html = planSection(p);
  EXPECT_EQ(count(html, "class=\"limit\""), 0u);
  EXPECT_NE(html.find("far to the right"), std::string::npos);
}

TEST(ReportHtml, ProfileDrawsBarsForKernelsAndOpTypes) {
  const std::string html = profileSection(profile());
  EXPECT_EQ(count(html, "<svg class=\"chart bars\""), 2u);
  EXPECT_EQ(count(html, "<g class=\"bar\">"), 3u);
  EXPECT_NE(html.find("MatmulPass"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
}

TEST(ReportHtml, ThePageIsSelfContainedWithASectionPerInputInOrder) {
  const std::string html =
      renderReport({ReportInput(plan()), ReportInput(log()), ReportInput(profile())}, "t<i>");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg")); // only the namespace
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_NE(html.find("<title>t&lt;i&gt;</title>"), std::string::npos);
  const size_t plan_at = html.find("<section class=\"plan\">");
  const size_t training_at = html.find("<section class=\"training\">");
  const size_t profile_at = html.find("<section class=\"profile\">");
  ASSERT_NE(profile_at, std::string::npos);
  EXPECT_LT(plan_at, training_at);
  EXPECT_LT(training_at, profile_at);
}

TEST(ReportHtml, ChartsWithoutValuesSaySo) {
  LineChart empty{"Loss", "step", "loss", false, {{"loss", "#000", {}}}, {}, ""};
  EXPECT_NE(svgLineChart(empty).find("no values to draw"), std::string::npos);
  EXPECT_NE(svgBarChart({"t", "ms", {}}).find("no values to draw"), std::string::npos);
}

} // namespace
} // namespace kiln::report
