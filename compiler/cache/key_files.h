// kiln's per-user key files (the cache secret, the artifact signing key, the
// trusted signers): where they live, and how a secret is created once and
// read back safely.
//
// The folder is $KILN_CONFIG_DIR, else $XDG_CONFIG_HOME/kiln, else
// ~/.config/kiln (created 0700). A key file must be a regular file (not a
// link) that nobody but its owner may write: whoever could replace it could
// make kiln trust their code.
#pragma once

#include <functional>
#include <string>

#include "support/error.h"

namespace kiln::cache {

Expected<std::string> kilnConfigDir();

// The contents of the key file `path` (at most `max_bytes`). When it does
// not exist and `create` is given, creates it 0600 with create()'s bytes:
// written to a temporary file and linked into place, so concurrent first
// uses agree on one key.
Expected<std::string> readOrCreateKeyFile(const std::string &path, size_t max_bytes,
                                          const std::function<Expected<std::string>()> &create);

// `bytes` random bytes from OpenSSL's generator.
Expected<std::string> randomBytes(size_t bytes);

} // namespace kiln::cache
