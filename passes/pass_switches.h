// Fusion switches: which passes a job runs, decided by layers of settings.
//
// Precedence, lowest first: built-in default < the default switch file of
// fusion_rules/ < the job file < --fusion-switch-file < --enable-pass /
// --disable-pass. Within one layer a setting for a single pass beats "ALL" of
// its group; a higher layer beats everything below it. "ALL": "off" turns off
// every pass of the group that may be disabled; "ALL": "on" puts the group
// back to the built-in defaults (it never turns on a pass that is off by
// default), so in CANN's own files it changes nothing.
// "ALL" leaves the StepRewrite passes alone (--recompute decides those; a
// single pass setting still switches one).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "support/error.h"

namespace kiln::passes {

struct SwitchLayer {
  std::string source; // where the settings came from, for messages and reports
  // Whether unknown pass names may be accepted with a warning
  // (--allow-unknown-passes): true for CANN-format switch settings, which may
  // name passes kiln does not have; never for --enable-pass/--disable-pass.
  bool cann_format = true;
  std::map<PassGroup, bool> all;                    // "ALL" per group
  std::vector<std::pair<std::string, bool>> passes; // single passes, in file order
  // Where each single-pass setting came from ("$.Switch.UBFusion.X", "line 3").
  std::vector<std::string> locations;
  // The group a CANN file listed each pass under (nullopt for line format).
  std::vector<std::optional<PassGroup>> listed_groups;
};

// CANN's JSON object {"Switch": {"GraphFusion": {...}, "UBFusion": {...}}};
// kiln also accepts its Cleanup and Precision groups there.
Expected<SwitchLayer> parseSwitchObject(const nlohmann::json &doc, std::string_view source,
                                        const std::string &path = "$");
// Just the object inside "Switch": {"GraphFusion": {...}, "UBFusion": {...}}.
Expected<SwitchLayer> parseSwitchGroups(const nlohmann::json &groups, std::string_view source,
                                        const std::string &path);
// The old format: one "PassName:off" (or ":on") a line; '#' starts a comment.
Expected<SwitchLayer> parseSwitchLines(std::string_view text, std::string_view source);
// Either format, told apart by the first non-blank character ('{' is JSON).
Expected<SwitchLayer> parseSwitchText(std::string_view text, std::string_view source);
Expected<SwitchLayer> readSwitchFile(const std::string &path);

struct SwitchResolution {
  std::map<std::string, bool> enabled;           // every registered pass
  std::map<std::string, std::string> decided_by; // which layer set it ("built-in default", ...)
  std::vector<std::string> warnings;             // unknown passes accepted
  std::vector<std::string> notes;                // passes listed under another group
};

// Applies `layers` (lowest precedence first) to the registry's defaults.
// Unknown names are errors suggesting the nearest names (warnings when
// `allow_unknown` and the layer is CANN format); switching off a pass that may
// not be disabled is an error that says why. A pass listed under a group
// other than its own (SoftmaxFusionPass under GraphFusion) is set all the
// same, with a note.
Expected<SwitchResolution> resolveSwitches(const PassRegistry &registry,
                                           const std::vector<SwitchLayer> &layers,
                                           bool allow_unknown);

} // namespace kiln::passes
