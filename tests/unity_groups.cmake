# Unity groups of the test files (tests/CMakeLists.txt, when KVWATCH_UNITY_BUILD is
# on): the files of one string compile as one translation unit, so the inline code of
# the headers they share (gtest and gmock, simdjson, the standard library) is
# generated once per group instead of once per file (docs/development.md, "Unity
# batches and precompiled headers", has the figures). Listed by hand, not batched by
# count: the test files keep their helpers in anonymous namespaces, often under the
# same names (At, Options, MustParse, ...), and two files of a group must not define
# the same file-local name ("redefinition of ..."). A fixed list keeps a new file from
# moving an existing one into a batch with a neighbour it collides with: a test file
# in no group compiles on its own, as before. To add one, put it in a group of its
# folder whose files define none of its file-local names (or rename the helper, or
# give a shared helper one home in the folder's testing header).
set(KVWATCH_TEST_UNITY_GROUPS
  "agent/runtime/agent_clock_test.cc agent/runtime/alertmanager_e2e_test.cc agent/runtime/curve_history_test.cc agent/dashboard_test.cc agent/web/http_server_test.cc agent/render/replay_svg_test.cc agent/runtime/state_file_test.cc"
  "agent/runtime/agent_restart_test.cc agent/runtime/agent_tenants_test.cc agent/cli/calibrate_test.cc agent/runtime/collector_registry_test.cc agent/packaging_test.cc agent/prometheus_rules_test.cc agent/render/simulate_output_test.cc agent/cli/synth_command_test.cc"
  "agent/runtime/builtin_config_test.cc agent/runtime/crash_consistency_test.cc agent/runtime/metrics_golden_test.cc agent/runtime/metrics_reference_test.cc agent/cli/replay_golden_test.cc agent/cli/replay_page_tokens_test.cc agent/runtime/sampled_agent_test.cc agent/web/web_page_test.cc"
  "agent/runtime/agent_bad_input_test.cc agent/runtime/agent_scrape_test.cc agent/runtime/alert_runner_test.cc agent/runtime/canary_restore_test.cc agent/runtime/canary_roles_test.cc agent/web/http_abuse_test.cc agent/runtime/kv_load_agent_test.cc agent/runtime/policy_canary_test.cc agent/runtime/tenants_e2e_test.cc"
  "agent/runtime/agent_e2e_test.cc agent/runtime/check_config_test.cc agent/runtime/engine_histograms_agent_test.cc agent/runtime/knee_shift_stationary_test.cc agent/quickstart_test.cc agent/cli/replay_policy_test.cc agent/cli/replay_test.cc agent/cli/simulate_command_test.cc"
  "collectors/engine_metrics_collector_test.cc collectors/exposition_parser_test.cc collectors/kv_events_collector_test.cc collectors/synth_test.cc collectors/tail_checkpoint_test.cc collectors/trace_record_test.cc"
  "collectors/engine_log_collector_test.cc collectors/engine_log_parser_test.cc collectors/file_tailer_test.cc collectors/file_tailer_torture_test.cc collectors/kv_event_tracker_test.cc collectors/kv_events_fleet_test.cc collectors/trace_reader_test.cc"
  "curve/hybrid_engine_test.cc curve/kv_load_test.cc curve/policy_core_test.cc curve/policy_test.cc curve/sampled_engine_test.cc curve/sliding_windows_test.cc curve/tiers_test.cc"
  "curve/bucketed_curve_test.cc curve/knee_test.cc curve/policy_checkpoint_test.cc curve/request_classes_test.cc curve/sizing_test.cc curve/tenants_test.cc"
  "sim/admission_test.cc sim/latency_samples_test.cc sim/replica_order_test.cc sim/replica_policy_test.cc sim/replica_test.cc sim/time_model_test.cc"
  "alerts/alerts_capacity_miss_share_test.cc alerts/alerts_format_test.cc"
  "alerts/alerts_alerter_test.cc alerts/alerts_checkpoint_test.cc"
  "config/agent_config_test.cc config/model_choice_test.cc"
)
