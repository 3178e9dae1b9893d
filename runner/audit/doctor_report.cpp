// The target's verdict and the human report (doctor_report.hpp).
#include "runner/audit/doctor_report.hpp"

#include "envspec/stack/recipes.hpp"
#include "runner/audit/doctor_text.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>
#include <vector>

namespace lockstep::runner {

using namespace doctor_detail; // doctor's shared bounds and text rules (doctor_text.hpp)

namespace {

using Status = Check::Status;

// ---------------------------------------------------------------------------------------------
// The report

// Rows of two columns, the first padded to the widest; "" in the first column continues a row.
class Table {
public:
  void row(std::string label, std::string value) { m_rows.emplace_back(std::move(label), std::move(value)); }
  [[nodiscard]] std::string render() const {
    std::size_t width = 0;
    for (const auto& [label, value] : m_rows) {
      width = std::max(width, label.size());
    }
    std::string out;
    for (const auto& [label, value] : m_rows) {
      std::string line = fmt::format("{:<{}}  {}", label, width, value);
      line.erase(line.find_last_not_of(' ') + 1);
      out += line + '\n';
    }
    return out;
  }

private:
  std::vector<std::pair<std::string, std::string>> m_rows;
};

std::string or_none(const std::string& s, std::string_view none = "not found") {
  return s.empty() ? std::string(none) : s;
}

std::string describe_facts(const envspec::ImageFacts& f) {
  std::vector<std::string> parts;
  if (!f.cuda.version.empty()) {
    parts.push_back(f.cuda_driver_floor.empty()
                        ? "CUDA " + f.cuda.version
                        : fmt::format("CUDA {} (driver >= {})", f.cuda.version, f.cuda_driver_floor));
  }
  if (!f.mpi_impl.empty()) {
    parts.push_back(mpi_display(f.mpi_impl, f.mpi.version));
  }
  if (!f.pmix.version.empty()) {
    parts.push_back("PMIx " + f.pmix.version);
  }
  if (!f.ucx.version.empty()) {
    parts.push_back("UCX " + f.ucx.version);
  }
  if (!f.libfabric.version.empty()) {
    parts.push_back("libfabric " + f.libfabric.version);
  }
  std::string out;
  for (const std::string& p : parts) {
    out += (out.empty() ? "" : ", ") + p;
  }
  return out.empty() ? "records no CUDA or MPI" : out;
}

} // namespace

TargetReport evaluate_target(std::string kind, const std::string& ref, const envspec::ImageFacts& facts,
                             const Capture& host, const ImageProbe* image, std::uint64_t unpack_bytes,
                             std::string_view gpu_min_cc) {
  PreflightRequest request;
  request.image = ref;
  request.model = "hybrid";
  if (!host.probe.mpi.path.empty()) {
    request.launcher = "mpirun";
  } else if (!host.snapshot.host.slurm.empty()) {
    request.launcher = "slurm";
  } else {
    request.launcher = "local";
  }
  request.gpus_per_node = facts.cuda.version.empty() && facts.cuda_driver_floor.empty() ? 0 : 1;
  request.facts = facts;
  request.unpack_bytes = unpack_bytes;
  const ImageProbe no_image{ImageProbe::State::present, ref, ImageArg::Kind::directory, std::nullopt, {}, {}};
  const NodeReport node = evaluate_preflight(request, host.probe, image != nullptr ? *image : no_image);
  TargetReport t;
  t.kind = std::move(kind);
  t.ref = printable_ascii(ref, k_max_path);
  t.facts = facts;
  for (envspec::FactSource* f :
       {&t.facts.mpi, &t.facts.pmix, &t.facts.ucx, &t.facts.libfabric, &t.facts.cuda}) {
    f->from.clear();
  }
  for (const Check& c : node.checks) {
    const bool not_for_lock = image == nullptr && (c.name == "image" || c.name == "space");
    const bool nothing_to_unpack = c.name == "space" && unpack_bytes == 0;
    if (c.status == Status::skipped || not_for_lock || nothing_to_unpack) {
      continue;
    }
    Check kept = c;
    kept.detail = printable_ascii(kept.detail, k_max_text);
    t.checks.push_back(std::move(kept));
  }
  // The GPUs' architecture against the oldest one the target's binaries support.
  if (!gpu_min_cc.empty() && !host.snapshot.host.gpus.empty()) {
    std::vector<std::string> old;
    std::size_t known = 0;
    for (const SnapshotGpu& g : host.snapshot.host.gpus) {
      if (g.compute_capability.empty()) {
        continue;
      }
      ++known;
      if (envspec::compare_dotted(g.compute_capability, gpu_min_cc) < 0) {
        old.push_back(fmt::format("GPU {} ({}, compute capability {})", g.index, or_none(g.name, "unnamed"),
                                  g.compute_capability));
      }
    }
    if (!old.empty()) {
      t.checks.push_back(
          Check{"gpu-arch", Status::fail,
                printable_ascii(fmt::format("{} {} older than {}, the lowest compute capability the "
                                            "target's CUDA stack supports (use newer GPUs, or a stack "
                                            "built for older ones)",
                                            fmt::join(old, ", "), old.size() == 1 ? "is" : "are", gpu_min_cc),
                                k_max_text)});
    } else if (known > 0) {
      t.checks.push_back(Check{"gpu-arch", Status::ok,
                               fmt::format("{} GPU{} at compute capability {} or newer", known,
                                           known == 1 ? "" : "s", gpu_min_cc)});
    }
  }
  return t;
}

std::string render_doctor_report(const Capture& c, const std::optional<TargetReport>& target) {
  const SnapshotHost& h = c.snapshot.host;
  Table table;
  table.row("arch", or_none(h.arch, "unknown"));
  table.row("os", or_none(h.os, "unknown"));
  table.row("kernel", or_none(h.kernel, "unknown"));
  table.row("glibc", or_none(h.glibc, "unknown"));
  table.row("user namespaces", h.user_namespaces ? "yes" : "no");
  table.row("NVIDIA driver",
            h.driver ? fmt::format("{} (from {})", h.driver->version, h.driver->from) : "none");
  if (!h.gpus.empty()) {
    table.row("GPUs", fmt::format("{} (from {})", h.gpus.size(), c.gpus_from));
    for (const SnapshotGpu& g : h.gpus) {
      std::string line = or_none(g.name, "(unnamed)");
      if (!g.compute_capability.empty()) {
        line += ", cc " + g.compute_capability;
      }
      if (g.memory_mib) {
        line += fmt::format(", {} MiB", *g.memory_mib);
      }
      if (!g.uuid.empty()) {
        line += ", " + g.uuid;
      }
      table.row(fmt::format("  {}", g.index), line);
    }
  } else {
    table.row("GPUs", "none");
  }
  table.row("mpirun", h.mpi ? fmt::format("{} ({})",
                                          h.mpi->impl == "unknown" ? "unknown MPI"
                                                                   : mpi_display(h.mpi->impl, h.mpi->version),
                                          h.mpi->path)
                            : "none on PATH");
  table.row("PMIx", or_none(h.pmix));
  table.row("UCX", or_none(h.ucx));
  table.row("libfabric", or_none(h.libfabric));
  table.row("Slurm", or_none(h.slurm));
  if (const auto& py = c.snapshot.python) {
    std::string line = fmt::format("{} {}", py->kind, py->prefix);
    if (!py->version.empty()) {
      line += ", Python " + py->version;
    }
    line += ", " + plural(py->packages.size(), "package");
    if (c.system_site_packages) {
      line += " (system site-packages visible, not listed)";
    }
    table.row("Python", line);
  } else {
    table.row("Python", "no active environment (set VIRTUAL_ENV or CONDA_PREFIX, or use --python PREFIX)");
  }
  std::string out = table.render();
  if (!target) {
    return out;
  }
  Table verdict;
  verdict.row("target", fmt::format("{} ({}): {}", target->ref, target->kind, describe_facts(target->facts)));
  verdict.row("can run here", target->can_run() ? "yes" : "no");
  for (const Check& check : target->checks) {
    std::string_view status = "ok";
    if (check.status == Status::fail) {
      status = "FAIL";
    } else if (check.status == Status::warn) {
      status = "WARN";
    }
    verdict.row("  " + check.name, fmt::format("{:<4}  {}", status, check.detail));
  }
  return out + '\n' + verdict.render();
}

} // namespace lockstep::runner
