// Launch planning for `lockstep run`: the default launcher, the node/rank arithmetic, and the
// exact mpirun / srun / lockstep exec / apptainer / enroot command lines. docs/launch.md.
#include "runner/launch/launch.hpp"

#include "support/base/text.hpp"
#include "support/system/process.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

namespace lockstep::runner {

namespace {

constexpr int k_max_count = 1 << 20; // nodes, ranks or slots beyond this are typos

Result<int> parse_count(std::string_view text, std::string_view what) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > k_max_count) {
    return invalid_input("{}: '{}' is not a count", what, text);
  }
  return value;
}

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) {
      ++i;
    }
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') {
      ++i;
    }
    if (i > start) {
      out.push_back(line.substr(start, i - start));
    }
  }
  return out;
}

bool valid_host_name(std::string_view host) {
  if (host.empty() || host.size() > 253 || host.front() == '-') {
    return false;
  }
  return std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
  });
}

int ceil_div(int a, int b) {
  return b <= 0 ? a : (a + b - 1) / b;
}

// The image's MPI launcher (container model) by implementation.
std::string image_launcher(const envspec::ImageFacts& facts) {
  return facts.mpi_impl == "mpich" ? "mpiexec" : "mpirun";
}

// The srun --mpi= plugin for the image's MPI: Open MPI with PMIx -> pmix; MPICH (Hydra's PMI) ->
// pmi2; no MPI recorded -> none (the ranks don't talk MPI, or bring their own).
std::string pmi_for(const envspec::ImageFacts& facts) {
  if (facts.mpi_impl == "openmpi") {
    return "pmix";
  }
  if (facts.mpi_impl == "mpich") {
    return "pmi2";
  }
  return facts.pmix.version.empty() ? "none" : "pmix";
}

// The run flags that pass to each rank's `lockstep exec` (--bind/--env/--cleanenv), translated for
// Apptainer/Singularity (same syntax) and Enroot/Pyxis.
struct ExecFlag {
  std::string name; // "--bind", "--env", "--cleanenv"
  std::string value;
};

Result<std::vector<ExecFlag>> exec_flags(const std::vector<std::string>& args) {
  std::vector<ExecFlag> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--cleanenv") {
      out.push_back({a, ""});
    } else if ((a == "--bind" || a == "--env") && i + 1 < args.size()) {
      out.push_back({a, args[++i]});
    } else {
      return internal_error("unexpected exec argument '{}'", a);
    }
  }
  return out;
}

// A `--env NAME=VALUE` reaches the ranks through the launcher's environment (`env`, which mpirun
// exports with -x and srun passes), never on their command lines, which `ps` on every node shows:
// as PREFIX+NAME=VALUE, the variable the runtime turns into NAME in the container. A shown plan's
// `--env NAME` (its value withheld) gives PREFIX+NAME.
void env_through_launcher(const ExecFlag& f, std::string_view prefix, std::vector<std::string>& env) {
  env.push_back(std::string(prefix) + f.value);
}

// Each rank's command for the chosen runtime; the variables it needs from the launcher go to `env`.
Result<std::vector<std::string>> rank_command(const LaunchRequest& r, const LaunchSite& site,
                                              const LaunchPlan& plan, std::vector<std::string>& notes,
                                              std::vector<std::string>& env) {
  LS_TRY_ASSIGN(std::vector<ExecFlag> flags, exec_flags(r.exec_args));
  std::vector<std::string> cmd;
  switch (r.runtime) {
  case ContainerRuntime::native: {
    const bool rank_of_many = plan.model == MpiModel::hybrid && plan.ranks != 1;
    if (rank_of_many && !site.rank_helper.empty()) { // ranks on one node share one container
      cmd = {site.rank_helper, "_rank", "--report", site.run_dir + "/ranks"};
      if (r.gate_seconds > 0) {
        cmd.insert(cmd.end(), {"--gate", std::to_string(r.gate_seconds)});
      }
      cmd.emplace_back("--");
    }
    cmd.insert(cmd.end(), {site.lockstep, "exec"});
    if (rank_of_many) {
      cmd.emplace_back("--mpi-rank");
    }
    cmd.insert(cmd.end(), {"--rank-report", site.run_dir + "/ranks"});
    if (r.gpus_per_node > 0) {
      cmd.emplace_back("--gpus");
    }
    for (const ExecFlag& f : flags) {
      if (f.name == "--env") {
        env_through_launcher(f, "LOCKSTEP_ENV_", env); // lockstep exec reads LOCKSTEP_ENV_NAME
        continue;
      }
      cmd.push_back(f.name);
      if (f.name != "--cleanenv") {
        cmd.push_back(f.value);
      }
    }
    cmd.insert(cmd.end(), {r.image, "--"});
    break;
  }
  case ContainerRuntime::apptainer:
  case ContainerRuntime::singularity: {
    cmd = {std::string(name_of(r.runtime)), "exec"};
    if (r.gpus_per_node > 0) {
      cmd.emplace_back("--nv");
    }
    for (const ExecFlag& f : flags) {
      if (f.name == "--env") {
        // APPTAINERENV_NAME / SINGULARITYENV_NAME: NAME in the container.
        env_through_launcher(
            f, r.runtime == ContainerRuntime::apptainer ? "APPTAINERENV_" : "SINGULARITYENV_", env);
        continue;
      }
      cmd.push_back(f.name);
      if (f.name != "--cleanenv") {
        cmd.push_back(f.value);
      }
    }
    std::string image = r.image;
    if (image.starts_with("sif:") || image.starts_with("dir:")) {
      image = image.substr(4);
    } else if (image.starts_with("oci:") || image.starts_with("oci-archive:") ||
               image.starts_with("docker-archive:")) {
      notes.push_back(
          fmt::format("{} converts {} to a temporary SIF at every start; build the spec's SIF output "
                      "and run that instead",
                      name_of(r.runtime), r.image));
    }
    cmd.push_back(image);
    break;
  }
  case ContainerRuntime::enroot: {
    if (plan.launcher == Launcher::slurm) {
      return std::vector<std::string>{}; // Pyxis: srun --container-image, no wrapper per rank
    }
    cmd = {"enroot", "start"};
    for (const ExecFlag& f : flags) {
      if (f.name == "--bind") {
        cmd.insert(cmd.end(), {"--mount", f.value});
      } else if (f.name == "--env") {
        // `enroot start --env NAME` passes the host's NAME, which the launcher sets.
        cmd.insert(cmd.end(), {"--env", f.value.substr(0, f.value.find('='))});
        env_through_launcher(f, "", env);
      } else {
        notes.emplace_back("enroot start has no --cleanenv: the host's environment passes");
      }
    }
    if (r.gpus_per_node > 0) {
      cmd.insert(cmd.end(), {"--env", "NVIDIA_VISIBLE_DEVICES=all"});
    }
    cmd.push_back(r.image);
    notes.push_back(fmt::format("enroot start needs the container on every node first: enroot import / "
                                "enroot create --name {} IMAGE.sqsh",
                                r.image));
    break;
  }
  }
  return cmd;
}

// ---- the passes of plan_launch ---------------------------------------------------------------------

// The ranks asked for: -n, else --ranks-per-node (0: neither).
int requested_ranks(const LaunchRequest& r) {
  return r.ranks > 0 ? r.ranks : r.ranks_per_node;
}

// The launcher and the model, which decide each other's defaults, and the combinations refused.
Result<void> choose_launcher_and_model(const LaunchRequest& r, const LaunchSite& site,
                                       const envspec::ImageFacts& facts, LaunchPlan& plan) {
  if (r.launcher) {
    plan.launcher = *r.launcher;
    // NOLINTNEXTLINE(bugprone-branch-clone): the rules in the order they are asked
  } else if (r.model == MpiModel::container) {
    plan.launcher = Launcher::local;
  } else if (site.slurm_job_id) {
    plan.launcher = Launcher::slurm;
  } else if (!r.hostfile.empty() || r.nodes > 1) {
    plan.launcher = Launcher::mpirun;
  } else {
    plan.launcher = Launcher::local;
  }
  plan.model = r.model.value_or(
      plan.launcher == Launcher::local && requested_ranks(r) > 1 ? MpiModel::container : MpiModel::hybrid);
  if (plan.model == MpiModel::container && plan.launcher != Launcher::local) {
    return invalid_input(
        "--mpi-model container runs the image's own {} on this node; it can't be combined with "
        "--launcher {} (use --mpi-model hybrid)",
        image_launcher(facts), name_of(plan.launcher));
  }
  if (plan.launcher == Launcher::local && r.nodes > 1) {
    return invalid_input("-N {} needs more than this node: give --hostfile (mpirun) or run inside a Slurm "
                         "allocation (salloc/sbatch)",
                         r.nodes);
  }
  if (plan.launcher == Launcher::slurm && !site.slurm_job_id) {
    return invalid_input(
        "--launcher slurm runs inside an allocation (SLURM_JOB_ID is not set): use salloc or "
        "sbatch (lockstep run --emit sbatch FILE writes a batch script)");
  }
  if (r.runtime != ContainerRuntime::native && plan.model == MpiModel::container) {
    return invalid_input("--runtime {} starts each rank from the host's launcher; use --mpi-model hybrid",
                         name_of(r.runtime));
  }
  if (r.runtime == ContainerRuntime::enroot && plan.launcher == Launcher::local && requested_ranks(r) <= 1) {
    plan.notes.emplace_back("enroot: one process on this node");
  }
  if (r.ranks_per_node > 0 && r.ranks > 0 && r.nodes > 0 && r.ranks > r.nodes * r.ranks_per_node) {
    return invalid_input("-n {} ranks don't fit on -N {} nodes x --ranks-per-node {}", r.ranks, r.nodes,
                         r.ranks_per_node);
  }
  return {};
}

// mpirun's nodes and ranks: the first -N hosts of the hostfile (this node without one), the
// ranks -n asks for, else --ranks-per-node on each, else the hosts' slots.
Result<void> place_mpirun_ranks(const LaunchRequest& r, const LaunchSite& site, LaunchPlan& plan) {
  if (site.hostfile.empty()) {
    if (r.nodes > 1) {
      return invalid_input("-N {} with --launcher mpirun needs --hostfile FILE naming the nodes", r.nodes);
    }
    plan.nodes = 1;
    plan.ranks = std::max(1, requested_ranks(r));
    plan.ranks_per_node = plan.ranks;
    return {};
  }
  const int available = static_cast<int>(site.hostfile.size());
  plan.nodes = r.nodes > 0 ? r.nodes : available;
  if (plan.nodes > available) {
    return invalid_input("-N {} but the hostfile {} lists only {} host{}", plan.nodes, r.hostfile, available,
                         available == 1 ? "" : "s");
  }
  plan.hosts.assign(site.hostfile.begin(), site.hostfile.begin() + plan.nodes);
  int slots = 0;
  for (const HostSlots& h : plan.hosts) {
    slots += h.slots;
  }
  plan.ranks = r.ranks > 0 ? r.ranks : (r.ranks_per_node > 0 ? plan.nodes * r.ranks_per_node : slots);
  plan.ranks_per_node = r.ranks_per_node;
  if (r.ranks_per_node > 0 && plan.ranks > plan.nodes * r.ranks_per_node) {
    return invalid_input("-n {} ranks don't fit on {} nodes x --ranks-per-node {}", plan.ranks, plan.nodes,
                         r.ranks_per_node);
  }
  const int per_node = r.ranks_per_node > 0 ? r.ranks_per_node : ceil_div(plan.ranks, plan.nodes);
  for (HostSlots& h : plan.hosts) {
    h.slots = r.ranks_per_node > 0 ? r.ranks_per_node : std::max(h.slots, per_node);
  }
  return {};
}

// Nodes and ranks: this node alone, the hostfile's hosts, or what the Slurm allocation decides.
Result<void> place_ranks(const LaunchRequest& r, const LaunchSite& site, LaunchPlan& plan) {
  switch (plan.launcher) {
  case Launcher::local:
    plan.nodes = 1;
    plan.ranks = std::max(1, requested_ranks(r));
    plan.ranks_per_node = plan.ranks;
    break;
  case Launcher::mpirun:
    LS_TRY(place_mpirun_ranks(r, site, plan));
    break;
  case Launcher::slurm:
    plan.nodes = r.nodes;
    plan.ranks = r.ranks;
    plan.ranks_per_node = r.ranks_per_node;
    break;
  }
  return {};
}

// The container model: the image's own mpirun, started in one container on this node.
Result<void> container_mpirun_command(const LaunchRequest& r, const LaunchSite& site,
                                      const envspec::ImageFacts& facts, LaunchPlan& plan) {
  if (facts.mpi_impl.empty()) {
    return invalid_input("{} records no MPI, so --mpi-model container has no mpirun to start; use -n 1 or an "
                         "image with Open MPI or MPICH",
                         r.image);
  }
  plan.argv = plan.rank;
  plan.argv.push_back(image_launcher(facts));
  plan.argv.insert(plan.argv.end(), {"-n", std::to_string(plan.ranks)});
  if (site.root && facts.mpi_impl == "openmpi") {
    plan.argv.emplace_back("--allow-run-as-root");
  }
  plan.argv.insert(plan.argv.end(), r.launcher_args.begin(), r.launcher_args.end());
  plan.argv.insert(plan.argv.end(), r.command.begin(), r.command.end());
  plan.rank = r.command;
  return {};
}

// One process on this node: the rank's command itself.
Result<void> single_process_command(const LaunchRequest& r, LaunchPlan& plan) {
  if (!r.launcher_args.empty()) {
    return invalid_input("--launcher-arg needs a launcher: one process on this node has none (use -n N or "
                         "--launcher mpirun)");
  }
  plan.argv = plan.rank;
  plan.argv.insert(plan.argv.end(), r.command.begin(), r.command.end());
  return {};
}

// Whether launcher_args[i] starts `--mca NAME VALUE` (or -mca) for the MCA parameter `name`.
bool mca_at(const std::vector<std::string>& args, std::size_t i, std::string_view name) {
  return i + 2 < args.size() && (args[i] == "--mca" || args[i] == "-mca") && args[i + 1] == name;
}

// The launcher arguments, with the relay as mpirun's rsh agent (the user's
// agent, if any, is inside it) and daemons started by mpirun itself, unless the user chose the
// tree spawn: a daemon another daemon starts has no relay to talk to (docs/launch.md, "Preflight").
void add_relay_agent(const LaunchRequest& r, std::vector<std::string>& argv) {
  bool tree_chosen = false;
  for (std::size_t i = 0; i < r.launcher_args.size(); ++i) {
    if (mca_at(r.launcher_args, i, "plm_rsh_agent")) {
      i += 2;
      continue;
    }
    tree_chosen = tree_chosen || mca_at(r.launcher_args, i, "plm_rsh_no_tree_spawn");
    argv.push_back(r.launcher_args[i]);
  }
  argv.insert(argv.end(), {"--mca", "plm_rsh_agent", fmt::format("{}", fmt::join(r.relay_agent, " "))});
  if (!tree_chosen) {
    argv.insert(argv.end(), {"--mca", "plm_rsh_no_tree_spawn", "1"});
  }
}

// The host's mpirun starting one container per rank (Open MPI's or MPICH's options).
void mpirun_command(const LaunchRequest& r, const LaunchSite& site, const envspec::ImageFacts& facts,
                    LaunchPlan& plan) {
  const bool openmpi = facts.mpi_impl.empty() || facts.mpi_impl == "openmpi";
  plan.argv = {"mpirun", "-n", std::to_string(plan.ranks)};
  if (!plan.hosts.empty()) {
    plan.argv.insert(plan.argv.end(), {"--hostfile", site.run_dir + "/hostfile"});
  }
  if (openmpi) {
    if (plan.ranks_per_node > 0 && plan.launcher == Launcher::mpirun && !plan.hosts.empty()) {
      plan.argv.insert(plan.argv.end(), {"--map-by", fmt::format("ppr:{}:node", plan.ranks_per_node)});
    } else if (plan.nodes > 1) {
      plan.argv.insert(plan.argv.end(), {"--map-by", "node"});
    }
    if (site.root) {
      plan.argv.emplace_back("--allow-run-as-root");
    }
    // Open MPI passes only the variables named with -x to ranks on other nodes (MPICH's Hydra
    // passes the whole environment).
    for (const std::string& e : plan.env) {
      plan.argv.insert(plan.argv.end(), {"-x", e.substr(0, e.find('='))});
    }
  } else if (plan.ranks_per_node > 0 && !plan.hosts.empty()) {
    plan.argv.insert(plan.argv.end(), {"-ppn", std::to_string(plan.ranks_per_node)});
  }
  if (openmpi && !r.relay_agent.empty()) {
    add_relay_agent(r, plan.argv);
  } else {
    plan.argv.insert(plan.argv.end(), r.launcher_args.begin(), r.launcher_args.end());
  }
  plan.argv.insert(plan.argv.end(), plan.rank.begin(), plan.rank.end());
  plan.argv.insert(plan.argv.end(), r.command.begin(), r.command.end());
}

// Pyxis (--runtime enroot under Slurm): the image, binds as --container-mounts, --env values in the
// launcher's environment.
Result<void> add_pyxis_options(const LaunchRequest& r, LaunchPlan& plan) {
  plan.argv.push_back("--container-image=" + r.image);
  LS_TRY_ASSIGN(std::vector<ExecFlag> flags, exec_flags(r.exec_args));
  std::string mounts;
  for (const ExecFlag& f : flags) {
    if (f.name == "--bind") {
      mounts += (mounts.empty() ? "" : ",") + f.value;
    } else if (f.name == "--env") {
      plan.env.push_back(f.value);
    } else {
      plan.notes.emplace_back("pyxis has no --cleanenv: the job's environment passes");
    }
  }
  if (!mounts.empty()) {
    plan.argv.push_back("--container-mounts=" + mounts);
  }
  return {};
}

// srun in the allocation, with the PMI plugin the image's MPI needs.
Result<void> srun_command(const LaunchRequest& r, const envspec::ImageFacts& facts, LaunchPlan& plan) {
  plan.pmi = r.pmi.empty() ? pmi_for(facts) : r.pmi;
  plan.argv = {"srun", "--mpi=" + plan.pmi};
  if (plan.nodes > 0) {
    plan.argv.push_back(fmt::format("--nodes={}", plan.nodes));
  }
  if (plan.ranks > 0) {
    plan.argv.push_back(fmt::format("--ntasks={}", plan.ranks));
  }
  if (plan.ranks_per_node > 0) {
    plan.argv.push_back(fmt::format("--ntasks-per-node={}", plan.ranks_per_node));
  }
  if (r.gpus_per_node > 0) {
    plan.argv.push_back(fmt::format("--gpus-per-node={}", r.gpus_per_node));
  }
  plan.argv.emplace_back("--kill-on-bad-exit=1");
  if (r.runtime == ContainerRuntime::enroot) {
    LS_TRY(add_pyxis_options(r, plan));
  }
  plan.argv.insert(plan.argv.end(), r.launcher_args.begin(), r.launcher_args.end());
  plan.argv.insert(plan.argv.end(), plan.rank.begin(), plan.rank.end());
  plan.argv.insert(plan.argv.end(), r.command.begin(), r.command.end());
  return {};
}

// What --pmi can't do here, for the user.
void add_pmi_notes(const LaunchRequest& r, const envspec::ImageFacts& facts, LaunchPlan& plan) {
  if (!r.pmi.empty() && plan.launcher != Launcher::slurm) {
    plan.notes.push_back(
        fmt::format("--pmi {}: only srun takes it; mpirun starts its own PMIx server", r.pmi));
  }
  if (plan.launcher == Launcher::slurm && plan.pmi == "pmi2" && facts.mpi_impl == "openmpi") {
    plan.notes.emplace_back(
        "--pmi pmi2 with Open MPI needs an Open MPI built with Slurm's PMI-2 (Debian's is "
        "not); pmix is the usual choice");
  }
}

} // namespace

std::string_view name_of(Launcher launcher) {
  switch (launcher) {
  case Launcher::local:
    return "local";
  case Launcher::mpirun:
    return "mpirun";
  case Launcher::slurm:
    return "slurm";
  }
  return "?";
}

std::string_view name_of(MpiModel model) {
  return model == MpiModel::hybrid ? "hybrid" : "container";
}

std::string_view name_of(ContainerRuntime runtime) {
  switch (runtime) {
  case ContainerRuntime::native:
    return "native";
  case ContainerRuntime::apptainer:
    return "apptainer";
  case ContainerRuntime::singularity:
    return "singularity";
  case ContainerRuntime::enroot:
    return "enroot";
  }
  return "?";
}

Result<Launcher> parse_launcher(std::string_view text) {
  for (Launcher l : {Launcher::local, Launcher::mpirun, Launcher::slurm}) {
    if (text == name_of(l)) {
      return l;
    }
  }
  return invalid_input("unknown --launcher '{}': use local, mpirun or slurm", text);
}

Result<MpiModel> parse_mpi_model(std::string_view text) {
  for (MpiModel m : {MpiModel::hybrid, MpiModel::container}) {
    if (text == name_of(m)) {
      return m;
    }
  }
  return invalid_input("unknown --mpi-model '{}': use hybrid or container", text);
}

Result<ContainerRuntime> parse_container_runtime(std::string_view text) {
  for (ContainerRuntime c : {ContainerRuntime::native, ContainerRuntime::apptainer,
                             ContainerRuntime::singularity, ContainerRuntime::enroot}) {
    if (text == name_of(c)) {
      return c;
    }
  }
  return invalid_input("unknown --runtime '{}': use native, apptainer, singularity or enroot", text);
}

Result<std::vector<HostSlots>> parse_hostfile(std::string_view text, std::string_view origin) {
  std::vector<HostSlots> hosts;
  std::map<std::string, std::size_t> index;
  std::size_t line_no = 0;
  for (std::string_view line : text_lines(text)) {
    ++line_no;
    if (std::size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    std::vector<std::string_view> words = words_of(line);
    if (words.empty()) {
      continue;
    }
    if (hosts.size() >= 65536) {
      return invalid_input("{}:{}: more than 65536 hosts", origin, line_no);
    }
    std::string_view host = words[0];
    int slots = 1;
    if (std::size_t colon = host.find(':'); colon != std::string_view::npos) {
      LS_TRY_ASSIGN(slots, parse_count(host.substr(colon + 1), fmt::format("{}:{}: slots", origin, line_no)));
      host = host.substr(0, colon);
    }
    if (!valid_host_name(host)) {
      return invalid_input("{}:{}: '{}' is not a host name", origin, line_no, host);
    }
    for (std::size_t i = 1; i < words.size(); ++i) {
      std::string_view w = words[i];
      if (w.starts_with("slots=")) {
        LS_TRY_ASSIGN(slots, parse_count(w.substr(6), fmt::format("{}:{}: slots", origin, line_no)));
      } else if (w.starts_with("max_slots=") || w.starts_with("max-slots=")) {
        continue; // a cap Open MPI enforces itself
      } else {
        return invalid_input("{}:{}: unknown hostfile field '{}' (write HOST slots=N)", origin, line_no, w);
      }
    }
    if (slots == 0) {
      return invalid_input("{}:{}: {} has 0 slots", origin, line_no, host);
    }
    auto [it, inserted] = index.emplace(std::string(host), hosts.size());
    if (inserted) {
      hosts.push_back({std::string(host), slots});
    } else {
      hosts[it->second].slots = std::min(k_max_count, hosts[it->second].slots + slots);
    }
  }
  if (hosts.empty()) {
    return invalid_input("{}: the hostfile lists no hosts", origin);
  }
  return hosts;
}

std::string LaunchPlan::hostfile_text() const {
  std::string out;
  for (const HostSlots& h : hosts) {
    out += fmt::format("{} slots={}\n", h.host, h.slots);
  }
  return out;
}

Result<LaunchPlan> plan_launch(const LaunchRequest& r, const LaunchSite& site,
                               const envspec::ImageFacts& facts) {
  if (r.command.empty()) {
    return invalid_input("give the command each rank runs: lockstep run IMAGE -- CMD...");
  }
  LaunchPlan plan;
  plan.runtime = r.runtime;
  // Who starts the ranks, and where MPI's launcher lives.
  LS_TRY(choose_launcher_and_model(r, site, facts, plan));
  // Nodes and ranks.
  LS_TRY(place_ranks(r, site, plan));
  // Each rank's command.
  LS_TRY_ASSIGN(plan.rank, rank_command(r, site, plan, plan.notes, plan.env));
  // The launch command around it.
  if (plan.model == MpiModel::container) {
    LS_TRY(container_mpirun_command(r, site, facts, plan));
    return plan;
  }
  if (plan.launcher == Launcher::local && plan.ranks == 1) {
    LS_TRY(single_process_command(r, plan));
  } else if (plan.launcher == Launcher::slurm) {
    LS_TRY(srun_command(r, facts, plan));
  } else {
    mpirun_command(r, site, facts, plan);
  }
  add_pmi_notes(r, facts, plan);
  return plan;
}

std::vector<std::string> run_command_line(const LaunchRequest& r, const LaunchSite& site) {
  std::vector<std::string> out = {site.lockstep, "run"};
  if (r.launcher) {
    out.insert(out.end(), {"--launcher", std::string(name_of(*r.launcher))});
  }
  if (r.nodes > 0) {
    out.insert(out.end(), {"-N", std::to_string(r.nodes)});
  }
  if (r.ranks > 0) {
    out.insert(out.end(), {"-n", std::to_string(r.ranks)});
  }
  if (r.ranks_per_node > 0) {
    out.insert(out.end(), {"--ranks-per-node", std::to_string(r.ranks_per_node)});
  }
  if (!r.hostfile.empty()) {
    out.insert(out.end(), {"--hostfile", r.hostfile});
  }
  if (r.gpus_per_node > 0) {
    out.insert(out.end(), {"--gpus-per-node", std::to_string(r.gpus_per_node)});
  }
  if (r.model) {
    out.insert(out.end(), {"--mpi-model", std::string(name_of(*r.model))});
  }
  if (!r.pmi.empty()) {
    out.insert(out.end(), {"--pmi", r.pmi});
  }
  if (r.runtime != ContainerRuntime::native) {
    out.insert(out.end(), {"--runtime", std::string(name_of(r.runtime))});
  }
  for (const std::string& a : r.launcher_args) {
    out.push_back("--launcher-arg=" + a);
  }
  out.insert(out.end(), r.exec_args.begin(), r.exec_args.end());
  if (!r.runs_dir.empty()) {
    out.insert(out.end(), {"--runs-dir", r.runs_dir});
  }
  if (!r.job.empty()) {
    out.insert(out.end(), {"--job", r.job});
  }
  if (r.record_env_values) {
    out.emplace_back("--record-env-values");
  }
  if (!r.stage) {
    out.emplace_back("--no-stage");
  }
  out.insert(out.end(), {r.image, "--"});
  out.insert(out.end(), r.command.begin(), r.command.end());
  return out;
}

LaunchRequest without_env_values(const LaunchRequest& request) {
  LaunchRequest out = request;
  std::vector<std::string>& args = out.exec_args;
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--env") {
      args[i + 1] = args[i + 1].substr(0, args[i + 1].find('='));
    }
    if (args[i] == "--env" || args[i] == "--bind") {
      ++i; // a value, even one that reads "--env"
    }
  }
  return out;
}

std::string render_sbatch(const LaunchRequest& r, const LaunchSite& site, std::string_view image_digest) {
  std::string name = r.image;
  if (std::size_t slash = name.find_last_of('/'); slash != std::string::npos) {
    name = name.substr(slash + 1);
  }
  for (char& c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.')) {
      c = '-';
    }
  }
  std::string out = "#!/bin/sh\n";
  out += fmt::format("#SBATCH --job-name=lockstep-{}\n", name.empty() ? "job" : name);
  if (r.nodes > 0) {
    out += fmt::format("#SBATCH --nodes={}\n", r.nodes);
  }
  if (r.ranks > 0) {
    out += fmt::format("#SBATCH --ntasks={}\n", r.ranks);
  }
  if (r.ranks_per_node > 0) {
    out += fmt::format("#SBATCH --ntasks-per-node={}\n", r.ranks_per_node);
  }
  if (r.gpus_per_node > 0) {
    out += fmt::format("#SBATCH --gpus-per-node={}\n", r.gpus_per_node);
  }
  out += "# Written by `lockstep run --emit sbatch`. Inside the allocation lockstep checks every node\n";
  out += "# (preflight), starts the ranks with srun and writes the run record.\n";
  if (!image_digest.empty()) {
    out += fmt::format("# image: {} ({})\n", escape_controls(r.image), escape_controls(image_digest));
  }
  LaunchRequest inside = r;
  inside.launcher = Launcher::slurm;
  inside.hostfile.clear();
  out += "exec " + shell_join(run_command_line(inside, site)) + "\n";
  return out;
}

} // namespace lockstep::runner
