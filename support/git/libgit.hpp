#pragma once
// libgit2, loaded with dlopen on first use and shared by git provenance (git_info.cpp) and git
// sources (builder/lock/git_source.cpp).
//
// libgit2's closure (krb5, ssh2, mbedtls, pcre2, ...) costs a few milliseconds to load and relocate,
// which every `lockstep exec` would pay if lockstep linked it. So only its headers are used at build
// time: the library is opened by its SONAME (LOCKSTEP_LIBGIT2_SONAME, fixed by CMake) the first time
// a git feature is needed, and only the functions listed below are looked up. The declarations in
// git2.h give their types, so a call through LibGit is type-checked like a direct call.
#include <git2.h>

#include <memory>
#include <string>

namespace lockstep {

// Every libgit2 function lockstep calls. Add a name here to use it through LibGit.
#define LS_LIBGIT_FUNCTIONS(X)                                                                               \
  X(git_libgit2_init)                                                                                        \
  X(git_libgit2_shutdown)                                                                                    \
  X(git_libgit2_opts)                                                                                        \
  X(git_libgit2_version)                                                                                     \
  X(git_error_last)                                                                                          \
  X(git_repository_open_ext)                                                                                 \
  X(git_repository_open_bare)                                                                                \
  X(git_repository_init)                                                                                     \
  X(git_repository_free)                                                                                     \
  X(git_repository_is_bare)                                                                                  \
  X(git_repository_odb)                                                                                      \
  X(git_reference_name_to_id)                                                                                \
  X(git_reference_name_is_valid)                                                                             \
  X(git_reference_create)                                                                                    \
  X(git_reference_free)                                                                                      \
  X(git_oid_tostr)                                                                                           \
  X(git_oid_fromstrn)                                                                                        \
  X(git_status_list_new)                                                                                     \
  X(git_status_list_entrycount)                                                                              \
  X(git_status_list_free)                                                                                    \
  X(git_remote_lookup)                                                                                       \
  X(git_remote_url)                                                                                          \
  X(git_remote_free)                                                                                         \
  X(git_remote_create_anonymous)                                                                             \
  X(git_remote_init_callbacks)                                                                               \
  X(git_proxy_options_init)                                                                                  \
  X(git_fetch_options_init)                                                                                  \
  X(git_remote_connect)                                                                                      \
  X(git_remote_ls)                                                                                           \
  X(git_remote_fetch)                                                                                        \
  X(git_remote_disconnect)                                                                                   \
  X(git_odb_free)                                                                                            \
  X(git_odb_exists)                                                                                          \
  X(git_odb_read_header)                                                                                     \
  X(git_object_lookup)                                                                                       \
  X(git_object_peel)                                                                                         \
  X(git_object_free)                                                                                         \
  X(git_object_id)                                                                                           \
  X(git_object_type)                                                                                         \
  X(git_object_type2string)                                                                                  \
  X(git_commit_lookup)                                                                                       \
  X(git_commit_tree)                                                                                         \
  X(git_commit_free)                                                                                         \
  X(git_tree_lookup)                                                                                         \
  X(git_tree_free)                                                                                           \
  X(git_tree_entrycount)                                                                                     \
  X(git_tree_entry_byindex)                                                                                  \
  X(git_tree_entry_name)                                                                                     \
  X(git_tree_entry_id)                                                                                       \
  X(git_tree_entry_filemode)                                                                                 \
  X(git_blob_lookup)                                                                                         \
  X(git_blob_free)                                                                                           \
  X(git_blob_rawcontent)                                                                                     \
  X(git_blob_rawsize)

/// libgit2's entry points, looked up by name in the loaded library.
struct LibGit {
#define LS_LIBGIT_MEMBER(name) decltype(&::name) name = nullptr; // NOLINT(bugprone-macro-parentheses)
  LS_LIBGIT_FUNCTIONS(LS_LIBGIT_MEMBER)
#undef LS_LIBGIT_MEMBER

  /// libgit2's message for the last failed call on this thread, or "unknown error".
  [[nodiscard]] std::string last_error() const;
};

/// libgit2, loaded and initialised on the first call (thread-safe), or nullptr when it can't be
/// loaded; libgit_load_error() then says why. Released (git_libgit2_shutdown) at exit.
const LibGit* libgit();

/// Why libgit() returned nullptr ("libgit2.so.1.5: cannot open shared object file: ...").
const std::string& libgit_load_error();

/// Owns a libgit2 object and frees it with the matching git_*_free function.
template <typename T> using GitPtr = std::unique_ptr<T, void (*)(T*)>;

/// "git_oid" as 40 lowercase hex digits.
std::string oid_hex(const LibGit& git, const git_oid& oid);

/// `url` with any "user:password@" (or "token@") after the scheme removed, for messages, logs and
/// provenance: credentials never reach output.
std::string strip_url_credentials(std::string url);

} // namespace lockstep
