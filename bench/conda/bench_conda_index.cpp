// bench/conda-repodata.sh's subject: reads a repodata.json, parses it (support/conda/repodata) and
// builds the solver's package index from it (support/conda/index), then prints what it found, so the
// script can time lockstep's parse and index against python's json.load of the same file.
//   bench_conda_index FILE
#include "support/conda/index.hpp"
#include "support/conda/repodata.hpp"

#include <fmt/format.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: bench_conda_index REPODATA.json\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    fmt::print(stderr, "bench_conda_index: can't open {}\n", argv[1]);
    return 2;
  }
  in.seekg(0, std::ios::end);
  std::string text(static_cast<std::size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  auto repodata = lockstep::conda::parse_repodata(std::move(text), argv[1]);
  if (!repodata) {
    fmt::print(stderr, "bench_conda_index: {}\n", repodata.error().message);
    return 2;
  }
  std::vector<lockstep::conda::ChannelRepoData> channels(1);
  channels[0].channel = "bench";
  channels[0].subdirs.push_back(std::move(*repodata));
  auto index = lockstep::conda::PackageIndex::build(std::move(channels), {});
  if (!index) {
    fmt::print(stderr, "bench_conda_index: {}\n", index.error().message);
    return 2;
  }
  fmt::print("{} records, {} names, {} left out (version)\n", index->stats().records,
             index->packages().size(), index->stats().unparseable);
  return 0;
}
