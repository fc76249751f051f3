// The commands README.md, docs/ and the examples' READMEs show, checked
// against the program so that the docs cannot drift from it: every example
// command line (`$ kiln ...` in a console block, `kiln ...` in a sh block)
// parses (KILN_CHECK_COMMAND_LINE: the command, its flags and their values'
// forms), every flag a synopsis in docs/cli.md names is in its command's
// --help, every command of README's table exists, and README's tiny-model
// commands run as shown. Parsing is cheap; only the tiny model runs.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

struct DocCommand {
  std::string file;
  int line = 0;
  std::string args; // after "kiln "
};

std::vector<std::string> linesOf(const std::string &path) {
  std::vector<std::string> lines;
  std::istringstream in(slurp(path));
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  return lines;
}

std::string trim(const std::string &s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// A shown command without what only a shell or a reader needs: a trailing
// comment, a redirection, "..." for what the reader adds, N for a number
// the reader picks.
std::string runnable(std::string args) {
  if (size_t hash = args.find("  #"); hash != std::string::npos)
    args.erase(hash);
  if (size_t redirect = args.find(" > "); redirect != std::string::npos)
    args.erase(redirect);
  for (size_t dots; (dots = args.find(" ...")) != std::string::npos;)
    args.erase(dots, 4);
  // "--steps N": a number the reader picks.
  for (size_t n; (n = (args + " ").find(" N ")) != std::string::npos;)
    args.replace(n + 1, 1, "1");
  return trim(args);
}

std::vector<std::string> docFiles() {
  std::vector<std::string> files = {kSource + "/README.md"};
  for (const std::string folder : {"/docs", "/examples"})
    for (const auto &entry : fs::recursive_directory_iterator(kSource + folder))
      if (entry.path().extension() == ".md")
        files.push_back(entry.path().string());
  std::sort(files.begin() + 1, files.end());
  return files;
}

// Example command lines: "$ kiln ..." in any fenced block, "kiln ..." in a
// sh/console block, continued over lines ending in a backslash.
std::vector<DocCommand> exampleCommands(const std::string &file) {
  std::vector<DocCommand> out;
  const std::vector<std::string> lines = linesOf(file);
  bool fenced = false;
  std::string lang;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) == 0) {
      fenced = !fenced;
      lang = fenced ? trim(lines[i].substr(3)) : "";
      continue;
    }
    if (!fenced)
      continue;
    const std::string s = trim(lines[i]);
    std::string command;
    if (s.rfind("$ kiln ", 0) == 0)
      command = s.substr(7);
    else if ((lang == "sh" || lang == "console") && s.rfind("kiln ", 0) == 0)
      command = s.substr(5);
    else
      continue;
    const int first = static_cast<int>(i) + 1;
    while (!command.empty() && command.back() == '\\' && i + 1 < lines.size())
      command = trim(command.substr(0, command.size() - 1)) + " " + trim(lines[++i]);
    out.push_back({file, first, runnable(command)});
  }
  return out;
}

class DocsCommands : public Cli {
protected:
  Result kiln(const std::string &args, const std::string &env = "") {
    return shell("cd " + kSource + " && " + env + " " + KILN_CLI + " " + args);
  }
};

TEST_F(DocsCommands, EveryExampleCommandParses) {
  int checked = 0;
  for (const std::string &file : docFiles())
    for (const DocCommand &c : exampleCommands(file)) {
      ++checked;
      Result r = kiln(c.args, "KILN_CHECK_COMMAND_LINE=1");
      EXPECT_EQ(r.exit_code, 0) << c.file << ":" << c.line << ": kiln " << c.args << "\n" << r.err;
    }
  EXPECT_GT(checked, 40) << "the docs show fewer commands than they did: is the reader broken?";
}

// docs/cli.md's synopses ("kiln plan MODEL --global-batch B [--devices 8]
// ..."): every flag named is one of that command's.
TEST_F(DocsCommands, EverySynopsisFlagIsInItsCommandsHelp) {
  const std::vector<std::string> lines = linesOf(kSource + "/docs/cli.md");
  const std::regex flag("--[a-z0-9][a-z0-9-]*");
  std::map<std::string, std::string> help; // command -> its --help
  std::string command;
  bool fenced = false;
  int synopses = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) == 0) {
      fenced = !fenced;
      command.clear();
      continue;
    }
    if (!fenced || lines[i].rfind("$ ", 0) == 0)
      continue;
    if (lines[i].rfind("kiln ", 0) == 0) {
      // The command's words: lower-case, up to the first argument or flag;
      // "stats|list" names several, the first is checked.
      std::istringstream words(lines[i].substr(5));
      command.clear();
      for (std::string w; words >> w;) {
        if (w.empty() || !std::islower(static_cast<unsigned char>(w[0])) || w.find('.') != w.npos)
          break;
        command += (command.empty() ? "" : " ") + w.substr(0, w.find('|'));
      }
      if (!help.count(command)) {
        Result r = kiln(command + " --help");
        ASSERT_EQ(r.exit_code, 0) << "docs/cli.md:" << i + 1 << ": kiln " << command << "\n"
                                  << r.err;
        help[command] = r.out;
        ++synopses;
      }
    } else if (command.empty() || lines[i].rfind(" ", 0) != 0) {
      continue; // only a synopsis' own continuation lines
    }
    for (std::sregex_iterator m(lines[i].begin(), lines[i].end(), flag), end; m != end; ++m)
      EXPECT_NE(help[command].find(m->str()), std::string::npos)
          << "docs/cli.md:" << i + 1 << ": " << m->str() << " is not a flag of kiln " << command;
  }
  EXPECT_GT(synopses, 10);
}

// README's command table: each row's command exists.
TEST_F(DocsCommands, EveryCommandOfReadmesTableExists) {
  int rows = 0;
  for (const std::string &line : linesOf(kSource + "/README.md")) {
    if (line.rfind("| `kiln ", 0) != 0)
      continue;
    std::istringstream words(line.substr(8, line.find('`', 8) - 8));
    std::string command;
    for (std::string w; words >> w;) {
      if (!std::islower(static_cast<unsigned char>(w[0])) || w.find('.') != w.npos)
        break;
      command += (command.empty() ? "" : " ") + w.substr(0, w.find("\\|"));
    }
    ++rows;
    Result r = kiln(command + " --help");
    EXPECT_EQ(r.exit_code, 0) << "README.md: kiln " << command << "\n" << r.err;
  }
  EXPECT_GT(rows, 15);
}

// README's tiny model, run as shown (in a folder of its own, the examples
// reached through a link): each exits 0 and prints what README shows it
// printing first.
TEST_F(DocsCommands, ReadmesTinyModelCommandsRunAsShown) {
  fs::create_directory_symlink(kSource + "/examples", dir_ / "examples");
  int ran = 0;
  for (const DocCommand &c : exampleCommands(kSource + "/README.md")) {
    if (c.args.find("examples/qwen-tiny/") == std::string::npos)
      continue; // examples/overflow's weights are made as its README shows (OverflowExample)
    ++ran;
    Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 0) << "README.md:" << c.line << ": kiln " << c.args << "\n" << r.err;
    if (c.args.rfind("compile ", 0) == 0) {
      EXPECT_NE(r.out.find("kiln: compiled 'qwen_train' for ascend910b (f16 model, precision "
                           "must_keep_origin_dtype, recompute none)"),
                std::string::npos)
          << r.out;
    }
    if (c.args.rfind("run ", 0) == 0) {
      EXPECT_EQ(r.out.rfind("loss ", 0), 0u) << r.out;
    }
    if (c.args.rfind("train ", 0) == 0) {
      EXPECT_NE(r.out.find("step 20/20"), std::string::npos) << r.out;
    }
  }
  EXPECT_GE(ran, 6);
}

} // namespace
} // namespace kiln
