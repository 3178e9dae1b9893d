#include "cli/cli.hpp"

int main(int argc, char** argv) {
  return lockstep::cli::run(argc, argv);
}
