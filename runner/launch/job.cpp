#include "runner/launch/job.hpp"

#include "runner/launch/relay.hpp"
#include "runner/runtime/join.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/system/process.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <future>
#include <thread>
#include <utility>

namespace lockstep::runner {

namespace {

namespace fs = std::filesystem;

NodeReport unreachable(const std::string& node, const std::string& why) {
  NodeReport r;
  r.node = node;
  r.checks.push_back({"reach", Check::Status::fail, why});
  return r;
}

// Whether an agent's exit status (128+N for signal N) is a signal a launcher ends its agents with.
bool killed_by_teardown(int status) {
  const int signal = status - 128;
  return signal == SIGTERM || signal == SIGKILL || signal == SIGHUP || signal == SIGINT || signal == SIGPIPE;
}

// The last line of a program's output, bounded, for a message.
std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  std::size_t nl = text.find_last_of('\n');
  text = nl == std::string::npos ? text : text.substr(nl + 1);
  return text.size() > 300 ? text.substr(0, 300) : text;
}

Result<std::vector<NodeReport>> preflight_through_srun(const LaunchPlan& plan,
                                                       const std::vector<std::string>& node_cmd,
                                                       const CaptureOptions& capture, bool dry_run,
                                                       std::vector<std::vector<std::string>>& commands) {
  std::vector<std::string> argv = {"srun", "--ntasks-per-node=1", "--mpi=none", "--kill-on-bad-exit=0"};
  if (plan.nodes > 0) {
    argv.insert(argv.end(), {fmt::format("--nodes={}", plan.nodes), fmt::format("--ntasks={}", plan.nodes)});
  }
  argv.insert(argv.end(), node_cmd.begin(), node_cmd.end());
  commands.push_back(argv);
  if (dry_run) {
    return std::vector<NodeReport>{};
  }
  LS_TRY_ASSIGN(CaptureResult out, run_capture(argv, capture));
  std::vector<std::string> bad;
  std::vector<NodeReport> reports = reports_from_output(out.out, bad);
  if (reports.empty() && out.timed_out) {
    return external_error("preflight through srun gave no results within the preflight timeout ({} s); a "
                          "loaded cluster may need a longer --preflight-timeout",
                          std::chrono::duration_cast<std::chrono::seconds>(capture.timeout).count());
  }
  if (reports.empty()) {
    return external_error("preflight through srun gave no results (exit {}): {}{}", out.status,
                          last_line(out.err), bad.empty() ? "" : "; " + bad.front());
  }
  return reports;
}

// One host through the rsh agent: its one report, or a failed "reach" check saying why not.
NodeReport preflight_host(const std::vector<std::string>& argv, const CaptureOptions& capture,
                          const std::string& host) {
  Result<CaptureResult> out = run_capture(argv, capture);
  if (!out) {
    return unreachable(host, out.error().message);
  }
  if (out->timed_out) {
    return unreachable(host, "no answer within the preflight timeout");
  }
  std::vector<std::string> bad;
  std::vector<NodeReport> rs = reports_from_output(out->out, bad);
  if (rs.size() != 1) {
    return unreachable(host, fmt::format("`lockstep preflight` didn't report (exit {}): {}", out->status,
                                         bad.empty() ? last_line(out->err) : bad.front()));
  }
  rs[0].node = rs[0].node.empty() ? host : rs[0].node;
  return rs[0];
}

// `AGENT HOST 'LOCKSTEP preflight ...'` for every host of `plan`, in its order, appended to `commands`.
std::vector<std::vector<std::string>> agent_commands(const LaunchPlan& plan,
                                                     const std::vector<std::string>& node_cmd,
                                                     const PreflightFanout& how,
                                                     std::vector<std::vector<std::string>>& commands) {
  const std::vector<std::string> agent = rsh_agent(how.launcher_args, how.env_agent);
  const std::string remote = shell_join(node_cmd);
  std::vector<std::vector<std::string>> out;
  for (const HostSlots& h : plan.hosts) {
    std::vector<std::string> argv = agent;
    argv.insert(argv.end(), {h.host, remote});
    commands.push_back(argv);
    out.push_back(std::move(argv));
  }
  return out;
}

} // namespace

std::string absolute_image(const ImageArg& image) {
  std::error_code ec;
  switch (image.kind) {
  case ImageArg::Kind::oci: {
    oci::ImageRef ref = image.ref;
    ref.path = fs::absolute(ref.path, ec).lexically_normal();
    return ref.str();
  }
  case ImageArg::Kind::sif:
    return "sif:" + fs::absolute(image.path, ec).lexically_normal().string();
  case ImageArg::Kind::directory:
    break;
  }
  return "dir:" + fs::absolute(image.path, ec).lexically_normal().string();
}

std::vector<std::string> rsh_agent(const std::vector<std::string>& launcher_args,
                                   std::string_view env_agent) {
  std::string agent;
  for (std::size_t i = 0; i + 2 < launcher_args.size(); ++i) {
    const std::string& a = launcher_args[i];
    if ((a == "--mca" || a == "-mca") && launcher_args[i + 1] == "plm_rsh_agent") {
      agent = launcher_args[i + 2];
    }
  }
  if (agent.empty()) {
    agent = env_agent.empty() ? "ssh" : std::string(env_agent);
  }
  if (std::size_t colon = agent.find(':'); colon != std::string::npos) {
    agent = agent.substr(0, colon);
  }
  std::vector<std::string> words;
  std::string word;
  for (char c : agent + " ") {
    if (c == ' ' || c == '\t') {
      if (!word.empty()) {
        words.push_back(word);
      }
      word.clear();
    } else {
      word += c;
    }
  }
  if (words.empty()) {
    words = {"ssh"};
  }
  if (words.size() == 1 && fs::path(words[0]).filename() == "ssh") {
    words.insert(words.end(), {"-o", "BatchMode=yes"});
  }
  return words;
}

std::vector<std::string> preflight_argv(const std::string& lockstep, const PreflightRequest& request) {
  std::vector<std::string> argv = {lockstep,         "preflight",   "--json",     "--launcher",
                                   request.launcher, "--mpi-model", request.model};
  if (!request.image_digest.empty()) {
    argv.insert(argv.end(), {"--digest", request.image_digest});
  }
  if (request.gpus_per_node > 0) {
    argv.insert(argv.end(), {"--gpus-per-node", std::to_string(request.gpus_per_node)});
  }
  if (!request.facts.mpi_impl.empty()) {
    argv.insert(argv.end(), {"--expect-mpi", request.facts.mpi_impl + "@" + request.facts.mpi.version});
  }
  if (!request.facts.pmix.version.empty()) {
    argv.insert(argv.end(), {"--expect-pmix", request.facts.pmix.version});
  }
  if (!request.facts.cuda_driver_floor.empty()) {
    argv.insert(argv.end(), {"--cuda-floor", request.facts.cuda_driver_floor});
  }
  argv.insert(argv.end(), {"--unpack-bytes", std::to_string(request.unpack_bytes)});
  if (request.prepare_store) {
    argv.emplace_back("--prepare-store");
  }
  if (!request.gate.empty()) {
    argv.insert(argv.end(), {"--gate", request.gate});
  }
  if (!request.hold_exec.empty()) {
    argv.insert(argv.end(), {"--hold-cwd", request.hold_cwd});
  }
  argv.push_back(request.image);
  if (!request.hold_exec.empty()) {
    argv.emplace_back("--");
    argv.insert(argv.end(), request.hold_exec.begin(), request.hold_exec.end());
  }
  return argv;
}

std::vector<NodeReport> reports_from_output(const std::string& out, std::vector<std::string>& bad) {
  std::vector<NodeReport> reports;
  for (const std::string_view line : text_lines(out)) {
    if (line.empty() || line.front() != '{') {
      continue;
    }
    Result<NodeReport> r = node_report_from_json(line);
    if (r) {
      reports.push_back(std::move(*r));
    } else {
      bad.push_back(r.error().message);
    }
  }
  return reports;
}

Result<std::vector<NodeReport>> preflight_nodes(const LaunchPlan& plan, const PreflightRequest& request,
                                                const PreflightFanout& how,
                                                std::vector<std::vector<std::string>>& commands) {
  const std::vector<std::string> node_cmd = preflight_argv(how.lockstep, request);
  const CaptureOptions capture{std::nullopt, how.timeout, 1U << 20};
  if (plan.launcher == Launcher::slurm) {
    return preflight_through_srun(plan, node_cmd, capture, how.dry_run, commands);
  }
  std::vector<NodeReport> reports;
  if (plan.hosts.empty()) { // this node only
    commands.push_back(node_cmd);
    if (!how.dry_run) {
      LS_TRY_ASSIGN(NodeReport r, preflight_node(request));
      reports.push_back(std::move(r));
    }
    return reports;
  }
  const std::vector<std::vector<std::string>> argvs = agent_commands(plan, node_cmd, how, commands);
  std::vector<std::future<NodeReport>> pending;
  for (std::size_t i = 0; i < argvs.size() && !how.dry_run; ++i) {
    pending.push_back(std::async(std::launch::async, preflight_host, argvs[i], capture, plan.hosts[i].host));
  }
  for (auto& f : pending) {
    reports.push_back(f.get()); // in the plan's host order
  }
  return reports;
}

struct GatedPreflight::Node {
  std::string host;
  std::optional<Dialogue> agent; ///< nullopt: not started (yet), or could not be (why)
  std::string why;
  std::vector<std::string> argv; ///< the agent command that starts its preflight directly
  bool awaiting_relay = false;   ///< relayed: its preflight waits for mpirun's agent call
  bool relayed = false;          ///< its preflight rides on mpirun's agent call (mpirun owns the agent)

  void start_directly() {
    if (Result<Dialogue> d = Dialogue::start(argv)) {
      agent.emplace(std::move(*d));
    } else {
      why = d.error().message;
    }
  }
};

// The relay socket, and after reports() the thread that answers every later call with a pass:
// mpirun's daemon alone, for a host whose preflight already runs.
struct GatedPreflight::Desk {
  UniqueFd listener;
  std::string preflight; ///< the node's preflight command, for the remote shell
  UniqueFd wake_read;    ///< readable when stop() wants the thread to end
  UniqueFd wake_write;
  std::thread late;

  void answer_late() const {
    std::array<pollfd, 2> fds{{{listener.get(), POLLIN, 0}, {wake_read.get(), POLLIN, 0}}};
    for (;;) {
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
        return;
      }
      if (fds[1].revents != 0) {
        return;
      }
      if ((fds[0].revents & POLLIN) != 0) {
        UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (conn.valid() && relay_call_words(conn.get())) {
          relay_pass(conn.get());
        }
      }
    }
  }
  void stop() {
    wake_write.reset(); // the thread sees the pipe's end
    if (late.joinable()) {
      late.join();
    }
  }
};

namespace {

// The index of the first word naming `node`'s host, [USER@]HOST as mpirun gives it to its agent.
std::optional<std::size_t> host_word(const std::vector<std::string>& words, const std::string& host) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const std::size_t at = w.find('@');
    if ((at == std::string::npos ? w : w.substr(at + 1)) == host) {
      return i;
    }
  }
  return std::nullopt;
}

} // namespace

Result<GatedPreflight> GatedPreflight::start(const LaunchPlan& plan, const PreflightRequest& request,
                                             const PreflightFanout& how,
                                             std::vector<std::vector<std::string>>& commands,
                                             const std::string& relay_run_dir) {
  GatedPreflight g;
  g.m_timeout = how.timeout;
  const std::vector<std::string> node_cmd = preflight_argv(how.lockstep, request);
  std::vector<std::vector<std::string>> argvs = agent_commands(plan, node_cmd, how, commands);
  if (!relay_run_dir.empty()) {
    g.m_desk = std::make_unique<Desk>();
    LS_TRY_ASSIGN(g.m_desk->listener, join::bind_relay(relay_run_dir));
    std::array<int, 2> wake{-1, -1};
    if (::pipe2(wake.data(), O_CLOEXEC) != 0) {
      return errno_error("pipe", errno);
    }
    g.m_desk->wake_read = UniqueFd(wake[0]);
    g.m_desk->wake_write = UniqueFd(wake[1]);
    g.m_desk->preflight = shell_join(node_cmd);
  }
  std::vector<bool> here(plan.hosts.size(), true); // not relayed: every host's preflight starts now
  if (g.m_desk) {
    std::vector<std::string> hosts;
    for (const HostSlots& h : plan.hosts) {
      hosts.push_back(h.host);
    }
    here = name_this_node(hosts);
  }
  for (std::size_t i = 0; i < argvs.size(); ++i) {
    Node node{plan.hosts[i].host, std::nullopt, "", std::move(argvs[i]), !here[i]};
    if (!node.awaiting_relay) {
      node.start_directly();
    }
    g.m_nodes.push_back(std::move(node));
  }
  return g;
}

GatedPreflight::GatedPreflight(GatedPreflight&& o) noexcept
    : m_nodes(std::move(o.m_nodes)), m_desk(std::move(o.m_desk)), m_timeout(o.m_timeout), m_told(o.m_told),
      m_finished(o.m_finished) {
  o.m_finished = true;
}

GatedPreflight::~GatedPreflight() {
  if (!m_finished) {
    if (!m_told) {
      tell(false);
    }
    finish();
  }
}

void GatedPreflight::take_relay_calls(const std::function<bool()>& launching) {
  if (!m_desk) {
    return;
  }
  const auto deadline = Dialogue::Clock::now() + m_timeout;
  std::optional<Dialogue::Clock::time_point> grace; // the others' calls come right after the first
  auto awaiting = [this] {
    return std::any_of(m_nodes.begin(), m_nodes.end(), [](const Node& n) { return n.awaiting_relay; });
  };
  while (awaiting()) {
    const auto now = Dialogue::Clock::now();
    if (now >= deadline || (grace && now >= *grace) || (launching && !launching())) {
      break;
    }
    pollfd p{m_desk->listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) {
      continue;
    }
    UniqueFd conn(::accept4(m_desk->listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) {
      continue;
    }
    Result<std::vector<std::string>> words = relay_call_words(conn.get());
    if (!words) {
      log::debug("relay socket: {}", words.error().message);
      continue;
    }
    Node* node = nullptr;
    std::optional<std::size_t> index;
    for (Node& n : m_nodes) {
      if (n.awaiting_relay && (index = host_word(*words, n.host))) {
        node = &n;
        break;
      }
    }
    if (node == nullptr) {
      relay_pass(conn.get());
      continue;
    }
    node->awaiting_relay = false;
    if (Result<Dialogue> d = relay_preflight(std::move(conn), *index, m_desk->preflight)) {
      node->agent.emplace(std::move(*d));
      node->relayed = true;
    } else {
      node->why = "mpirun's agent call through lockstep's relay failed: " + d.error().message;
    }
    grace = grace ? grace : Dialogue::Clock::now() + std::chrono::seconds(2);
  }
  for (Node& n : m_nodes) {
    if (std::exchange(n.awaiting_relay, false)) {
      log::debug("preflight on {}: mpirun did not call its agent for it; starting it directly", n.host);
      n.start_directly();
    }
  }
  m_desk->late = std::thread([desk = m_desk.get()] { desk->answer_late(); });
}

std::vector<NodeReport> GatedPreflight::reports(const std::function<bool()>& launching) {
  take_relay_calls(launching);
  const auto deadline = Dialogue::Clock::now() + m_timeout;
  auto read_one = [deadline](Node& n) -> GatedOutcome {
    if (!n.agent) {
      return {unreachable(n.host, n.why)};
    }
    std::string bad;
    std::optional<std::string> line = n.agent->read_line(
        [&bad](std::string_view l) {
          if (l.empty() || l.front() != '{') {
            return false;
          }
          Result<NodeReport> r = node_report_from_json(l);
          bad = r ? "" : r.error().message;
          return static_cast<bool>(r);
        },
        deadline);
    if (!line && n.agent->timed_out()) {
      return {unreachable(n.host, "no answer within the preflight timeout")};
    }
    if (!line) { // its output ended: it has ended, or soon will
      CaptureResult end = n.agent->finish(Dialogue::Clock::now() + std::chrono::seconds(5));
      // Relayed (no process of ours): the preflight's stderr is in its stdout, and the agent's
      // stderr and exit status came on the relay socket.
      if (end.status < 0) {
        end.status = relayed_exit_status(end.err);
      }
      const std::string said = !bad.empty()                  ? bad
                               : !last_line(end.err).empty() ? last_line(end.err)
                                                             : last_line(end.out);
      // mpirun ends a launch by signalling its agents (the relay passes the signal on, and says
      // so in its exit status), or by killing the relay itself (no status came).
      const bool cut = n.relayed && bad.empty() && (end.status < 0 || killed_by_teardown(end.status));
      return {unreachable(n.host, end.status < 0
                                      ? fmt::format("`lockstep preflight` didn't report: {}", said)
                                      : fmt::format("`lockstep preflight` didn't report (exit {}): {}",
                                                    end.status, said)),
              cut};
    }
    NodeReport r = std::move(*node_report_from_json(*line));
    r.node = r.node.empty() ? n.host : r.node;
    return {std::move(r)};
  };
  std::vector<std::future<GatedOutcome>> pending;
  for (Node& n : m_nodes) {
    pending.push_back(std::async(std::launch::async, read_one, std::ref(n)));
  }
  std::vector<GatedOutcome> out;
  out.reserve(pending.size());
  for (auto& f : pending) {
    out.push_back(f.get()); // in the plan's host order
  }
  return judge_cut_nodes(std::move(out));
}

std::vector<NodeReport> judge_cut_nodes(std::vector<GatedOutcome> outcomes) {
  std::vector<std::string> failed; // failed without being cut
  for (const GatedOutcome& o : outcomes) {
    if (!o.cut && !o.report.ok()) {
      failed.push_back(o.report.node);
    }
  }
  std::vector<NodeReport> out;
  for (GatedOutcome& o : outcomes) {
    if (o.cut && !failed.empty()) {
      NodeReport r;
      r.node = o.report.node;
      r.checks.push_back(
          {"reach", Check::Status::warn,
           fmt::format("not checked: mpirun stopped its launch when {} failed", fmt::join(failed, ", "))});
      out.push_back(std::move(r));
    } else {
      out.push_back(std::move(o.report));
    }
  }
  return out;
}

void GatedPreflight::tell(bool go) {
  m_told = true;
  for (Node& n : m_nodes) {
    if (n.agent) {
      n.agent->say(go ? "go\n" : "stop\n");
    }
  }
}

void GatedPreflight::finish() {
  m_finished = true;
  if (m_desk) {
    m_desk->stop();
  }
  for (Node& n : m_nodes) {
    if (n.agent) {
      n.agent->close_input();
    }
  }
  const auto deadline = Dialogue::Clock::now() + std::chrono::seconds(10);
  for (Node& n : m_nodes) {
    if (n.agent) {
      (void)n.agent->finish(deadline);
    }
  }
}

RunVerdict judge_run(const Result<int>& launcher_status, const std::vector<RankReport>& ranks,
                     const std::string& launcher, int expected_ranks) {
  RunVerdict v;
  if (!launcher_status) {
    v.exit_status = launcher_status.error().process_exit();
    v.message = launcher_status.error().message;
    return v;
  }
  v.exit_status = *launcher_status;
  v.failure = first_failure(ranks);
  if (v.exit_status == 0 && !v.failure) {
    return v;
  }
  if (v.failure) {
    const RankReport& f = *v.failure;
    const std::string how = !f.error.empty()    ? "could not start: " + f.error
                            : f.exit_code > 128 ? fmt::format("was killed by signal {}", f.exit_code - 128)
                                                : fmt::format("exited with status {}", f.exit_code);
    v.message = fmt::format("rank {} on {} {}", f.rank, f.node, how);
    v.exit_status = f.exit_code != 0 ? f.exit_code : v.exit_status;
  } else {
    v.message =
        fmt::format("{} exited with status {} before any rank reported a failure", launcher, v.exit_status);
  }
  if (static_cast<int>(ranks.size()) < expected_ranks) {
    v.message += fmt::format(" ({} of {} ranks reported)", ranks.size(), expected_ranks);
  }
  return v;
}

nlohmann::ordered_json rank_exits_json(const std::vector<RankReport>& ranks) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const RankReport& r : ranks) {
    nlohmann::ordered_json j;
    j["rank"] = r.rank;
    j["node"] = r.node;
    j["exit_code"] = r.exit_code;
    if (!r.error.empty()) {
      j["error"] = r.error;
    }
    j["start"] = iso8601_utc(r.start_ns);
    j["end"] = iso8601_utc(r.end_ns);
    out.push_back(j);
  }
  return out;
}

} // namespace lockstep::runner
