// The located YAML node layer and the merge function.
#include "envspec/load/merge.hpp"
#include "envspec/yaml/node.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace lockstep;
using envspec::Diagnostics;
using envspec::Node;
using envspec::NodeKind;

namespace {

const std::filesystem::path k_file = "/spec/lockstep.yaml";

// Parses `text`, which must parse without diagnostics.
Node parse_ok(const std::string& text) {
  Diagnostics diags;
  std::optional<Node> node = envspec::parse_yaml(text, k_file, diags);
  INFO(diags.render());
  REQUIRE(node);
  REQUIRE(diags.empty());
  return *node;
}

// The messages of the diagnostics from parsing `text`.
std::vector<std::string> parse_messages(const std::string& text) {
  Diagnostics diags;
  (void)envspec::parse_yaml(text, k_file, diags);
  std::vector<std::string> out;
  for (const auto& d : diags.items()) {
    out.push_back(d.key_path + ": " + d.message);
  }
  return out;
}

} // namespace

TEST_CASE("Nodes and keys carry their file, line, column and length", "[node]") {
  Node root = parse_ok("name: app\ncopy:\n  - {from: \"./a b\", to: '/x'}\n");
  REQUIRE(root.is_map());
  REQUIRE(root.entries.size() == 2);
  const auto& name = root.entries[0];
  CHECK(name.key == "name");
  CHECK(name.key_location.file == k_file);
  CHECK(name.key_location.line == 1);
  CHECK(name.key_location.column == 1);
  CHECK(name.key_location.length == 4);
  CHECK(name.value.location.column == 7);
  CHECK(name.value.location.length == 3);
  CHECK_FALSE(name.value.quoted);

  const Node& item = root.find("copy")->value.items.at(0);
  CHECK(item.location.line == 3);
  CHECK(item.location.column == 5);
  const Node& from = item.find("from")->value;
  CHECK(from.scalar == "./a b");
  CHECK(from.quoted);
  CHECK(from.location.column == 12);
  CHECK(from.location.length == 7);
  const Node& to = item.find("to")->value;
  CHECK(to.scalar == "/x");
  CHECK(to.location.length == 4);
}

TEST_CASE("Scalars keep their source text", "[node]") {
  Node root = parse_ok("mode: 0755\nflag: yes\nnum: 1.50\n");
  CHECK(root.find("mode")->value.scalar == "0755");
  CHECK(root.find("flag")->value.scalar == "yes");
  CHECK(root.find("num")->value.scalar == "1.50");
}

TEST_CASE("A null value is located at its key", "[node]") {
  Node root = parse_ok("a: 1\nempty:\nb: 2\n");
  const Node& empty = root.find("empty")->value;
  CHECK(empty.is_null());
  CHECK(empty.location.line == 2);
  CHECK(empty.location.column == 1);
  CHECK(empty.location.length == 5);
}

TEST_CASE("An empty document is a null node", "[node]") {
  CHECK(parse_ok("").is_null());
  CHECK(parse_ok("# nothing\n").is_null());
  CHECK(parse_ok("---\n").is_null());
}

TEST_CASE("Aliases expand to a copy of the anchored node", "[node]") {
  Node root = parse_ok("common: &c {A: 1}\nenv: *c\n");
  const Node& env = root.find("env")->value;
  REQUIRE(env.is_map());
  CHECK(env.find("A")->value.scalar == "1");
  CHECK(env.location.line == 1); // where the content was written
}

TEST_CASE("Alias expansion is bounded", "[node]") {
  std::string text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'h'; ++c) {
    std::string list;
    for (int i = 0; i < 10; ++i) {
      list += (i ? ", *" : "*") + prev;
    }
    text += std::string(1, c) + ": &" + std::string(1, c) + " [" + list + "]\n";
    prev = std::string(1, c);
  }
  CHECK(
      parse_messages(text) ==
      std::vector<std::string>{": more than 100000 nodes after expanding aliases; refusing to read further"});
}

TEST_CASE("Duplicate keys are reported at the second one and the first is kept", "[node]") {
  Diagnostics diags;
  std::optional<Node> root = envspec::parse_yaml("a: 1\nb: {x: 1, x: 2}\na: 3\n", k_file, diags);
  REQUIRE(root);
  CHECK(root->find("a")->value.scalar == "1");
  REQUIRE(diags.items().size() == 2);
  CHECK(diags.items()[0].key_path == "b.x");
  CHECK(diags.items()[0].message == "duplicate key 'x' (first at line 2)");
  CHECK(diags.items()[0].location.column == 11);
  CHECK(diags.items()[1].key_path == "a");
  CHECK(diags.items()[1].message == "duplicate key 'a' (first at line 1)");
  CHECK(diags.items()[1].location.line == 3);
}

TEST_CASE("Keys that are not strings are reported", "[node]") {
  CHECK(parse_messages("? [a, b]\n: 1\nc: {? {x: 1} : 2}\n") ==
        std::vector<std::string>{": map keys must be strings, found a list",
                                 "c: map keys must be strings, found a map"});
}

TEST_CASE("describe names what was found", "[node]") {
  Node root = parse_ok("a: ~\nb: {}\nc: []\nd: 12\ne: -1.5e3\nf: true\ng: text\nh: \"12\"\ni: 0x1F\n");
  auto what = [&](const char* key) { return envspec::describe(root.find(key)->value); };
  CHECK(what("a") == "nothing");
  CHECK(what("b") == "a map");
  CHECK(what("c") == "a list");
  CHECK(what("d") == "a number");
  CHECK(what("e") == "a number");
  CHECK(what("f") == "a boolean");
  CHECK(what("g") == "a string");
  CHECK(what("h") == "a string");
  CHECK(what("i") == "a number");
}

TEST_CASE("Key paths are spelled with dots and indices", "[node]") {
  CHECK(envspec::child_path("", "env") == "env");
  CHECK(envspec::child_path("env", "A") == "env.A");
  CHECK(envspec::item_path("copy", 2) == "copy[2]");
  CHECK(envspec::child_path(envspec::item_path("copy", 0), "to") == "copy[0].to");
}

TEST_CASE("merge_nodes merges maps deeply, appends lists and replaces the rest", "[node][merge]") {
  Node base = parse_ok("m: {a: 1, b: {x: 1}}\nl: [1, 2]\ns: base\nt: {k: v}\n");
  Node overlay = parse_ok("m: {b: {y: 2}, c: 3}\nl: [3]\ns: overlay\nt: scalar\nnew: 1\n");
  Node merged = envspec::merge_nodes(base, overlay, "", nullptr);
  const Node& m = merged.find("m")->value;
  CHECK(m.find("a")->value.scalar == "1");
  CHECK(m.find("b")->value.find("x")->value.scalar == "1");
  CHECK(m.find("b")->value.find("y")->value.scalar == "2");
  CHECK(m.find("c")->value.scalar == "3");
  const Node& l = merged.find("l")->value;
  REQUIRE(l.items.size() == 3);
  CHECK(l.items[2].scalar == "3");
  CHECK(merged.find("s")->value.scalar == "overlay");
  CHECK(merged.find("t")->value.scalar == "scalar");
  CHECK(merged.find("new")->value.scalar == "1");
  std::vector<std::string> keys;
  for (const auto& e : merged.entries) {
    keys.push_back(e.key);
  }
  CHECK(keys == std::vector<std::string>{"m", "l", "s", "t", "new"});
}

TEST_CASE("merge_nodes replaces atomic lists", "[node][merge]") {
  Node base = parse_ok("cmd: [a]\ncopy: [a]\n");
  Node overlay = parse_ok("cmd: [b]\ncopy: [b]\n");
  Node merged = envspec::merge_nodes(base, overlay, "", envspec::is_atomic_list);
  CHECK(merged.find("cmd")->value.items.size() == 1);
  CHECK(merged.find("cmd")->value.items[0].scalar == "b");
  CHECK(merged.find("copy")->value.items.size() == 2);
}

TEST_CASE("YAML nesting is bounded, located where it goes too deep", "[node]") {
  // 128 levels of flow sequences parse; one more is refused at the bracket that opens it.
  CHECK(parse_messages("a: " + std::string(127, '[') + std::string(127, ']') + "\n").empty());
  const std::string too_deep = "a: " + std::string(128, '[') + std::string(128, ']') + "\n";
  Diagnostics diags;
  CHECK_FALSE(envspec::parse_yaml(too_deep, k_file, diags));
  REQUIRE(diags.items().size() == 1);
  CHECK(diags.items()[0].message == "nested more than 128 levels deep; refusing to read further");
  CHECK(diags.items()[0].location.line == 1);
  CHECK(diags.items()[0].location.column == 4 + 127);
  // Hostile sizes: flow sequences and maps, and block sequences two characters a level.
  for (const std::string& text :
       {std::string(100000, '['), std::string(300000, '['), "a: " + std::string(100000, '{'), [] {
          std::string s;
          for (int i = 0; i < 100000; ++i) {
            s += "- ";
          }
          return s + "x\n";
        }()}) {
    CHECK(parse_messages(text) ==
          std::vector<std::string>{": nested more than 128 levels deep; refusing to read further"});
  }
}

TEST_CASE("YAML nesting through aliases is bounded too", "[node]") {
  // Each alias copies a 100-level node one level further down: depth, not size, runs out.
  const std::string hundred = std::string(100, '[') + "x" + std::string(100, ']');
  CHECK(parse_messages("a: &a " + hundred + "\nb: [*a]\n").empty());
  CHECK(parse_messages("a: &a " + hundred + "\nb: " + std::string(30, '[') + "*a" + std::string(30, ']') +
                       "\n") ==
        std::vector<std::string>{": nested more than 128 levels deep; refusing to read further"});
}
