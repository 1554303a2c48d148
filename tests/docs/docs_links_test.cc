// The repository's documentation holds together: every relative link in every
// markdown file (README.md, docs/, alerts/README.md, any other *.md outside
// build trees) names a file or folder that exists inside the repository, and a
// link with a #fragment into a markdown file names one of its headings (as
// GitHub turns headings into anchors). No link leaves the repository: a user of
// the repository has only the repository, so a link such as ../shared/... is an
// error even where the target exists on this machine. Links inside code (fenced
// blocks and `spans`) are text, not links; http(s) and mailto links are not
// checked (no network in tests).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace kvwatch {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::weakly_canonical(fs::path(KVWATCH_SOURCE_DIR));

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct Link {
  int line = 0;
  std::string target;
};

// The text of a markdown line with `code spans` blanked (their contents are not
// links), given whether a ``` fence is open before it.
std::string WithoutCodeSpans(const std::string& line) {
  std::string out = line;
  std::size_t i = 0;
  while ((i = out.find('`', i)) != std::string::npos) {
    std::size_t run = out.find_first_not_of('`', i);
    if (run == std::string::npos) break;
    const std::string ticks = out.substr(i, run - i);
    const std::size_t close = out.find(ticks, run);
    if (close == std::string::npos) break;
    for (std::size_t k = i; k < close + ticks.size(); ++k) out[k] = ' ';
    i = close + ticks.size();
  }
  return out;
}

// Lines of a markdown text outside fenced code blocks and indented code, with
// their 1-based numbers.
std::vector<std::pair<int, std::string>> ProseLines(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream in(text);
  std::string line;
  bool fenced = false;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && start < 4 &&
        (line.compare(start, 3, "```") == 0 || line.compare(start, 3, "~~~") == 0)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    out.emplace_back(number, WithoutCodeSpans(line));
  }
  return out;
}

// Inline links and images [text](target "title"), and reference definitions
// [id]: target.
std::vector<Link> Links(const std::string& text) {
  std::vector<Link> out;
  for (const auto& [number, line] : ProseLines(text)) {
    for (std::size_t i = line.find("]("); i != std::string::npos; i = line.find("](", i + 2)) {
      std::size_t end = i + 2;
      int depth = 0;
      while (end < line.size() && !(line[end] == ')' && depth == 0) && line[end] != ' ') {
        if (line[end] == '(') ++depth;
        if (line[end] == ')') --depth;
        ++end;
      }
      std::string target = line.substr(i + 2, end - i - 2);
      if (target.size() >= 2 && target.front() == '<' && target.back() == '>')
        target = target.substr(1, target.size() - 2);
      out.push_back(Link{number, target});
    }
    const std::size_t lead = line.find_first_not_of(' ');
    if (lead != std::string::npos && lead < 4 && line[lead] == '[') {
      const std::size_t colon = line.find("]:", lead);
      if (colon != std::string::npos && line.find(']', lead) == colon) {
        std::istringstream rest(line.substr(colon + 2));
        std::string target;
        rest >> target;
        if (!target.empty()) out.push_back(Link{number, target});
      }
    }
  }
  return out;
}

// The anchor GitHub gives a heading: lowercase; letters, digits, '-' and '_'
// kept; spaces become '-'; other punctuation dropped; non-ASCII kept. Markdown
// inside the heading counts by its text (`code` -> code, [text](url) -> text).
std::string Slug(std::string heading) {
  std::string text;
  for (std::size_t i = 0; i < heading.size(); ++i) {
    if (heading[i] == ']' && i + 1 < heading.size() && heading[i + 1] == '(') {
      const std::size_t close = heading.find(')', i);
      if (close != std::string::npos) {
        i = close;
        continue;
      }
    }
    text += heading[i];
  }
  std::string slug;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_') {
      slug += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      slug += '-';
    } else if (c >= 0x80) {
      slug += static_cast<char>(c);
    }
  }
  return slug;
}

// Every anchor of a markdown text: its ATX headings' slugs, repeated ones
// numbered -1, -2, ... as GitHub does.
std::set<std::string> Anchors(const std::string& text) {
  std::set<std::string> out;
  std::map<std::string, int> seen;
  std::istringstream in(text);
  std::string line;
  bool fenced = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0 || line.rfind("~~~", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    const std::size_t hashes = line.find_first_not_of('#');
    if (hashes == std::string::npos || hashes > 6 || line[hashes] != ' ') continue;
    std::string heading = line.substr(hashes + 1);
    while (!heading.empty() && (heading.back() == ' ' || heading.back() == '#')) heading.pop_back();
    const std::string slug = Slug(heading);
    const int n = seen[slug]++;
    out.insert(n == 0 ? slug : slug + "-" + std::to_string(n));
  }
  return out;
}

bool External(const std::string& target) {
  const std::size_t colon = target.find(':');
  if (colon == std::string::npos) return false;
  const std::size_t slash = target.find('/');
  return slash == std::string::npos || colon < slash;  // scheme:...
}

bool Inside(const fs::path& path, const fs::path& root) {
  const fs::path relative = path.lexically_relative(root);
  return !relative.empty() && *relative.begin() != "..";
}

// What is wrong with the links of `file` (one message per bad link, naming the
// file, line and target); empty when nothing is.
std::vector<std::string> CheckLinks(const fs::path& root, const fs::path& file) {
  std::vector<std::string> problems;
  const std::string text = ReadFile(file);
  const std::string where = fs::relative(file, root).string();
  for (const Link& link : Links(text)) {
    const std::string at = where + ":" + std::to_string(link.line) + ": (" + link.target + ") ";
    if (link.target.empty()) {
      problems.push_back(at + "an empty link");
      continue;
    }
    if (External(link.target)) continue;
    const std::size_t hash = link.target.find('#');
    const std::string path_part = link.target.substr(0, hash);
    const std::string fragment = hash == std::string::npos ? "" : link.target.substr(hash + 1);
    if (!path_part.empty() && path_part.front() == '/') {
      problems.push_back(at + "is absolute; write it relative to " + where);
      continue;
    }
    const fs::path target = path_part.empty() ? file : (file.parent_path() / path_part).lexically_normal();
    if (!Inside(target, root) && target != root) {
      problems.push_back(at +
                         "leaves the repository: a user of the repository does not have it; "
                         "restate what is needed in docs/ instead");
      continue;
    }
    if (!fs::exists(target)) {
      problems.push_back(at + "names " + fs::relative(target, root).string() + ", which does not exist");
      continue;
    }
    if (fragment.empty()) continue;
    if (target.extension() != ".md") {
      if (fragment.rfind('L', 0) != 0) problems.push_back(at + "has a #fragment into a file that is not markdown");
      continue;
    }
    const std::set<std::string> anchors = Anchors(ReadFile(target));
    if (!anchors.count(fragment)) {
      problems.push_back(at + fs::relative(target, root).string() + " has no heading with the anchor #" + fragment);
    }
  }
  return problems;
}

// Every markdown file of the repository but build trees and dot folders.
std::vector<fs::path> MarkdownFiles(const fs::path& root) {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.rfind("build", 0) == 0 || name.front() == '.')) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && it->path().extension() == ".md") out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// --- The checker on its own -------------------------------------------------------

class LinkCheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kvwatch_docs_links_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "docs");
    Write("docs/target.md", "# Target\n\n## The `code` part, and more!\n\n## Again\n\n## Again\n");
    Write("src.h", "// a source file\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(root_ / name, std::ios::binary) << text;
  }
  std::vector<std::string> Check(const std::string& text) {
    Write("docs/page.md", text);
    return CheckLinks(root_, root_ / "docs" / "page.md");
  }
  fs::path root_;
};

TEST_F(LinkCheckerTest, GoodLinksPass) {
  EXPECT_TRUE(Check("[t](target.md) [h](target.md#the-code-part-and-more) [a](target.md#again-1) "
                    "[s](../src.h) [d](.) [x](https://example.com/a#b) [self](#local)\n\n## Local\n\n"
                    "[ref]: target.md#target\n")
                  .empty());
}

TEST_F(LinkCheckerTest, AMissingFileIsNamed) {
  const auto problems = Check("text\n[t](missing.md)\n");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("docs/page.md:2: (missing.md)"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("does not exist"), std::string::npos) << problems[0];
}

TEST_F(LinkCheckerTest, AMissingHeadingIsNamed) {
  const auto problems = Check("[t](target.md#nowhere) [u](#also-nowhere)\n");
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("no heading with the anchor #nowhere"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("#also-nowhere"), std::string::npos) << problems[1];
}

TEST_F(LinkCheckerTest, ALinkOutsideTheRepositoryIsAnErrorEvenWhenItExists) {
  Write("../outside_" + std::to_string(::getpid()) + ".md", "# Outside\n");
  const auto problems =
      Check("[o](../../outside_" + std::to_string(::getpid()) + ".md) [s](../../shared/docs/curve-semantics.md)\n");
  fs::remove(root_.parent_path() / ("outside_" + std::to_string(::getpid()) + ".md"));
  ASSERT_EQ(problems.size(), 2u);
  for (const auto& p : problems) EXPECT_NE(p.find("leaves the repository"), std::string::npos) << p;
}

TEST_F(LinkCheckerTest, AbsoluteAndEmptyLinksAreErrors) {
  EXPECT_EQ(Check("[a](/etc/passwd)\n").size(), 1u);
  EXPECT_EQ(Check("[e]()\n").size(), 1u);
}

TEST_F(LinkCheckerTest, CodeIsNotLinks) {
  EXPECT_TRUE(Check("`[a](missing.md)`\n```\n[b](missing.md)\n```\n").empty());
}

TEST(SlugTest, FollowsGitHub) {
  EXPECT_EQ(Slug("Two commands"), "two-commands");
  EXPECT_EQ(Slug("Eviction policies (`--policy`)"), "eviction-policies---policy");
  EXPECT_EQ(Slug("Sampled mode (`--sample-rate R`)"), "sampled-mode---sample-rate-r");
  EXPECT_EQ(Slug("Fleet ingestion: one agent, 16 KV-event publishers"),
            "fleet-ingestion-one-agent-16-kv-event-publishers");
  EXPECT_EQ(Slug("curve.capacities -> kvwatch_page_hit_ratio"), "curvecapacities---kvwatch_page_hit_ratio");
  EXPECT_EQ(Slug("See [the docs](x.md)"), "see-the-docs");
}

// --- The repository ---------------------------------------------------------------

TEST(DocsLinksTest, EveryRelativeLinkResolvesInsideTheRepository) {
  const std::vector<fs::path> files = MarkdownFiles(kRoot);
  ASSERT_FALSE(files.empty());
  std::vector<std::string> names;
  for (const fs::path& f : files) names.push_back(fs::relative(f, kRoot).string());
  // The files the brief of the docs promises, so that this test cannot pass on
  // a tree that lost them.
  for (const char* required : {"README.md", "docs/architecture.md", "docs/semantics.md", "docs/configuration.md",
                               "docs/metrics.md", "docs/alerts.md", "docs/guarantees.md"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required << " is missing";
  }
  std::size_t links = 0;
  for (const fs::path& f : files) {
    links += Links(ReadFile(f)).size();
    for (const std::string& problem : CheckLinks(kRoot, f)) ADD_FAILURE() << problem;
  }
  EXPECT_GT(links, 20u) << "the checker found almost no links: is it reading the files?";
}

// The shared folder beside this checkout is not part of the repository: the
// docs restate what they need of it, so they do not even name its docs.
TEST(DocsLinksTest, NoDocumentNamesTheSharedDocs) {
  for (const fs::path& f : MarkdownFiles(kRoot)) {
    const std::string text = ReadFile(f);
    std::istringstream in(text);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      EXPECT_EQ(line.find("shared/docs"), std::string::npos)
          << fs::relative(f, kRoot).string() << ":" << number << ": " << line;
    }
  }
}

}  // namespace
}  // namespace kvwatch
