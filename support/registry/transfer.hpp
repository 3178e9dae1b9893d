#pragma once
// Blob downloads from a registry into the content store, several at once: each verified while it
// streams (size bound first, then sha256 and size at the end), resumed with Range after a dropped
// connection, published only whole and correct. Progress per blob and in total on a terminal.
#include "support/base/log.hpp"
#include "support/base/result.hpp"
#include "support/oci/oci.hpp"
#include "support/registry/client.hpp"
#include "support/store/blob_store.hpp"

#include <string>
#include <vector>

namespace lockstep::registry {

/// What a BlobFetch moved.
struct FetchTotals {
  std::size_t downloaded = 0; ///< blobs fetched (the others were in the store)
  std::uint64_t bytes = 0;    ///< bytes fetched
};

/// Downloads of one repository's blobs.
struct BlobFetch {
  Client& client;
  std::string repository;
  const BlobStore& store;
  std::string location; ///< names the image in messages: "docker://HOST/REPO"

  /// Fetches every blob the store lacks, up to client.options().connections at once. Every blob is
  /// attempted; the error lists each failure in input order (the first one's code).
  Result<FetchTotals> run(const std::vector<oci::Descriptor>& blobs, const std::string& label) const;
  /// Fetches one blob (nothing when the store has it); returns the bytes downloaded.
  Result<std::uint64_t> one(const oci::Descriptor& blob, log::Progress* progress) const;
};

} // namespace lockstep::registry
