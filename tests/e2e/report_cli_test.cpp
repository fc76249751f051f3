// kiln report on what kiln itself wrote: a training log, a plan and a
// profile folder from real runs of the tiny Qwen, drawn as one page and
// rendered by headless Chromium (Debian's `chromium`, scripts/setup.sh),
// whose screenshot must not be blank. The screenshots stay in the test's
// scratch folder.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

bool isPng(const std::string &bytes) {
  return bytes.size() > 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

class ReportCli : public TrainCli {
protected:
  // `kiln train` with --log-json, `kiln plan --format json` and `kiln run
  // --profile`, into log.jsonl, plan.json and prof/.
  void writeInputs() {
    Result train = run(this->train("--steps 4 --log-json log.jsonl"));
    ASSERT_EQ(train.exit_code, 0) << train.err;
    // A small device memory, so that some layouts do not fit.
    Result plan = run("plan " + kTiny +
                      " --devices 4 --global-batch 8 --seq 32 --device-memory 1200KiB "
                      "--format json");
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    write("plan.json", plan.out);
    ASSERT_EQ(run("make-inputs " + kTiny + " --batch 2 --seq 8 -o in.safetensors").exit_code, 0);
    ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
    Result profile = run("run " + kTiny +
                         " --weights w.safetensors --inputs in.safetensors --outputs "
                         "out.safetensors --training --profile prof");
    ASSERT_EQ(profile.exit_code, 0) << profile.err;
  }

  // Chromium's screenshot of `page` at 1200 x 2400 into `png`; false when it
  // wrote none. Its profile lives in the test's folder.
  bool screenshot(const std::string &page, const std::string &png) {
    Result r = shell("timeout 120 chromium --headless --disable-gpu --no-sandbox "
                     "--user-data-dir=" +
                     path("chromium-profile") + " --screenshot=" + path(png) +
                     " --window-size=1200,2400 file://" + path(page));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return fs::exists(path(png));
  }
};

TEST_F(ReportCli, DrawsALogAPlanAndAProfileThatChromiumRenders) {
  ASSERT_NO_FATAL_FAILURE(writeInputs());
  Result r = run("report log.jsonl plan.json prof -o report.html");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote report.html (3 section(s)"), std::string::npos) << r.err;

  const std::string html = slurp(path("report.html"));
  EXPECT_EQ(count(html, "<svg class=\"chart line\""), 4u); // loss, scale, grad norm, tokens/s
  EXPECT_EQ(count(html, "<polyline"), 4u);
  EXPECT_EQ(count(html, "<svg class=\"chart scatter\""), 1u);
  EXPECT_GT(count(html, "<circle class=\"fits\""), 0u);
  EXPECT_GT(count(html, "<circle class=\"nofit\""), 0u);
  EXPECT_EQ(count(html, "<circle class=\"best\""), 1u);
  EXPECT_NE(html.find("device memory 1.2 MiB"), std::string::npos);
  EXPECT_EQ(count(html, "<svg class=\"chart bars\""), 3u); // memory by part, kernels, op types
  EXPECT_NE(html.find("Memory per device of the recommended layout"), std::string::npos);
  EXPECT_NE(html.find("optimizer state"), std::string::npos);
  EXPECT_GT(count(html, "<g class=\"bar\">"), 4u);
  EXPECT_EQ(html.find("<script"), std::string::npos);

  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs Debian's chromium): "
                    "the page was written and checked, but not rendered";
  write("blank.html", "<!DOCTYPE html><html><body></body></html>");
  ASSERT_TRUE(screenshot("blank.html", "blank.png"));
  ASSERT_TRUE(screenshot("report.html", "report.png"));
  const std::string blank = slurp(path("blank.png")), shot = slurp(path("report.png"));
  ASSERT_TRUE(isPng(blank));
  ASSERT_TRUE(isPng(shot)) << "chromium's screenshot is not a PNG";
  // A white page compresses to almost nothing; charts, text and points do not.
  EXPECT_GT(shot.size(), 5 * blank.size())
      << "the screenshot looks blank: " << shot.size() << " bytes, a blank page " << blank.size();
}

TEST_F(ReportCli, StringsFromTheInputsAreEscaped) {
  write("plan.json", R"({"candidates": [{"flags": "<script>alert(1)</script>",
      "peak_bytes": 100, "fits": true, "tokens_per_s_per_device": 5}],
      "recommended": {"flags": "<script>alert(1)</script>"}, "command": "<img src=x>"})");
  Result r = run("report plan.json -o report.html --title '<b>t</b>'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = slurp(path("report.html"));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
}

TEST_F(ReportCli, AnInputItCannotReadIsOneLineNamingIt) {
  write("notes.txt", "hello");
  Result r = run("report notes.txt -o report.html");
  expectRunError(r, {"notes.txt", "--log-json", "--profile"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(fs::exists(path("report.html")));
  fs::create_directories(path("empty"));
  Result folder = run("report empty -o report.html");
  expectRunError(folder, {"empty", "op_summary.csv"});
  EXPECT_EQ(folder.exit_code, 1);
}

TEST_F(ReportCli, MissingOutputOrInputIsUsage) {
  write("log.jsonl", "{\"step\":1,\"loss\":2}\n");
  Result no_output = run("report log.jsonl");
  expectUsageError(no_output, {"--output"});
  EXPECT_EQ(no_output.exit_code, 2);
  Result no_input = run("report -o report.html");
  expectUsageError(no_input, {"INPUT"});
  EXPECT_EQ(no_input.exit_code, 2);
}

} // namespace
} // namespace kiln
