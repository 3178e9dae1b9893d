// The one typed YAML reader (envspec/yaml/yaml_reader.hpp) that the spec's walker and the recipes share.
#include "envspec/yaml/yaml_reader.hpp"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::envspec;

namespace {

Node parsed(const std::string& text) {
  Diagnostics diags;
  std::optional<Node> root = parse_yaml(text, "f.yaml", diags);
  REQUIRE(root);
  REQUIRE(diags.empty());
  return *root;
}

// "KEY.PATH LINE:COL: MESSAGE" for each diagnostic, in the order reported.
std::vector<std::string> reported(const Diagnostics& diags) {
  std::vector<std::string> out;
  for (const Diagnostic& d : diags.items()) {
    out.push_back(d.key_path + " " + std::to_string(d.location.line) + ":" +
                  std::to_string(d.location.column) + ": " + d.message);
  }
  return out;
}

} // namespace

TEST_CASE("The reader reports a value of the wrong kind at the value, under its key path", "[yaml_reader]") {
  const Node root = parsed("a: [1]\nb: {c: d}\ne: \"\"\nf: text\n");
  Diagnostics diags;
  YamlReader r(diags, Dialect::spec);
  CHECK(r.string(root.find("a")->value, "a") == nullptr);
  CHECK_FALSE(r.expect_list(root.find("b")->value, "b"));
  CHECK_FALSE(r.expect_map(root.find("f")->value, "f", "a map {x: y}"));
  CHECK(r.nonempty_string(root.find("e")->value, "e", "a name") == nullptr);
  CHECK(*r.string(root.find("f")->value, "f") == "text");
  CHECK(reported(diags) == std::vector<std::string>{
                               "a 1:4: expected a string, found a list",
                               "b 2:4: expected a list, found a map",
                               "f 4:4: expected a map {x: y}, found a string",
                               "e 3:4: expected a name, found an empty string",
                           });
}

TEST_CASE(
    "An unknown key: a spec suggests the closest key or lists them sorted, a recipe lists them in order",
    "[yaml_reader]") {
  const Node root = parsed("labls: 1\nzzz: 2\nlaunch: 3\n<<: 4\n");
  Diagnostics spec_diags;
  YamlReader spec(spec_diags, Dialect::spec);
  for (const MapEntry& e : root.entries) {
    spec.unknown_key(e, "", {"name", "labels", "env"}, {"launch"});
  }
  CHECK(reported(spec_diags) ==
        std::vector<std::string>{
            "labls 1:1: unknown key; did you mean 'labels'?",
            "zzz 2:1: unknown key; expected one of: env, labels, name",
            "launch 3:1: not supported by this lockstep version yet",
            "<< 4:1: YAML merge keys are not supported; use 'extends' to share settings",
        });

  Diagnostics recipe_diags;
  YamlReader recipe(recipe_diags, Dialect::recipe);
  recipe.check_keys(root, "", {"name", "labels", "env"});
  CHECK(reported(recipe_diags) == std::vector<std::string>{
                                      "labls 1:1: unknown key; expected one of: name, labels, env",
                                      "zzz 2:1: unknown key; expected one of: name, labels, env",
                                      "launch 3:1: unknown key; expected one of: name, labels, env",
                                      "<< 4:1: unknown key; expected one of: name, labels, env",
                                  });
}

TEST_CASE("A value that is not true or false: a spec quotes it, a recipe names its kind", "[yaml_reader]") {
  const Node root = parsed("a: yes\nb: \"true\"\nc: [x]\nd: false\n");
  for (Dialect dialect : {Dialect::spec, Dialect::recipe}) {
    Diagnostics diags;
    YamlReader r(diags, dialect);
    for (const char* key : {"a", "b", "c"}) {
      CHECK_FALSE(r.boolean(root, "m", key));
    }
    CHECK(r.boolean(root, "m", "d") == false);
    CHECK_FALSE(r.boolean(root, "m", "absent"));
    if (dialect == Dialect::spec) {
      CHECK(reported(diags) == std::vector<std::string>{
                                   "m.a 1:4: expected true or false, found 'yes'",
                                   "m.b 2:4: expected true or false, found 'true'",
                                   "m.c 3:4: expected a string, found a list",
                               });
    } else {
      CHECK(reported(diags) == std::vector<std::string>{
                                   "m.a 1:4: expected true or false, found a string",
                                   "m.b 2:4: expected true or false, found a string",
                                   "m.c 3:4: expected true or false, found a list",
                               });
    }
  }
}

TEST_CASE("Map entries: a missing key is reported at the map, a wrong one at its value", "[yaml_reader]") {
  const Node root = parsed("m:\n  s: text\n  l: [a, {b: c}]\n  n: 7\n");
  const Node& m = root.find("m")->value;
  Diagnostics diags;
  YamlReader r(diags);
  CHECK(r.scalar(m, "m", "s") == "text");
  CHECK_FALSE(r.scalar(m, "m", "gone"));
  CHECK_FALSE(r.scalar(m, "m", "optional", false));
  CHECK(r.string_list(m, "m", "l") == std::vector<std::string>{"a"});
  CHECK(r.entries(m, "m", "n") == nullptr);
  r.expect(false, m, "m", "n", "expected an even number");
  CHECK(reported(diags) == std::vector<std::string>{
                               "m 2:3: missing key 'gone'",
                               "m.l[1] 3:10: expected a string, found a map",
                               "m.n 4:6: expected a map, found a number",
                               "m.n 4:6: expected an even number",
                           });
}
