// Diagnostics: the rendered layout (location, key path, source line, caret), ordering, and the Error.
#include "envspec/yaml/diagnostics.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace lockstep;
using envspec::Diagnostic;
using envspec::Diagnostics;
using envspec::SourceLocation;
using test::TempDirFixture;

TEST_CASE_METHOD(TempDirFixture, "A diagnostic shows location, key path, source line and caret",
                 "[diagnostics]") {
  auto file = write("lockstep.yaml", "lockstep: 1\nname: a\nlabls: {a: b}\n");
  Diagnostics d;
  d.error(SourceLocation{file, 3, 1, 5}, "labls", "unknown key; did you mean 'labels'?");
  CHECK(d.render() == file.string() + ":3:1: error: labls: unknown key; did you mean 'labels'?\n"
                                      "    3 | labls: {a: b}\n"
                                      "      | ^~~~~\n");
}

TEST_CASE_METHOD(TempDirFixture, "The caret starts at the column and underlines length characters",
                 "[diagnostics]") {
  auto file = write("s.yaml", "env: {A: 1, B-C: 2}\n");
  Diagnostics d;
  d.error(SourceLocation{file, 1, 13, 3}, "env.B-C", "bad");
  CHECK(d.render() == file.string() + ":1:13: error: env.B-C: bad\n"
                                      "    1 | env: {A: 1, B-C: 2}\n"
                                      "      |             ^~~\n");
}

TEST_CASE_METHOD(TempDirFixture, "Without a key path the message follows 'error:' directly",
                 "[diagnostics]") {
  auto file = write("s.yaml", "a: [\n");
  Diagnostics d;
  d.error(SourceLocation{file, 1, 4, 1}, "", "invalid YAML: end of sequence flow not found");
  CHECK(d.render() == file.string() + ":1:4: error: invalid YAML: end of sequence flow not found\n"
                                      "    1 | a: [\n"
                                      "      |    ^\n");
}

TEST_CASE("A diagnostic without a location is just the message", "[diagnostics]") {
  Diagnostics d;
  d.error(SourceLocation{}, "name", "missing");
  CHECK(d.render() == "error: name: missing\n");
}

TEST_CASE_METHOD(TempDirFixture, "A diagnostic with a file but no line has no source line", "[diagnostics]") {
  auto file = write("s.yaml", "x: 1\n");
  Diagnostics d;
  d.error(SourceLocation{file, 0, 0, 1}, "", "too big");
  CHECK(d.render() == file.string() + ": error: too big\n");
}

TEST_CASE_METHOD(TempDirFixture,
                 "A line past the end of the file or an unreadable file omits the source line",
                 "[diagnostics]") {
  auto file = write("s.yaml", "x: 1\n");
  Diagnostics d;
  d.error(SourceLocation{file, 7, 1, 1}, "", "at the end");
  d.error(SourceLocation{dir() / "gone.yaml", 1, 1, 1}, "", "gone");
  CHECK(d.render() == file.string() + ":7:1: error: at the end\n" + (dir() / "gone.yaml").string() +
                          ":1:1: error: gone\n"
                          "2 errors\n");
}

TEST_CASE_METHOD(TempDirFixture, "Tabs before the column are kept so the caret lines up", "[diagnostics]") {
  auto file = write("s.yaml", "\tkey: value\n");
  Diagnostics d;
  d.error(SourceLocation{file, 1, 7, 5}, "key", "bad");
  CHECK(d.render() == file.string() + ":1:7: error: key: bad\n"
                                      "    1 | \tkey: value\n"
                                      "      | \t     ^~~~~\n");
}

TEST_CASE_METHOD(TempDirFixture, "Windows line endings are not shown", "[diagnostics]") {
  auto file = write("s.yaml", "a: 1\r\nb: 2\r\n");
  Diagnostics d;
  d.error(SourceLocation{file, 2, 4, 1}, "b", "bad");
  CHECK(d.render() == file.string() + ":2:4: error: b: bad\n"
                                      "    2 | b: 2\n"
                                      "      |    ^\n");
}

TEST_CASE_METHOD(TempDirFixture, "Long line numbers widen the gutter and keep the caret aligned",
                 "[diagnostics]") {
  std::string text;
  for (int i = 1; i < 123456; ++i) {
    text += "\n";
  }
  text += "key: x\n";
  auto file = write("s.yaml", text);
  Diagnostics d;
  d.error(SourceLocation{file, 123456, 6, 1}, "key", "bad");
  CHECK(d.render() == file.string() + ":123456:6: error: key: bad\n"
                                      "123456 | key: x\n"
                                      "       |      ^\n");
}

TEST_CASE_METHOD(TempDirFixture, "Several diagnostics end with a count", "[diagnostics]") {
  auto file = write("s.yaml", "a: 1\nb: 2\n");
  Diagnostics d;
  d.error(SourceLocation{file, 1, 1, 1}, "a", "first");
  d.error(SourceLocation{file, 2, 1, 1}, "b", "second");
  CHECK(d.render() == file.string() +
                          ":1:1: error: a: first\n"
                          "    1 | a: 1\n"
                          "      | ^\n" +
                          file.string() +
                          ":2:1: error: b: second\n"
                          "    2 | b: 2\n"
                          "      | ^\n"
                          "2 errors\n");
}

TEST_CASE_METHOD(TempDirFixture, "Source text given to set_source is quoted instead of the file",
                 "[diagnostics]") {
  auto file = write("s.yaml", "changed on disk\n");
  Diagnostics d;
  d.set_source(file, "as parsed: 1\n");
  d.set_source(dir() / "virtual.yaml", "never on disk\n");
  d.error(SourceLocation{file, 1, 1, 9}, "", "one");
  d.error(SourceLocation{dir() / "virtual.yaml", 1, 7, 2}, "", "two");
  CHECK(d.render() == file.string() +
                          ":1:1: error: one\n"
                          "    1 | as parsed: 1\n"
                          "      | ^~~~~~~~~\n" +
                          (dir() / "virtual.yaml").string() +
                          ":1:7: error: two\n"
                          "    1 | never on disk\n"
                          "      |       ^~\n"
                          "2 errors\n");
}

TEST_CASE("Diagnostics sort by file order, then line and column, stably", "[diagnostics]") {
  Diagnostics d;
  d.error(SourceLocation{"/b.yaml", 1, 1, 1}, "", "b1");
  d.error(SourceLocation{"/a.yaml", 5, 2, 1}, "", "a5.2");
  d.error(SourceLocation{"/other.yaml", 1, 1, 1}, "", "other");
  d.error(SourceLocation{"/a.yaml", 5, 1, 1}, "", "a5.1 first");
  d.error(SourceLocation{"/a.yaml", 1, 9, 1}, "", "a1");
  d.error(SourceLocation{"/a.yaml", 5, 1, 1}, "", "a5.1 second");
  d.sort_by_location({"/a.yaml", "/b.yaml"});
  std::vector<std::string> order;
  for (const Diagnostic& item : d.items()) {
    order.push_back(item.message);
  }
  CHECK(order == std::vector<std::string>{"a1", "a5.1 first", "a5.1 second", "a5.2", "b1", "other"});
}

TEST_CASE("to_error is a pre-rendered invalid_input error", "[diagnostics]") {
  Diagnostics d;
  CHECK(d.empty());
  d.error(SourceLocation{}, "", "bad");
  CHECK_FALSE(d.empty());
  Error e = d.to_error();
  CHECK(e.code == ExitCode::invalid_input);
  CHECK(e.rendered);
  CHECK(e.message == "error: bad\n");
  CHECK(e.with_context("ignored").message == "error: bad\n");
}
