#include <gtest/gtest.h>

#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// Every XML definition has an implementation and every implementation a definition.
TEST(OpRegistry, DefinitionsAndImplementationsMatch) {
  const OpRegistry &r = OpRegistry::global();
  for (const std::string &e : r.consistencyErrors())
    ADD_FAILURE() << e;
  EXPECT_FALSE(r.names().empty());
}

TEST(OpDefs, ParseErrorsNameTheLine) {
  auto defs = parseOpDefs("<ops>\n<op name=\"X\" kind=\"weird\"><output name=\"y\"/></op></ops>",
                          "test.xml");
  ASSERT_FALSE(defs);
  EXPECT_NE(defs.message().find("test.xml:2"), std::string::npos) << defs.message();
}

TEST(OpDefs, AttributeDefaultsAreTyped) {
  auto defs = parseOpDefs(R"(<ops><op name="X" kind="elementwise"><input name="x"/>
      <output name="y"/><attr name="n" type="int" default="abc"/></op></ops>)",
                          "bad.xml");
  ASSERT_FALSE(defs);
  EXPECT_NE(defs.message().find("default 'abc'"), std::string::npos) << defs.message();
}

} // namespace
} // namespace kiln::ops
