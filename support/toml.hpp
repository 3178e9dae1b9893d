// toml++ as lockstep includes it: header-only, errors as values, its internal assertions off.
//
// Every file that reads TOML includes this header instead of <toml++/toml.h>, so that the parser is
// compiled the same way in each of them.
//
// Why the assertions are off: toml++ 3.3.0 (Debian 12) asserts that a table header's key starts
// with a key character *before* it checks it. A hostile `[+x]` aborts a build with assertions on,
// and under NDEBUG with clang the assertion becomes an assumption the optimiser may rely on. With
// TOML_ASSERT a no-op and NDEBUG hidden from toml++, the parser reaches its own check and returns
// "expected bare key starting character or string delimiter" as a parse error. fuzz_pyinputs
// found it; tests/fuzz/corpus/pyinputs/08-pyproject-table-header keeps the input.
#pragma once

#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#define TOML_ASSERT(expr) static_assert(true)
#pragma push_macro("NDEBUG")
#undef NDEBUG
#include <toml++/toml.h>
#pragma pop_macro("NDEBUG")
