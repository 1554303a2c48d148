// The live agent's web page: the document itself (self-contained, escaped), and the
// page as a browser runs it: headless Chromium loads it from a fake agent (a
// cpp-httplib server on 127.0.0.1 at a port picked at run time) whose API serves
// curves the real engine computed over the synthetic workload, and the test reads
// the DOM after the page's JavaScript ran (--dump-dom) and takes a screenshot.
// Also: the empty window, targets that did not converge, an API that answers 503,
// an agent that stops answering after a good curve, and an agent that is gone.
// And the demo's page itself: the real agent with the built-in config (what
// `kvwatch agent` runs with no config) after the first minute of its synthetic
// replica, serving the page and every API path the page reads.
//
// The browser tests skip when /usr/bin/chromium is absent. Set
// KVWATCH_WEB_PAGE_SCREENSHOTS=<existing dir> to keep a screenshot of every page.
#include "agent/web/web_page.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "agent/cli/replay_command.h"
#include "agent/render/api_json.h"
#include "agent/render/replay_result.h"
#include "agent/runtime/agent.h"
#include "agent/runtime/agent_command.h"
#include "agent/runtime/builtin_config.h"
#include "base/json_writer.h"
#include "collectors/synth.h"
#include "curve/report.h"

namespace kvwatch::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kChromium[] = "/usr/bin/chromium";
constexpr char kSvgNamespace[] = "http://www.w3.org/2000/svg";

// ---------------------------------------------------------------- fixtures

// The curve report of the engine over `requests` synthetic requests, with bytes
// (llama-3-8b, 16 tokens a page) and an engine that tracks at most `max_pages`.
curve::CurveReport ComputeReport(std::uint64_t requests, std::uint64_t max_pages = 1u << 26) {
  ReplayOptions options;
  options.model.model = "llama-3-8b";
  options.page_tokens = 16;
  options.max_pages = max_pages;
  auto resolved = ResolveReplayOptions(options);
  EXPECT_TRUE(resolved.ok()) << resolved.error();
  Replayer replayer(resolved.value());
  if (requests > 0) {
    collectors::SynthOptions synth;
    synth.seed = 7;
    synth.duration_s = 0;
    synth.max_requests = requests;
    auto generated =
        collectors::GenerateSynth(synth, [&](const collectors::SynthRequest& r) { replayer.Add(r.request); });
    EXPECT_TRUE(generated.ok()) << generated.error();
  }
  return replayer.Result().total;
}

// The answer of GET /api/v1/curve?window=NAME for a report, as the agent writes it.
std::string CurveJson(const curve::CurveReport& r, const std::string& window,
                      const std::vector<std::uint64_t>& configured, std::optional<double> load_factor = {}) {
  CurveApiContext context;
  context.window = window;
  context.capacities = configured;
  context.kv_load.load_factor = load_factor;
  return RenderCurveApiJson(r, context);
}

const curve::WorkingSetEntry* FindTarget(const curve::CurveReport& r, const std::string& target, double fraction) {
  for (const auto& e : r.working_set) {
    if (e.target == target && std::fabs(e.fraction - fraction) < 1e-9) return &e;
  }
  return nullptr;
}

// 1234567 -> "1,234,567", as the page's en-US number format writes it.
std::string Grouped(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// ---------------------------------------------------------------- the fake agent

// Serves the page at `mount` and the API under `mount`api/v1/, like the agent.
class FakeAgent {
 public:
  struct Options {
    PageOptions page;
    std::string mount = "/";
    std::vector<std::pair<std::string, std::string>> curves;  // window name, JSON
    int curve_answers_before_503 = -1;                        // -1: never answer 503
    bool content_security_policy = true;
  };

  explicit FakeAgent(Options options) : options_(std::move(options)) { Route(); }
  ~FakeAgent() { Stop(); }

  // Binds 127.0.0.1 at a free port and serves on a thread; false if it cannot bind.
  bool Start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) return false;
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the loop runs (cpp-httplib 0.11.4): wait for it.
    for (int i = 0; i < 10000 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return server_.is_running();
  }
  void Stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }

  std::string Origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string PageUrl() const { return Origin() + options_.mount; }
  std::vector<std::string> CurveRequests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return curve_requests_;
  }

 private:
  void Route() {
    const std::string page = RenderIndexPage(options_.page);
    server_.Get(options_.mount, [this, page](const httplib::Request&, httplib::Response& res) {
      if (options_.content_security_policy) res.set_header("Content-Security-Policy", kIndexPageContentSecurityPolicy);
      res.set_content(page, kIndexPageContentType);
    });
    server_.Get(options_.mount + "api/v1/windows", [this](const httplib::Request&, httplib::Response& res) {
      base::JsonWriter w;
      w.BeginObject();
      w.Key("windows");
      w.BeginArray();
      for (const auto& [name, json] : options_.curves) w.String(name);
      w.EndArray();
      w.EndObject();
      res.set_content(w.Take(), "application/json");
    });
    server_.Get(options_.mount + "api/v1/curve", [this](const httplib::Request& req, httplib::Response& res) {
      AnswerCurve(req.get_param_value("window"), res);
    });
  }

  void AnswerCurve(const std::string& window, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    curve_requests_.push_back(window);
    if (options_.curve_answers_before_503 >= 0 && answered_ >= options_.curve_answers_before_503) {
      res.status = 503;
      res.set_content("{\"error\":\"collector restarting\"}", "application/json");
      return;
    }
    for (const auto& [name, json] : options_.curves) {
      if (name != window) continue;
      ++answered_;
      res.set_content(json, "application/json");
      return;
    }
    res.status = 404;
    res.set_content("{\"error\":\"no such window\"}", "application/json");
  }

  Options options_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  mutable std::mutex mu_;
  std::vector<std::string> curve_requests_;
  int answered_ = 0;
};

// ---------------------------------------------------------------- the browser

// Runs argv with stdout and stderr to files, in a process group of its own. If it
// has not ended after `limit` (a safety net against a hung browser, not a
// measurement) the group is killed. Leftover members of the group are killed at
// the end either way. Returns the exit code, or -1 if it did not exit normally.
int RunProcess(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err,
               std::chrono::seconds limit) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string out_path = out.string(), err_path = err.string();
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    const int in_fd = open("/dev/null", O_RDONLY);
    const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0) _exit(126);
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  setpgid(pid, pid);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class BrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " is absent";
    dir_ = fs::temp_directory_path() / ("kvwatch_web_page_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Chromium's arguments up to (not including) the action and the URL, with a
  // fresh profile each run.
  std::vector<std::string> BrowserArgs() {
    const std::string size = "--window-size=1100," + std::to_string(window_height_);
    const fs::path profile = dir_ / ("profile-" + std::to_string(++runs_));
    return {kChromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            size,
            "--user-data-dir=" + profile.string(),
            "--virtual-time-budget=5000"};
  }

  // The DOM after the page's scripts ran for 5 s of virtual time. With
  // KVWATCH_WEB_PAGE_SCREENSHOTS=<dir>, also keeps <dir>/<test name>.png to look at.
  std::string DumpDom(const std::string& url) {
    std::vector<std::string> args = BrowserArgs();
    args.push_back("--dump-dom");
    args.push_back(url);
    const fs::path out = dir_ / "dom.html", err = dir_ / "chromium.log";
    const int code = RunProcess(args, out, err, std::chrono::seconds(120));
    EXPECT_EQ(code, 0) << "chromium failed; its log:\n" << ReadFile(err);
    if (const char* keep = std::getenv("KVWATCH_WEB_PAGE_SCREENSHOTS")) {
      const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      fs::copy_file(Screenshot(url), fs::path(keep) / (name + ".png"), fs::copy_options::overwrite_existing);
    }
    return ReadFile(out);
  }

  // A PNG of the page after 5 s of virtual time.
  fs::path Screenshot(const std::string& url) {
    const fs::path png = dir_ / "page.png";
    std::vector<std::string> args = BrowserArgs();
    args.push_back("--screenshot=" + png.string());
    args.push_back(url);
    const fs::path err = dir_ / "chromium.log";
    const int code = RunProcess(args, dir_ / "screenshot.out", err, std::chrono::seconds(120));
    EXPECT_EQ(code, 0) << "chromium failed; its log:\n" << ReadFile(err);
    return png;
  }

  fs::path dir_;
  int runs_ = 0;
  int window_height_ = 1150;  // taller for a screenshot of the whole page
};

// ---------------------------------------------------------------- reading the DOM

// The start tags of the <tag> elements whose class attribute contains `cls`.
std::vector<std::string> StartTags(const std::string& dom, const std::string& tag, const std::string& cls) {
  std::vector<std::string> tags;
  const std::regex re("<" + tag + "\\b[^>]*>");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), re); it != std::sregex_iterator(); ++it) {
    const std::string t = it->str();
    const std::regex class_re("\\bclass=\"([^\"]*\\s)?" + cls + "(\\s[^\"]*)?\"");
    if (std::regex_search(t, class_re)) tags.push_back(t);
  }
  return tags;
}

// The value of attribute `name` in a start tag; "" when absent.
std::string Attribute(const std::string& start_tag, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(start_tag, m, std::regex("\\s" + name + "=\"([^\"]*)\""))) return "";
  return m[1].str();
}

// The start tag of the element with this id; "" when there is none.
std::string TagWithId(const std::string& dom, const std::string& id) {
  std::smatch m;
  if (!std::regex_search(dom, m, std::regex("<[a-z]+\\b[^>]*\\bid=\"" + id + "\"[^>]*>"))) return "";
  return m.str();
}

// The text right after the element's start tag, up to the next tag.
std::string TextOf(const std::string& dom, const std::string& id) {
  const std::string tag = TagWithId(dom, id);
  if (tag.empty()) return "";
  const std::size_t start = dom.find(tag) + tag.size();
  return dom.substr(start, dom.find('<', start) - start);
}

// The inner HTML of the working-set table's row for a fraction; "" when absent.
std::string TableRow(const std::string& dom, double fraction) {
  std::ostringstream key;
  key << "<tr data-fraction=\"" << fraction << "\">";
  const std::size_t start = dom.find(key.str());
  if (start == std::string::npos) return "";
  return dom.substr(start, dom.find("</tr>", start) - start);
}

std::string Cell(const std::string& row, const std::string& cls) {
  std::smatch m;
  if (!std::regex_search(row, m, std::regex("<td class=\"" + cls + "[^\"]*\"[^>]*>([^<]*)</td>"))) return "";
  return m[1].str();
}

std::size_t Count(const std::string& text, char c) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), c));
}

std::size_t CountOf(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size())) ++n;
  return n;
}

// ---------------------------------------------------------------- the document

TEST(WebPageTest, IsSelfContained) {
  PageOptions options;
  options.windows = {"5m", "1h"};
  const std::string page = RenderIndexPage(options);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("<svg id=\"curve\""), std::string::npos);
  EXPECT_NE(page.find("<table id=\"working-set\""), std::string::npos);
  for (const char* external : {"<link", " src=", "href=", "@import", "url(", "<iframe", "<img"}) {
    EXPECT_EQ(page.find(external), std::string::npos) << external;
  }
  // The only URL is the SVG namespace, which is a name, not a resource.
  EXPECT_EQ(CountOf(page, "://"), CountOf(page, kSvgNamespace));
  EXPECT_EQ(page.find("@@"), std::string::npos);  // every placeholder filled
}

TEST(WebPageTest, EscapesTitleReplicaAndWindows) {
  PageOptions options;
  options.title = "KV <b>\"cache\"</b> & co";
  options.replica = "</script><script>alert(1)</script>";
  options.windows = {"</script>"};
  const std::string page = RenderIndexPage(options);
  EXPECT_NE(page.find("<title>KV &lt;b&gt;&quot;cache&quot;&lt;/b&gt; &amp; co</title>"), std::string::npos);
  EXPECT_NE(page.find("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(CountOf(page, "</script>"), 2u);  // the configuration and the code
  EXPECT_NE(page.find("\"windows\":[\"\\u003c/script\\u003e\"]"), std::string::npos);
  EXPECT_NE(page.find("\"title\":\"KV \\u003cb\\u003e\\\"cache\\\"\\u003c/b\\u003e \\u0026 co\""), std::string::npos);
}

TEST(WebPageTest, ConfigurationCarriesTheOptions) {
  PageOptions options;
  options.refresh_seconds = 0;
  options.windows = {"5m", "1h", "24h"};
  options.api_base = "/kvwatch";
  options.replica = "vllm-0";
  const std::string page = RenderIndexPage(options);
  EXPECT_NE(page.find("\"refresh_seconds\":1,"), std::string::npos);
  EXPECT_NE(page.find("\"windows\":[\"5m\",\"1h\",\"24h\"]"), std::string::npos);
  EXPECT_NE(page.find("\"api_base\":\"/kvwatch\""), std::string::npos);
  EXPECT_NE(page.find("<strong id=\"replica\">vllm-0</strong>"), std::string::npos);
  options.refresh_seconds = 30;
  EXPECT_NE(RenderIndexPage(options).find("\"refresh_seconds\":30,"), std::string::npos);
}

// ---------------------------------------------------------------- in the browser

TEST_F(BrowserTest, DrawsCurvesKneeTargetsConfiguredSizesAndTable) {
  const curve::CurveReport five = ComputeReport(1500);
  const curve::CurveReport hour = ComputeReport(4000);
  ASSERT_GT(five.requests, 0u);
  ASSERT_GT(five.plot.size(), 2u);
  ASSERT_TRUE(five.knee.has_value());
  const std::vector<std::uint64_t> configured = {500, 2000};
  FakeAgent::Options options;
  options.page.title = "kvwatch test";
  options.page.replica = "replica-a";
  options.page.refresh_seconds = 2;
  options.page.windows = {"5m"};
  options.curves = {{"5m", CurveJson(five, "5m", configured, 0.8125)}, {"1h", CurveJson(hour, "1h", configured)}};
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  const std::string dom = DumpDom(agent.PageUrl());
  const fs::path png = Screenshot(agent.PageUrl());
  agent.Stop();

  // Header: live status, a time of update, the window buttons from the API.
  EXPECT_EQ(Attribute(TagWithId(dom, "status"), "data-state"), "ok") << TextOf(dom, "status");
  EXPECT_NE(TextOf(dom, "updated"), "never");
  EXPECT_NE(TextOf(dom, "summary").find("window 5m: " + Grouped(five.requests) + " requests"), std::string::npos)
      << TextOf(dom, "summary");
  EXPECT_NE(TextOf(dom, "summary").find("; KV load factor 0.813"), std::string::npos) << TextOf(dom, "summary");
  const auto buttons = StartTags(dom, "button", "window");
  ASSERT_EQ(buttons.size(), 2u);
  EXPECT_EQ(Attribute(buttons[0], "data-window"), "5m");
  EXPECT_EQ(Attribute(buttons[0], "aria-pressed"), "true");
  EXPECT_EQ(Attribute(buttons[1], "data-window"), "1h");
  EXPECT_EQ(Attribute(buttons[1], "aria-pressed"), "false");
  EXPECT_NE(TagWithId(dom, "empty").find(" hidden"), std::string::npos);

  // Both curves as step lines over every plot sample, plus one segment to the edge.
  for (const char* cls : {"page-hit-ratio", "request-coverage"}) {
    const auto paths = StartTags(dom, "path", cls);
    ASSERT_EQ(paths.size(), 1u) << cls;
    const std::string d = Attribute(paths[0], "d");
    EXPECT_EQ(d.rfind("M", 0), 0u) << d;
    EXPECT_EQ(Count(d, 'L'), 2 * (five.plot.size() - 1) + 1) << cls;
  }
  EXPECT_EQ(StartTags(dom, "line", "unlimited").size(), 1u);

  // The knee, the page-hit targets 0.9/0.95/0.99 and the configured sizes.
  const auto knee = StartTags(dom, "line", "knee");
  ASSERT_EQ(knee.size(), 1u);
  EXPECT_EQ(Attribute(knee[0], "data-capacity-pages"), std::to_string(five.knee->capacity_pages));
  const auto targets = StartTags(dom, "circle", "target");
  std::vector<std::string> expected_targets;
  for (double f : {0.9, 0.95, 0.99}) {
    const auto* e = FindTarget(five, "page_hit", f);
    ASSERT_NE(e, nullptr);
    ASSERT_TRUE(e->capacity_pages.has_value());
    expected_targets.push_back(std::to_string(*e->capacity_pages));
  }
  ASSERT_EQ(targets.size(), expected_targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    EXPECT_EQ(Attribute(targets[i], "data-capacity-pages"), expected_targets[i]);
  }
  const auto lines = StartTags(dom, "line", "configured");
  ASSERT_EQ(lines.size(), configured.size());
  EXPECT_EQ(Attribute(lines[1], "data-capacity-pages"), "2000");
  EXPECT_FALSE(StartTags(dom, "text", "bytes").empty()) << "no byte axis although points have capacity_bytes";

  // The table: every target of both kinds, pages and bytes.
  for (const auto& e : five.working_set) {
    const std::string row = TableRow(dom, e.fraction);
    ASSERT_FALSE(row.empty()) << e.fraction;
    ASSERT_TRUE(e.capacity_pages && e.bytes);
    EXPECT_EQ(Cell(row, e.target + " pages"), Grouped(*e.capacity_pages)) << e.target << " " << e.fraction;
    EXPECT_EQ(Cell(row, e.target + " bytes"), HumanBytes(*e.bytes)) << e.target << " " << e.fraction;
  }

  // The screenshot is a PNG.
  ASSERT_TRUE(fs::exists(png));
  const std::string bytes = ReadFile(png);
  ASSERT_GT(bytes.size(), 1000u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST_F(BrowserTest, FragmentSelectsTheWindowAndPathPrefixWorks) {
  const curve::CurveReport five = ComputeReport(300);
  const curve::CurveReport hour = ComputeReport(900);
  FakeAgent::Options options;
  options.mount = "/kvwatch/";  // the API exists only under the prefix: URLs must be relative
  options.page.windows = {"5m", "1h"};
  options.curves = {{"5m", CurveJson(five, "5m", {}, 0.5)}, {"1h", CurveJson(hour, "1h", {})}};
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  const std::string dom = DumpDom(agent.PageUrl() + "#window=1h");
  agent.Stop();

  EXPECT_EQ(Attribute(TagWithId(dom, "status"), "data-state"), "ok") << TextOf(dom, "status");
  EXPECT_NE(TextOf(dom, "summary").find("window 1h: " + Grouped(hour.requests) + " requests"), std::string::npos)
      << TextOf(dom, "summary");
  EXPECT_EQ(TextOf(dom, "summary").find("KV load factor"), std::string::npos) << "5m's load factor, not 1h's";
  const auto buttons = StartTags(dom, "button", "window");
  ASSERT_EQ(buttons.size(), 2u);
  EXPECT_EQ(Attribute(buttons[1], "aria-pressed"), "true");
  const auto requested = agent.CurveRequests();
  ASSERT_FALSE(requested.empty());
  for (const std::string& w : requested) EXPECT_EQ(w, "1h");
  const auto paths = StartTags(dom, "path", "page-hit-ratio");
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(Count(Attribute(paths[0], "d"), 'L'), 2 * (hour.plot.size() - 1) + 1);
  // No configured sizes: no lines for them.
  EXPECT_TRUE(StartTags(dom, "line", "configured").empty());
}

TEST_F(BrowserTest, EmptyWindowSaysSo) {
  const curve::CurveReport none = ComputeReport(0);
  ASSERT_EQ(none.requests, 0u);
  FakeAgent::Options options;
  options.page.windows = {"5m"};
  options.curves = {{"5m", CurveJson(none, "5m", {1000})}};
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  const std::string dom = DumpDom(agent.PageUrl());
  agent.Stop();

  EXPECT_EQ(Attribute(TagWithId(dom, "status"), "data-state"), "ok") << TextOf(dom, "status");
  EXPECT_EQ(TagWithId(dom, "empty").find(" hidden"), std::string::npos) << "the empty-window notice is hidden";
  EXPECT_EQ(TextOf(dom, "empty"), "no requests in this window yet");
  const auto notes = StartTags(dom, "text", "empty-note");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(dom.find(notes[0] + "no requests in this window yet</text>"), std::string::npos);
  EXPECT_TRUE(StartTags(dom, "path", "page-hit-ratio").empty());
  EXPECT_TRUE(StartTags(dom, "line", "knee").empty());
  const auto message = StartTags(dom, "td", "message");
  ASSERT_EQ(message.size(), 1u);
  EXPECT_NE(dom.find(message[0] + "no requests in this window yet</td>"), std::string::npos);
}

TEST_F(BrowserTest, PolicyCanariesAreListedWithTheirGain) {
  const curve::CurveReport report = ComputeReport(1500);
  CurveApiContext context;
  context.window = "5m";
  context.capacities = {1000};
  context.policies = {{"vllm", 1000, 0.40, 0.60, 0.0, true},
                      {"s3fifo", 1000, 0.45, 0.62, 0.05, false},
                      {"fifo", 1000, 0.38, 0.58, -0.02, false}};
  FakeAgent::Options options;
  options.page.windows = {"5m"};
  options.curves = {{"5m", RenderCurveApiJson(report, context)}};
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  const std::string dom = DumpDom(agent.PageUrl());
  agent.Stop();

  EXPECT_EQ(TagWithId(dom, "policies").find(" hidden"), std::string::npos) << "the policy table is hidden";
  auto row = [&](const std::string& policy) {
    const std::size_t at = dom.find("data-policy=\"" + policy + "\"");
    if (at == std::string::npos) return std::string();
    return dom.substr(at, dom.find("</tr>", at) - at);
  };
  // Best first within a capacity; the engine's own row marked, gains signed.
  EXPECT_LT(dom.find("data-policy=\"s3fifo\""), dom.find("data-policy=\"vllm\""));
  EXPECT_LT(dom.find("data-policy=\"vllm\""), dom.find("data-policy=\"fifo\""));
  EXPECT_EQ(Cell(row("vllm"), "policy"), "vllm (engine)");
  EXPECT_EQ(Cell(row("s3fifo"), "page-hit"), "0.4500");
  EXPECT_EQ(Cell(row("s3fifo"), "gain"), "+0.0500");
  EXPECT_EQ(Cell(row("fifo"), "gain"), "-0.0200");
  EXPECT_NE(row("fifo").find("worse"), std::string::npos);
}

TEST_F(BrowserTest, NoCanariesNoPolicyTable) {
  const curve::CurveReport report = ComputeReport(300);
  FakeAgent::Options options;
  options.page.windows = {"5m"};
  options.curves = {{"5m", CurveJson(report, "5m", {})}};
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  const std::string dom = DumpDom(agent.PageUrl());
  agent.Stop();
  EXPECT_NE(TagWithId(dom, "policies").find(" hidden"), std::string::npos) << TagWithId(dom, "policies");
  EXPECT_NE(TagWithId(dom, "hybrid").find(" hidden"), std::string::npos) << "a dense curve shows no hybrid panel";
}

// A hybrid model's panel, from the real agent's answer: its working sets under the
// hybrid rule beside the full-attention count, the knee, and per group its pages
// and the bytes it holds at each page-hit working set. A dense curve hides it.
TEST_F(BrowserTest, HybridModelPanelShowsWorkingSetsAndGroupBytes) {
  const curve::ModelSpec spec = curve::LookupModelPreset("gpt-oss-20b").value();
  AgentOptions o;
  o.replica = "hybrid";
  o.page_tokens = 16;
  o.bytes_per_token = static_cast<double>(curve::BytesPerTokenPerRank(spec, 1).value());
  auto model = HybridModelFor(spec, 1, 16, curve::TouchOrder::kTailFirst, o.engine.max_pages,
                              o.engine.remembered_evictions, *o.bytes_per_token * 16);
  ASSERT_TRUE(model.ok() && model.value()) << (model.ok() ? "no groups" : model.error());
  o.hybrid = model.value();
  o.curve.windows = {{"5m", 300}};
  o.curve.capacities = {2000};
  o.http.port = 0;
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Agent& live = *created.value();
  collectors::SynthOptions synth;
  synth.seed = 7;
  synth.duration_s = 0;
  synth.max_requests = 1500;
  ASSERT_TRUE(collectors::GenerateSynth(synth, [&](const collectors::SynthRequest& r) {
                curve::Request request = r.request;
                request.timestamp_s = std::nan("");  // at the agent's clock: all in the window
                live.OnRequest(request);
              }).ok());
  FakeAgent::Options options;
  options.page.windows = {"5m"};
  options.curves = {{"5m", live.RenderCurveJson("5m")}};
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  window_height_ = 1900;  // the screenshot reaches the hybrid panel
  const std::string dom = DumpDom(agent.PageUrl());
  Screenshot(agent.PageUrl());
  agent.Stop();

  ASSERT_EQ(TagWithId(dom, "hybrid").find(" hidden"), std::string::npos) << "the hybrid panel is hidden";
  auto row = [&](const std::string& start) {
    const std::size_t at = dom.find(start);
    if (at == std::string::npos) return std::string();
    return dom.substr(at, dom.find("</tr>", at) - at);
  };
  const std::string ws = row("<tr data-target=\"page_hit\" data-fraction=\"0.9\">");
  ASSERT_FALSE(ws.empty()) << "no hybrid working-set row for page hit 0.9";
  EXPECT_TRUE(std::regex_search(Cell(ws, "hybrid"), std::regex("^[0-9.]+ (KiB|MiB|GiB|TiB)$"))) << ws;
  EXPECT_TRUE(std::regex_search(Cell(ws, "full"), std::regex("^[0-9.]+ (KiB|MiB|GiB|TiB)$"))) << ws;
  EXPECT_TRUE(std::regex_search(Cell(ws, "ratio"), std::regex("^[0-9]\\.[0-9]{3}$"))) << ws;
  EXPECT_NE(TextOf(dom, "hybrid-knee").find("hybrid knee: "), std::string::npos);
  const std::string window = row("<tr data-group=\"0\" data-kind=\"sliding_window\">");
  const std::string full = row("<tr data-group=\"1\" data-kind=\"full\">");
  ASSERT_FALSE(window.empty() || full.empty()) << dom.substr(dom.find("hybrid-groups"), 2000);
  EXPECT_EQ(Cell(window, "layers"), "12");
  EXPECT_EQ(Cell(window, "window"), "128 tokens");
  EXPECT_EQ(Cell(full, "window"), "\u2014");
  EXPECT_EQ(Cell(window, "page-bytes"), Cell(full, "page-bytes"));  // 12 layers each
  // One "held" cell per page-hit working set reached (0.5, 0.9, 0.95, 0.99 at most).
  const std::size_t held = CountOf(full, "class=\"held\"");
  EXPECT_GE(held, 2u);
  EXPECT_LE(held, 4u);
  EXPECT_EQ(CountOf(window, "class=\"held\""), held);
}

TEST_F(BrowserTest, TargetsThatDidNotConvergeAreSaidInWords) {
  // An engine that tracks fewer pages than the 0.99 working set needs.
  const curve::CurveReport full = ComputeReport(1500);
  const auto* p95 = FindTarget(full, "page_hit", 0.95);
  ASSERT_TRUE(p95 && p95->capacity_pages);
  const curve::CurveReport cut = ComputeReport(1500, *p95->capacity_pages);
  std::vector<double> missing;
  for (double f : {0.9, 0.95, 0.99}) {
    const auto* e = FindTarget(cut, "page_hit", f);
    ASSERT_NE(e, nullptr);
    if (!e->capacity_pages) missing.push_back(f);
  }
  ASSERT_FALSE(missing.empty()) << "the fixture converged everywhere; it tests nothing";
  FakeAgent::Options options;
  options.page.windows = {"5m"};
  options.curves = {{"5m", CurveJson(cut, "5m", {})}};
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  const std::string dom = DumpDom(agent.PageUrl());
  agent.Stop();

  EXPECT_EQ(Attribute(TagWithId(dom, "status"), "data-state"), "ok") << TextOf(dom, "status");
  EXPECT_EQ(StartTags(dom, "circle", "target").size(), 3 - missing.size());
  EXPECT_EQ(StartTags(dom, "text", "target-missing").size(), 1u);
  for (const auto& e : cut.working_set) {
    const std::string row = TableRow(dom, e.fraction);
    ASSERT_FALSE(row.empty()) << e.fraction;
    const std::string pages = Cell(row, e.target + " pages");
    if (e.capacity_pages) {
      EXPECT_EQ(pages, Grouped(*e.capacity_pages));
    } else {
      EXPECT_EQ(pages, "not converged") << e.target << " " << e.fraction;
      EXPECT_EQ(Cell(row, e.target + " bytes"), "not converged");
    }
  }
  if (cut.knee) {
    EXPECT_EQ(StartTags(dom, "line", "knee").size(), 1u);
  } else {
    EXPECT_EQ(StartTags(dom, "text", "knee-missing").size(), 1u);
  }
}

TEST_F(BrowserTest, ApiAnswering503IsReported) {
  FakeAgent::Options options;
  options.page.windows = {"5m"};
  options.curves = {{"5m", CurveJson(ComputeReport(200), "5m", {})}};
  options.curve_answers_before_503 = 0;
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  const std::string dom = DumpDom(agent.PageUrl());
  agent.Stop();

  EXPECT_EQ(Attribute(TagWithId(dom, "status"), "data-state"), "error");
  const std::string status = TextOf(dom, "status");
  EXPECT_NE(status.find("agent unavailable: HTTP 503 Service Unavailable: collector restarting"), std::string::npos)
      << status;
  EXPECT_NE(status.find("no data yet"), std::string::npos) << status;
  EXPECT_EQ(TextOf(dom, "updated"), "never");
  EXPECT_TRUE(StartTags(dom, "path", "page-hit-ratio").empty());
  const auto notes = StartTags(dom, "text", "empty-note");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(dom.find(notes[0] + "no data yet: agent unavailable</text>"), std::string::npos);
}

TEST_F(BrowserTest, AgentThatStopsAnsweringKeepsTheLastCurveDimmed) {
  const curve::CurveReport five = ComputeReport(300);
  FakeAgent::Options options;
  options.page.windows = {"5m"};
  options.page.refresh_seconds = 1;
  options.curves = {{"5m", CurveJson(five, "5m", {})}};
  options.curve_answers_before_503 = 1;
  FakeAgent agent(options);
  ASSERT_TRUE(agent.Start());
  const std::string dom = DumpDom(agent.PageUrl());
  agent.Stop();

  ASSERT_GE(agent.CurveRequests().size(), 2u) << "the page did not refresh";
  EXPECT_EQ(Attribute(TagWithId(dom, "status"), "data-state"), "error");
  const std::string status = TextOf(dom, "status");
  EXPECT_NE(status.find("agent unavailable: HTTP 503"), std::string::npos) << status;
  EXPECT_NE(status.find("showing data from"), std::string::npos) << status;
  EXPECT_NE(Attribute(TagWithId(dom, "curve"), "class").find("stale"), std::string::npos);
  ASSERT_EQ(StartTags(dom, "path", "page-hit-ratio").size(), 1u);
  EXPECT_FALSE(Attribute(StartTags(dom, "path", "page-hit-ratio")[0], "d").empty());
}

TEST_F(BrowserTest, AgentThatIsGoneIsReportedUnreachable) {
  // The API's port was bound, then released once the page's server holds its own
  // port: nothing listens there.
  FakeAgent gone(FakeAgent::Options{});
  ASSERT_TRUE(gone.Start());
  FakeAgent::Options options;
  options.page.windows = {"5m"};
  options.page.api_base = gone.Origin();
  options.content_security_policy = false;  // the API is on another origin here
  FakeAgent page_only(options);
  ASSERT_TRUE(page_only.Start());
  gone.Stop();
  const std::string dom = DumpDom(page_only.PageUrl());
  page_only.Stop();

  EXPECT_EQ(Attribute(TagWithId(dom, "status"), "data-state"), "error");
  const std::string status = TextOf(dom, "status");
  EXPECT_NE(status.find("agent unreachable"), std::string::npos) << status;
  EXPECT_NE(status.find(gone.Origin() + "/api/v1/curve?window=5m"), std::string::npos) << status;
  // The configured windows are offered although the list could not be fetched.
  const auto buttons = StartTags(dom, "button", "window");
  ASSERT_EQ(buttons.size(), 1u);
  EXPECT_EQ(Attribute(buttons[0], "data-window"), "5m");
}

// ---------------------------------------------------------------- the demo's page

// The rows of the group table for a dimension, as (start tag, inner HTML).
std::vector<std::pair<std::string, std::string>> GroupRows(const std::string& dom, const std::string& dimension) {
  std::vector<std::pair<std::string, std::string>> rows;
  const std::regex re("<tr data-dimension=\"" + dimension + "\"[^>]*>");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), re); it != std::sregex_iterator(); ++it) {
    const std::size_t start = static_cast<std::size_t>(it->position()) + it->length();
    rows.emplace_back(it->str(), dom.substr(start, dom.find("</tr>", start) - start));
  }
  return rows;
}

// The groups of a dimension in the agent's GET /api/v1/groups answer.
std::vector<std::string> ApiGroups(const std::string& json, const char* dimension) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return out;
  const simdjson::dom::array items =
      doc["dimensions"][dimension].get_array().value();  // named: value() of a temporary dangles
  for (simdjson::dom::element g : items) {
    out.emplace_back(g["group"].get_string().value());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// `kvwatch agent` with no config, one minute in: the real agent with the built-in
// config (on a port picked at run time), fed the first minute of its synthetic
// replica ending now, with a history sample every 5 s of it as the loop takes
// them, then serving the page to Chromium. Every panel shows: working sets in
// bytes, a row per tenant and class, the policy table, the configured cache on
// the curve and in the history, the working set and knee over time, and one line
// per panel saying what it answers.
TEST_F(BrowserTest, BuiltInReplicaShowsBytesTenantsClassesPoliciesCapacityAndHistory) {
  auto config = BuiltInAgentConfig();
  ASSERT_TRUE(config.ok()) << config.error();
  config.value().web.port = 0;
  auto validated = ValidateAgentConfig(config.value());
  ASSERT_TRUE(validated.ok()) << validated.error();
  ASSERT_EQ(validated.value().collectors.size(), 1u);
  collectors::SynthOptions synth = std::get<collectors::SynthOptions>(validated.value().collectors[0].options);
  const std::vector<std::uint64_t> capacities = validated.value().options.curve.capacities;
  ASSERT_EQ(capacities.size(), 1u);
  const std::string capacity = std::to_string(capacities[0]);
  auto created = Agent::Create(std::move(validated.value().options));
  ASSERT_TRUE(created.ok()) << created.error();
  Agent& agent = *created.value();

  synth.duration_s = 60;
  synth.max_requests = 0;
  std::vector<curve::Request> requests;
  auto generated =
      collectors::GenerateSynth(synth, [&](const collectors::SynthRequest& r) { requests.push_back(r.request); });
  ASSERT_TRUE(generated.ok()) << generated.error();
  ASSERT_GT(requests.size(), 100u);
  const double start = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() - 61;
  double next_sample = start;
  for (curve::Request& r : requests) {
    r.timestamp_s += start;
    for (; next_sample <= r.timestamp_s; next_sample += CurveHistory::kDefaultIntervalS)
      agent.RecordHistory(next_sample);
    agent.OnRequest(r);
  }
  agent.RecordHistory(start + 61);  // now, when the loop would take its next one

  std::thread loop([&] { agent.Run(); });
  for (int i = 0; i < 2000 && !agent.ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(agent.ready());
  const std::string url = "http://127.0.0.1:" + std::to_string(agent.port()) + "/";
  window_height_ = 2600;
  const std::string dom = DumpDom(url);
  const fs::path png = Screenshot(url);
  const std::string curve_json = agent.RenderCurveJson("5m");
  const std::string groups_json = agent.RenderGroupsJson("5m");
  agent.Stop();
  loop.join();

  EXPECT_EQ(Attribute(TagWithId(dom, "status"), "data-state"), "ok") << TextOf(dom, "status");
  EXPECT_EQ(TextOf(dom, "replica"), "demo");

  // One line per panel saying what it answers.
  const auto answers = StartTags(dom, "p", "answers");
  std::vector<std::string> panels;
  for (const std::string& tag : answers) panels.push_back(Attribute(tag, "data-panel"));
  EXPECT_EQ(panels, (std::vector<std::string>{"curve", "working-set", "history", "groups", "policies", "hybrid"}));

  // Working sets in bytes, as the agent computed them.
  simdjson::dom::parser parser;
  simdjson::dom::element curve;
  ASSERT_EQ(parser.parse(curve_json).get(curve), simdjson::SUCCESS) << curve_json;
  std::size_t with_bytes = 0;
  const simdjson::dom::array items = curve["working_set"].get_array().value();  // named: value() of a temporary dangles
  for (simdjson::dom::element e : items) {
    if (e["bytes"].is_null()) continue;
    const std::string target(e["target"].get_string().value());
    const std::string row = TableRow(dom, e["fraction"].get_double().value());
    EXPECT_EQ(Cell(row, target + " bytes"), HumanBytes(e["bytes"].get_double().value())) << row;
    ++with_bytes;
  }
  EXPECT_GE(with_bytes, 4u) << "the working sets have no bytes: " << curve_json;
  EXPECT_FALSE(StartTags(dom, "text", "bytes").empty()) << "no byte axis on the curve";

  // The configured cache on the curve; the knee found.
  const auto configured = StartTags(dom, "line", "configured");
  ASSERT_EQ(configured.size(), 1u);
  EXPECT_EQ(Attribute(configured[0], "data-capacity-pages"), capacity);
  EXPECT_EQ(StartTags(dom, "line", "knee").size(), 1u);

  // A row per tenant and class the agent saw, with the hit ratio at the cache size.
  EXPECT_EQ(TagWithId(dom, "groups").find(" hidden"), std::string::npos) << "the group table is hidden";
  for (const char* dimension : {"tenant", "class"}) {
    const auto rows = GroupRows(dom, dimension);
    std::vector<std::string> shown;
    for (const auto& [tag, inner] : rows) {
      shown.push_back(Attribute(tag, "data-group"));
      EXPECT_NE(Cell(inner, "hit-at"), "\u2014") << inner;
      EXPECT_NE(Cell(inner, "misses-at"), "\u2014") << inner;
    }
    std::sort(shown.begin(), shown.end());
    EXPECT_EQ(shown, ApiGroups(groups_json, dimension)) << dimension;
    EXPECT_GE(shown.size(), 2u) << dimension;
  }
  EXPECT_EQ(GroupRows(dom, "tenant").size(), static_cast<std::size_t>(synth.tenants));
  EXPECT_NE(TextOf(dom, "groups-hit-at").find(Grouped(capacities[0])), std::string::npos);

  // The policy table: the engine's lru and the two canaries at the cache size.
  EXPECT_EQ(TagWithId(dom, "policies").find(" hidden"), std::string::npos) << "the policy table is hidden";
  std::vector<std::string> policies;
  const std::regex policy_re("<tr data-policy=\"([^\"]+)\" data-capacity=\"([0-9]+)\"");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), policy_re); it != std::sregex_iterator(); ++it) {
    policies.push_back((*it)[1].str());
    EXPECT_EQ((*it)[2].str(), capacity);
  }
  std::sort(policies.begin(), policies.end());
  EXPECT_EQ(policies, (std::vector<std::string>{"lfu", "lru", "s3fifo"}));

  // The working set and the knee over time, against the cache size.
  EXPECT_EQ(TagWithId(dom, "history-panel").find(" hidden"), std::string::npos) << "the history is hidden";
  const auto history = StartTags(dom, "path", "history-working-set");
  ASSERT_EQ(history.size(), 2u);
  for (const std::string& path : history) EXPECT_GE(Count(Attribute(path, "d"), 'L'), 5u) << path;
  const auto knee = StartTags(dom, "path", "history-knee");
  ASSERT_EQ(knee.size(), 1u);
  EXPECT_GE(Count(Attribute(knee[0], "d"), 'L'), 3u) << knee[0];
  const auto history_capacity = StartTags(dom, "line", "history-capacity");
  ASSERT_EQ(history_capacity.size(), 1u);
  EXPECT_EQ(Attribute(history_capacity[0], "data-capacity-pages"), capacity);
  EXPECT_NE(TextOf(dom, "history-note").find("samples since"), std::string::npos) << TextOf(dom, "history-note");

  // The screenshot of the whole page.
  ASSERT_TRUE(fs::exists(png));
  const std::string bytes = ReadFile(png);
  ASSERT_GT(bytes.size(), 1000u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace kvwatch::agent
