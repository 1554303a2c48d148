// `kvwatch check-config` validates exactly what start-up validates, and touches
// nothing. Each document of the table is run through both paths, as the binary:
// `kvwatch check-config FILE` (exit 0 or 1) and `kvwatch agent --config FILE`
// (rejected: it exits non-zero without listening; accepted: it logs "listening
// on", then is stopped). Both must give the table's verdict. The bad documents are
// the config tests' (tests/config/agent_config_test.cc, the collector registry's,
// the policy canaries') plus what only start-up used to catch: TLS files missing
// or not PEM, an unresolvable listen address, a state path that cannot be created.
// Then a check-config run beside a running agent with the same config (a ZeroMQ
// bind endpoint and a state path) exits 0 and leaves that agent as it was.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

struct Case {
  std::string name;
  std::string yaml;  // $DIR is replaced by the test's directory
  bool valid;
};

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// Runs `kvwatch check-config`: true when it says valid (exit 0).
bool CheckConfigAccepts(const std::string& config, std::string* detail) {
  CommandResult r = RunCommand({KVWATCH_BINARY, "check-config", config}, Millis(30000));
  *detail = r.Describe();
  EXPECT_TRUE(r.Exited(0) || r.Exited(1)) << r.Describe();
  return r.Exited(0);
}

// Starts `kvwatch agent --config`: true when it listens (then it is stopped),
// false when it exits first.
bool StartUpAccepts(const std::string& dir, const std::string& name, const std::string& config, std::string* detail) {
  std::string error;
  auto process = ChildProcess::Start({KVWATCH_BINARY, "agent", "--config", config}, dir + "/" + name + ".out",
                                     dir + "/" + name + ".err", &error);
  EXPECT_NE(process, nullptr) << error;
  if (!process) return false;
  bool listening = false;
  PollUntil(
      [&] {
        listening = process->Stderr().find("listening on") != std::string::npos;
        return listening || !process->Running();
      },
      kStartTimeout, Millis(20));
  *detail = process->Stderr();
  if (listening) {
    EXPECT_EQ(DescribeWaitStatus(process->Terminate(kStopTimeout)), "exit 0") << process->Stderr();
    return true;
  }
  EXPECT_FALSE(process->Running()) << "neither listening nor exited:\n" << process->Stderr();
  EXPECT_NE(DescribeWaitStatus(process->status()), "exit 0") << process->Stderr();
  return false;
}

class CheckConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    // Files the documents refer to.
    ASSERT_TRUE(WriteFile(dir_.Sub("not-pem.crt"), "this is not a certificate\n"));
    ASSERT_TRUE(WriteFile(dir_.Sub("not-pem.key"), "this is not a key\n"));
    ASSERT_TRUE(WriteFile(dir_.Sub("web-missing-cert.yml"), "tls_server_config:\n  cert_file: " + dir_.Sub("no.crt") +
                                                                "\n  key_file: " + dir_.Sub("not-pem.key") + "\n"));
    ASSERT_TRUE(WriteFile(
        dir_.Sub("web-missing-key.yml"),
        "tls_server_config:\n  cert_file: " + dir_.Sub("not-pem.crt") + "\n  key_file: " + dir_.Sub("no.key") + "\n"));
    ASSERT_TRUE(WriteFile(dir_.Sub("web-not-pem.yml"), "tls_server_config:\n  cert_file: " + dir_.Sub("not-pem.crt") +
                                                           "\n  key_file: " + dir_.Sub("not-pem.key") + "\n"));
    ASSERT_TRUE(WriteFile(dir_.Sub("web-plain.yml"), "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"));
    ASSERT_TRUE(WriteFile(dir_.Sub("a-file"), "x"));
    ASSERT_TRUE(WriteFile(dir_.Sub("trace.jsonl"), ""));
  }

  TempDir dir_{"kvwatch_check_config"};
};

TEST_F(CheckConfigTest, CheckConfigAndStartUpGiveTheSameVerdictOnEveryDocument) {
  const std::string port0 = "web: {port: 0}\n";
  const std::vector<Case> cases = {
      // Valid documents (each listens on a free port).
      {"empty", port0, true},
      {"canaries", port0 + "curve: {capacities: [10, 100], policies: [fifo, sglang]}\n", true},
      {"trace_file_and_state",
       port0 + "state: {path: $DIR/new-state/sub}\ncollectors:\n  trace_files:\n" +
           "    - {name: t, paths: [$DIR/trace.jsonl]}\n",
       true},
      {"web_config_without_tls", "web: {port: 0, config_file: $DIR/web-plain.yml}\n", true},
      {"model_and_alerts", port0 + "model: llama-3-8b\nkv_dtype: fp8\nalerts: {webhooks: ['http://127.0.0.1:9/x']}\n",
       true},
      {"max_clock_skew", port0 + "curve: {max_clock_skew: 30s}\n", true},
      // What only start-up used to catch.
      {"tls_cert_missing", "web: {port: 0, config_file: $DIR/web-missing-cert.yml}\n", false},
      {"tls_key_missing", "web: {port: 0, config_file: $DIR/web-missing-key.yml}\n", false},
      {"tls_not_pem", "web: {port: 0, config_file: $DIR/web-not-pem.yml}\n", false},
      {"web_config_file_missing", "web: {port: 0, config_file: $DIR/no-web.yml}\n", false},
      {"listen_address_999", "web: {port: 0, listen_address: 999.0.0.1}\n", false},
      {"state_path_under_a_file", port0 + "state: {path: $DIR/a-file/state}\n", false},
      {"state_path_is_a_file", port0 + "state: {path: $DIR/a-file}\n", false},
      {"model_config_missing", port0 + "model_config: $DIR/no-config.json\n", false},
      // The config tests' bad documents.
      {"yaml_syntax", port0 + "curve: [\n", false},
      {"unknown_key", port0 + "bogus: 1\n", false},
      {"port_range", "web:\n  port: 70000\n", false},
      {"refresh_seconds", "web: {port: 0, refresh_seconds: 0}\n", false},
      {"listen_empty", "web: {port: 0, listen_address: ''}\n", false},
      {"duplicate_key", "web:\n  port: 0\n  port: 0\n", false},
      {"page_tokens", port0 + "page_tokens: 0\n", false},
      {"tensor_parallel_alone", port0 + "tensor_parallel: 0\n", false},
      {"max_pages", port0 + "engine: {max_pages: 0}\n", false},
      {"coverage_share", port0 + "engine: {coverage_share: 1.01}\n", false},
      {"touch_order", port0 + "engine: {touch_order: tail_first}\n", false},
      {"sample_rate", port0 + "engine: {sample_rate: .nan}\n", false},
      {"buckets", port0 + "curve: {buckets_per_octave: 3}\n", false},
      {"knee_sensitivity", port0 + "curve: {knee_sensitivity: 0}\n", false},
      {"windows_empty", port0 + "curve: {windows: []}\n", false},
      {"windows_duplicate", port0 + "curve: {windows: [5m, 1h, 60m]}\n", false},
      {"capacity_zero", port0 + "curve: {capacities: [0]}\n", false},
      {"capacity_beyond", port0 + "curve: {capacities: [2000]}\nengine: {max_pages: 1000}\n", false},
      {"max_clock_skew_zero", port0 + "curve: {max_clock_skew: 0s}\n", false},
      {"policy_belady", port0 + "curve: {capacities: [10], policies: [belady]}\n", false},
      {"policies_without_capacities", port0 + "curve: {policies: [fifo]}\n", false},
      {"policy_priorities", port0 + "curve: {capacities: [10], policies: [priority], policy_priorities: \"a=high\"}\n",
       false},
      {"model_unknown", port0 + "model: llama-9\n", false},
      {"kv_dtype", port0 + "model: llama-3-70b\nkv_dtype: int3\n", false},
      {"tensor_parallel", port0 + "model: llama-3-70b\ntensor_parallel: 3\n", false},
      {"two_models", port0 + "model: llama-3-70b\nbytes_per_token: 1000\n", false},
      {"kv_dtype_alone", port0 + "kv_dtype: fp8\n", false},
      {"alert_thresholds", port0 + "alerts:\n  knee_shift:\n    fire_threshold: 0.2\n    clear_threshold: 0.3\n",
       false},
      {"alert_window", port0 + "alerts:\n  short_window: 2h\n", false},
      {"alert_webhook", port0 + "alerts:\n  webhooks: ['https://a b']\n", false},
      {"alert_baseline", port0 + "alerts:\n  baseline_window: 1h\n", false},
      {"tenants_sampled", port0 + "engine: {sample_rate: 0.5}\ntenants:\n  enabled: true\n", false},
      {"tenants_top_k", port0 + "tenants:\n  top_k: 0\n", false},
      {"alert_share_floor", port0 + "alerts:\n  capacity_miss_share:\n    share_floor: 2\n", false},
      {"trace_no_paths", port0 + "collectors:\n  trace_files:\n    - {name: t}\n", false},
      {"trace_empty_path", port0 + "collectors:\n  trace_files:\n    - {name: t, paths: ['']}\n", false},
      {"kv_bad_endpoint", port0 + "collectors:\n  kv_events:\n    - {name: k, endpoints: ['udp://x:1']}\n", false},
      {"kv_replay_no_port",
       port0 + "collectors:\n  kv_events:\n    - {name: k, endpoints: ['tcp://127.0.0.1:1', "
               "'tcp://127.0.0.1:2'], replay_endpoint: 'tcp://127.0.0.1:x'}\n",
       false},
      {"metrics_url", port0 + "collectors:\n  engine_metrics:\n    - {name: m, url: 'ftp://h/metrics'}\n", false},
      {"metrics_timeout",
       port0 + "collectors:\n  engine_metrics:\n    - {name: m, url: 'http://127.0.0.1:9/metrics', "
               "interval: 1s, timeout: 2s}\n",
       false},
      {"duplicate_names",
       port0 + "collectors:\n  trace_files:\n    - {name: a, paths: [x]}\n  engine_log:\n"
               "    - {name: a, paths: [y]}\n",
       false},
      {"synth_rate", port0 + "collectors:\n  synth: {rate: 0}\n", false},
      {"synth_shift", port0 + "collectors:\n  synth: {shift_start: 10s}\n", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string config = dir_.Sub(c.name + ".yaml");
    ASSERT_TRUE(WriteFile(config, Replace(c.yaml, "$DIR", dir_.path())));
    std::string check_detail, start_detail;
    const bool check = CheckConfigAccepts(config, &check_detail);
    const bool start = StartUpAccepts(dir_.path(), c.name, config, &start_detail);
    EXPECT_EQ(check, start) << "check-config: " << check_detail << "\nstart-up:\n" << Tail(start_detail);
    EXPECT_EQ(check, c.valid) << check_detail;
    EXPECT_EQ(start, c.valid) << Tail(start_detail);
  }
}

TEST_F(CheckConfigTest, ErrorsNameTheKey) {
  auto check = [&](const std::string& name, const std::string& yaml) {
    const std::string config = dir_.Sub(name + ".yaml");
    EXPECT_TRUE(WriteFile(config, Replace(yaml, "$DIR", dir_.path())));
    return RunCommand({KVWATCH_BINARY, "check-config", config}, Millis(30000));
  };
  CommandResult r = check("tls", "web: {config_file: $DIR/web-not-pem.yml}\n");
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("web.config_file: "), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("not-pem.crt"), std::string::npos) << r.Describe();
  r = check("address", "web: {listen_address: 999.0.0.1}\n");
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("web.listen_address: cannot resolve \"999.0.0.1\""), std::string::npos) << r.Describe();
  r = check("state", "state: {path: $DIR/a-file/state}\n");
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("state.path: cannot create"), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.Describe();
}

// The notes on a valid config (an alert window the curve does not keep) name the
// command that wrote them.
TEST_F(CheckConfigTest, NotesNameCheckConfig) {
  const std::string config = dir_.Sub("alert-windows.yaml");
  ASSERT_TRUE(WriteFile(config, "curve: {windows: [\"5m\"]}\nalerts: {enabled: true}\n"));
  CommandResult r = RunCommand({KVWATCH_BINARY, "check-config", config}, Millis(30000));
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_NE(r.err.find("kvwatch check-config: alerts: curve.windows has no 1h window"), std::string::npos)
      << r.Describe();
  EXPECT_EQ(r.err.find("kvwatch agent"), std::string::npos) << r.Describe();
}

// The model flags replay and simulate take override the config's model keys;
// their errors name the flag.
TEST_F(CheckConfigTest, ModelFlagsOverrideTheConfigsKeys) {
  const std::string config = dir_.Sub("model.yaml");
  ASSERT_TRUE(WriteFile(config, "replica: r\nmodel: llama-3-8b\n"));
  auto check = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv = {KVWATCH_BINARY, "check-config", config};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunCommand(argv, Millis(30000));
  };
  // llama-3-8b has 8 KV heads: 3 ranks are refused, naming the flag; llama-3-70b's 8 too.
  CommandResult r = check({"--tensor-parallel", "3"});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("--tensor-parallel: tensor-parallel size 3"), std::string::npos) << r.Describe();
  r = check({"--model", "nope"});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("--model: unknown model 'nope'"), std::string::npos) << r.Describe();
  r = check({"--bytes-per-token", "131072", "--tensor-parallel", "2"});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("--tensor-parallel: applies to --model or --model-config"), std::string::npos) << r.Describe();
  r = check({"--bytes-per-token", "0.5"});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("--bytes-per-token: the agent takes a whole number"), std::string::npos) << r.Describe();
  r = check({"--model", "llama-3-70b", "--tp", "4"});
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_NE(r.err.find("--tp is deprecated; use --tensor-parallel"), std::string::npos) << r.Describe();
  r = check({"--bytes-per-token", "131072"});
  EXPECT_TRUE(r.Exited(0)) << r.Describe();
}

// Every file and directory under root with its size and modification time.
std::map<std::string, std::string> Listing(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    std::error_code ec;
    const auto size = e.is_regular_file(ec) ? e.file_size(ec) : 0;
    const auto mtime = std::filesystem::last_write_time(e.path(), ec).time_since_epoch().count();
    out[e.path().string()] = std::to_string(size) + "@" + std::to_string(mtime);
  }
  return out;
}

// True when a TCP socket can bind 127.0.0.1:port (nobody holds it).
bool CanBind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

TEST_F(CheckConfigTest, CheckConfigBesideARunningAgentTouchesNothing) {
  const int kv_port = PickFreePort();
  ASSERT_NE(kv_port, 0);
  const std::string state = dir_.Sub("state");
  const std::string yaml = "web: {port: 0}\nstate: {path: " + state +
                           ", interval: 1h}\ncollectors:\n"
                           "  kv_events:\n    - name: kv\n      endpoints: [\"tcp://127.0.0.1:" +
                           std::to_string(kv_port) + "\"]\n      bind: true\n  trace_files:\n" +
                           TraceFileCollectorYaml("trace", dir_.Sub("trace.jsonl"));
  std::string error;
  auto agent = AgentProcess::Start(dir_.path(), "agent", yaml, &error);
  ASSERT_NE(agent, nullptr) << error;
  ASSERT_FALSE(CanBind(kv_port)) << "the agent should hold the ZeroMQ port";
  ASSERT_EQ(agent->Get("/healthz").status, 200);
  const double up_before = agent->Value("kvwatch_collector_up", {{"collector", "kv"}});
  // The agent's own save right after start-up (the next is an hour away).
  ASSERT_TRUE(PollUntil([&] { return agent->Value("kvwatch_state_saves_total") >= 1; }, Millis(30000)))
      << Tail(agent->Stderr());

  // The same config, and one whose state directory does not exist yet.
  const std::string other = dir_.Sub("other.yaml");
  ASSERT_TRUE(WriteFile(other, Replace(yaml, state, dir_.Sub("not-yet/state"))));
  const std::map<std::string, std::string> before = Listing(dir_.path());
  for (const std::string& config : {dir_.Sub("agent.yaml"), other}) {
    SCOPED_TRACE(config);
    CommandResult r = RunCommand({KVWATCH_BINARY, "check-config", config}, Millis(30000));
    EXPECT_TRUE(r.Exited(0)) << r.Describe();
    EXPECT_NE(r.out.find(config + ": valid"), std::string::npos) << r.Describe();
  }
  // Nothing created or changed (the agent's own stderr file aside, which it appends to).
  std::map<std::string, std::string> after = Listing(dir_.path());
  after.erase(dir_.Sub("agent.stderr"));
  std::map<std::string, std::string> expected = before;
  expected.erase(dir_.Sub("agent.stderr"));
  EXPECT_EQ(after, expected);
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("not-yet")));

  // The agent is undisturbed: still bound, still answering, its collector up.
  EXPECT_TRUE(agent->Running());
  EXPECT_FALSE(CanBind(kv_port));
  EXPECT_EQ(agent->Get("/healthz").status, 200);
  EXPECT_EQ(agent->Get("/readyz").status, 200);
  EXPECT_EQ(agent->Value("kvwatch_collector_up", {{"collector", "kv"}}), up_before);
  EXPECT_EQ(agent->Stderr().find("kv:"), std::string::npos) << Tail(agent->Stderr());
  EXPECT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
}

}  // namespace
}  // namespace kvwatch::agent
