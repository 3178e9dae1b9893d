#include "support/oci/sif.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace lockstep::sif {
namespace {

namespace fs = std::filesystem;
using test::slurp;
using test::TempDirFixture;

constexpr std::int64_t k_time = 1700000000;

std::uint64_t le(const std::string& b, std::size_t off, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(b[off + i])) << (8 * i);
  }
  return v;
}

void put_le(std::string& b, std::size_t off, std::uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    b[off + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  }
}

// A SIF with a definition file, a JSON object and a 5000-byte partition.
fs::path write_sample(const fs::path& file, const std::string& partition = std::string(5000, 'p')) {
  UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(fd.valid());
  Writer w(fd.get(), k_time, file.string());
  REQUIRE(w.add_object(DataType::deffile, "", "bootstrap: scratch\n"));
  REQUIRE(w.add_object(DataType::generic_json, "oci-config.json", "{\"Env\":[]}"));
  std::int64_t at = w.next_partition_offset();
  REQUIRE(::pwrite(fd.get(), partition.data(), partition.size(), at) ==
          static_cast<ssize_t>(partition.size()));
  REQUIRE(w.add_partition(static_cast<std::int64_t>(partition.size()), sha256_of(partition), FsType::squashfs,
                          PartType::prim_sys, "amd64"));
  auto size = w.finish();
  REQUIRE(size);
  CHECK(*size == at + static_cast<std::int64_t>(partition.size()));
  return file;
}

// Writes `bytes` to a file and returns read_image's error message ("" when it succeeds).
std::string read_error(const TempDirFixture& tmp, const std::string& bytes) {
  fs::path f = tmp.write("bad.sif", bytes);
  auto r = read_image(f);
  if (r) {
    return "";
  }
  CHECK(r.error().code == ExitCode::invalid_input);
  std::string msg = r.error().message;
  std::string prefix = f.string() + ": ";
  REQUIRE(msg.rfind(prefix, 0) == 0);
  return msg.substr(prefix.size());
}

} // namespace

TEST_CASE("the SIF writer lays out the header and descriptors as sylabs/sif v2.8", "[sif]") {
  TempDirFixture tmp;
  std::string b = slurp(write_sample(tmp.dir() / "a.sif"));
  // Global header (formats: 128 bytes, little-endian, packed).
  CHECK(b.substr(0, 32) == std::string("#!/usr/bin/env run-singularity\n") + std::string(1, '\0'));
  CHECK(b.substr(32, 10) == std::string("SIF_MAGIC\0", 10));
  CHECK(b.substr(42, 3) == std::string("01\0", 3));
  CHECK(b.substr(45, 3) == std::string("02\0", 3));             // amd64, from the primary partition
  CHECK((static_cast<std::uint8_t>(b[48 + 6]) >> 4) == 5);      // UUID version 5
  CHECK((static_cast<std::uint8_t>(b[48 + 8]) & 0xC0) == 0x80); // RFC 4122 variant
  CHECK(le(b, 64, 8) == k_time);
  CHECK(le(b, 72, 8) == k_time);
  CHECK(le(b, 80, 8) == 45);     // free descriptors
  CHECK(le(b, 88, 8) == 48);     // total
  CHECK(le(b, 96, 8) == 4096);   // descriptors offset
  CHECK(le(b, 104, 8) == 28080); // 48 x 585
  CHECK(le(b, 112, 8) == 32176); // data offset
  CHECK(b.substr(128, 4096 - 128) == std::string(4096 - 128, '\0'));

  // Descriptor 1: the definition file, right at the data offset, unaligned.
  std::size_t d = 4096;
  CHECK(le(b, d + 0, 4) == 0x4001);
  CHECK(le(b, d + 4, 1) == 1);
  CHECK(le(b, d + 5, 4) == 1);
  CHECK(le(b, d + 9, 4) == 0xF0000001); // group 1
  CHECK(le(b, d + 13, 4) == 0);
  CHECK(le(b, d + 17, 8) == 32176);
  CHECK(le(b, d + 25, 8) == 19);
  CHECK(le(b, d + 33, 8) == 19);
  CHECK(le(b, d + 41, 8) == k_time);
  CHECK(le(b, d + 49, 8) == k_time);
  CHECK(b.substr(32176, 19) == "bootstrap: scratch\n");
  // Descriptor 2: JSON.Generic with its name, straight after the first object.
  d += 585;
  CHECK(le(b, d + 0, 4) == 0x4006);
  CHECK(le(b, d + 5, 4) == 2);
  CHECK(le(b, d + 17, 8) == 32176 + 19);
  CHECK(b.substr(d + 73, 16) == std::string("oci-config.json\0", 16));
  // Descriptor 3: the partition, aligned to 4096; the padding before it counts in SizeWithPadding.
  d += 585;
  CHECK(le(b, d + 0, 4) == 0x4004);
  CHECK(le(b, d + 17, 8) == 32768);
  CHECK(le(b, d + 25, 8) == 5000);
  CHECK(le(b, d + 33, 8) == 32768 - (32176 + 19 + 10) + 5000);
  CHECK(le(b, d + 201, 4) == 1); // Squashfs
  CHECK(le(b, d + 205, 4) == 2); // PrimSys
  CHECK(b.substr(d + 209, 3) == std::string("02\0", 3));
  // Unused slots are zero; data size covers every object with its padding.
  CHECK(b.substr(d + 585, 45 * 585) == std::string(45 * 585, '\0'));
  CHECK(le(b, 120, 8) == 32768 + 5000 - 32176);
  CHECK(b.size() == 32768 + 5000);
}

TEST_CASE("read_image reads back what the writer wrote", "[sif]") {
  TempDirFixture tmp;
  auto img = read_image(write_sample(tmp.dir() / "a.sif"));
  REQUIRE(img);
  CHECK(img->launch_script == k_launch_script);
  CHECK(img->arch == "amd64");
  CHECK(img->created_at == k_time);
  CHECK(img->descriptors_free == 45);
  CHECK(img->descriptors_total == 48);
  CHECK(img->data_offset == 32176);
  REQUIRE(img->descriptors.size() == 3);
  CHECK(img->descriptors[0].type == DataType::deffile);
  CHECK(img->descriptors[1].name == "oci-config.json");
  CHECK(img->descriptors[1].group_id == 1);
  const Descriptor* p = img->primary_partition();
  REQUIRE(p != nullptr);
  CHECK(p->id == 3);
  CHECK(p->offset == 32768);
  CHECK(p->size == 5000);
  CHECK(p->fs_type == FsType::squashfs);
  CHECK(p->arch == "amd64");
  CHECK(img->find(2) == &img->descriptors[1]);
  CHECK(img->find(9) == nullptr);
}

TEST_CASE("the SIF UUID is derived from the content", "[sif]") {
  TempDirFixture tmp;
  auto a = read_image(write_sample(tmp.dir() / "a.sif"));
  auto b = read_image(write_sample(tmp.dir() / "b.sif"));
  auto c = read_image(write_sample(tmp.dir() / "c.sif", std::string(5000, 'q')));
  REQUIRE((a && b && c));
  CHECK(a->id == b->id);
  CHECK(a->id != c->id);
  CHECK(slurp(tmp.dir() / "a.sif") == slurp(tmp.dir() / "b.sif"));
  CHECK(uuid_string(derive_uuid("x")).size() == 36);
  CHECK(uuid_string(derive_uuid("x"))[14] == '5');
}

TEST_CASE("siftool reads the SIF lockstep writes", "[sif]") {
  if (!test::have_tool("siftool")) {
    WARN("siftool is not installed; skipped");
    return;
  }
  TempDirFixture tmp;
  fs::path f = write_sample(tmp.dir() / "a.sif");
  CHECK(test::run_command("siftool list " + f.string() + " | tail -n 3") ==
        "1    |1       |NONE    |32176-32195               |Def.FILE\n"
        "2    |1       |NONE    |32195-32205               |JSON.Generic\n"
        "3    |1       |NONE    |32768-37768               |FS (Squashfs/*System/amd64)\n");
  CHECK(test::run_command("siftool info 3 " + f.string() +
                          " | grep -E 'Filesystem|Partition|Architecture|Group'") ==
        "  Group ID:         1\n"
        "  Filesystem Type:  Squashfs\n"
        "  Partition Type:   *System\n"
        "  Architecture:     amd64\n");
  CHECK(test::run_command("siftool header " + f.string() +
                          " | grep -E 'Created|Descriptors Free|Data Offset'") ==
        "Created At:           2023-11-14 22:13:20 +0000 UTC\n"
        "Descriptors Free:     45\n"
        "Data Offset:          32176\n");
  CHECK(test::run_command("siftool dump 3 " + f.string()) == std::string(5000, 'p'));
}

TEST_CASE("read_image reads a SIF that siftool wrote", "[sif]") {
  if (!test::have_tool("siftool")) {
    WARN("siftool is not installed; skipped");
    return;
  }
  TempDirFixture tmp;
  tmp.write("p.bin", std::string(5000, 'z'));
  tmp.write("j.json", "{}");
  std::string dir = tmp.dir().string();
  test::run_command("cd " + dir +
                    " && siftool new x.sif && siftool add x.sif p.bin --datatype 4 --parttype 2 --partfs 1 "
                    "--partarch 4 && siftool add x.sif j.json --datatype 6");
  auto img = read_image(tmp.dir() / "x.sif");
  REQUIRE(img);
  const Descriptor* p = img->primary_partition();
  REQUIRE(p != nullptr);
  CHECK(p->offset == 32768); // siftool aligns partitions to 4096 after the 32176-byte table
  CHECK(p->size == 5000);
  CHECK(p->arch == "arm64");
  CHECK(p->group_id == 0); // siftool add: no group
  CHECK(img->arch == "arm64");
  CHECK(img->descriptors.size() == 2);
}

TEST_CASE("read_image refuses hostile SIF files with a located message", "[sif]") {
  TempDirFixture tmp;
  const std::string good = slurp(write_sample(tmp.dir() / "good.sif"));
  const std::size_t d3 = 4096 + 2 * 585;
  auto with = [&](std::size_t off, std::uint64_t v, std::size_t n) {
    std::string b = good;
    put_le(b, off, v, n);
    return b;
  };
  CHECK(read_error(tmp, good).empty());
  CHECK(read_error(tmp, good.substr(0, 100)) ==
        "not a valid SIF image: the file has 100 bytes, less than the 128-byte SIF header");
  {
    std::string b = good;
    b[32] = 'X';
    CHECK(read_error(tmp, b) == "not a valid SIF image: no SIF_MAGIC at byte 32");
  }
  {
    std::string b = good;
    b[43] = '2';
    CHECK(read_error(tmp, b) ==
          "not a valid SIF image: unsupported SIF version '02' (lockstep reads version 01)");
  }
  CHECK(read_error(tmp, with(88, 1ULL << 40, 8)) ==
        "not a valid SIF image: the header declares 1099511627776 descriptors (at most 65536 are accepted)");
  CHECK(read_error(tmp, with(88, 50, 8)) ==
        "not a valid SIF image: the descriptor table size 28080 is not 50 descriptors of 585 bytes");
  CHECK(read_error(tmp, with(80, 49, 8)) ==
        "not a valid SIF image: the header declares 49 free descriptors of 48");
  CHECK(read_error(tmp, with(96, 40000, 8)) == "not a valid SIF image: the descriptor table (28080 bytes at "
                                               "offset 40000) is not inside the file (37768 "
                                               "bytes)");
  CHECK(
      read_error(tmp, with(120, 1ULL << 62, 8)) ==
      "not a valid SIF image: the data section (4611686018427387904 bytes at offset 32176) is not inside the "
      "file (37768 bytes)");
  CHECK(read_error(tmp, with(d3 + 25, 0x7FFFFFFFFFFFFFFFULL, 8)) ==
        "not a valid SIF image: descriptor 3 (ID 3): the object (9223372036854775807 bytes at offset 32768) "
        "extends past the end of the file (37768 bytes)");
  CHECK(read_error(tmp, with(d3 + 17, static_cast<std::uint64_t>(-5), 8)) ==
        "not a valid SIF image: descriptor 3 (ID 3): the object (5000 bytes at offset -5) extends past the "
        "end of "
        "the file (37768 bytes)");
  CHECK(read_error(tmp, with(d3 + 17, 32176, 8)) ==
        "not a valid SIF image: two objects overlap (bytes 32176-32195 and 32176-37176)");
  CHECK(read_error(tmp, with(d3 + 17, 4096, 8)) ==
        "not a valid SIF image: descriptor 3 (ID 3): the object at offset 4096 overlaps the header or the "
        "descriptor table");
  CHECK(read_error(tmp, with(d3 + 5, 1, 4)) ==
        "not a valid SIF image: descriptor 3 (ID 1): the ID is used twice");
  CHECK(read_error(tmp, with(d3 + 4, 7, 1)) ==
        "not a valid SIF image: descriptor 3 has an invalid 'used' flag 7");
  CHECK(read_error(tmp, with(d3 + 0, 0x1234, 4)) ==
        "not a valid SIF image: descriptor 3 has an invalid data type 0x1234");
  CHECK(read_error(tmp, with(d3 + 201, 9, 4)) ==
        "not a valid SIF image: descriptor 3 (ID 3): unknown partition file system type 9");
  {
    // A second primary partition (the first object relabelled as one).
    std::string b = with(4096, 0x4004, 4);
    put_le(b, 4096 + 201, 1, 4);
    put_le(b, 4096 + 205, 2, 4);
    CHECK(read_error(tmp, b) ==
          "not a valid SIF image: descriptor 3 (ID 3): a second primary system partition");
  }
  CHECK(read_error(tmp, [&] {
          std::string b = with(4096 + 3 * 585 + 4, 1, 1);
          put_le(b, 4096 + 3 * 585, 0x4007, 4);
          put_le(b, 80, 44, 8);
          return b;
        }()) == "not a valid SIF image: descriptor 4 (ID 0): the ID is zero");
  {
    std::string b = good;
    b.resize(32768 + 100);
    CHECK(read_error(tmp, b) ==
          "not a valid SIF image: the data section (5592 bytes at offset 32176) is not inside "
          "the file (32868 bytes)");
  }
  auto missing = read_image(tmp.dir() / "none.sif");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ExitCode::invalid_input);
  CHECK(missing.error().message ==
        "can't open SIF image " + (tmp.dir() / "none.sif").string() + ": No such file or directory");
  auto dir = read_image(tmp.dir());
  REQUIRE_FALSE(dir);
  CHECK(dir.error().message == tmp.dir().string() + ": not a SIF image: not a regular file");
}

TEST_CASE("SIF architecture codes follow pkg/sif/arch.go", "[sif]") {
  CHECK(arch_code("amd64") == "02");
  CHECK(arch_code("arm64") == "04");
  CHECK(arch_code("riscv64") == "12");
  CHECK_FALSE(arch_code("wasm"));
  CHECK(arch_name("06") == "ppc64le");
  CHECK(arch_name("00").empty());
  CHECK(data_type_name(DataType::labels) == "JSON.Labels");
}

} // namespace lockstep::sif
