// The variables a conda environment's activation sets, read statically (support/conda/activation):
// env_vars.d files, then activate.d scripts' top-level exports, each file in name order; what
// can't be known without running the script is left out and the script named.
#include "support/conda/activation.hpp"

#include <catch2/catch.hpp>

using namespace lockstep::conda;
using Env = std::vector<std::pair<std::string, std::string>>;

TEST_CASE("activation paths are the env_vars.d files and the activate.d sh scripts", "[conda][activation]") {
  CHECK(is_activation_path("etc/conda/env_vars.d/gdal.json"));
  CHECK(is_activation_path("etc/conda/activate.d/gdal-activate.sh"));
  CHECK_FALSE(is_activation_path("etc/conda/activate.d/gdal-activate.csh"));
  CHECK_FALSE(is_activation_path("etc/conda/activate.d/sub/x.sh"));
  CHECK_FALSE(is_activation_path("etc/conda/deactivate.d/x.sh"));
  CHECK_FALSE(is_activation_path("etc/conda/activate.d/.sh"));
}

TEST_CASE("env_vars.d files merge in name order, then scripts in theirs", "[conda][activation]") {
  const Activation a = evaluate_activation(
      {{"etc/conda/env_vars.d/a.json", R"({"X": "1", "Y": "a"})"},
       {"etc/conda/env_vars.d/b.json", R"({"Y": "b"})"},
       {"etc/conda/activate.d/10-a.sh", "export Z=$CONDA_PREFIX/share\nexport Y=\"${Y}-script\"\n"},
       {"etc/conda/activate.d/20-b.sh", "unset X\nexport W='$not expanded'\n"}},
      "/opt/conda");
  CHECK(a.env == Env{{"Y", "b-script"}, {"Z", "/opt/conda/share"}, {"W", "$not expanded"}});
  CHECK(a.partly_evaluated.empty());
}

TEST_CASE("what needs the shell to run is left out and the script named", "[conda][activation]") {
  const Activation a =
      evaluate_activation({{"etc/conda/activate.d/gdal.sh", "#!/bin/sh\n"
                                                            "if [ -n \"${GDAL_DATA:-}\" ]; then\n"
                                                            "  export _CONDA_SET_GDAL_DATA=$GDAL_DATA\n"
                                                            "fi\n"
                                                            "export GDAL_DATA=$CONDA_PREFIX/share/gdal\n"
                                                            "export CC=$(which gcc)\n"
                                                            "export PATH=\"$CONDA_PREFIX/extra:$PATH\"\n"
                                                            "export A=`date`\n"
                                                            "export B=x; rm -rf /\n"
                                                            "f() {\n  export C=1\n}\n"
                                                            "export _CONDA_BACKUP_CC=x\n"},
                           {"etc/conda/env_vars.d/bad.json", "[1, 2]"}},
                          "/opt/env");
  CHECK(a.env == Env{{"GDAL_DATA", "/opt/env/share/gdal"}});
  CHECK(a.partly_evaluated ==
        std::vector<std::string>{"etc/conda/env_vars.d/bad.json", "etc/conda/activate.d/gdal.sh"});
}

TEST_CASE("activation work is bounded", "[conda][activation]") {
  std::string many;
  for (int i = 0; i < 5000; ++i) {
    many += "export V" + std::to_string(i) + "=x\n";
  }
  const Activation a = evaluate_activation({{"etc/conda/activate.d/many.sh", many}}, "/opt/conda");
  CHECK(a.env.size() == 4096);
  CHECK(a.partly_evaluated == std::vector<std::string>{"etc/conda/activate.d/many.sh"});
}
