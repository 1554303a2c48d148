// Tests of the deployment files under packaging/:
//
//   - The Debian package: `cpack -G DEB` on this build tree's CPackConfig.cmake
//     (packaging/cpack.cmake), output and staging in a temp dir, extracted with
//     `dpkg-deb -x` into a throwaway root (nothing is installed on the system).
//     The files land where the unit expects them: ExecStart's binary, the
//     EnvironmentFile, the --config file of its ARGS, the state directory in the
//     config, the dashboard where the Grafana provisioning file points, the rule
//     files; /etc files are conffiles; Depends was computed; the maintainer
//     scripts parse; the packaged binary runs and accepts the packaged config;
//     `systemd-analyze verify` accepts the extracted unit (its paths rewritten
//     into the extracted root) without a warning.
//   - The systemd unit's `systemd-analyze security --offline=true` exposure is
//     at most 2.0 (printed).
//   - The shipped configs pass `kvwatch check-config`, and so does the default
//     config with every commented example uncommented.
//   - The Dockerfile, read by a small parser: FROM first, known instructions,
//     stages named and used by COPY --from, a non-root USER in the final stage,
//     Debian 12 bases, no build dependencies in the runtime stage, EXPOSE 8477,
//     ENTRYPOINT kvwatch agent with a config the image copies in.
//   - The Kubernetes manifests: every document parses and has apiVersion, kind
//     and metadata.name; the pod runs vLLM with prefix caching and ZeroMQ KV
//     events and kvwatch as a native sidecar that reads the shared log volume
//     read-only, subscribes to vLLM's endpoint over localhost, runs non-root on
//     a read-only root file system and serves the port the PodMonitor scrapes;
//     the PrometheusRule holds the rule files' groups (or, without them, an
//     alert for each of the agent's PromQL-expressible alerts).
//
// Parts skip when a tool (cpack, dpkg-deb, systemd-analyze) is absent. The
// package test fails when the build tree has no CPackConfig.cmake: the top-level
// CMakeLists.txt must include packaging/cpack.cmake.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/file.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/agent/deploy_checks.h"
#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers
using namespace deploy_checks;    // NOLINT(build/namespaces): test helpers
namespace fs = std::filesystem;

const std::string kSource = KVWATCH_SOURCE_DIR;
const std::string kPackaging = kSource + "/packaging";
constexpr Millis kCommandTimeout{120000};
constexpr Millis kPackageTimeout{300000};

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += "  " + s + "\n";
  return out;
}

// `kvwatch check-config FILE`: nullopt when valid, else why.
std::optional<std::string> CheckConfig(const std::string& file) {
  const CommandResult r = RunCommand({KVWATCH_BINARY, "check-config", file}, kCommandTimeout);
  if (r.Exited(0)) return std::nullopt;
  return r.Describe();
}

// Writes text to a file of dir and checks it as a config.
std::optional<std::string> CheckConfigText(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.Sub(name);
  if (!WriteFile(path, text)) return "cannot write " + path;
  return CheckConfig(path);
}

// The default config's commented examples ("# key: value" lines, at any depth) uncommented.
std::string Uncommented(const std::string& text) {
  static const std::regex kExample(R"(^(\s*)# (\s*(- )?[a-z_]+:( .*)?)$)");
  std::string out, line;
  std::istringstream in(text);
  while (std::getline(in, line)) out += std::regex_replace(line, kExample, "$1$2") + "\n";
  return out;
}

// ------------------------------------------------------------------ configs

TEST(PackagingConfigTest, ShippedConfigsAreValid) {
  for (const std::string& file : {kPackaging + "/kvwatch.yml", kPackaging + "/container/kvwatch.yml"}) {
    const auto problem = CheckConfig(file);
    EXPECT_FALSE(problem.has_value()) << file << ": " << *problem;
  }
  const YAML::Node config = YAML::LoadFile(kPackaging + "/kvwatch.yml");
  EXPECT_EQ(config["state"]["path"].as<std::string>(""), "/var/lib/kvwatch");
  EXPECT_EQ(config["web"]["listen_address"].as<std::string>(""), "127.0.0.1");
  EXPECT_EQ(config["web"]["port"].as<int>(0), 8477);
}

TEST(PackagingConfigTest, CommentedExamplesAreValidWhenUncommented) {
  TempDir dir("kvwatch_packaging_test");
  ASSERT_TRUE(dir.ok());
  const std::string original = ReadFile(kPackaging + "/kvwatch.yml");
  const std::string text = Uncommented(original);
  // The examples are there: a trace_files collector among them.
  ASSERT_NE(text, original);
  const YAML::Node config = YAML::Load(text);
  ASSERT_TRUE(config["collectors"]["trace_files"].IsSequence()) << text;
  EXPECT_TRUE(config["curve"]["capacities"].IsSequence()) << text;
  const auto problem = CheckConfigText(dir, "uncommented.yml", text);
  EXPECT_FALSE(problem.has_value()) << *problem << "\n" << text;
}

// ------------------------------------------------------------------ systemd

TEST(SystemdUnitTest, SecurityExposureIsLow) {
  const std::string analyze = FindProgram("systemd-analyze");
  if (analyze.empty()) GTEST_SKIP() << "systemd-analyze is not installed";
  const std::string unit = kPackaging + "/systemd/kvwatch-agent.service";
  const CommandResult r = RunCommand({analyze, "security", "--offline=true", "--no-pager", unit}, kCommandTimeout);
  std::smatch m;
  const std::string all = r.out + r.err;
  static const std::regex kLevel(R"(Overall exposure level for kvwatch-agent\.service: ([0-9.]+) (\S+))");
  ASSERT_TRUE(std::regex_search(all, m, kLevel)) << r.Describe();
  const double exposure = std::stod(m[1].str());
  std::cout << "[ systemd ] systemd-analyze security --offline=true: exposure " << m[1].str() << " " << m[2].str()
            << "\n";
  EXPECT_LE(exposure, 2.0) << all;
}

TEST(SystemdUnitTest, UnitHasTheHardeningTheDocsPromise) {
  const auto unit = ParseUnit(ReadFile(kPackaging + "/systemd/kvwatch-agent.service"));
  const std::map<std::string, std::string> expected = {{"DynamicUser", "yes"},
                                                       {"StateDirectory", "kvwatch"},
                                                       {"ProtectSystem", "strict"},
                                                       {"ProtectHome", "yes"},
                                                       {"PrivateTmp", "yes"},
                                                       {"NoNewPrivileges", "yes"},
                                                       {"CapabilityBoundingSet", ""},
                                                       {"MemoryDenyWriteExecute", "yes"},
                                                       {"RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"},
                                                       {"EnvironmentFile", "-/etc/default/kvwatch-agent"},
                                                       {"ExecStart", "/usr/bin/kvwatch agent $ARGS"}};
  for (const auto& [key, value] : expected) {
    const auto values = UnitValues(unit, "Service", key);
    ASSERT_EQ(values.size(), 1u) << key;
    EXPECT_EQ(values[0], value) << key;
  }
  const auto filters = UnitValues(unit, "Service", "SystemCallFilter");
  EXPECT_NE(std::find(filters.begin(), filters.end(), "@system-service"), filters.end());
  EXPECT_EQ(UnitValues(unit, "Install", "WantedBy"), std::vector<std::string>{"multi-user.target"});
}

// ------------------------------------------------------------------ Debian package

// The build tree of KVWATCH_BINARY: the nearest ancestor with a CMakeCache.txt.
std::string BuildDir() {
  for (fs::path p = fs::path(KVWATCH_BINARY).parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (fs::exists(p / "CMakeCache.txt")) return p.string();
  }
  return "";
}

// The newest modification time (ns since the epoch) of the package's inputs: the
// binary, CPackConfig.cmake, and every file under packaging/ and docs/ and README.md.
std::string PackageInputsKey(const std::string& build) {
  fs::file_time_type newest = fs::last_write_time(KVWATCH_BINARY);
  auto consider = [&](const fs::path& p) {
    std::error_code ec;
    const fs::file_time_type t = fs::last_write_time(p, ec);
    if (!ec && t > newest) newest = t;
  };
  consider(fs::path(build) / "CPackConfig.cmake");
  consider(fs::path(kSource) / "README.md");
  for (const char* dir : {"packaging", "docs"}) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(fs::path(kSource) / dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      consider(it->path());
    }
  }
  return std::to_string(newest.time_since_epoch().count());
}

class DebPackageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string cpack = FindProgram("cpack");
    dpkg_deb_ = FindProgram("dpkg-deb");
    if (cpack.empty() || dpkg_deb_.empty()) {
      skip_ = "cpack or dpkg-deb is not installed";
      return;
    }
    const std::string build = BuildDir();
    if (build.empty() || !fs::exists(fs::path(build) / "CPackConfig.cmake")) {
      error_ = "no CPackConfig.cmake in the build tree " + build +
               ": the top-level CMakeLists.txt must include(packaging/cpack.cmake)";
      return;
    }
    // One package per set of inputs, shared by this suite's tests: ctest runs each
    // test in a process of its own, so making it per process meant four cpack runs
    // (50 s each on a loaded 2-core machine). <build>/tests/deb_package/<key>/ holds
    // it, made under an exclusive flock, where the key is the newest modification
    // time of what packaging/cpack.cmake installs (the binary, packaging/,
    // README.md, docs/) and of CPackConfig.cmake.
    const std::string cache = (fs::path(build) / "tests" / "deb_package").string();
    fs::create_directories(cache);
    const std::string out = (fs::path(cache) / PackageInputsKey(build)).string();
    const int lock = open((fs::path(cache) / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0 || flock(lock, LOCK_EX) != 0) {
      error_ = "cannot lock " + cache + "/lock";
      if (lock >= 0) close(lock);
      return;
    }
    const bool made_before = fs::exists(fs::path(out) / "made");
    CommandResult made;
    if (!made_before) {
      std::error_code ignored;
      for (const auto& old : fs::directory_iterator(cache)) {
        if (old.is_directory()) fs::remove_all(old.path(), ignored);  // packages of older inputs
      }
      made = RunCommand({cpack, "-G", "DEB", "--config", (fs::path(build) / "CPackConfig.cmake").string(), "-B", out},
                        kPackageTimeout);
      if (made.Exited(0)) {
        std::ofstream(fs::path(out) / "made") << made.out << made.err;
      }
    }
    close(lock);
    if (!made_before && !made.Exited(0)) {
      error_ = "cpack -G DEB: " + made.Describe();
      return;
    }
    for (const auto& entry : fs::directory_iterator(out)) {
      if (entry.path().extension() == ".deb") deb_ = entry.path().string();
    }
    if (deb_.empty()) {
      error_ = "cpack made no .deb in " + out + ":\n" + ReadFile((fs::path(out) / "made").string());
      return;
    }
    cpack_output_ = ReadFile((fs::path(out) / "made").string());
    dir_ = std::make_unique<TempDir>("kvwatch_packaging_test");
    root_ = dir_->Sub("root");
    control_ = dir_->Sub("control");
    for (const auto& args : {std::vector<std::string>{dpkg_deb_, "-x", deb_, root_},
                             std::vector<std::string>{dpkg_deb_, "-e", deb_, control_}}) {
      const CommandResult r = RunCommand(args, kCommandTimeout);
      if (!r.Exited(0)) {
        error_ = args[1] + " " + deb_ + ": " + r.Describe();
        return;
      }
    }
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(error_.empty()) << error_;
  }

  static std::string InRoot(const std::string& absolute) { return root_ + absolute; }

  // The unit as packaged.
  static std::vector<UnitEntry> Unit() {
    return ParseUnit(ReadFile(InRoot("/lib/systemd/system/kvwatch-agent.service")));
  }

  // The --config argument of ARGS in the packaged environment file.
  static std::string ConfigFromArgs(const std::string& env_file) {
    static const std::regex kArgs(R"re(^ARGS="([^"]*)")re");
    std::istringstream in(ReadFile(env_file));
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, kArgs)) continue;
      const std::vector<std::string> words = Words(m[1].str());
      for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        if (words[i] == "--config") return words[i + 1];
      }
    }
    return "";
  }

  static inline std::string skip_, error_, dpkg_deb_, deb_, root_, control_, cpack_output_;
  static inline std::unique_ptr<TempDir> dir_;
};

TEST_F(DebPackageTest, FilesLandWhereTheUnitExpectsThem) {
  const auto unit = Unit();
  // ExecStart's program.
  const auto exec = UnitValues(unit, "Service", "ExecStart");
  ASSERT_EQ(exec.size(), 1u);
  const std::string program = Words(exec[0]).at(0);
  ASSERT_EQ(program.front(), '/') << program;
  EXPECT_EQ(::access(InRoot(program).c_str(), X_OK), 0) << program << " is not an executable in the package";
  // The environment file and the config its ARGS name.
  const auto env = UnitValues(unit, "Service", "EnvironmentFile");
  ASSERT_EQ(env.size(), 1u);
  const std::string env_file = env[0].front() == '-' ? env[0].substr(1) : env[0];
  ASSERT_TRUE(fs::is_regular_file(InRoot(env_file))) << env_file;
  const std::string config = ConfigFromArgs(InRoot(env_file));
  ASSERT_EQ(config, "/etc/kvwatch/kvwatch.yml") << ReadFile(InRoot(env_file));
  ASSERT_TRUE(fs::is_regular_file(InRoot(config)));
  // The config keeps its state in the unit's StateDirectory.
  const auto state_dir = UnitValues(unit, "Service", "StateDirectory");
  ASSERT_EQ(state_dir.size(), 1u);
  EXPECT_EQ(YAML::LoadFile(InRoot(config))["state"]["path"].as<std::string>(""), "/var/lib/" + state_dir[0]);
  // The packaged files are the sources.
  const std::map<std::string, std::string> copies = {
      {"/lib/systemd/system/kvwatch-agent.service", "/systemd/kvwatch-agent.service"},
      {"/etc/default/kvwatch-agent", "/systemd/kvwatch-agent.default"},
      {"/etc/kvwatch/kvwatch.yml", "/kvwatch.yml"},
      {"/usr/share/kvwatch/grafana/dashboards/kvwatch.json", "/grafana/kvwatch.json"},
      {"/usr/share/kvwatch/grafana/provisioning/dashboards/kvwatch.yml",
       "/grafana/provisioning/dashboards/kvwatch.yml"},
      {"/usr/share/kvwatch/grafana/provisioning/datasources/prometheus.yml",
       "/grafana/provisioning/datasources/prometheus.yml"},
      {"/usr/share/kvwatch/kubernetes/deployment.yaml", "/kubernetes/deployment.yaml"},
      {"/usr/share/kvwatch/container/Dockerfile", "/container/Dockerfile"}};
  for (const auto& [installed, source] : copies) {
    ASSERT_TRUE(fs::is_regular_file(InRoot(installed))) << installed << " is not in the package";
    EXPECT_EQ(ReadFile(InRoot(installed)), ReadFile(kPackaging + source)) << installed;
  }
  // The README and every file of docs/ (which the README links to), side by
  // side as in the repository, so the README's relative links resolve.
  const fs::path source = fs::path(KVWATCH_SOURCE_DIR);
  ASSERT_TRUE(fs::is_regular_file(InRoot("/usr/share/doc/kvwatch/README.md"))) << "README.md is not in the package";
  EXPECT_EQ(ReadFile(InRoot("/usr/share/doc/kvwatch/README.md")), ReadFile((source / "README.md").string()));
  std::size_t docs = 0;
  for (const auto& entry : fs::recursive_directory_iterator(source / "docs")) {
    if (!entry.is_regular_file()) continue;
    const std::string installed = "/usr/share/doc/kvwatch/docs/" + fs::relative(entry.path(), source / "docs").string();
    ++docs;
    ASSERT_TRUE(fs::is_regular_file(InRoot(installed))) << installed << " is not in the package";
    EXPECT_EQ(ReadFile(InRoot(installed)), ReadFile(entry.path().string())) << installed;
  }
  EXPECT_GT(docs, 0u) << (source / "docs") << " has no files";
  // Grafana's provisioning points at the packaged dashboard.
  const YAML::Node provisioning =
      YAML::LoadFile(InRoot("/usr/share/kvwatch/grafana/provisioning/dashboards/kvwatch.yml"));
  const std::string dashboards = provisioning["providers"][0]["options"]["path"].as<std::string>("");
  EXPECT_TRUE(fs::is_regular_file(InRoot(dashboards + "/kvwatch.json"))) << dashboards;
  // Every rule file of packaging/prometheus/ is shipped (promtool test files,
  // which have no groups, need not be).
  if (fs::is_directory(kPackaging + "/prometheus")) {
    for (const auto& entry : fs::directory_iterator(kPackaging + "/prometheus")) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".yml" && ext != ".yaml") continue;
      if (!YAML::LoadFile(entry.path().string())["groups"]) continue;
      EXPECT_TRUE(fs::is_regular_file(InRoot("/usr/share/kvwatch/prometheus/" + entry.path().filename().string())))
          << entry.path() << " is not in the package";
    }
  }
}

TEST_F(DebPackageTest, PackagedBinaryRunsWithThePackagedConfig) {
  const CommandResult version = RunCommand({InRoot("/usr/bin/kvwatch"), "--version"}, kCommandTimeout);
  EXPECT_TRUE(version.Exited(0)) << version.Describe();
  const CommandResult check =
      RunCommand({InRoot("/usr/bin/kvwatch"), "check-config", InRoot("/etc/kvwatch/kvwatch.yml")}, kCommandTimeout);
  EXPECT_TRUE(check.Exited(0)) << check.Describe();
}

TEST_F(DebPackageTest, ControlHasDependsConffilesAndMaintainerScripts) {
  const CommandResult fields = RunCommand({dpkg_deb_, "-f", deb_}, kCommandTimeout);
  ASSERT_TRUE(fields.Exited(0)) << fields.Describe();
  EXPECT_NE(fields.out.find("Package: kvwatch\n"), std::string::npos) << fields.out;
  if (!FindProgram("dpkg-shlibdeps").empty()) {
    for (const char* lib : {"libc6", "libyaml-cpp", "libsimdjson", "libssl"}) {
      EXPECT_TRUE(std::regex_search(fields.out, std::regex(std::string("\nDepends: .*") + lib)))
          << "Depends lacks " << lib << ":\n"
          << fields.out;
    }
  } else {
    std::cout << "[ package ] dpkg-shlibdeps is absent: Depends not checked\n";
  }
  // Every file under /etc is a conffile, and only those.
  std::set<std::string> etc;
  for (const auto& entry : fs::recursive_directory_iterator(InRoot("/etc"))) {
    if (entry.is_regular_file()) etc.insert(entry.path().string().substr(root_.size()));
  }
  std::set<std::string> conffiles;
  std::istringstream in(ReadFile(control_ + "/conffiles"));
  for (std::string line; std::getline(in, line);) {
    if (!Trim(line).empty()) conffiles.insert(Trim(line));
  }
  EXPECT_EQ(conffiles, etc);
  EXPECT_EQ(etc.count("/etc/kvwatch/kvwatch.yml"), 1u);
  // The maintainer scripts are executable shell that parses and handles the unit.
  for (const char* script : {"postinst", "prerm", "postrm"}) {
    const std::string path = control_ + "/" + script;
    ASSERT_TRUE(fs::is_regular_file(path)) << script;
    EXPECT_EQ(::access(path.c_str(), X_OK), 0) << script;
    const CommandResult parsed = RunCommand({"/bin/sh", "-n", path}, kCommandTimeout);
    EXPECT_TRUE(parsed.Exited(0)) << script << ": " << parsed.Describe();
    EXPECT_NE(ReadFile(path).find("kvwatch-agent.service"), std::string::npos) << script;
  }
}

TEST_F(DebPackageTest, SystemdVerifiesTheExtractedUnit) {
  const std::string analyze = FindProgram("systemd-analyze");
  if (analyze.empty()) GTEST_SKIP() << "systemd-analyze is not installed";
  // The unit with its absolute paths moved into the extracted root, so that
  // verify checks the packaged binary rather than the host's.
  std::string text = ReadFile(InRoot("/lib/systemd/system/kvwatch-agent.service"));
  for (const std::string& from : {std::string("ExecStart=/usr/bin/"), std::string("EnvironmentFile=-/etc/")}) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    const std::string prefix = from.substr(0, from.find('/'));
    text.replace(at, from.size(), prefix + root_ + from.substr(prefix.size()));
  }
  const std::string unit = dir_->Sub("kvwatch-agent.service");
  ASSERT_TRUE(WriteFile(unit, text));
  const CommandResult r = RunCommand({analyze, "verify", "--no-pager", unit}, kCommandTimeout);
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(Trim(r.out + r.err), "") << "systemd-analyze verify warned:\n" << r.Describe();
}

// ------------------------------------------------------------------ Dockerfile

base::Result<std::vector<DockerInstruction>> ShippedDockerfile() {
  return ParseDockerfile(ReadFile(kPackaging + "/container/Dockerfile"));
}

TEST(DockerfileTest, ShippedDockerfileFollowsTheRules) {
  auto parsed = ShippedDockerfile();
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  const auto problems = CheckDockerfile(parsed.value());
  EXPECT_TRUE(problems.empty()) << Join(problems);
  const std::vector<DockerStage> stages = DockerStages(parsed.value());
  ASSERT_GE(stages.size(), 2u) << "multi-stage: a build stage and a runtime stage";
  for (const DockerStage& s : stages) EXPECT_EQ(s.image.rfind("debian:bookworm", 0), 0u) << s.image;
  const DockerStage& runtime = stages.back();
  std::vector<std::string> entrypoint, cmd;
  std::string copied_config;
  bool exposes = false;
  for (const DockerInstruction& in : runtime.instructions) {
    if (in.keyword == "EXPOSE") exposes = exposes || in.args.find("8477") != std::string::npos;
    if (in.keyword == "ENTRYPOINT") {
      ASSERT_TRUE(IsJsonStringArray(in.args, &entrypoint)) << in.args;
    }
    if (in.keyword == "CMD") {
      ASSERT_TRUE(IsJsonStringArray(in.args, &cmd)) << in.args;
    }
    if (in.keyword == "RUN") {
      EXPECT_FALSE(std::regex_search(in.args, std::regex(R"([a-z0-9+.]-dev\b)")))
          << "line " << in.line << ": the runtime stage installs a -dev package";
      EXPECT_EQ(in.args.find("install-deps.sh"), std::string::npos) << "line " << in.line;
    }
    const std::vector<std::string> words = Words(in.args);
    if (in.keyword == "COPY" && words.size() == 2 && words[0] == "packaging/container/kvwatch.yml") {
      copied_config = words[1];
    }
  }
  EXPECT_TRUE(exposes) << "no EXPOSE 8477 in the final stage";
  EXPECT_EQ(entrypoint, (std::vector<std::string>{"/usr/bin/kvwatch", "agent"}));
  ASSERT_EQ(cmd.size(), 2u);
  EXPECT_EQ(cmd[0], "--config");
  EXPECT_EQ(cmd[1], copied_config) << "CMD's config is not the one the image copies in";
  // Every COPY source from the build context exists in the repository.
  for (const DockerStage& s : stages) {
    for (const DockerInstruction& in : s.instructions) {
      if (in.keyword != "COPY" || in.args.find("--from=") != std::string::npos) continue;
      const std::vector<std::string> words = Words(in.args);
      for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        EXPECT_TRUE(fs::exists(kSource + "/" + words[i])) << "line " << in.line << ": " << words[i];
      }
    }
  }
}

TEST(DockerfileTest, CheckerCatchesEachKindOfMistake) {
  const std::string good =
      "# syntax=docker/dockerfile:1\nFROM debian:bookworm AS build\nRUN echo a \\\n  b\n"
      "FROM debian:bookworm-slim\nCOPY --from=build /x /x\nUSER 10001:10001\nENTRYPOINT [\"/x\"]\n";
  auto parsed = ParseDockerfile(good);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_TRUE(CheckDockerfile(parsed.value()).empty()) << Join(CheckDockerfile(parsed.value()));
  ASSERT_EQ(parsed.value().size(), 6u);
  EXPECT_EQ(parsed.value()[1].args, "echo a b");
  struct Case {
    std::string name;
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"root user", "FROM debian:bookworm\nUSER root\n", "runs as root"},
      {"uid 0", "FROM debian:bookworm\nUSER 0:0\n", "runs as root"},
      {"no user", "FROM debian:bookworm\nRUN true\n", "sets no USER"},
      {"unknown instruction", "FROM debian:bookworm\nRUNN true\nUSER 1\n", "unknown instruction"},
      {"RUN first", "RUN true\nFROM debian:bookworm\nUSER 1\n", "first instruction"},
      {"unknown stage", "FROM debian:bookworm AS build\nFROM debian:bookworm\nCOPY --from=biuld /a /a\nUSER 1\n",
       "names no earlier stage"},
      {"later stage", "FROM debian:bookworm\nCOPY --from=late /a /a\nFROM debian:bookworm AS late\nUSER 1\n",
       "names no earlier stage"},
      {"duplicate stage", "FROM debian:bookworm AS a\nFROM debian:bookworm AS a\nUSER 1\n", "used twice"},
      {"bad exec form", "FROM debian:bookworm\nUSER 1\nENTRYPOINT [\"/x\", agent]\n", "JSON array"},
      {"bad FROM", "FROM debian:bookworm build\nUSER 1\n", "expected FROM"},
  };
  for (const Case& c : cases) {
    auto p = ParseDockerfile(c.text);
    ASSERT_TRUE(p.ok()) << c.name << ": " << p.error();
    const auto problems = CheckDockerfile(p.value());
    bool found = false;
    for (const std::string& s : problems) found = found || s.find(c.expected) != std::string::npos;
    EXPECT_TRUE(found) << c.name << ": expected \"" << c.expected << "\", got:\n" << Join(problems);
  }
  EXPECT_FALSE(ParseDockerfile("FROM debian:bookworm\nRUN a \\\n").ok());
}

// ------------------------------------------------------------------ Kubernetes

struct Manifests {
  std::vector<std::pair<std::string, YAML::Node>> docs;  // file, document
  std::vector<std::string> problems;

  std::vector<YAML::Node> OfKind(const std::string& kind) const {
    std::vector<YAML::Node> out;
    for (const auto& [file, doc] : docs) {
      if (doc["kind"].as<std::string>("") == kind) out.push_back(doc);
    }
    return out;
  }
};

Manifests LoadManifests() {
  Manifests m;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kPackaging + "/kubernetes")) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".yaml" || ext == ".yml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    try {
      for (const YAML::Node& doc : YAML::LoadAllFromFile(file.string())) {
        if (!doc || doc.IsNull()) continue;
        m.docs.emplace_back(file.filename().string(), doc);
      }
    } catch (const YAML::Exception& e) {
      m.problems.push_back(file.string() + ": " + e.what());
    }
  }
  return m;
}

// The entry of a list of maps (containers, ports, volumes) named name, or a
// null node (which is not a map; note that a null YAML::Node converts to true).
YAML::Node Named(const YAML::Node& list, const std::string& name) {
  if (list.IsSequence()) {
    for (const YAML::Node& c : list) {
      if (c["name"].as<std::string>("") == name) return c;
    }
  }
  return YAML::Node();
}

// The volumeMount of a container for a volume, or a null node.
YAML::Node MountOf(const YAML::Node& container, const std::string& volume) {
  if (container["volumeMounts"].IsSequence()) {
    for (const YAML::Node& m : container["volumeMounts"]) {
      if (m["name"].as<std::string>("") == volume) return m;
    }
  }
  return YAML::Node();
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

class KubernetesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manifests_ = LoadManifests();
    ASSERT_TRUE(manifests_.problems.empty()) << Join(manifests_.problems);
    const auto deployments = manifests_.OfKind("Deployment");
    ASSERT_EQ(deployments.size(), 1u);
    pod_ = deployments[0]["spec"]["template"];
    kvwatch_ = Named(pod_["spec"]["initContainers"], "kvwatch");
    vllm_ = Named(pod_["spec"]["containers"], "vllm");
    ASSERT_TRUE(kvwatch_.IsMap()) << "no init container named kvwatch";
    ASSERT_TRUE(vllm_.IsMap()) << "no container named vllm";
    const auto maps = manifests_.OfKind("ConfigMap");
    ASSERT_EQ(maps.size(), 1u);
    config_map_ = maps[0];
    kvwatch_config_ = YAML::Load(config_map_["data"]["kvwatch.yml"].as<std::string>(""));
  }

  // vLLM's --kv-events-config, parsed: {endpoint, topic}; the test fails when malformed.
  std::pair<std::string, std::string> KvEventsConfig() {
    std::vector<std::string> args;
    for (const YAML::Node& a : vllm_["args"]) args.push_back(a.as<std::string>());
    const auto it = std::find(args.begin(), args.end(), "--kv-events-config");
    EXPECT_TRUE(it != args.end() && it + 1 != args.end()) << "vLLM has no --kv-events-config";
    if (it == args.end() || it + 1 == args.end()) return {};
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    bool enabled = false;
    std::string_view publisher, endpoint, topic;
    EXPECT_EQ(parser.parse(*(it + 1)).get(doc), simdjson::SUCCESS) << *(it + 1);
    EXPECT_EQ(doc["enable_kv_cache_events"].get(enabled), simdjson::SUCCESS);
    EXPECT_TRUE(enabled);
    EXPECT_EQ(doc["publisher"].get(publisher), simdjson::SUCCESS);
    EXPECT_EQ(publisher, "zmq");
    EXPECT_EQ(doc["endpoint"].get(endpoint), simdjson::SUCCESS);
    EXPECT_EQ(doc["topic"].get(topic), simdjson::SUCCESS);
    return {std::string(endpoint), std::string(topic)};
  }

  Manifests manifests_;
  YAML::Node pod_, kvwatch_, vllm_, config_map_, kvwatch_config_;
};

TEST_F(KubernetesTest, EveryDocumentHasIdentity) {
  ASSERT_GE(manifests_.docs.size(), 4u);
  std::set<std::string> kinds;
  for (const auto& [file, doc] : manifests_.docs) {
    EXPECT_FALSE(doc["apiVersion"].as<std::string>("").empty()) << file;
    EXPECT_FALSE(doc["kind"].as<std::string>("").empty()) << file;
    EXPECT_FALSE(doc["metadata"]["name"].as<std::string>("").empty()) << file;
    kinds.insert(doc["kind"].as<std::string>(""));
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"ConfigMap", "Deployment", "PodMonitor", "PrometheusRule"}));
  for (const auto& [file, doc] : manifests_.docs) {
    const std::string kind = doc["kind"].as<std::string>("");
    if (kind == "PodMonitor" || kind == "PrometheusRule") {
      EXPECT_EQ(doc["apiVersion"].as<std::string>(""), "monitoring.coreos.com/v1") << file;
    }
  }
}

TEST_F(KubernetesTest, VllmPublishesKvEventsWithPrefixCaching) {
  EXPECT_TRUE(StartsWith(vllm_["image"].as<std::string>(""), "vllm/vllm-openai")) << vllm_["image"];
  std::vector<std::string> args;
  for (const YAML::Node& a : vllm_["args"]) args.push_back(a.as<std::string>());
  EXPECT_NE(std::find(args.begin(), args.end(), "--enable-prefix-caching"), args.end());
  const auto [endpoint, topic] = KvEventsConfig();
  EXPECT_EQ(endpoint, "tcp://*:5557");
  EXPECT_EQ(topic, "kv-events");
}

TEST_F(KubernetesTest, KvwatchIsANativeSidecarSharingLogsAndEvents) {
  EXPECT_EQ(kvwatch_["restartPolicy"].as<std::string>(""), "Always") << "a native sidecar needs restartPolicy: Always";
  // The log volume: an emptyDir vLLM writes and kvwatch reads only.
  const YAML::Node volumes = pod_["spec"]["volumes"];
  std::string log_volume;
  for (const YAML::Node& v : volumes) {
    const std::string name = v["name"].as<std::string>("");
    const YAML::Node in_kvwatch = MountOf(kvwatch_, name), in_vllm = MountOf(vllm_, name);
    if (v["emptyDir"] && in_kvwatch.IsMap() && in_vllm.IsMap()) log_volume = name;
  }
  ASSERT_FALSE(log_volume.empty()) << "no emptyDir volume mounted in both containers";
  const YAML::Node kv_mount = MountOf(kvwatch_, log_volume), vllm_mount = MountOf(vllm_, log_volume);
  EXPECT_TRUE(kv_mount["readOnly"].as<bool>(false)) << "the log volume must be read-only in kvwatch";
  EXPECT_FALSE(vllm_mount["readOnly"].as<bool>(false));
  const std::string kv_logs = kv_mount["mountPath"].as<std::string>();
  const std::string vllm_logs = vllm_mount["mountPath"].as<std::string>();
  // kvwatch tails the file vLLM's logging config writes, through its own mount.
  const YAML::Node engine_log = kvwatch_config_["collectors"]["engine_log"];
  ASSERT_TRUE(engine_log.IsSequence());
  const std::string tailed = engine_log[0]["paths"][0].as<std::string>("");
  EXPECT_TRUE(StartsWith(tailed, kv_logs + "/")) << tailed << " is not on the shared volume " << kv_logs;
  std::string logging_path;
  for (const YAML::Node& e : vllm_["env"]) {
    if (e["name"].as<std::string>("") == "VLLM_LOGGING_CONFIG_PATH") logging_path = e["value"].as<std::string>("");
  }
  ASSERT_FALSE(logging_path.empty()) << "vLLM writes no log file without VLLM_LOGGING_CONFIG_PATH";
  const std::string key = fs::path(logging_path).filename().string();
  const std::string logging = config_map_["data"][key].as<std::string>("");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view filename;
  ASSERT_EQ(parser.parse(logging).get(doc), simdjson::SUCCESS) << key << " is not JSON";
  ASSERT_EQ(doc["handlers"]["file"]["filename"].get(filename), simdjson::SUCCESS);
  EXPECT_EQ(std::string(filename), vllm_logs + tailed.substr(kv_logs.size()))
      << "vLLM writes " << filename << ", kvwatch tails " << tailed;
  // KV events over the pod's loopback, on vLLM's port and topic.
  const auto [endpoint, topic] = KvEventsConfig();
  const YAML::Node kv_events = kvwatch_config_["collectors"]["kv_events"];
  ASSERT_TRUE(kv_events.IsSequence());
  const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
  EXPECT_EQ(kv_events[0]["endpoints"][0].as<std::string>(""), "tcp://127.0.0.1:" + port);
  EXPECT_EQ(kv_events[0]["topic"].as<std::string>(""), topic);
  // vLLM's /metrics on its container port, over loopback.
  const YAML::Node engine_metrics = kvwatch_config_["collectors"]["engine_metrics"];
  ASSERT_TRUE(engine_metrics.IsSequence());
  EXPECT_EQ(engine_metrics[0]["url"].as<std::string>(""),
            "http://127.0.0.1:" + Named(vllm_["ports"], "http")["containerPort"].as<std::string>("") + "/metrics");
}

TEST_F(KubernetesTest, KvwatchRunsNonRootOnAReadOnlyRootFilesystem) {
  const YAML::Node sc = kvwatch_["securityContext"];
  EXPECT_TRUE(sc["runAsNonRoot"].as<bool>(false));
  EXPECT_GT(sc["runAsUser"].as<int>(0), 0);
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>(false));
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>(true));
  bool drops_all = false;
  for (const YAML::Node& c : sc["capabilities"]["drop"]) drops_all = drops_all || c.as<std::string>("") == "ALL";
  EXPECT_TRUE(drops_all);
  // With a read-only root, the state directory must be a writable mount.
  const std::string state = kvwatch_config_["state"]["path"].as<std::string>("");
  ASSERT_FALSE(state.empty());
  bool writable_state = false;
  for (const YAML::Node& m : kvwatch_["volumeMounts"]) {
    writable_state = writable_state || (m["mountPath"].as<std::string>("") == state && !m["readOnly"].as<bool>(false));
  }
  EXPECT_TRUE(writable_state) << state << " is not a writable mount";
  // The config comes from the ConfigMap at the path of --config.
  std::vector<std::string> args;
  for (const YAML::Node& a : kvwatch_["args"]) args.push_back(a.as<std::string>());
  ASSERT_EQ(args, (std::vector<std::string>{"--config", "/etc/kvwatch/kvwatch.yml"}));
  const YAML::Node mount = MountOf(kvwatch_, "kvwatch-config");
  ASSERT_TRUE(mount.IsMap());
  EXPECT_EQ(mount["mountPath"].as<std::string>(""), "/etc/kvwatch");
  const YAML::Node volume = Named(pod_["spec"]["volumes"], "kvwatch-config");
  EXPECT_EQ(volume["configMap"]["name"].as<std::string>(""), config_map_["metadata"]["name"].as<std::string>());
}

TEST_F(KubernetesTest, SidecarConfigIsValid) {
  EXPECT_EQ(kvwatch_config_["web"]["listen_address"].as<std::string>(""), "0.0.0.0");
  EXPECT_EQ(kvwatch_config_["web"]["port"].as<int>(0),
            Named(kvwatch_["ports"], "metrics")["containerPort"].as<int>(-1));
  TempDir dir("kvwatch_packaging_test");
  ASSERT_TRUE(dir.ok());
  const auto problem = CheckConfigText(dir, "sidecar.yml", config_map_["data"]["kvwatch.yml"].as<std::string>(""));
  EXPECT_FALSE(problem.has_value()) << *problem;
}

TEST_F(KubernetesTest, PodMonitorScrapesTheSidecar) {
  const auto monitors = manifests_.OfKind("PodMonitor");
  ASSERT_EQ(monitors.size(), 1u);
  const YAML::Node spec = monitors[0]["spec"];
  for (const auto& label : spec["selector"]["matchLabels"]) {
    EXPECT_EQ(pod_["metadata"]["labels"][label.first.as<std::string>()].as<std::string>(""),
              label.second.as<std::string>())
        << "the pods lack the selected label " << label.first.as<std::string>();
  }
  const std::string port = spec["podMetricsEndpoints"][0]["port"].as<std::string>("");
  EXPECT_TRUE(Named(kvwatch_["ports"], port).IsMap()) << "kvwatch has no port named " << port;
  EXPECT_EQ(spec["podMetricsEndpoints"][0]["path"].as<std::string>("/metrics"), "/metrics");
  EXPECT_GT(spec["sampleLimit"].as<int>(0), 0) << "set a sampleLimit as a cardinality guard";
}

// The alert names a running agent evaluates: the alertname labels of its
// kvwatch_alert_state (the synthetic replica, alerting on by default).
base::Result<std::set<std::string>> AgentAlertNames() {
  using R = base::Result<std::set<std::string>>;
  TempDir dir("kvwatch_packaging_test");
  std::string error;
  auto agent = AgentProcess::Start(dir.path(), "agent", "web:\n  port: 0\ncollectors:\n  synth: {}\n", &error);
  if (!agent) return R::Error(error);
  auto metrics = agent->Metrics(&error);
  agent->Stop();
  if (!metrics) return R::Error(error);
  std::set<std::string> names;
  for (const collectors::Sample& s : metrics->samples) {
    if (s.name != "kvwatch_alert_state") continue;
    if (const auto name = s.Label("alertname")) names.insert(std::string(*name));
  }
  return names;
}

TEST_F(KubernetesTest, PrometheusRuleHoldsTheShippedRules) {
  const auto rules = manifests_.OfKind("PrometheusRule");
  ASSERT_EQ(rules.size(), 1u);
  const YAML::Node groups = rules[0]["spec"]["groups"];
  ASSERT_TRUE(groups.IsSequence() && groups.size() > 0);
  std::set<std::string> alerts;
  for (const YAML::Node& g : groups) {
    for (const YAML::Node& r : g["rules"]) {
      EXPECT_FALSE(r["expr"].as<std::string>("").empty()) << g["name"];
      EXPECT_NE(static_cast<bool>(r["alert"]), static_cast<bool>(r["record"])) << "alert or record, not both";
      if (r["alert"]) alerts.insert(r["alert"].as<std::string>());
    }
  }
  // The dashboard's ALERTS panel selects alertname=~"(?i)kvwatch.*".
  for (const std::string& a : alerts) EXPECT_TRUE(std::regex_match(a, std::regex("kvwatch.*", std::regex::icase))) << a;
  // With rule files in packaging/prometheus/, the PrometheusRule carries exactly their groups.
  YAML::Node shipped(YAML::NodeType::Sequence);
  std::vector<std::string> files;
  if (fs::is_directory(kPackaging + "/prometheus")) {
    for (const auto& entry : fs::directory_iterator(kPackaging + "/prometheus")) {
      const std::string ext = entry.path().extension().string();
      if (ext == ".yml" || ext == ".yaml") files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    const YAML::Node doc = YAML::LoadFile(f);
    if (!doc["groups"]) continue;  // promtool test files
    for (const YAML::Node& g : doc["groups"]) shipped.push_back(g);
  }
  if (shipped.size() > 0) {
    EXPECT_EQ(YAML::Dump(groups), YAML::Dump(shipped))
        << "packaging/kubernetes/prometheusrule.yaml differs from packaging/prometheus/*.yml: regenerate it "
           "(the command is in its header)";
    return;
  }
  // Without them: an alert for each of the agent's alerts that PromQL can
  // express (the CUSUM drift tests, KVWatch*Drift, live only in the agent).
  auto agent_alerts = AgentAlertNames();
  ASSERT_TRUE(agent_alerts.ok()) << agent_alerts.error();
  std::size_t expected = 0;
  for (const std::string& name : agent_alerts.value()) {
    if (std::regex_search(name, std::regex("Drift$"))) continue;
    ++expected;
    EXPECT_EQ(alerts.count(name), 1u) << "no Prometheus rule for the agent's alert " << name;
  }
  EXPECT_GT(expected, 0u) << "the agent exports no kvwatch_alert_state";
}

}  // namespace
}  // namespace kvwatch::agent
