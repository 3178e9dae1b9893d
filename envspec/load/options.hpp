#pragma once
// How a spec is read: the choices a command line makes for the loaders (load.hpp, merge.hpp, schema.hpp).

namespace lockstep::envspec {

struct LoadOptions {
  /// Allow `copy.from` outside the spec's directory (`--allow-outside`).
  bool allow_outside = false;
};

} // namespace lockstep::envspec
