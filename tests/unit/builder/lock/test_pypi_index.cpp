#include "builder/lock/pypi_index.hpp"
#include "support/codec/digest.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::builder;

namespace {

const std::string k_sha_a(64, 'a');
const std::string k_sha_b(64, 'b');

std::string resolve(const std::string& base, const std::string& ref) {
  auto r = resolve_url(base, ref);
  INFO(base << " + " << ref);
  REQUIRE(r);
  return *r;
}

// A PEP 503 page as PyPI and download.pytorch.org write them.
std::string html_page() {
  return "<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"1.1\">\n"
         "    <title>Links for numpy</title>\n  </head>\n  <body>\n    <h1>Links for numpy</h1>\n"
         "    <a "
         "href=\"https://files.example.org/packages/ab/cd/numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64."
         "manylinux2014_x86_64.whl#sha256=" +
         k_sha_a + "\" data-requires-python=\"&gt;=3.9\" data-dist-info-metadata=\"sha256=" + k_sha_b +
         "\" data-core-metadata=\"sha256=" + k_sha_b +
         "\">numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl</a><br />\n"
         "    <!-- <a href=\"javascript:alert(1)\">commented out</a> -->\n"
         "    <A HREF='../../packages/numpy-1.26.3.tar.gz#sha256=" +
         std::string(64, 'C') +
         "' data-yanked=\"broken &amp; replaced\">numpy-1.26.3.tar.gz</A>\n"
         "    <a href=\"/whl/cu121/torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl\" "
         "data-requires-python=\"&gt;=3.8.0\" data-yanked=\"\">torch</a>\n"
         "    <a name=\"no-href\">ignored</a>\n"
         "  </body>\n</html>\n";
}

} // namespace

TEST_CASE("Relative references resolve as RFC 3986 section 5.4 says", "[pypi_index][url]") {
  const std::string base = "http://a/b/c/d;p?q";
  const std::pair<const char*, const char*> examples[] = {
      // 5.4.1 normal examples
      {"g:h", "g:h"},
      {"g", "http://a/b/c/g"},
      {"./g", "http://a/b/c/g"},
      {"g/", "http://a/b/c/g/"},
      {"/g", "http://a/g"},
      {"//g", "http://g"},
      {"?y", "http://a/b/c/d;p?y"},
      {"g?y", "http://a/b/c/g?y"},
      {"#s", "http://a/b/c/d;p?q#s"},
      {"g#s", "http://a/b/c/g#s"},
      {"g?y#s", "http://a/b/c/g?y#s"},
      {";x", "http://a/b/c/;x"},
      {"g;x", "http://a/b/c/g;x"},
      {"g;x?y#s", "http://a/b/c/g;x?y#s"},
      {"", "http://a/b/c/d;p?q"},
      {".", "http://a/b/c/"},
      {"./", "http://a/b/c/"},
      {"..", "http://a/b/"},
      {"../", "http://a/b/"},
      {"../g", "http://a/b/g"},
      {"../..", "http://a/"},
      {"../../", "http://a/"},
      {"../../g", "http://a/g"},
      // 5.4.2 abnormal examples
      {"../../../g", "http://a/g"},
      {"../../../../g", "http://a/g"},
      {"/./g", "http://a/g"},
      {"/../g", "http://a/g"},
      {"g.", "http://a/b/c/g."},
      {".g", "http://a/b/c/.g"},
      {"g..", "http://a/b/c/g.."},
      {"..g", "http://a/b/c/..g"},
      {"./../g", "http://a/b/g"},
      {"./g/.", "http://a/b/c/g/"},
      {"g/./h", "http://a/b/c/g/h"},
      {"g/../h", "http://a/b/c/h"},
      {"g;x=1/./y", "http://a/b/c/g;x=1/y"},
      {"g;x=1/../y", "http://a/b/c/y"},
      {"g?y/./x", "http://a/b/c/g?y/./x"},
      {"g?y/../x", "http://a/b/c/g?y/../x"},
      {"g#s/./x", "http://a/b/c/g#s/./x"},
      {"g#s/../x", "http://a/b/c/g#s/../x"},
      {"http:g", "http:g"},
  };
  for (const auto& [ref, expected] : examples) {
    CHECK(resolve(base, ref) == expected);
  }
  CHECK(resolve("https://pypi.org/simple/numpy/", "../../packages/x.whl") ==
        "https://pypi.org/packages/x.whl");
  CHECK(resolve("https://h", "x.whl") == "https://h/x.whl");
  CHECK(resolve_url("/simple/numpy/", "x.whl").error().message ==
        "base URL '/simple/numpy/' is not absolute");
  CHECK(resolve_url("https://h/", "a b.whl").error().message ==
        "URL 'a b.whl' (relative to 'https://h/') contains a space or control character");
}

TEST_CASE("PEP 503 HTML pages list files with hashes, Requires-Python, yanking and metadata",
          "[pypi_index][html]") {
  auto files = parse_simple_html(html_page(), "https://pypi.example.org/simple/numpy/");
  REQUIRE(files);
  REQUIRE(files->size() == 3);
  const auto& whl = (*files)[0];
  CHECK(whl.filename == "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
  CHECK(whl.url == "https://files.example.org/packages/ab/cd/numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64."
                   "manylinux2014_x86_64.whl");
  CHECK(whl.sha256 == k_sha_a);
  CHECK(whl.requires_python == ">=3.9");
  CHECK_FALSE(whl.yanked);
  CHECK(whl.has_metadata);
  CHECK(whl.metadata_sha256 == k_sha_b);
  const auto& sdist = (*files)[1];
  CHECK(sdist.url == "https://pypi.example.org/packages/numpy-1.26.3.tar.gz");
  CHECK(sdist.sha256 == std::string(64, 'c'));
  CHECK(sdist.yanked);
  CHECK(sdist.yanked_reason == "broken & replaced");
  CHECK_FALSE(sdist.has_metadata);
  const auto& torch = (*files)[2];
  CHECK(torch.filename == "torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl");
  CHECK(torch.url == "https://pypi.example.org/whl/cu121/torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl");
  CHECK(torch.sha256.empty()); // listed, so that the lock can refuse it by name
  CHECK(torch.yanked);
  CHECK(torch.yanked_reason.empty());

  // PEP 592: the attribute's presence yanks, with or without a value. (pip 23 reads a value-less
  // data-yanked as not yanked.)
  auto bare = parse_simple_html("<a href=\"x-1.0.whl\" data-yanked>x</a>", "https://h/simple/x/");
  REQUIRE(bare);
  CHECK(bare->at(0).yanked);

  auto based =
      parse_simple_html("<base href=\"https://mirror.example/simple/x/\"><a href=\"x-1.0.tar.gz\">x</a>",
                        "https://pypi.example.org/simple/x/");
  REQUIRE(based);
  CHECK(based->at(0).url == "https://mirror.example/simple/x/x-1.0.tar.gz");
}

TEST_CASE("Hostile index pages are refused with the file and the reason", "[pypi_index][errors]") {
  const std::string page = "https://pypi.example.org/simple/x/";
  auto message = [&](const std::string& body) {
    auto r = parse_simple_html(body, page);
    INFO(body);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message("<a href=\"javascript:alert(1)//x.whl\">x</a>") ==
        "https://pypi.example.org/simple/x/: file x.whl has a URL with scheme 'javascript' "
        "(javascript:alert(1)//"
        "x.whl); only http(s) is allowed");
  CHECK(message("<a href=\"file:///etc/x-1.0.whl\">x</a>") ==
        "https://pypi.example.org/simple/x/: file x-1.0.whl has a URL with scheme 'file' "
        "(file:///etc/x-1.0.whl); "
        "only http(s) is allowed");
  CHECK(message("<a href=\"..%2f..%2fetc%2fpasswd\">x</a>") ==
        "https://pypi.example.org/simple/x/: invalid file name '../../etc/passwd' (a plain file name is "
        "required)");
  CHECK(message("<a href=\"x-1.0.whl#sha256=123\">x</a>") ==
        "https://pypi.example.org/simple/x/: file x-1.0.whl has a malformed sha256 '123'");
  CHECK(message("<a href=\"a/x-1.0.whl#sha256=" + k_sha_a +
                "\">x</a><a href=\"b/x-1.0.whl#sha256=" + k_sha_b + "\">x</a>") ==
        "https://pypi.example.org/simple/x/: file x-1.0.whl is listed twice with different URLs or hashes");
  // The same file twice (mirrors do this) is listed once.
  auto twice = parse_simple_html("<a href=\"x-1.0.whl\">x</a><a href=\"x-1.0.whl\">x</a>", page);
  REQUIRE(twice);
  CHECK(twice->size() == 1);
  // Unclosed tags end the scan without reading past the page.
  auto unclosed = parse_simple_html("<a href=\"x-1.0.whl\">x</a><a href=\"y", page);
  REQUIRE(unclosed);
  CHECK(unclosed->size() == 1);
  CHECK(parse_simple_html(std::string((64U << 20) + 1, ' '), page).error().message ==
        "https://pypi.example.org/simple/x/: project page is larger than 67108864 bytes");
}

TEST_CASE("PEP 691 JSON pages list the same fields", "[pypi_index][json]") {
  std::string body = R"({"meta": {"api-version": "1.1", "_last-serial": 1},
    "name": "numpy", "versions": ["1.26.4"],
    "files": [
      {"filename": "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl",
       "url": "../../packages/numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl#frag",
       "hashes": {"sha256": ")" +
                     std::string(64, 'A') +
                     R"(", "blake2b_256": "x"}, "requires-python": ">=3.9",
       "core-metadata": {"sha256": ")" +
                     k_sha_b + R"("}, "size": 18300000, "upload-time": "2024-02-05T23:00:00.000000Z"},
      {"filename": "numpy-1.26.3.tar.gz", "url": "https://files.example.org/numpy-1.26.3.tar.gz",
       "hashes": {}, "requires-python": null, "yanked": "broken", "dist-info-metadata": true},
      {"filename": "numpy-1.0.tar.gz", "url": "https://files.example.org/numpy-1.0.tar.gz",
       "hashes": {"sha256": ")" +
                     k_sha_a + R"("}, "yanked": false, "core-metadata": false}
    ]})";
  auto files = parse_project_page(body, "application/vnd.pypi.simple.v1+json; charset=utf-8",
                                  "https://pypi.example.org/simple/numpy/");
  REQUIRE(files);
  REQUIRE(files->size() == 3);
  const auto& a = (*files)[0];
  CHECK(a.url == "https://pypi.example.org/packages/numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl");
  CHECK(a.sha256 == std::string(64, 'a'));
  CHECK(a.requires_python == ">=3.9");
  CHECK(a.has_metadata);
  CHECK(a.metadata_sha256 == k_sha_b);
  CHECK(a.size == 18300000U);
  const auto& b = (*files)[1];
  CHECK(b.sha256.empty());
  CHECK(b.yanked);
  CHECK(b.yanked_reason == "broken");
  CHECK(b.has_metadata);
  CHECK(b.metadata_sha256.empty());
  CHECK_FALSE((*files)[2].yanked);
  CHECK_FALSE((*files)[2].has_metadata);

  const std::string page = "https://pypi.example.org/simple/numpy/";
  auto message = [&](const std::string& text) {
    auto r = parse_simple_json(text, page);
    INFO(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message(R"({"files": []})") ==
        "https://pypi.example.org/simple/numpy/: project page has no meta.api-version (not a PEP 691 page)");
  CHECK(
      message(R"({"meta": {"api-version": "2.0"}, "files": []})") ==
      "https://pypi.example.org/simple/numpy/: simple API version 2.0 is not supported (lockstep reads 1.x)");
  CHECK(message(R"({"meta": {"api-version": "1.0"}, "files": [{"filename": "x.whl"}]})") ==
        "https://pypi.example.org/simple/numpy/: files[0]: expected an object with string 'filename' and "
        "'url'");
  CHECK(
      message(R"({"meta": {"api-version": "1.0"}, "files": [{"filename": "../x.whl", "url": "x.whl"}]})") ==
      "https://pypi.example.org/simple/numpy/: invalid file name '../x.whl' (a plain file name is required)");
  CHECK(
      message(
          R"({"meta": {"api-version": "1.0"}, "files": [{"filename": "x.whl", "url": "x.whl", "yanked": 1}]})") ==
      "https://pypi.example.org/simple/numpy/: files[0] (x.whl): 'yanked' is neither a boolean nor a string");
  CHECK(message("{").find("https://pypi.example.org/simple/numpy/") == 0);

  auto other = parse_project_page("x", "application/json", page);
  REQUIRE_FALSE(other);
  CHECK(other.error().code == ExitCode::external);
}

TEST_CASE("Index pages read as pip reads them", "[pypi_index][peer]") {
  // pip's own link collector is the reference for what an installer takes from a page.
  std::string probe = test::run_command("python3 -c 'from pip._internal.index.collector import parse_links, "
                                        "IndexContent' >/dev/null 2>&1 && echo yes",
                                        test::ExitCheck::ignore);
  if (probe != "yes\n") {
    WARN("python3 with pip's link collector (pip >= 22.3) is not available: the peer comparison is skipped");
    return;
  }
  test::TempDirFixture tmp;
  const std::string page_url = "https://pypi.example.org/simple/numpy/";
  auto page = tmp.write("page.html", html_page());
  auto script =
      tmp.write("links.py", "import sys\n"
                            "from pip._internal.index.collector import parse_links, IndexContent\n"
                            "page = IndexContent(open(sys.argv[1], 'rb').read(), 'text/html', None, "
                            "sys.argv[2])\n"
                            "for l in parse_links(page):\n"
                            "    sha = l.hash if l.hash_name == 'sha256' else ''\n"
                            "    print('|'.join([l.filename, l.url_without_fragment, sha.lower(),\n"
                            "        l.requires_python or '', str(int(l.yanked_reason is not None)),\n"
                            "        l.yanked_reason or '']))\n");
  auto theirs = test::lines_of(test::run_python(script, {page.string(), page_url}));
  auto ours = parse_simple_html(html_page(), page_url);
  REQUIRE(ours);
  REQUIRE(theirs.size() == ours->size());
  for (std::size_t i = 0; i < ours->size(); ++i) {
    const auto& f = (*ours)[i];
    CHECK(f.filename + "|" + f.url + "|" + f.sha256 + "|" + f.requires_python + "|" + (f.yanked ? "1" : "0") +
              "|" + f.yanked_reason ==
          theirs[i]);
  }
}

TEST_CASE("A local wheelhouse lists its wheels with their sha256", "[pypi_index][wheelhouse]") {
  test::TempDirFixture tmp;
  tmp.write("house/b_pkg-1.0-py3-none-any.whl", "wheel b");
  tmp.write("house/a_pkg-2.0-py3-none-any.whl", "wheel a");
  tmp.write("house/notes.txt", "not a wheel");
  tmp.write("house/c pkg-1.0-py3-none-any.whl", "space in name");
  std::filesystem::create_directory(tmp.dir() / "house/dir-1.0-py3-none-any.whl");
  auto files = scan_wheelhouse(tmp.dir() / "house", {tmp.dir()});
  REQUIRE(files);
  REQUIRE(files->size() == 3);
  CHECK((*files)[0].filename == "a_pkg-2.0-py3-none-any.whl");
  CHECK((*files)[0].sha256 == sha256_of("wheel a").hex());
  CHECK((*files)[0].url == "file://" + (tmp.dir() / "house/a_pkg-2.0-py3-none-any.whl").string());
  CHECK((*files)[0].size == 7U);
  CHECK((*files)[2].filename == "c pkg-1.0-py3-none-any.whl");
  CHECK((*files)[2].url == "file://" + (tmp.dir() / "house/c%20pkg-1.0-py3-none-any.whl").string());
  auto missing = scan_wheelhouse(tmp.dir() / "nope", {tmp.dir()});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ExitCode::invalid_input);
}

TEST_CASE("A wheelhouse wheel that leads outside the project is refused unread", "[pypi_index][wheelhouse]") {
  test::TempDirFixture tmp;
  const std::filesystem::path secret = tmp.write("outside/id_rsa", "-----BEGIN SECRET KEY-----\n");
  tmp.write("proj/house/a_pkg-1.0-py3-none-any.whl", "wheel a");
  tmp.write("proj/shared/b_pkg-1.0-py3-none-any.whl", "wheel b");
  std::filesystem::create_symlink("../shared/b_pkg-1.0-py3-none-any.whl",
                                  tmp.dir() / "proj/house/b_pkg-1.0-py3-none-any.whl");
  // A symlink to another file in the project is a wheel like any other.
  auto files = scan_wheelhouse(tmp.dir() / "proj/house", {tmp.dir() / "proj"});
  REQUIRE(files);
  REQUIRE(files->size() == 2);
  CHECK((*files)[1].sha256 == sha256_of("wheel b").hex());
  CHECK((*files)[1].url == "file://" + (tmp.dir() / "proj/house/b_pkg-1.0-py3-none-any.whl").string());

  std::filesystem::create_symlink(secret, tmp.dir() / "proj/house/c_pkg-1.0-py3-none-any.whl");
  auto refused = scan_wheelhouse(tmp.dir() / "proj/house", {tmp.dir() / "proj"});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ExitCode::invalid_input);
  CHECK(refused.error().message == "wheelhouse " + (tmp.dir() / "proj/house").string() +
                                       ": c_pkg-1.0-py3-none-any.whl leads outside the spec's directory and "
                                       "the local repositories it names "
                                       "(to " +
                                       secret.string() +
                                       "); nothing was read. Put the wheel itself in the wheelhouse");
}
