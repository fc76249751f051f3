// `kiln keys`: the Ed25519 key this user signs artifacts with, and the keys
// whose artifacts this user runs (compiler/artifact/artifact_signing.h).
#include <iostream>

#include "compiler/artifact/artifact_signing.h"
#include "support/file_io.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct KeysOptions {
  std::string output;
  std::string key;
  std::string name;
};

int runShow() {
  auto own = artifact::SigningKey::loadOrCreate();
  if (!own)
    return fail(own.error());
  auto store = artifact::loadTrustStore();
  if (!store)
    return fail(store.error());
  std::string text = "signing key " + artifact::keyFingerprint(own->publicKey()) + " (" +
                     own->path() + ")\n  public " + artifact::publicKeyHex(own->publicKey()) +
                     "\ntrusted keys (" + store->path + "):\n";
  if (store->keys.empty())
    text += "  none but your own\n";
  for (const artifact::TrustedKey &k : store->keys)
    text += "  " + artifact::keyFingerprint(k.public_key) + " " +
            artifact::publicKeyHex(k.public_key) + (k.name.empty() ? "" : " " + k.name) + "\n";
  printText(text);
  return kExitOk;
}

int runExport(const KeysOptions &opts) {
  auto own = artifact::SigningKey::loadOrCreate();
  if (!own)
    return fail(own.error());
  const std::string line =
      artifact::publicKeyHex(own->publicKey()) + (opts.name.empty() ? "" : " " + opts.name) + "\n";
  if (opts.output.empty()) {
    std::cout << line;
    return kExitOk;
  }
  if (Status s = writeFileAtomic(opts.output, line); !s)
    return fail(s.error());
  note("wrote " + opts.output);
  return kExitOk;
}

// KEY is 64 hex digits, or a file `kiln keys export` wrote.
int runTrust(const KeysOptions &opts) {
  std::string hex = opts.key, name = opts.name;
  if (hex.size() != 2 * artifact::kPublicKeySize) {
    auto text = readFile(opts.key, 4096);
    if (!text)
      return fail(opts.key + ": neither a public key (64 hex digits) nor a readable key file: " +
                  text.message());
    const size_t end = text->find_first_of(" \t\r\n");
    hex = text->substr(0, end);
    if (name.empty() && end != std::string::npos) {
      name = text->substr(end + 1);
      while (!name.empty() && (name.back() == '\n' || name.back() == '\r'))
        name.pop_back();
    }
  }
  auto key = artifact::parsePublicKeyHex(hex);
  if (!key)
    return fail(opts.key + ": " + key.message());
  if (Status s = artifact::trustKey(*key, name); !s)
    return fail(s.error());
  note("trusting key " + artifact::keyFingerprint(*key) + (name.empty() ? "" : " (" + name + ")"));
  return kExitOk;
}

} // namespace

void registerKeysCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<KeysOptions>();
  CLI::App *keys = app.add_subcommand(
      "keys", "Show, export and trust the Ed25519 keys that sign artifacts (docs/reliability.md)");
  keys->require_subcommand(1);
  CLI::App *show = keys->add_subcommand("show", "Your signing key and the keys you trust");
  show->callback([&action] { action = [] { return runShow(); }; });
  CLI::App *exp = keys->add_subcommand("export", "Print your public key, for others to trust");
  exp->add_option("-o,--output", opts->output, "write it to this file instead");
  exp->add_option("--name", opts->name, "a name to store with it (who you are)");
  exp->callback([opts, &action] { action = [opts] { return runExport(*opts); }; });
  CLI::App *trust = keys->add_subcommand(
      "trust", "Run artifacts signed by this key from now on (adds it to trusted_keys)");
  trust->add_option("KEY", opts->key, "64 hex digits, or a file kiln keys export wrote")
      ->required();
  trust->add_option("--name", opts->name, "a name to remember it by");
  trust->callback([opts, &action] { action = [opts] { return runTrust(*opts); }; });
  suggestOnUnknownArguments(*keys);
}

} // namespace kiln::cli
